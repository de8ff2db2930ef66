/* gmshim run (analyzer/run.c): the command under the preload, its exit status kept, and only
 * the logs it wrote reported. */
#include "gmlog.h"
#include "suites.h"
#include "test_analyzer_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

START_TEST(test_run_preloads_the_shim_reports_and_keeps_the_exit_status)
{
    const char *dir = temp_dir();
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/run-%%p.gmlog", dir);
    char prog[600];
    snprintf(prog, sizeof prog, "%s", build_path("tests/integration/oom_leak"));
    const char *san = getenv("GMSHIM_TEST_PRELOAD");
    char pre[4200] = "";
    if (san && *san)
        snprintf(pre, sizeof pre, "LD_PRELOAD=%s", san);
    const char *argv[] = {build_path("gmshim"), "--color=never", "run", "-o", tmpl, "--", prog, NULL};
    const char *env[] = {"FAKECUDA_MEM=1G", "ASAN_OPTIONS=verify_asan_link_order=0", pre[0] ? pre : NULL, NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 0, &out);
    ck_assert_msg(rc == 0 && strstr(out, "expected OOM") && strstr(out, "cause    leak") && strstr(out, "gmshim run: log "),
                  "gmshim run oom_leak: exit %d\n%.3000s", rc, out);
    free(out);
    const char *argv2[] = {build_path("gmshim"), "run", "-o", tmpl, "--", "/bin/sh", "-c", "exit 7", NULL};
    rc = run_program(argv2, env, 0, &out);
    ck_assert_msg(rc == 7 && strstr(out, "wrote no log"), "the command's exit status 7 became %d:\n%.3000s", rc, out);
    free(out);
}
END_TEST

/* Only the logs the command wrote are reported: not one that was there before it started (an
 * earlier run's, though its header claims a start in the future), nor one that appears during
 * the run with a start time outside it. */
START_TEST(test_run_reports_only_the_logs_its_command_wrote)
{
    const char *dir = temp_dir();
    char tmpl[512], stale[520], copied[520], future[520];
    snprintf(tmpl, sizeof tmpl, "%s/run-%%p.gmlog", dir);
    snprintf(stale, sizeof stale, "%s/run-1.gmlog", dir);
    snprintf(copied, sizeof copied, "%s/run-2.gmlog", dir);
    snprintf(future, sizeof future, "%s/future.log", dir);
    size_t flen;
    uint8_t *fix = gm_slurp(FIXTURE, &flen);
    gmlog_file_header_t *h = (gmlog_file_header_t *)fix;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    h->start_realtime_ns = ((uint64_t)now.tv_sec + 3600) * 1000000000ull;
    gm_spew(stale, fix, flen);
    gm_spew(future, fix, flen);
    free(fix);
    char prog[600], script[2400];
    snprintf(prog, sizeof prog, "%s", build_path("tests/integration/oom_leak"));
    snprintf(script, sizeof script, "cp '%s' '%s' && exec '%s'", future, copied, prog);
    const char *san = getenv("GMSHIM_TEST_PRELOAD");
    char pre[4200] = "";
    if (san && *san)
        snprintf(pre, sizeof pre, "LD_PRELOAD=%s", san);
    const char *argv[] = {build_path("gmshim"), "--color=never", "run", "-o", tmpl, "--", "/bin/sh", "-c", script, NULL};
    const char *env[] = {"FAKECUDA_MEM=1G", "ASAN_OPTIONS=verify_asan_link_order=0", pre[0] ? pre : NULL, NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 0, &out);
    char was_there[700], outside[700];
    snprintf(was_there, sizeof was_there, "gmshim run: not reporting %s: it was there before the command started", stale);
    snprintf(outside, sizeof outside, "gmshim run: not reporting %s: its start time is not within the command's run",
             copied);
    ck_assert_msg(rc == 0 && gm_count(out, "gmshim run: log ") == 1 && !strstr(out, "combined") &&
                  strstr(out, was_there) && strstr(out, outside) && strstr(out, "cause    leak"),
                  "gmshim run beside a stale log and a copied one: exit %d\n%.4000s", rc, out);
    free(out);
}
END_TEST

Suite *analyzer_run_suite(void)
{
    Suite *s = suite_create("analyzer_run");
    TCase *tc = tcase_create("run");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_run_preloads_the_shim_reports_and_keeps_the_exit_status);
    tcase_add_test(tc, test_run_reports_only_the_logs_its_command_wrote);
    suite_add_tcase(s, tc);
    return s;
}
