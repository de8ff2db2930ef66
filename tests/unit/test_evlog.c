/* The log writer as a host sees it: programs under the preload on the fake runtime whose
 * surroundings are hostile (closed descriptors, ignored signals, odd paths, little room) or
 * whose logs outgrow GMSHIM_LOG_LIMIT. */
#include "suites.h"
#include "reader.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static int run_mode(const char *prog, const char *mode, const char *const *env, char **out)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", build_path(prog));
    const char *argv[] = {path, mode, NULL};
    return run_program(argv, env, 1, out);
}

static int cli(const char *cmd, const char *log, char **out)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", build_path("gmshim"));
    const char *argv[] = {path, cmd, log, NULL};
    return run_program(argv, NULL, 0, out);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    buf[got] = 0;
    *len = got;
    return buf;
}

static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static int count_lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

START_TEST(test_a_host_with_stdio_closed_keeps_its_output_out_of_the_log)
{
    char log[4200], env_log[4300];
    snprintf(log, sizeof log, "%s/closed.gmlog", temp_dir());
    snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s", log);
    const char *env[] = {env_log, "GMSHIM_VERBOSE=1", NULL};
    char *out = NULL;
    int rc = run_mode("tests/integration/host_hostile", "closed-stdio", env, &out);
    ck_assert_msg(rc == 0, "host_hostile closed-stdio exited %d (3: the program's own open did not "
                  "get descriptor 0):\n%s", rc, out);
    free(out);
    size_t len;
    char *bytes = slurp(log, &len);
    ck_assert_msg(bytes && len >= 8 && !memcmp(bytes, "GMSHIMLG", 8), "the log %s lost its header", log);
    ck_assert_msg(!memmem(bytes, len, "host's own output", 17) && !memmem(bytes, len, "gmshim:", 7),
                  "the host's output or gmshim's verbose lines went into the log");
    free(bytes);
    rc = cli("summary", log, &out);
    ck_assert_msg(rc == 0 && strstr(out, "closed at exit") && strstr(out, "2,000 allocs"),
                  "summary of the log exited %d:\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_an_ignored_fault_ends_the_host_as_without_gmshim)
{
    static const struct {
        const char *mode;
        int sig;
    } cases[] = {{"ignore-segv", 11}, {"ignore-ill", 4}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char log[4200], env_log[4300];
        snprintf(log, sizeof log, "%s/%s.gmlog", temp_dir(), cases[i].mode);
        snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s", log);
        const char *env[] = {env_log, NULL};
        char *out = NULL;
        /* A spin would hang here until the test's timeout. */
        int rc = run_mode("tests/integration/host_hostile", cases[i].mode, env, &out);
        ck_assert_msg(rc == 128 + cases[i].sig, "%s: exit %d, expected signal %d:\n%s", cases[i].mode, rc,
                      cases[i].sig, out);
        free(out);
        char want[64];
        snprintf(want, sizeof want, "closed by signal %d", cases[i].sig);
        rc = cli("summary", log, &out);
        ck_assert_msg(rc == 0 && strstr(out, want), "%s: the log does not say '%s' (exit %d):\n%s",
                      cases[i].mode, want, rc, out);
        free(out);
    }
}
END_TEST

START_TEST(test_an_ignored_signal_sent_by_kill_stays_ignored)
{
    const char *env[] = {"GMSHIM_LOG=off", NULL};
    char *out = NULL;
    int rc = run_mode("tests/integration/host_hostile", "sent-ignored", env, &out);
    ck_assert_msg(rc == 0, "an ignored SIGSEGV sent by kill ended the program: exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_a_log_path_that_is_not_a_regular_file_is_refused_once)
{
    const char *dir = temp_dir();
    char env_dir[4300], env_dev[] = "GMSHIM_LOG=/dev/full", dotted[4200];
    snprintf(env_dir, sizeof env_dir, "GMSHIM_LOG=%s", dir);
    const char *targets[] = {env_dev, env_dir};
    for (int i = 0; i < 2; i++) {
        const char *env[] = {targets[i], NULL};
        char *out = NULL;
        unlink("/dev/full.1");
        int rc = run_mode("tests/integration/host_hostile", "sent-ignored", env, &out);
        ck_assert_msg(rc == 0, "%s: exit %d:\n%s", targets[i], rc, out);
        ck_assert_msg(count_lines_with(out, "gmshim[") == 1 && (strstr(out, "not a regular file") || strstr(out, "Is a directory")),
                      "%s: expected one warning saying it is not a regular file:\n%s", targets[i], out);
        free(out);
    }
    ck_assert_msg(access("/dev/full.1", F_OK) != 0, "a file /dev/full.1 was created");
    snprintf(dotted, sizeof dotted, "%s.1", dir);
    ck_assert_msg(access(dotted, F_OK) != 0, "%s was created beside the directory", dotted);
}
END_TEST

/* GMSHIM_LOG=/dev/stdout is a symlink to a device (here through a pipe); a symlink to a FIFO or
 * a device anywhere: refused with one warning, never a file made beside it (/dev/stdout.1). */
START_TEST(test_a_log_path_that_leads_to_a_device_or_fifo_is_refused_once)
{
    const char *dir = temp_dir();
    char fifo[4200], to_fifo[4200], to_null[4200], env_fifo[4300], env_null[4300], env_stdout[] = "GMSHIM_LOG=/dev/stdout";
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(to_fifo, sizeof to_fifo, "%s/to-fifo.gmlog", dir);
    snprintf(to_null, sizeof to_null, "%s/to-null.gmlog", dir);
    ck_assert(mkfifo(fifo, 0600) == 0 && symlink(fifo, to_fifo) == 0 && symlink("/dev/null", to_null) == 0);
    snprintf(env_fifo, sizeof env_fifo, "GMSHIM_LOG=%s", to_fifo);
    snprintf(env_null, sizeof env_null, "GMSHIM_LOG=%s", to_null);
    const char *targets[] = {env_stdout, env_fifo, env_null};
    unlink("/dev/stdout.1");
    for (int i = 0; i < 3; i++) {
        const char *env[] = {targets[i], NULL};
        char *out = NULL;
        int rc = run_mode("tests/integration/host_hostile", "sent-ignored", env, &out);
        ck_assert_msg(rc == 0, "%s: exit %d:\n%s", targets[i], rc, out);
        ck_assert_msg(count_lines_with(out, "gmshim[") == 1 && strstr(out, "not a regular file"),
                      "%s: expected one warning saying it is not a regular file:\n%s", targets[i], out);
        free(out);
    }
    char beside[4300];
    int made = access("/dev/stdout.1", F_OK) == 0;
    unlink("/dev/stdout.1");
    ck_assert_msg(!made, "a file /dev/stdout.1 was created");
    snprintf(beside, sizeof beside, "%s.1", to_fifo);
    ck_assert_msg(access(beside, F_OK) != 0, "%s was created beside the symlink to a FIFO", beside);
    snprintf(beside, sizeof beside, "%s.1", to_null);
    ck_assert_msg(access(beside, F_OK) != 0, "%s was created beside the symlink to /dev/null", beside);
}
END_TEST

/* %n is the program's name, which the program chooses (argv[0]): "..", a newline or a slash in
 * it must neither leave the directory nor make an odd file name. */
START_TEST(test_a_program_name_in_the_log_path_stays_one_plain_file_name)
{
    static const char *const names[] = {"..", "two\nlines", "a/../../b", "."};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *dir = temp_dir();
        char sub[4200], env_log[4300];
        snprintf(sub, sizeof sub, "%s/logs", dir);
        ck_assert(mkdir(sub, 0700) == 0);
        snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s/%%n", sub);
        const char *env[] = {env_log, NULL};
        const char *argv[] = {names[i], "sent-ignored", NULL};
        char *out = NULL;
        int rc = run_program_from(NULL, build_path("tests/integration/host_hostile"), argv, env, 1, &out);
        ck_assert_msg(rc == 0, "argv[0] '%s': exit %d:\n%s", names[i], rc, out);
        free(out);
        DIR *d = opendir(sub);
        int files = 0;
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            files++;
            for (const char *c = e->d_name; *c; c++)
                ck_assert_msg((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                              *c == '.' || *c == '_' || *c == '-', "argv[0] '%s' made the log name '%s'", names[i],
                              e->d_name);
        }
        if (d)
            closedir(d);
        ck_assert_msg(files == 1, "argv[0] '%s': %d files in %s, expected the log alone", names[i], files, sub);
    }
}
END_TEST

/* Under an address-space limit (ulimit -v) that leaves the log's mappings no room, the host
 * gets the memory it would get without gmshim: no log, one warning saying why. */
START_TEST(test_a_small_address_space_leaves_the_host_its_memory)
{
    const char *san = getenv("GMSHIM_TEST_PRELOAD");
    if (san && *san) {
        fprintf(stderr, "skipped: a sanitizer's runtime needs more address space than the limit tested\n");
        return;
    }
    char log[4200], env_log[4300];
    snprintf(log, sizeof log, "%s/small-as.gmlog", temp_dir());
    snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s", log);
    const char *env[] = {env_log, NULL};
    char *out = NULL;
    const char *argv[] = {build_path("tests/integration/host_hostile"), "small-address-space", NULL};
    int rc = run_program(argv, env, 0, &out);
    ck_assert_msg(rc == 0, "without gmshim: exit %d:\n%s", rc, out);
    free(out);
    rc = run_mode("tests/integration/host_hostile", "small-address-space", env, &out);
    ck_assert_msg(rc == 0, "with gmshim the host lost its memory: exit %d:\n%s", rc, out);
    ck_assert_msg(count_lines_with(out, "gmshim[") == 1 && strstr(out, "address-space limit"),
                  "expected one warning naming the address-space limit:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_a_rank_with_slashes_stays_in_the_log_directory)
{
    const char *dir = temp_dir();
    char env_log[4300];
    snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s/r%%r.gmlog", dir);
    const char *env[] = {env_log, "RANK=../../x", NULL};
    char *out = NULL;
    int rc = run_mode("tests/integration/host_hostile", "sent-ignored", env, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    free(out);
    char want[4300];
    snprintf(want, sizeof want, "%s/r.._.._x.gmlog", dir);
    ck_assert_msg(file_size(want) > 0, "no log %s (the rank's '/' must become '_')", want);
}
END_TEST

START_TEST(test_a_log_with_room_for_less_than_an_extent_records_what_fits)
{
    char log[4200], env_log[4300];
    snprintf(log, sizeof log, "%s/small.gmlog", temp_dir());
    snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s", log);
    const char *env[] = {env_log, "PAIRS=200000", "THREADS=1", "LEAK_EVERY=1000000", NULL};
    struct rlimit lim = {4u << 20, 4u << 20}; /* this test's process and its children only */
    ck_assert(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    char *out = NULL;
    int rc = run_mode("tests/integration/log_bounded", NULL, env, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(count_lines_with(out, "gmshim[") == 1 && strstr(out, "stopped"),
                  "expected one warning that the log stopped:\n%s", out);
    free(out);
    ck_assert_msg(file_size(log) <= (4 << 20), "the log is %lld bytes, past the 4 MiB file limit", file_size(log));
    rc = cli("summary", log, &out);
    long allocs = 0;
    const char *a = strstr(out, "allocations");
    if (a) {
        char digits[32] = {0};
        size_t k = 0;
        for (a += 11; *a == ' '; a++)
            ;
        for (; (*a >= '0' && *a <= '9') || *a == ','; a++)
            if (*a != ',' && k < 30)
                digits[k++] = *a;
        allocs = atol(digits);
    }
    ck_assert_msg(allocs >= 20000, "the 4 MiB the file may take hold only %ld allocations (exit %d):\n%s",
                  allocs, rc, out);
    free(out);
}
END_TEST

/* `ulimit -f` stops the log: the warning names the file size limit, not a full disk. */
START_TEST(test_a_log_stopped_by_the_file_size_limit_says_so)
{
    char log[4200], env_log[4300];
    snprintf(log, sizeof log, "%s/fsize.gmlog", temp_dir());
    snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s", log);
    const char *env[] = {env_log, "PAIRS=200000", "THREADS=1", "LEAK_EVERY=1000000", NULL};
    struct rlimit lim = {4u << 20, 4u << 20}; /* this test's process and its children only */
    ck_assert(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    char *out = NULL;
    int rc = run_mode("tests/integration/log_bounded", NULL, env, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(count_lines_with(out, "gmshim[") == 1 && strstr(out, "file size limit") &&
                  !strstr(out, "No space left"), "expected one warning naming the file size limit:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_a_bounded_log_keeps_its_size_and_memory_bounds)
{
    char log[4200], env_log[4300];
    snprintf(log, sizeof log, "%s/bounded.gmlog", temp_dir());
    snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s", log);
    const char *env[] = {env_log, "GMSHIM_LOG_LIMIT=64M", "PAIRS=1000000", "THREADS=4", "IDLE_THREADS=8", NULL};
    char *out = NULL;
    int rc = run_mode("tests/integration/log_bounded", NULL, env, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    long rss = -1;
    const char *r = strstr(out, "rss_file_kib ");
    if (r)
        rss = atol(r + 13);
    /* 8 M records (about 230 MB of log): kept in 64 MiB, with one extent of slack while a
     * checkpoint is written, although 8 idle threads each keep a chunk in an early extent;
     * mapped: the extents being written (one per thread, the next) and the idle threads'. */
    ck_assert_msg(file_size(log) <= (64 << 20) + (16 << 20) + (1 << 20), "the log is %lld bytes",
                  file_size(log));
    ck_assert_msg(rss >= 0 && rss < 200 * 1024, "the writer's resident file memory reached %ld KiB:\n%s",
                  rss, out);
    free(out);
}
END_TEST

/* One kill -9 trial: the target runs until thread 0 has reported `target` pairs done (0: kill
 * at once, while it may still be starting), then after `delay_us` it is killed. Returns the pairs
 * thread 0 reported done; *status the wait status. */
static unsigned long kill_once(const char *log, unsigned long target, unsigned delay_us, const char *limit,
                               int *status)
{
    char env_log[4300], env_limit[64];
    snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s", log);
    snprintf(env_limit, sizeof env_limit, "GMSHIM_LOG_LIMIT=%s", limit);
    const char *env[] = {env_log, env_limit, "FAKECUDA_MEM=1G", "THREADS=3", NULL};
    int pfd[1];
    pid_t pid = spawn_preloaded("tests/integration/kill_target", env, &pfd[0]);
    ck_assert_msg(pid > 0, "cannot start the target: %s", strerror(errno));
    unsigned long done = 0;
    char buf[4096];
    size_t got = 0;
    while (target && done < target) {
        ssize_t n = read(pfd[0], buf + got, sizeof buf - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
        buf[got] = 0;
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n'))) {
            unsigned long v;
            if (sscanf(line, "done %lu", &v) == 1)
                done = v;
            line = nl + 1;
        }
        got = strlen(line);
        memmove(buf, line, got + 1);
    }
    if (delay_us)
        usleep(delay_us);
    kill(pid, SIGKILL);
    close(pfd[0]);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
    return done;
}

/* kill -9 at random points (at once, mid-extent, past a wrap of a small bounded log): every log
 * opens, none reads as damaged or closed, and every pair completed before the kill is in it.
 * KILL_TRIALS sets the count (CI: 24; `make kill-trials`: 1 000). */
START_TEST(test_kill_9_at_any_point_loses_no_completed_pair)
{
    const char *n_env = getenv("KILL_TRIALS");
    int trials = n_env ? atoi(n_env) : 24;
    unsigned seed = (unsigned)time(NULL);
    const char *dir = temp_dir();
    int unreadable = 0, lost = 0, early = 0, wrapped = 0;
    for (int i = 0; i < trials; i++) {
        char log[4200];
        snprintf(log, sizeof log, "%s/k%d.gmlog", dir, i);
        unsigned r = rand_r(&seed);
        int bounded = i % 4 == 3;
        unsigned long target = i % 8 == 0 ? 0 : bounded ? 150000 + r % 200000 : 1 + r % 20000;
        int status = 0;
        unsigned long done = kill_once(log, target, r % 3 ? r % 2000 : 0, bounded ? "64M" : "0", &status);
        ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "trial %d: not killed (status 0x%x)",
                      i, status);
        struct stat st;
        if (stat(log, &st) != 0) {
            early++; /* killed before its first CUDA call: no log, as designed */
            ck_assert_msg(done == 0, "trial %d: %lu pairs done and no log", i, done);
            continue;
        }
        rd_log_t lf;
        if (rd_open_path(&lf, log) != 0) {
            unreadable++;
            fprintf(stderr, "trial %d (%lu done, %lld bytes): %s\n", i, done, (long long)st.st_size,
                    lf.ndiags ? lf.diags[0].msg : "?");
            rd_close(&lf);
            continue;
        }
        /* A wrapped log stands for the allocations before its checkpoint in the checkpoint's
         * cuts; the rest are events. */
        unsigned long allocs = lf.ckpt.seq ? (unsigned long)lf.ckpt.allocs : 0;
        rd_rec_t rec;
        while (rd_next(&lf, &rec))
            allocs += rec.type == GMLOG_ALLOC && rec.ckpt == RD_EVENT;
        if ((lf.partial || allocs < done) && lost++ < 5)
            fprintf(stderr, "trial %d: %lu pairs done, %lu allocations read%s%s\n", i, done, allocs,
                    lf.partial ? ", damaged: " : "", lf.partial && lf.ndiags ? lf.diags[0].msg : "");
        ck_assert_msg(!(lf.hdr.flags & GMLOG_F_CLOSED), "trial %d: a killed log reads as closed", i);
        wrapped += (lf.hdr.flags & GMLOG_F_WRAPPED) != 0;
        rd_close(&lf);
        unlink(log);
    }
    fprintf(stderr, "kill trials: %d, %d killed before any log, %d of the logs wrapped; %d did not open, %d lost "
            "completed pairs or read as damaged\n", trials, early, wrapped, unreadable, lost);
    ck_assert_msg(!unreadable && !lost, "%d of %d killed logs did not open, %d lost completed pairs or read "
                  "as damaged (%d killed before any log)", unreadable, trials, lost, early);
}
END_TEST

Suite *evlog_suite(void)
{
    Suite *s = suite_create("evlog");
    TCase *tc = tcase_create("host");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_a_host_with_stdio_closed_keeps_its_output_out_of_the_log);
    tcase_add_test(tc, test_an_ignored_fault_ends_the_host_as_without_gmshim);
    tcase_add_test(tc, test_an_ignored_signal_sent_by_kill_stays_ignored);
    tcase_add_test(tc, test_a_log_path_that_is_not_a_regular_file_is_refused_once);
    tcase_add_test(tc, test_a_log_path_that_leads_to_a_device_or_fifo_is_refused_once);
    tcase_add_test(tc, test_a_program_name_in_the_log_path_stays_one_plain_file_name);
    tcase_add_test(tc, test_a_small_address_space_leaves_the_host_its_memory);
    tcase_add_test(tc, test_a_rank_with_slashes_stays_in_the_log_directory);
    tcase_add_test(tc, test_a_log_with_room_for_less_than_an_extent_records_what_fits);
    tcase_add_test(tc, test_a_log_stopped_by_the_file_size_limit_says_so);
    tcase_add_test(tc, test_a_bounded_log_keeps_its_size_and_memory_bounds);
    suite_add_tcase(s, tc);
    /* Its own case, so that `make kill-trials` runs it alone (CK_RUN_CASE=kill). */
    TCase *kill = tcase_create("kill");
    tcase_set_timeout(kill, 7200);
    tcase_add_test(kill, test_kill_9_at_any_point_loses_no_completed_pair);
    suite_add_tcase(s, kill);
    return s;
}
