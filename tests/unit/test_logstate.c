/* The log writer's shared state (shim/logstate.c): space reserved past the file size limit is
 * refused with EFBIG instead of a SIGXFSZ that would end the program; a request for a
 * checkpoint with no writer installed starts no thread. */
#include "../../shim/logstate.h"
#include "suites.h"

#include <dirent.h>
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
    ck_assert_int_eq(evlog_reserve(fd, 0, 4096), 0);
    ck_assert_int_eq(evlog_reserve(fd, 0, 2 << 20), EFBIG);
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
    checkpoint_request();
    ck_assert_int_eq(threads(), before);
    checkpoint_stop();
}
END_TEST

Suite *logstate_suite(void)
{
    Suite *s = suite_create("logstate");
    TCase *tc = tcase_create("state");
    tcase_add_test(tc, test_space_past_the_file_size_limit_is_refused_not_signalled);
    tcase_add_test(tc, test_a_checkpoint_request_without_a_writer_starts_no_thread);
    suite_add_tcase(s, tc);
    return s;
}
