/* gmshim report (analyzer/report.c): the recorded demo fixture, with the binary that wrote it,
 * names its leak and its cause; the sections' JSON carries their members. */
#include "gmlog.h"
#include "suites.h"
#include "test_analyzer_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_fixture_report_names_the_leak_and_its_cause)
{
    char *out;
    int rc = gm(&out, "--color=never", "--symbol-path", FIXTURE_DIR, "report", FIXTURE, NULL);
    ck_assert_msg(rc == 0, "report exited %d:\n%s", rc, out);
    const char *want[] = {"Summary", "hit rate", "Fragmentation at the peak", "keep_loss_history (demo_train.c:",
                          "grows by", "per mark", "cause    leak", "loss.item()", "closed at exit"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(out, want[i]), "the report lacks '%s':\n%s", want[i], out);
    ck_assert_msg(!strstr(out, "build id differs"), "the fixture's own binary reads as another build:\n%s", out);
    free(out);
    rc = gm(&out, "--json", "--symbol-path", FIXTURE_DIR, "oom", FIXTURE, NULL);
    ck_assert_msg(rc == 0 && gm_count(out, "\"cause\":\"leak\"") == 1 && strstr(out, "\"requested\":"),
                  "oom --json: %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "--json", "--symbol-path", FIXTURE_DIR, "leaks", FIXTURE, NULL);
    ck_assert_msg(rc == 0 && strstr(out, "\"growing\":[{") && strstr(out, "\"function\":\"keep_loss_history\"") &&
                  strstr(out, "\"file\":") && strstr(out, "\"bytes_per_epoch\":"), "leaks --json: %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "--json", "summary", FIXTURE, NULL, NULL, NULL);
    const char *keys[] = {"\"allocs\":", "\"frees\":", "\"peak_requested\":", "\"peak_allocated\":",
                          "\"peak_reserved\":", "\"cache_hits\":", "\"cache_misses\":", "\"est_time_saved_ns\":"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ck_assert_msg(strstr(out, keys[i]), "summary --json lacks %s:\n%s", keys[i], out);
    free(out);
}
END_TEST

Suite *analyzer_report_suite(void)
{
    Suite *s = suite_create("analyzer_report");
    TCase *tc = tcase_create("report");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_fixture_report_names_the_leak_and_its_cause);
    suite_add_tcase(s, tc);
    return s;
}
