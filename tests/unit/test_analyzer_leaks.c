/* gmshim leaks (analyzer/leaks.c): --at a mark by number or label, and a mark not in the log. */
#include "gmlog.h"
#include "suites.h"
#include "test_analyzer_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

START_TEST(test_leaks_at_a_mark_stops_there)
{
    char *out;
    int rc = gm(&out, "--symbol-path", FIXTURE_DIR, "leaks", "--at", "3", FIXTURE, NULL);
    ck_assert_msg(rc == 0 && strstr(out, "at mark 3 \"iteration 3\"") && strstr(out, "keep_loss_history"),
                  "--at 3: %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "leaks", "--at", "iteration 5", FIXTURE, NULL, NULL);
    ck_assert_msg(rc == 0 && strstr(out, "at mark 5"), "--at 'iteration 5': %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "leaks", "--at", "no such mark", FIXTURE, NULL, NULL);
    ck_assert_msg(rc == 2 && strstr(out, "is not in this log"), "--at a missing mark: %d\n%s", rc, out);
    free(out);
}
END_TEST

/* gmshim.phase() writes a mark at each end of a step: growth per mark must still be per step,
 * the phase's end being no boundary of its own. */
START_TEST(test_growth_per_mark_counts_a_phase_once_not_at_its_end_too)
{
    const char *dir = temp_dir();
    char log[512], logenv[600], pydir[4200], cwd[4096];
    snprintf(log, sizeof log, "%s/phase.gmlog", dir);
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
    snprintf(pydir, sizeof pydir, "%s/python", getcwd(cwd, sizeof cwd) ? cwd : ".");
    const char *keep = "1048576";
    const char *argv[] = {"/usr/bin/env", "python3", "tests/integration/phase_steps.py", pydir,
                          build_path("fake/libcudart.so.13"), keep, NULL};
    const char *env[] = {logenv, "FAKECUDA_MEM=1G", NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0 && strstr(out, "phase_steps: ok"), "phase_steps.py: rc %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "--json", "leaks", log, NULL, NULL, NULL);
    const char *g = out ? strstr(out, "\"growing\":[{\"bytes_per_epoch\":") : NULL;
    ck_assert_msg(rc == 0 && g, "no growing site: rc %d\n%.3000s", rc, out);
    unsigned long long per = strtoull(g + strlen("\"growing\":[{\"bytes_per_epoch\":"), NULL, 10);
    ck_assert_msg(per == strtoull(keep, NULL, 10), "grows by %llu per mark, want %s (one step):\n%.3000s", per, keep, out);
    free(out);
    rc = gm(&out, "leaks", "--at", "step end", log, NULL, NULL);
    ck_assert_msg(rc == 0 && strstr(out, "at mark 2 \"step end\""), "--at a phase's end: rc %d\n%.3000s", rc, out);
    free(out);
    unlink(log);
    rmdir(dir);
}
END_TEST

Suite *analyzer_leaks_suite(void)
{
    Suite *s = suite_create("analyzer_leaks");
    TCase *tc = tcase_create("leaks");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_leaks_at_a_mark_stops_there);
    tcase_add_test(tc, test_growth_per_mark_counts_a_phase_once_not_at_its_end_too);
    suite_add_tcase(s, tc);
    return s;
}
