/* Driver segments (shim/segments.c) on the fake runtime: a segment from the driver is counted
 * as reserved and serves the request; whole free segments go back; the device cap shrinks a
 * large segment to what the request needs, and refuses what does not fit. */
#include "capheap.h"
#include "devctx.h"
#include "device.h"
#include "fencepol.h"
#include "hit.h"
#include "options.h"
#include "segments.h"
#include "slowpath.h"
#include "suites.h"

#include "../fakecuda.h"
#include "pooltest.h"

#include <stdlib.h>

START_TEST(test_a_segment_from_the_driver_is_reserved_and_goes_back_whole)
{
    gm_arena_t *a = d->arenas[0];
    gm_block_t *b = NULL;
    pthread_mutex_lock(&a->lock);
    size_t rounded = pool_round(3u << 20);
    ck_assert_int_eq(segments_grow(a, &a->general, 20u << 20, rounded, 3u << 20, &b), cudaSuccess);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(device_reserved(d), 20u << 20);
    ck_assert_uint_eq(b->size, rounded);
    pool_free_block(&a->general, b, gm_now_ns());
    unsigned nseg = 0;
    ck_assert_uint_eq(segments_release_free(a, 0, gm_now_ns(), &nseg), 20u << 20);
    pthread_mutex_unlock(&a->lock);
    ck_assert_uint_eq(nseg, 1);
    ck_assert_uint_eq(device_reserved(d), 0);
    struct fakecuda_stats fs;
    fakecuda_get_stats(0, &fs);
    ck_assert_uint_eq(fs.mallocs, 1);
    ck_assert_uint_eq(fs.frees, 1);
}
END_TEST

START_TEST(test_the_device_cap_shrinks_a_segment_to_the_request_or_refuses_it)
{
    __atomic_store_n(&d->limit, (size_t)16 << 20, __ATOMIC_RELAXED);
    size_t rounded = pool_round(3u << 20), seg = pool_segment_size(rounded);
    ck_assert_uint_eq(seg, 20u << 20);
    ck_assert_int_eq(segments_fit_limit(d, &seg, rounded), 1);
    ck_assert_uint_eq(seg, 4u << 20); /* 3 MiB rounded to 2 MiB */
    rounded = pool_round(17u << 20);
    seg = pool_segment_size(rounded);
    ck_assert_int_eq(segments_fit_limit(d, &seg, rounded), 0);
}
END_TEST

Suite *segments_suite(void)
{
    Suite *s = suite_create("segments");
    TCase *tc = tcase_create("in process");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_a_segment_from_the_driver_is_reserved_and_goes_back_whole);
    tcase_add_test(tc, test_the_device_cap_shrinks_a_segment_to_the_request_or_refuses_it);
    suite_add_tcase(s, tc);
    return s;
}
