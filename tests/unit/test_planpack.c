/* The step's placement (common/planpack.c): blocks that live at once never share an address, on
 * the step's circle too; the top is never below the floor and is the same for the same input. */
#include "planpack.h"
#include "suites.h"

#include <stdlib.h>

static uint64_t rng;

static uint64_t next_rand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return rng >> 33;
}

/* n random lives in a step of `period`, some round its end. */
static void random_lives(planpack_iv_t *iv, size_t n, uint64_t period)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t b = next_rand() % period, life = 1 + next_rand() % (period / 3);
        iv[i] = (planpack_iv_t){b, b + life, 512 * (1 + next_rand() % 4096)};
    }
}

START_TEST(test_blocks_alive_at_once_never_overlap)
{
    rng = 42 + (uint64_t)_i;
    enum { N = 600 };
    planpack_iv_t iv[N];
    uint64_t off[N];
    random_lives(iv, N, 5000);
    uint64_t top = planpack_place(iv, N, 5000, 512, off);
    const char *why = planpack_check(iv, N, 5000, 512, off, top);
    ck_assert_msg(why == NULL, "round %d: %s (top %llu)", _i, why, (unsigned long long)top);
    uint64_t floor = planpack_floor(iv, N, 5000);
    ck_assert_msg(top >= floor, "top %llu below floor %llu", (unsigned long long)top, (unsigned long long)floor);
    /* A greedy packing of these lives stays near the floor (a bound, not a promise). */
    ck_assert_msg(top <= floor + floor / 2, "top %llu, floor %llu", (unsigned long long)top,
                  (unsigned long long)floor);
}
END_TEST

START_TEST(test_the_same_lives_give_the_same_offsets)
{
    rng = 7;
    enum { N = 300 };
    planpack_iv_t iv[N];
    uint64_t a[N], b[N];
    random_lives(iv, N, 2000);
    uint64_t ta = planpack_place(iv, N, 2000, 512, a), tb = planpack_place(iv, N, 2000, 512, b);
    ck_assert_uint_eq(ta, tb);
    for (int i = 0; i < N; i++)
        ck_assert_msg(a[i] == b[i], "block %d: %llu then %llu", i, (unsigned long long)a[i], (unsigned long long)b[i]);
}
END_TEST

START_TEST(test_a_life_round_the_step_end_meets_the_next_step_start)
{
    /* Born at 90, dead at 110 of a 100-long step: it lives at 5 of the next step, as the block
     * born at 0 and dead at 10 does; the one from 20 to 80 meets neither. */
    planpack_iv_t iv[3] = {{90, 110, 1024}, {0, 10, 1024}, {20, 80, 1024}};
    ck_assert(planpack_conflict(&iv[0], &iv[1], 100));
    ck_assert(planpack_conflict(&iv[1], &iv[0], 100));
    ck_assert(!planpack_conflict(&iv[0], &iv[2], 100));
    ck_assert(!planpack_conflict(&iv[1], &iv[2], 100));
    uint64_t off[3];
    uint64_t top = planpack_place(iv, 3, 100, 512, off);
    ck_assert_uint_eq(top, 2048);
    ck_assert_uint_ne(off[0], off[1]);
    ck_assert_uint_eq(planpack_floor(iv, 3, 100), 2048);
    ck_assert_ptr_null(planpack_check(iv, 3, 100, 512, off, top));
}
END_TEST

START_TEST(test_the_check_finds_an_overlap_and_a_top_below_the_floor)
{
    planpack_iv_t iv[2] = {{0, 50, 4096}, {10, 60, 4096}};
    uint64_t off[2] = {0, 2048};
    ck_assert_ptr_nonnull(planpack_check(iv, 2, 100, 512, off, 6144));
    off[1] = 4096;
    ck_assert_ptr_null(planpack_check(iv, 2, 100, 512, off, 8192));
    off[1] = 100; /* out of alignment */
    ck_assert_ptr_nonnull(planpack_check(iv, 2, 100, 512, off, 4196));
    /* Blocks that never meet may share: the floor is one block. */
    planpack_iv_t apart[2] = {{0, 40, 4096}, {50, 90, 4096}};
    uint64_t same[2] = {0, 0};
    ck_assert_uint_eq(planpack_floor(apart, 2, 100), 4096);
    ck_assert_ptr_null(planpack_check(apart, 2, 100, 512, same, 4096));
}
END_TEST

Suite *planpack_suite(void)
{
    Suite *s = suite_create("planpack");
    TCase *tc = tcase_create("placement");
    tcase_add_loop_test(tc, test_blocks_alive_at_once_never_overlap, 0, 8);
    tcase_add_test(tc, test_the_same_lives_give_the_same_offsets);
    tcase_add_test(tc, test_a_life_round_the_step_end_meets_the_next_step_start);
    tcase_add_test(tc, test_the_check_finds_an_overlap_and_a_top_below_the_floor);
    suite_add_tcase(s, tc);
    return s;
}
