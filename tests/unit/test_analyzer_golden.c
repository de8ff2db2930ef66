/* The CLI's output kept byte for byte: tests/golden/golden.sh runs every command on the fixtures
 * and on small generated logs and compares stdout, stderr and the exit status with the files in
 * tests/golden/ (`make golden-update` rewrites them when a change means to alter the output). */
#include "suites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_every_command_prints_what_the_golden_files_hold)
{
    const char *build = build_path("");
    const char *const argv[] = {"/bin/sh", "tests/golden/golden.sh", "check", build, NULL};
    char *out = NULL;
    int rc = run_program(argv, NULL, 0, &out);
    /* Check's messages are bounded: the full diff goes to stderr, the message keeps its end */
    size_t len = out ? strlen(out) : 0;
    const char *tail = len > 3000 ? out + len - 3000 : (out ? out : "");
    if (rc != 0 && out)
        fputs(out, stderr);
    ck_assert_msg(rc == 0, "golden.sh check exited %d (the whole output is on stderr):\n...%s", rc, tail);
    ck_assert_msg(out && strstr(out, "cases match"), "golden.sh check said:\n...%s", tail);
    free(out);
}
END_TEST

Suite *analyzer_golden_suite(void)
{
    Suite *s = suite_create("analyzer_golden");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_every_command_prints_what_the_golden_files_hold);
    suite_add_tcase(s, tc);
    return s;
}
