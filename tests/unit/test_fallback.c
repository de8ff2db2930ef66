/* Falling back (shim/fallback.c): pooling becomes pass-through for good with one warning, however
 * often it is asked; a fork child stays a fork child. */
#include "fallback.h"
#include "state.h"
#include "suites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void fall_back_twice(void)
{
    fallback_engage("first reason");
    fallback_engage("second reason");
}

START_TEST(test_pooling_falls_back_once_with_one_warning)
{
    gm_state = GM_POOLED;
    const char *err = stderr_of(fall_back_twice);
    ck_assert_int_eq(gm_state, GM_PASSTHROUGH);
    ck_assert_msg(strstr(err, "first reason") && !strstr(err, "second reason"), "stderr: %s", err);
    ck_assert_msg(strstr(err, "pass-through"), "the warning does not say what happens: %s", err);
}
END_TEST

START_TEST(test_a_fork_child_stays_a_fork_child)
{
    gm_state = GM_CHILD;
    stderr_of(fall_back_twice);
    ck_assert_int_eq(gm_state, GM_CHILD);
}
END_TEST

Suite *fallback_suite(void)
{
    Suite *s = suite_create("fallback");
    TCase *tc = tcase_create("pass-through");
    tcase_add_test(tc, test_pooling_falls_back_once_with_one_warning);
    tcase_add_test(tc, test_a_fork_child_stays_a_fork_child);
    suite_add_tcase(s, tc);
    return s;
}
