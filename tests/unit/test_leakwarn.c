/* common/leakwarn.c, the early-warning rule of GMSHIM_WARN and `gmshim top`: a steady rise is a
 * leak once past the warm-up, and nothing else is (a plateau, a cache filling ever slower, a
 * one-off jump, noise, growth too small to matter); troughs as the analyzer's epochs; the line. */
#include "suites.h"
#include "leakwarn.h"

#include <stdlib.h>
#include <string.h>

#define MiB (1ull << 20)

/* Feeds n steps of lows low(i), one second apart; returns the step (1-based) of the first verdict
 * of leak, 0 if none. */
static unsigned first_warning(leakwarn_t *w, unsigned n, uint64_t (*low)(unsigned), uint64_t cap,
                              leakwarn_verdict_t *v)
{
    for (unsigned i = 0; i < n; i++) {
        leakwarn_step(w, low(i), (uint64_t)i * 1000000000u);
        if (leakwarn_check(w, cap, v))
            return i + 1;
    }
    return 0;
}

static uint64_t linear(unsigned i) { return 100 * MiB + i * 16 * MiB; }
static uint64_t plateau(unsigned i) { return 100 * MiB + (i < 8 ? i : 8) * 16 * MiB; }
static uint64_t slowing(unsigned i) { return 100 * MiB + (64 * MiB - (64 * MiB >> (i < 30 ? i : 30))); }
/* ten rises, one of them a jump of 500 MiB (a buffer allocated once), then flat */
static uint64_t jump(unsigned i)
{
    uint64_t n = i < 12 ? 0 : i < 22 ? i - 11 : 10;
    return 100 * MiB + n * MiB + (i >= 15 ? 500 * MiB : 0);
}
static uint64_t tiny(unsigned i) { return 100 * MiB + i * 4096; }
static uint64_t noise(unsigned i) { return 100 * MiB + (uint64_t)(rand() % 64) * MiB + (i & 0); }

START_TEST(test_a_steady_rise_warns_once_past_the_warmup_with_the_steps_left)
{
    leakwarn_t w;
    memset(&w, 0, sizeof w);
    leakwarn_verdict_t v;
    unsigned at = first_warning(&w, 100, linear, 1024 * MiB, &v);
    ck_assert_msg(at == LEAKWARN_WARMUP + LEAKWARN_RISES + 1, "warned at step %u", at);
    ck_assert_msg(v.per_step == 16 * MiB, "per step %llu", (unsigned long long)v.per_step);
    uint64_t floor = linear(at - 1);
    ck_assert_msg(v.floor == floor && v.steps_left == (1024 * MiB - floor) / (16 * MiB),
                  "floor %llu, steps left %llu", (unsigned long long)v.floor, (unsigned long long)v.steps_left);
    ck_assert_msg(v.step_s > 0.99 && v.step_s < 1.01, "seconds per step %g", v.step_s);
}
END_TEST

START_TEST(test_no_warning_for_a_plateau_a_slowing_cache_a_jump_noise_or_tiny_growth)
{
    static uint64_t (*const shapes[])(unsigned) = {plateau, slowing, jump, noise, tiny};
    static const char *const names[] = {"plateau", "slowing", "jump", "noise", "tiny"};
    srand(7);
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        leakwarn_t w;
        memset(&w, 0, sizeof w);
        leakwarn_verdict_t v;
        unsigned at = first_warning(&w, k == 3 ? 100000 : 200, shapes[k], 1024 * MiB, &v);
        ck_assert_msg(at == 0, "%s warned at step %u", names[k], at);
    }
}
END_TEST

START_TEST(test_one_fall_starts_the_count_again)
{
    leakwarn_t w;
    memset(&w, 0, sizeof w);
    leakwarn_verdict_t v;
    for (unsigned i = 0; i < 20; i++)
        leakwarn_step(&w, linear(i), i);
    ck_assert_msg(leakwarn_check(&w, 0, &v), "no warning after 20 rising steps");
    ck_assert_msg(v.steps_left == UINT64_MAX, "steps left without a capacity: %llu", (unsigned long long)v.steps_left);
    leakwarn_step(&w, linear(3), 20);
    ck_assert_msg(leakwarn_rising(&w) == 0 && !leakwarn_check(&w, 0, &v), "still rising after a fall");
}
END_TEST

START_TEST(test_troughs_close_at_a_climb_of_a_tenth_of_the_peak)
{
    leakwarn_trough_t tr;
    leakwarn_trough_init(&tr);
    uint64_t peak = 1000 * MiB;
    ck_assert_msg(!leakwarn_trough_feed(&tr, 500 * MiB, peak, 1), "a trough before any fall");
    ck_assert_msg(!leakwarn_trough_feed(&tr, 450 * MiB, peak, 2), "a fall under a tenth closed a trough");
    ck_assert_msg(!leakwarn_trough_feed(&tr, 300 * MiB, peak, 3), "the fall itself closed a trough");
    ck_assert_msg(!leakwarn_trough_feed(&tr, 200 * MiB, peak, 4), "a lower point closed a trough");
    ck_assert_msg(leakwarn_trough_feed(&tr, 320 * MiB, peak, 5), "a climb of a tenth closed none");
    ck_assert_msg(tr.lo == 200 * MiB && tr.lo_t == 4, "trough at %llu, time %llu", (unsigned long long)tr.lo,
                  (unsigned long long)tr.lo_t);
}
END_TEST

/* One step of a figure fed to a tap: `base` + a climb of four 64 MiB activations, then their frees. */
static void tap_step(leakwarn_tap_t *tap, uint64_t base)
{
    for (int i = 1; i <= 4; i++)
        leakwarn_tap_feed(tap, base + (uint64_t)i * 64 * MiB);
    for (int i = 3; i >= 0; i--)
        leakwarn_tap_feed(tap, base + (uint64_t)i * 64 * MiB);
}

/* The tap closes a trough per step however rarely it is read, in order with the lows; a reader
 * further behind than the ring gets the newest troughs, none twice, none torn; its low is the
 * least since the last reading. */
START_TEST(test_the_tap_keeps_every_step_between_readings)
{
    leakwarn_tap_t tap;
    leakwarn_tap_init(&tap);
    uint64_t seen = 0, lo, t, n = 0;
    /* steps whose floor grows 16 MiB each: the trough of step k closes in step k + 1's climb */
    for (unsigned k = 0; k < 7; k++)
        tap_step(&tap, 100 * MiB + k * 16 * MiB);
    while (leakwarn_tap_next(&tap, &seen, &lo, &t)) {
        ck_assert_msg(lo == 100 * MiB + n * 16 * MiB && t > 0, "trough %llu: low %llu MiB", (unsigned long long)n,
                      (unsigned long long)(lo / MiB));
        n++;
    }
    ck_assert_msg(n == 6, "%llu troughs read of 7 steps (the last still open)", (unsigned long long)n);
    ck_assert_msg(leakwarn_tap_take_low(&tap, 1 << 30) == 100 * MiB, "the least since the start");
    ck_assert_msg(leakwarn_tap_take_low(&tap, 1 << 30) == 1 << 30, "nothing since: the figure now");
    /* 40 steps unread: the newest LEAKWARN_TAP_RING - 1 come, in order */
    for (unsigned k = 7; k < 47; k++)
        tap_step(&tap, 100 * MiB + k * 16 * MiB);
    uint64_t first = 0, prev = 0;
    n = 0;
    while (leakwarn_tap_next(&tap, &seen, &lo, &t)) {
        if (!n++)
            first = lo;
        else
            ck_assert_msg(lo == prev + 16 * MiB, "out of order: %llu after %llu MiB", (unsigned long long)(lo / MiB),
                          (unsigned long long)(prev / MiB));
        prev = lo;
    }
    ck_assert_msg(n == LEAKWARN_TAP_RING - 1 && prev == 100 * MiB + 45 * 16 * MiB,
                  "%llu read, last %llu MiB, first %llu MiB", (unsigned long long)n, (unsigned long long)(prev / MiB),
                  (unsigned long long)(first / MiB));
}
END_TEST

START_TEST(test_the_line_says_rate_site_time_and_steps)
{
    leakwarn_verdict_t v = {.per_step = 16 * MiB, .floor = 0, .steps_left = 180, .step_s = 1.0};
    char buf[256];
    leakwarn_format(buf, sizeof buf, 0, &v, "fn (train.py:42)");
    ck_assert_str_eq(buf, "leak suspected on device 0: +16.0 MiB per step at fn (train.py:42); at this rate the "
                          "device is full in ~3 min (180 steps)");
    v.steps_left = UINT64_MAX;
    leakwarn_format(buf, sizeof buf, 1, &v, "");
    ck_assert_str_eq(buf, "leak suspected on device 1: +16.0 MiB per step at an unknown site");
}
END_TEST

Suite *leakwarn_suite(void)
{
    Suite *s = suite_create("leakwarn");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_a_steady_rise_warns_once_past_the_warmup_with_the_steps_left);
    tcase_add_test(tc, test_no_warning_for_a_plateau_a_slowing_cache_a_jump_noise_or_tiny_growth);
    tcase_add_test(tc, test_one_fall_starts_the_count_again);
    tcase_add_test(tc, test_troughs_close_at_a_climb_of_a_tenth_of_the_peak);
    tcase_add_test(tc, test_the_tap_keeps_every_step_between_readings);
    tcase_add_test(tc, test_the_line_says_rate_site_time_and_steps);
    suite_add_tcase(s, tc);
    return s;
}
