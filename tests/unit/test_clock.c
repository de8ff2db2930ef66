/* The shim's clock: the time-stamp counter, once calibrated, reads as CLOCK_MONOTONIC does. */
#include "clock.h"
#include "suites.h"

#include <check.h>
#include <pthread.h>
#include <time.h>

static uint64_t mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void spin_ns(uint64_t ns)
{
    uint64_t end = mono() + ns;
    while (mono() < end)
        ;
}

/* The counter, where the machine allows it, after the calibration interval: 1 if in use. */
static int calibrated(void)
{
    clock_init(1);
    spin_ns(60u * 1000 * 1000);
    (void)gm_now_ns(); /* the first read past the interval calibrates */
    return clock_uses_counter();
}

START_TEST(test_the_counter_is_used_where_the_kernel_keeps_time_with_it)
{
    int usable = clock_counter_usable();
    ck_assert_int_eq(calibrated(), usable);
}
END_TEST

START_TEST(test_gmshim_clock_monotonic_keeps_clock_gettime)
{
    clock_init(0);
    spin_ns(60u * 1000 * 1000);
    (void)gm_now_ns();
    ck_assert_int_eq(clock_uses_counter(), 0);
}
END_TEST

START_TEST(test_the_counter_reads_within_50_us_of_clock_monotonic)
{
    if (!calibrated())
        return; /* no usable counter here: the clock is clock_gettime itself */
    for (int i = 0; i < 5; i++) {
        spin_ns(40u * 1000 * 1000);
        uint64_t a = mono(), t = gm_now_ns(), b = mono();
        ck_assert_msg(t + 50000 >= a && t <= b + 50000, "counter %llu, CLOCK_MONOTONIC %llu..%llu",
                      (unsigned long long)t, (unsigned long long)a, (unsigned long long)b);
    }
}
END_TEST

START_TEST(test_the_counter_never_goes_backwards)
{
    if (!calibrated())
        return;
    uint64_t last = gm_now_ns();
    for (int i = 0; i < 1000000; i++) {
        uint64_t t = gm_now_ns();
        ck_assert_msg(t >= last, "read %d: %llu after %llu", i, (unsigned long long)t, (unsigned long long)last);
        last = t;
    }
}
END_TEST

/* Times taken inside one lock keep the lock's order across threads (a free logged inside the
 * arena lock comes before the allocation that reuses its block). */
static pthread_mutex_t order_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t last_in_lock;
static int order_broken;

static void *take_turns(void *arg)
{
    (void)arg;
    for (int i = 0; i < 200000; i++) {
        pthread_mutex_lock(&order_lock);
        uint64_t t = gm_now_ns();
        if (t < last_in_lock)
            order_broken++;
        last_in_lock = t;
        pthread_mutex_unlock(&order_lock);
    }
    return NULL;
}

START_TEST(test_times_taken_inside_a_lock_keep_its_order_across_threads)
{
    if (!calibrated())
        return;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, take_turns, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    ck_assert_int_eq(order_broken, 0);
}
END_TEST

Suite *clock_suite(void)
{
    Suite *s = suite_create("clock");
    TCase *tc = tcase_create("counter");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_the_counter_is_used_where_the_kernel_keeps_time_with_it);
    tcase_add_test(tc, test_gmshim_clock_monotonic_keeps_clock_gettime);
    tcase_add_test(tc, test_the_counter_reads_within_50_us_of_clock_monotonic);
    tcase_add_test(tc, test_the_counter_never_goes_backwards);
    tcase_add_test(tc, test_times_taken_inside_a_lock_keep_its_order_across_threads);
    suite_add_tcase(s, tc);
    return s;
}
