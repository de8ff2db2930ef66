/* The step recogniser (common/steprec.c): a training loop's step found as its period, not a
 * layer or an optimizer loop inside it; the lives of one repetition recorded; a stream without
 * a period stops at its bound. */
#include "steprec.h"
#include "steptest.h"
#include "suites.h"

static uint32_t rec_alloc(void *arg, uint64_t key, uint64_t size)
{
    return steprec_alloc(arg, key, size);
}

static void rec_free(void *arg, uint32_t tag)
{
    steprec_free(arg, tag);
}

START_TEST(test_a_loop_s_period_is_its_step)
{
    steprec_t *r = steprec_create(1 << 16);
    st_loop_t l = {12, rec_alloc, rec_free, r, 0};
    st_weights(&l);
    st_step(&l, 1, 0);
    int steps = 1;
    while (steprec_state(r) != STEPREC_READY && steps < 10) {
        st_step(&l, 0, 0);
        steps++;
    }
    ck_assert_msg(steprec_state(r) == STEPREC_READY, "state %d after %d steps", steprec_state(r), steps);
    steprec_step_t st;
    ck_assert_int_eq(steprec_step(r, &st), 0);
    ck_assert_msg(st.period == 2 + 4 * 12, "period %u, step of %d allocations", st.period, 2 + 4 * 12);
    ck_assert_msg(steps <= 4, "found after %d steps", steps);
    uint32_t planned = 0;
    for (uint32_t i = 0; i < st.period; i++) {
        planned += st.planned[i];
        if (st.planned[i]) {
            ck_assert(st.iv[i].birth < st.clock_period);
            ck_assert(st.iv[i].death > st.iv[i].birth && st.iv[i].death <= st.iv[i].birth + st.clock_period);
        }
    }
    ck_assert_uint_eq(planned, st.period); /* every block of the step dies within it */
    ck_assert_uint_eq(steprec_alloc(r, 1, 1), 0); /* READY: nothing more recorded */
    steprec_destroy(r);
}
END_TEST

START_TEST(test_a_block_outliving_a_period_is_not_planned)
{
    steprec_t *r = steprec_create(1 << 16);
    /* Each step keeps its 5 MiB block until the step after next frees it. */
    uint32_t kept[16] = {0};
    for (int s = 0; s < 12 && steprec_state(r) != STEPREC_READY; s++) {
        uint32_t a = steprec_alloc(r, 1, 1 << 20);
        kept[s] = steprec_alloc(r, 2, 5 << 20);
        uint32_t b = steprec_alloc(r, 3, 2 << 20);
        uint32_t c = steprec_alloc(r, 4, 3 << 20);
        steprec_free(r, a), steprec_free(r, b), steprec_free(r, c);
        if (s >= 2)
            steprec_free(r, kept[s - 2]);
    }
    ck_assert_int_eq(steprec_state(r), STEPREC_READY);
    steprec_step_t st;
    steprec_step(r, &st);
    ck_assert_uint_eq(st.period, 4);
    for (uint32_t i = 0; i < st.period; i++)
        ck_assert_msg(st.planned[i] == (st.keys[i] != 2), "slot %u key %llu planned %u", i,
                      (unsigned long long)st.keys[i], st.planned[i]);
    steprec_destroy(r);
}
END_TEST

START_TEST(test_keys_without_a_period_stop_at_the_bound)
{
    steprec_t *r = steprec_create(1000);
    uint64_t x = 99;
    uint32_t last = 1;
    for (int i = 0; i < 2000 && last; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        last = steprec_alloc(r, x >> 40, 512);
    }
    ck_assert_int_eq(steprec_state(r), STEPREC_FULL);
    ck_assert_uint_eq(last, 0);
    steprec_step_t st;
    ck_assert_int_eq(steprec_step(r, &st), -1);
    steprec_destroy(r);
}
END_TEST

START_TEST(test_a_period_that_breaks_off_is_looked_for_again)
{
    steprec_t *r = steprec_create(1 << 16);
    st_loop_t l = {6, rec_alloc, rec_free, r, 0};
    st_weights(&l);
    st_step(&l, 1, 0);
    st_step(&l, 0, 0);
    st_step(&l, 0, 3); /* a departure in the third step */
    int steps = 0;
    while (steprec_state(r) != STEPREC_READY && steps < 10) {
        st_step(&l, 0, 0);
        steps++;
    }
    ck_assert_int_eq(steprec_state(r), STEPREC_READY);
    steprec_step_t st;
    steprec_step(r, &st);
    ck_assert_uint_eq(st.period, 2 + 4 * 6);
    steprec_destroy(r);
}
END_TEST

Suite *steprec_suite(void)
{
    Suite *s = suite_create("steprec");
    TCase *tc = tcase_create("recogniser");
    tcase_add_test(tc, test_a_loop_s_period_is_its_step);
    tcase_add_test(tc, test_a_block_outliving_a_period_is_not_planned);
    tcase_add_test(tc, test_keys_without_a_period_stop_at_the_bound);
    tcase_add_test(tc, test_a_period_that_breaks_off_is_looked_for_again);
    suite_add_tcase(s, tc);
    return s;
}
