/* gmshim leaks (analyzer/leaks.c): --at a mark by number or label, and a mark not in the log. */
#include "gmlog.h"
#include "suites.h"
#include "test_analyzer_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

Suite *analyzer_leaks_suite(void)
{
    Suite *s = suite_create("analyzer_leaks");
    TCase *tc = tcase_create("leaks");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_leaks_at_a_mark_stops_there);
    suite_add_tcase(s, tc);
    return s;
}
