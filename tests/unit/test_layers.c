/* The shim's and the analyzer's layers as docs/architecture.md orders them: scripts/shim-graph
 * reads the #include lines and the objects' symbols of the build and fails on a cycle (in the
 * shim, other than diag <-> options) or on a call up the documented order; for the analyzer also
 * on a module the order does not name; and, in the shim, on an exported function whose name does
 * not start with its file's (names equal rooms). */
#include "suites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_shim_calls_run_one_way_down_the_documented_order)
{
    const char *build = build_path("");
    const char *const argv[] = {"/usr/bin/env", "python3", "scripts/shim-graph", build, NULL};
    char *out = NULL;
    int rc = run_program(argv, NULL, 0, &out);
    ck_assert_msg(rc == 0 && out && strstr(out, "no cycle but diag<->options, every call down the documented order"),
                  "scripts/shim-graph exited %d:\n%s", rc, out ? out : "");
    free(out);
}
END_TEST

START_TEST(test_shim_exported_functions_start_with_their_files_name)
{
    const char *build = build_path("");
    const char *const argv[] = {"/usr/bin/env", "python3", "scripts/shim-graph", build, NULL};
    char *out = NULL;
    int rc = run_program(argv, NULL, 0, &out);
    ck_assert_msg(rc == 0 && out && strstr(out, "names: every exported function starts with its file's name") &&
                      !strstr(out, "not named for its file"),
                  "scripts/shim-graph exited %d:\n%s", rc, out ? out : "");
    free(out);
}
END_TEST

START_TEST(test_analyzer_calls_run_one_way_down_the_documented_order)
{
    const char *build = build_path("");
    const char *const argv[] = {"/usr/bin/env", "python3", "scripts/shim-graph", "--analyzer", build, NULL};
    char *out = NULL;
    int rc = run_program(argv, NULL, 0, &out);
    ck_assert_msg(rc == 0 && out && strstr(out, "no cycle, every call down the documented order") &&
                      !strstr(out, "not in the documented order"),
                  "scripts/shim-graph --analyzer exited %d:\n%s", rc, out ? out : "");
    free(out);
}
END_TEST

Suite *layers_suite(void)
{
    Suite *s = suite_create("layers");
    TCase *tc = tcase_create("graph");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_shim_calls_run_one_way_down_the_documented_order);
    tcase_add_test(tc, test_shim_exported_functions_start_with_their_files_name);
    tcase_add_test(tc, test_analyzer_calls_run_one_way_down_the_documented_order);
    suite_add_tcase(s, tc);
    return s;
}
