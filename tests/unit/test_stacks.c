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

Suite *stacks_suite(void)
{
    Suite *s = suite_create("stacks");
    TCase *tc = tcase_create("preload");
    tcase_add_test(tc, test_a_call_site_gets_an_id_and_a_string_is_interned_once);
    tcase_add_test(tc, test_no_log_no_call_site);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_stack_depth_of_two_to_the_31_or_more_warns_and_the_log_reads);
    suite_add_tcase(s, tc);
    return s;
}
