/* Messages (shim/diag.c): a warning given once stays given; verbose notes only with
 * GMSHIM_VERBOSE; every line names gmshim. */
#include "diag.h"
#include "options.h"
#include "suites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int once;

static void warn_thrice(void)
{
    for (int i = 0; i < 3; i++)
        diag_warn_once(&once, "warning number %d", i);
}

static void note(void)
{
    diag_verbose("a verbose note");
}

START_TEST(test_a_warning_given_once_is_given_once)
{
    const char *err = stderr_of(warn_thrice);
    ck_assert_msg(strstr(err, "warning number 0") && !strstr(err, "warning number 1"), "stderr: %s", err);
    ck_assert_msg(strstr(err, "gmshim"), "the line does not name gmshim: %s", err);
}
END_TEST

START_TEST(test_verbose_notes_only_with_gmshim_verbose)
{
    unsetenv("GMSHIM_VERBOSE");
    options_reset();
    ck_assert_str_eq(stderr_of(note), "");
    setenv("GMSHIM_VERBOSE", "1", 1);
    options_reset();
    ck_assert_msg(strstr(stderr_of(note), "a verbose note") != NULL, "no note with GMSHIM_VERBOSE=1");
}
END_TEST

Suite *diag_suite(void)
{
    Suite *s = suite_create("diag");
    TCase *tc = tcase_create("messages");
    tcase_add_test(tc, test_a_warning_given_once_is_given_once);
    tcase_add_test(tc, test_verbose_notes_only_with_gmshim_verbose);
    suite_add_tcase(s, tc);
    return s;
}
