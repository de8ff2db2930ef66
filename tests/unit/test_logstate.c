/* The log writer's shared state (shim/logstate.c): space reserved past the file size limit is
 * refused with EFBIG instead of a SIGXFSZ that would end the program; a request for a
 * checkpoint with no writer installed starts no thread; a request to fault an extent in is
 * served by the helper thread, not the caller; the idle helper thread marks the process alive
 * in the header once a period. */
#include "../../shim/logstate.h"
#include "suites.h"

#include <dirent.h>
#include <pthread.h>
#include <time.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

START_TEST(test_space_past_the_file_size_limit_is_refused_not_signalled)
{
    char path[512];
    snprintf(path, sizeof path, "%s/limit", temp_dir());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    struct rlimit lim = {1 << 20, 1 << 20};
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    ck_assert_int_eq(logstate_reserve(fd, 0, 4096), 0);
    ck_assert_int_eq(logstate_reserve(fd, 0, 2 << 20), EFBIG);
    close(fd);
    unlink(path);
}
END_TEST

static int threads(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

START_TEST(test_a_checkpoint_request_without_a_writer_starts_no_thread)
{
    int before = threads();
    logstate_checkpoint_request();
    ck_assert_int_eq(threads(), before);
    logstate_checkpoint_stop();
}
END_TEST

static struct {
    pthread_mutex_t lock;
    pthread_cond_t done;
    int calls;
    size_t extent;
    unsigned gen;
    pthread_t by;
} P = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0};

static void note_populate(size_t extent, unsigned gen)
{
    pthread_mutex_lock(&P.lock);
    P.calls++;
    P.extent = extent;
    P.gen = gen;
    P.by = pthread_self();
    pthread_cond_signal(&P.done);
    pthread_mutex_unlock(&P.lock);
}

START_TEST(test_a_populate_request_runs_on_the_helper_thread_with_its_extent)
{
    gm_log.enabled = 1; /* this test's own process (check forks one per test) */
    int before = threads();
    ck_assert_int_eq(logstate_request_populate(note_populate, 7, 3), 0);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&P.lock);
    while (!P.calls && pthread_cond_timedwait(&P.done, &P.lock, &until) == 0)
        ;
    int calls = P.calls;
    size_t extent = P.extent;
    unsigned gen = P.gen;
    pthread_t by = P.by;
    pthread_mutex_unlock(&P.lock);
    ck_assert_int_eq(calls, 1);
    ck_assert_uint_eq(extent, 7);
    ck_assert_uint_eq(gen, 3);
    ck_assert_msg(!pthread_equal(by, pthread_self()), "the caller faulted the extent in itself");
    ck_assert_int_ge(threads(), before + 1); /* a sanitizer may start a thread of its own too */
    logstate_checkpoint_stop();
}
END_TEST

static void populate_nothing(size_t extent, unsigned gen)
{
    (void)extent, (void)gen;
}

static uint64_t mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

START_TEST(test_the_idle_helper_thread_marks_the_process_alive_in_the_header)
{
    static gmlog_file_header_t hdr;
    gm_log.hdr = &hdr;
    gm_log.start_mono = mono_now();
    gm_log.enabled = 1;
    ck_assert_int_eq(logstate_request_populate(populate_nothing, 0, 0), 0);
    struct timespec nap = {2, 500000000};
    while (nanosleep(&nap, &nap) != 0)
        ;
    uint64_t alive = __atomic_load_n(&hdr.alive_ns, __ATOMIC_RELAXED), now = mono_now() - gm_log.start_mono;
    logstate_checkpoint_stop();
    gm_log.hdr = NULL;
    ck_assert_msg(alive >= GMLOG_ALIVE_PERIOD_NS && alive <= now,
                  "2.5 s after the helper started, the header says alive at %llu ns (now %llu)",
                  (unsigned long long)alive, (unsigned long long)now);
}
END_TEST

Suite *logstate_suite(void)
{
    Suite *s = suite_create("logstate");
    TCase *tc = tcase_create("state");
    tcase_add_test(tc, test_space_past_the_file_size_limit_is_refused_not_signalled);
    tcase_add_test(tc, test_a_checkpoint_request_without_a_writer_starts_no_thread);
    tcase_add_test(tc, test_a_populate_request_runs_on_the_helper_thread_with_its_extent);
    tcase_add_test(tc, test_the_idle_helper_thread_marks_the_process_alive_in_the_header);
    suite_add_tcase(s, tc);
    return s;
}
