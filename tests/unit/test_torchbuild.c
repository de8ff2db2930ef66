/* The bridge's build (shim/torchbuild.c): what it asks before it says anything — whether the
 * compiler exists, as a path or in PATH — and its file test. (The install's discovery and the
 * build itself are driven end to end by test_torchload.c, with stub torch installs.) */
#include "suites.h"
#include "torchbuild.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void with_env(const char *cxx, const char *path)
{
    if (cxx)
        setenv("CXX", cxx, 1);
    else
        unsetenv("CXX");
    setenv("PATH", path, 1);
}

START_TEST(test_a_compiler_named_by_path_or_found_in_path_is_there)
{
    char why[256];
    const char *saved = getenv("PATH");
    char *keep = saved ? strdup(saved) : NULL;
    with_env("/bin/sh -c", "/nonexistent");
    ck_assert_msg(torchbuild_compiler_found(why, sizeof why) == 0, "CXX=/bin/sh (a path): %s", why);
    with_env("sh", "/nonexistent:/bin");
    ck_assert_msg(torchbuild_compiler_found(why, sizeof why) == 0, "CXX=sh with /bin in PATH: %s", why);
    with_env("/nonexistent/c++", "/bin");
    ck_assert_msg(torchbuild_compiler_found(why, sizeof why) == -1, "CXX=/nonexistent/c++ was found");
    ck_assert_msg(strstr(why, "/nonexistent/c++"), "the reason does not name the compiler: %s", why);
    with_env("no-such-compiler-here", "/nonexistent");
    ck_assert_msg(torchbuild_compiler_found(why, sizeof why) == -1, "a name in no PATH directory was found");
    with_env(NULL, saved ? keep : "/usr/bin:/bin");
    free(keep);
}
END_TEST

START_TEST(test_only_a_regular_file_is_a_file)
{
    ck_assert(torchbuild_is_file("/bin/sh"));
    ck_assert(!torchbuild_is_file("/"));
    ck_assert(!torchbuild_is_file("/nonexistent/file"));
}
END_TEST

Suite *torchbuild_suite(void)
{
    Suite *s = suite_create("torchbuild");
    TCase *tc = tcase_create("build");
    tcase_add_test(tc, test_a_compiler_named_by_path_or_found_in_path_is_there);
    tcase_add_test(tc, test_only_a_regular_file_is_a_file);
    suite_add_tcase(s, tc);
    return s;
}
