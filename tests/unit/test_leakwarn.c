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

/* Feeds v[0..n) at times 1, 2, ...: the number of troughs that count, the last one's low in *lo. */
static unsigned feed_all(leakwarn_trough_t *tr, const uint64_t *v, size_t n, uint64_t *peak, uint64_t *lo)
{
    unsigned closed = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] > *peak)
            *peak = v[i];
        if (leakwarn_trough_feed(tr, v[i], *peak, i + 1)) {
            closed++;
            *lo = tr->z.lo;
        }
    }
    return closed;
}

/* A first forward pass whose temporaries dip while its lows rise is no steps; the count opens at
 * the first fall of a tenth of the peak and climb as large, then a trough closes at each fall of
 * 7/10 of the steps' swing and climb as large, never at a dip of the forward pass. */
START_TEST(test_troughs_open_at_a_whole_step_then_follow_its_swing)
{
    leakwarn_trough_t tr;
    leakwarn_trough_init(&tr);
    uint64_t peak = 0, lo = 0;
    static const uint64_t forward[] = {100, 110, 105, 120, 115, 130, 125, 140, 135, 150, 145, 160};
    uint64_t v[16];
    for (size_t i = 0; i < 12; i++)
        v[i] = forward[i] * MiB;
    ck_assert_msg(feed_all(&tr, v, 12, &peak, &lo) == 0 && !tr.open, "the first forward pass's dips counted");
    /* the backward: down to the weights, then the next step's forward */
    static const uint64_t step[] = {100, 130, 125, 160, 100};
    for (size_t i = 0; i < 5; i++)
        v[i] = step[i] * MiB;
    /* opened at 130 (60 down from 160, 30 up): the trough at 100 counts once the climb ends */
    unsigned n0 = feed_all(&tr, v, 5, &peak, &lo);
    ck_assert_msg(tr.open && n0 == 1 && lo == 100 * MiB, "the first whole step: open %d, %u troughs, low %llu MiB",
                  tr.open, n0, (unsigned long long)(lo / MiB));
    for (unsigned k = 0; k < 3; k++) {
        for (size_t i = 0; i < 5; i++)
            v[i] = (step[i] + 2 * k) * MiB; /* a leak of 2 MiB a step */
        unsigned n = feed_all(&tr, v, 5, &peak, &lo);
        ck_assert_msg(n == 1 && lo == (100 + 2 * (k ? k - 1 : 0)) * MiB, "step %u: %u troughs, low %llu MiB", k, n,
                      (unsigned long long)(lo / MiB));
    }
}
END_TEST

/* A leak whose steps' swing stays while its live bytes grow far past ten times it (a loop keeping
 * 64 MiB beside a 32 MiB scratch): a trough every step, its low rising by the leak. */
START_TEST(test_a_leak_that_outgrows_its_swing_keeps_its_steps)
{
    leakwarn_trough_t tr;
    leakwarn_trough_init(&tr);
    uint64_t peak = 0, lo = 0, prev = 0, live = 0;
    unsigned closed = 0;
    for (unsigned k = 0; k < 200; k++) {
        uint64_t v[3] = {live + 32 * MiB, live + 96 * MiB, live + 64 * MiB};
        live += 64 * MiB;
        unsigned n = feed_all(&tr, v, 3, &peak, &lo);
        if (n) {
            ck_assert_msg(!closed || lo == prev + 64 * MiB, "step %u: low %llu MiB after %llu", k,
                          (unsigned long long)(lo / MiB), (unsigned long long)(prev / MiB));
            prev = lo;
        }
        closed += n;
    }
    ck_assert_msg(closed >= 197, "%u troughs in 200 steps", closed);
}
END_TEST

/* A GiB loaded and freed before the first step (a checkpoint's buffer), then a loop keeping 16 MiB
 * a step beside 144 MiB of activations: a trough every step, long after the leak's peak passed ten
 * times the steps' swing. */
START_TEST(test_a_buffer_freed_before_the_first_step_leaves_the_steps_their_troughs)
{
    leakwarn_trough_t tr;
    leakwarn_trough_init(&tr);
    uint64_t peak = 0, lo = 0, live = 64 * MiB;
    uint64_t load[2] = {live + 1024 * MiB, live};
    feed_all(&tr, load, 2, &peak, &lo);
    unsigned closed = 0;
    for (unsigned k = 0; k < 400; k++) {
        live += 16 * MiB;
        uint64_t v[4] = {live + 48 * MiB, live + 96 * MiB, live + 144 * MiB, live};
        closed += feed_all(&tr, v, 4, &peak, &lo);
    }
    ck_assert_msg(closed >= 398 && lo == live - 16 * MiB, "%u troughs in 400 steps, the last low %llu MiB of %llu",
                  closed, (unsigned long long)(lo / MiB), (unsigned long long)(live / MiB));
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
    tcase_add_test(tc, test_troughs_open_at_a_whole_step_then_follow_its_swing);
    tcase_add_test(tc, test_a_leak_that_outgrows_its_swing_keeps_its_steps);
    tcase_add_test(tc, test_a_buffer_freed_before_the_first_step_leaves_the_steps_their_troughs);
    tcase_add_test(tc, test_the_tap_keeps_every_step_between_readings);
    tcase_add_test(tc, test_the_line_says_rate_site_time_and_steps);
    suite_add_tcase(s, tc);
    return s;
}
