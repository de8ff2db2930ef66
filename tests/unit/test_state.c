/* The floor (shim/state.c): the state starts uninitialized, and the guard is per thread (a
 * thread that gmshim entered does not make another thread's calls pass through). */
#include "state.h"
#include "suites.h"

#include <pthread.h>

static void *depth_of_new_thread(void *arg)
{
    *(int *)arg = gm_depth;
    return NULL;
}

START_TEST(test_the_guard_is_per_thread)
{
    ck_assert_int_eq(gm_state, GM_UNINIT);
    gm_depth = 1;
    int other = -1;
    pthread_t t;
    pthread_create(&t, NULL, depth_of_new_thread, &other);
    pthread_join(t, NULL);
    ck_assert_int_eq(other, 0);
    ck_assert_int_eq(gm_depth, 1);
    gm_depth = 0;
}
END_TEST

Suite *state_suite(void)
{
    Suite *s = suite_create("state");
    TCase *tc = tcase_create("floor");
    tcase_add_test(tc, test_the_guard_is_per_thread);
    suite_add_tcase(s, tc);
    return s;
}
