/* The injection entry point (shim/inject.c), in this process (not preloaded): InitializeInjection
 * always returns 1; without the preload it initializes gmshim as the injection library only, so
 * that its hooks pass calls through; a fork child's call does nothing. */
#include "../../shim/cupti.h"
#include "options.h"
#include "state.h"
#include "suites.h"

#include <stdlib.h>

int InitializeInjection(void);

static void setup(void)
{
    unsetenv("LD_PRELOAD");
    setenv("GMSHIM_LOG", "off", 1);
    options_reset();
}

START_TEST(test_injection_alone_initializes_gmshim_to_pass_calls_through)
{
    ck_assert_int_eq(InitializeInjection(), 1);
    ck_assert_int_eq(cupti_injection_only(), 1);
    ck_assert_int_eq(__atomic_load_n(&gm_state, __ATOMIC_ACQUIRE), GM_PASSTHROUGH);
    ck_assert_int_eq(gm_depth, 0);
}
END_TEST

START_TEST(test_injection_in_a_fork_child_does_nothing)
{
    gm_state = GM_CHILD;
    ck_assert_int_eq(InitializeInjection(), 1);
    ck_assert_int_eq(cupti_injection_only(), 0);
    ck_assert_int_eq(gm_state, GM_CHILD);
}
END_TEST

Suite *inject_suite(void)
{
    Suite *s = suite_create("inject");
    TCase *tc = tcase_create("entry");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_injection_alone_initializes_gmshim_to_pass_calls_through);
    tcase_add_test(tc, test_injection_in_a_fork_child_does_nothing);
    suite_add_tcase(s, tc);
    return s;
}
