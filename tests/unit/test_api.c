/* The public API (shim/api.c): it works with and without the preload. */
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

START_TEST(test_api_works_with_and_without_the_preload)
{
    const char *env[] = {"FAKECUDA_MEM=1G", NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/api", env, "with", &out);
    ck_assert_msg(rc == 0, "with the preload: exit %d:\n%s", rc, out);
    free(out);
    const char *argv[] = {build_path("tests/integration/api"), "without", NULL};
    rc = run_program(argv, env, 0, &out);
    ck_assert_msg(rc == 0, "without the preload: exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

Suite *api_suite(void)
{
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("preload");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_api_works_with_and_without_the_preload);
    suite_add_tcase(s, tc);
    return s;
}
