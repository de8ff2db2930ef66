/* Call sites (shim/stacks.c), under the preload: an out-of-range depth warns and the log reads. */
#include "evlog.h"
#include "options.h"
#include "stacks.h"
#include "suites.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* GMSHIM_STACK_DEPTH of 2^31 once became a negative depth (a crash at the first cudaMalloc),
 * and 2^32-1 a depth of -1 (a garbage record in the log): both are out of range now, warned
 * about once, and the program runs with the default and writes a log that reads. */
START_TEST(test_stack_depth_of_two_to_the_31_or_more_warns_and_the_log_reads)
{
    classic_pool_test();
    const char *values[] = {"2147483648", "4294967295"};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        const char *dir = temp_dir();
        char log[512], logenv[600], depth[64], want[128];
        snprintf(log, sizeof log, "%s/depth.gmlog", dir);
        snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
        snprintf(depth, sizeof depth, "GMSHIM_STACK_DEPTH=%s", values[i]);
        const char *env[] = {"FAKECUDA_MEM=1G", logenv, depth, NULL};
        char *out = NULL;
        int rc = run_built("tests/integration/pool_hits", env, NULL, &out);
        ck_assert_msg(rc == 0, "GMSHIM_STACK_DEPTH=%s: exit %d:\n%s", values[i], rc, out);
        snprintf(want, sizeof want, "GMSHIM_STACK_DEPTH='%s' is out of range (at most 64); using the default 16",
                 values[i]);
        const char *at = strstr(out, want);
        ck_assert_msg(at && !strstr(at + 1, "GMSHIM_STACK_DEPTH"), "one warning '%s' in:\n%s", want, out);
        free(out);
        const char *dump[] = {build_path("gmshim"), "dump", log, NULL};
        const char *none[] = {NULL};
        rc = run_program(dump, none, 0, &out);
        ck_assert_msg(rc == 0, "gmshim dump of the log (GMSHIM_STACK_DEPTH=%s) exited %d:\n%.3000s", values[i], rc,
                      out);
        ck_assert_msg(strstr(out, "GMSHIM_STACK_DEPTH=16\n") && strstr(out, " native=["),
                      "GMSHIM_STACK_DEPTH=%s: no depth 16 or no site in the log:\n%.3000s", values[i], out);
        ck_assert_msg(!strstr(out, " type_"), "GMSHIM_STACK_DEPTH=%s: a record of no known type:\n%.3000s",
                      values[i], strstr(out, " type_"));
        free(out);
        unlink(log);
        rmdir(dir);
    }
}
END_TEST


/* In this process, with a log: a call site gets an id, a string is interned once (the same string,
 * the same id; two strings, two ids), and no log means no sites. (This runner links gmshim's code,
 * whose frames a site skips, so what is left of a site here is the test harness's frames, which a
 * sanitizer's runtime may vary: sites are not compared.) */
static uint32_t __attribute__((noinline)) site_a(void)
{
    return stacks_site();
}

START_TEST(test_a_call_site_gets_an_id_and_a_string_is_interned_once)
{
    char path[512];
    snprintf(path, sizeof path, "%s/sites.gmlog", temp_dir());
    setenv("GMSHIM_LOG", path, 1);
    options_reset();
    evlog_open();
    stacks_init();
    uint32_t a[2];
    for (int i = 0; i < 2; i++)
        a[i] = site_a();
    ck_assert_uint_ne(a[0], 0);
    ck_assert_uint_ne(a[1], 0);
    uint32_t x = stacks_intern_string("libfirst.so"), y = stacks_intern_string("libsecond.so");
    ck_assert_uint_ne(x, 0);
    ck_assert_uint_ne(x, y);
    ck_assert_uint_eq(stacks_intern_string("libfirst.so"), x);
    evlog_close(GMLOG_CLOSE_EXIT);
}
END_TEST

START_TEST(test_no_log_no_call_site)
{
    setenv("GMSHIM_LOG", "off", 1);
    options_reset();
    evlog_open();
    stacks_init();
    ck_assert_uint_eq(site_a(), 0);
}
END_TEST

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A key destructor that allocates after gmshim's own per-thread state was freed at thread exit:
 * the run ends cleanly (and, under ASan, reads no freed memory). */
START_TEST(test_an_allocation_after_the_threads_own_state_is_gone_runs)
{
    char log[512], logenv[600];
    snprintf(log, sizeof log, "%s/exit.gmlog", temp_dir());
    unlink(log);
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
    const char *env[] = {"FAKECUDA_MEM=1G", logenv, NULL};
    char *out = NULL, prog[4096];
    snprintf(prog, sizeof prog, "%s", build_path("tests/integration/thread_exit_alloc"));
    /* Under valgrind where there is one (and no sanitizer runtime is preloaded): a read of freed
     * memory fails the run even where it would not crash. */
    const char *san = getenv("GMSHIM_TEST_PRELOAD");
    int grind = access("/usr/bin/valgrind", X_OK) == 0 && !(san && *san);
    const char *with[] = {"/usr/bin/valgrind", "-q", "--error-exitcode=9", prog, NULL};
    const char *plain[] = {prog, NULL};
    int rc = run_program(grind ? with : plain, env, 1, &out);
    ck_assert_msg(rc == 0 && strstr(out, "ok"), "thread_exit_alloc exited %d:\n%s", rc, out);
    free(out);
    unlink(log);
}
END_TEST

/* The sites a log holds, as sorted "native=[...] python=[...]" texts (ids and times left out: a
 * threaded program meets its sites in another order each run). */
static char *site_texts(const char *log)
{
    const char *dump[] = {build_path("gmshim"), "dump", log, NULL};
    const char *none[] = {NULL};
    char *out = NULL;
    int rc = run_program(dump, none, 0, &out);
    ck_assert_msg(rc == 0, "gmshim dump %s exited %d:\n%.2000s", log, rc, out);
    char *lines[4096];
    size_t n = 0, total = 0;
    for (char *l = strtok(out, "\n"); l && n < 4096; l = strtok(NULL, "\n")) {
        char *at = strstr(l, " site ");
        char *nat = at ? strstr(at, "native=[") : NULL;
        if (nat) {
            lines[n++] = nat;
            total += strlen(nat) + 1;
        }
    }
    qsort(lines, n, sizeof *lines, cmp_str);
    char *all = malloc(total + 1);
    ck_assert_ptr_nonnull(all);
    all[0] = 0;
    for (size_t i = 0; i < n; i++) {
        strcat(all, lines[i]);
        strcat(all, "\n");
    }
    free(out);
    return all;
}

static char *sites_walked_by(const char *how, const char *prog, const char *const *argv)
{
    char log[512], logenv[600], unwind[64], fake[4096];
    snprintf(log, sizeof log, "%s/walk-%s.gmlog", temp_dir(), how);
    unlink(log);
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
    snprintf(unwind, sizeof unwind, "GMSHIM_UNWIND=%s", how);
    snprintf(fake, sizeof fake, "FAKE_CUDART=%s", build_path("fake/libcudart.so.13"));
    const char *env[] = {"FAKECUDA_MEM=4G", logenv, unwind, fake, "ASAN_OPTIONS=detect_leaks=0", NULL};
    char *out = NULL;
    int rc = argv ? run_program(argv, env, 1, &out) : run_built(prog, env, NULL, &out);
    ck_assert_msg(rc == 0, "%s under GMSHIM_UNWIND=%s exited %d:\n%.2000s", prog, how, rc, out);
    free(out);
    char *texts = site_texts(log);
    unlink(log);
    return texts;
}

/* The cached table walk must log exactly the sites backtrace() gives: the same native frames for
 * every allocation, so the same sites, in a C program's threads and under CPython (built without
 * frame pointers). */
START_TEST(test_the_table_walk_logs_the_sites_backtrace_logs)
{
    const char *san = getenv("GMSHIM_TEST_PRELOAD");
    if (san && *san) { /* a sanitizer's runtime replaces backtrace() with its own walk */
        fprintf(stderr, "test_the_table_walk_logs_the_sites_backtrace_logs: skipped under a sanitizer\n");
        return;
    }
    const char *progs[] = {"tests/integration/threads", "tests/integration/oom_leak"};
    for (size_t i = 0; i < sizeof progs / sizeof *progs; i++) {
        char *bt = sites_walked_by("backtrace", progs[i], NULL), *tb = sites_walked_by("tables", progs[i], NULL);
        ck_assert_msg(strchr(bt, '\n'), "%s: no site logged", progs[i]);
        ck_assert_msg(!strcmp(bt, tb), "%s: sites differ:\nbacktrace:\n%.3000s\ntables:\n%.3000s", progs[i], bt, tb);
        free(bt);
        free(tb);
    }
    const char *python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : NULL;
    if (!python)
        return;
    const char *argv[] = {python, "tests/integration/pyleak.py", NULL};
    char *bt = sites_walked_by("backtrace", "pyleak.py", argv), *tb = sites_walked_by("tables", "pyleak.py", argv);
    ck_assert_msg(strstr(bt, "python=[") && strchr(bt, '\n'), "pyleak.py: no site logged");
    ck_assert_msg(!strcmp(bt, tb), "pyleak.py: sites differ:\nbacktrace:\n%.3000s\ntables:\n%.3000s", bt, tb);
    free(bt);
    free(tb);
}
END_TEST

Suite *stacks_suite(void)
{
    Suite *s = suite_create("stacks");
    TCase *tc = tcase_create("preload");
    tcase_add_test(tc, test_a_call_site_gets_an_id_and_a_string_is_interned_once);
    tcase_add_test(tc, test_no_log_no_call_site);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_stack_depth_of_two_to_the_31_or_more_warns_and_the_log_reads);
    tcase_add_test(tc, test_the_table_walk_logs_the_sites_backtrace_logs);
    tcase_add_test(tc, test_an_allocation_after_the_threads_own_state_is_gone_runs);
    suite_add_tcase(s, tc);
    return s;
}
