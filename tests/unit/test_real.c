/* The real runtime's functions (shim/real.c), under the preload: none at all gives an error and
 * one message; a libcudart loaded RTLD_LOCAL is found. */
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

START_TEST(test_no_runtime_at_all_returns_an_error_and_one_message)
{
    const char *env[] = {NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/no_runtime", env, NULL, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    const char *w = strstr(out, "no real CUDA runtime function");
    ck_assert_msg(w != NULL, "no message:\n%s", out);
    ck_assert_msg(strstr(w + 1, "no real CUDA runtime function") == NULL, "more than one message:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_runtime_loaded_rtld_local_is_found)
{
    char lib[4096];
    snprintf(lib, sizeof lib, "%s", build_path("fake/libcudart.so.13"));
    const char *env[] = {"FAKECUDA_MEM=1G", NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/local_cudart", env, lib, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

Suite *real_suite(void)
{
    Suite *s = suite_create("real");
    TCase *tc = tcase_create("preload");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_no_runtime_at_all_returns_an_error_and_one_message);
    tcase_add_test(tc, test_runtime_loaded_rtld_local_is_found);
    suite_add_tcase(s, tc);
    return s;
}
