/* Capture's private heaps (shim/capheap.c) on the fake runtime: while a capture runs, a block
 * comes from the capture's heap (a whole free segment of the general heap moved over, or a new
 * one), and a released heap's segments go back to arena 0 pending on the next fence. */
#include "capheap.h"
#include "devctx.h"
#include "device.h"
#include "fencepol.h"
#include "hit.h"
#include "options.h"
#include "slowpath.h"
#include "suites.h"

#include "../fakecuda.h"
#include "pooltest.h"

#include <stdlib.h>

START_TEST(test_a_block_during_a_capture_comes_from_its_heap)
{
    gm_heap_t *heap = capheap_graph_heap(d, &heap, 7);
    ck_assert_ptr_nonnull(heap);
    capheap_set_captures(d, 1, heap);
    ck_assert_int_eq(device_captures(d), 1);
    void *p = alloc_or_fail(4096);
    ck_assert_msg(pool_find_segment(heap, (uintptr_t)p) != NULL, "%p is not in the capture's heap", p);
    ck_assert_ptr_null(pool_find_segment(&d->arenas[0]->general, (uintptr_t)p));
    free_ok(p);
    capheap_set_captures(d, -1, NULL);
    ck_assert_int_eq(device_captures(d), 0);
    void *q = alloc_or_fail(4096);
    ck_assert_msg(pool_find_segment(heap, (uintptr_t)q) == NULL, "after the capture a block came from its heap");
    free_ok(q);
}
END_TEST

START_TEST(test_a_capture_takes_over_a_whole_free_segment_before_asking_the_driver)
{
    /* One small segment, wholly free once its fence completes and (with a thread cache) the
     * cache gives its one block back. */
    free_ok(alloc_or_fail(4096));
    complete_fences();
    gm_arena_t *a = d->arenas[0];
    pthread_mutex_lock(&a->lock);
    ck_assert_uint_eq(pool_segments(&a->general)->size, 2u << 20);
    ck_assert_ptr_null(pool_segments(&a->general)->next);
    pthread_mutex_unlock(&a->lock);
    ck_assert_uint_eq(stats().allocated.current, 0);
    unsigned long long mallocs = stats().driver_mallocs;
    gm_heap_t *heap = capheap_graph_heap(d, &heap, 8);
    capheap_set_captures(d, 1, heap);
    void *p = alloc_or_fail(4096);
    ck_assert_uint_eq(stats().driver_mallocs, mallocs);
    ck_assert_ptr_nonnull(pool_find_segment(heap, (uintptr_t)p));
    free_ok(p);
    capheap_set_captures(d, -1, NULL);
}
END_TEST

START_TEST(test_a_released_heap_returns_its_memory_pending_on_the_next_fence)
{
    gm_heap_t *heap = capheap_graph_heap(d, &heap, 9);
    capheap_set_captures(d, 1, heap);
    void *p = alloc_or_fail(4096);
    free_ok(p);
    capheap_set_captures(d, -1, NULL);
    uint64_t next = device_issued(d) + 1;
    capheap_release_graph_heap(d, heap);
    gm_heap_t *general = &d->arenas[0]->general;
    ck_assert_msg(pool_find_segment(general, (uintptr_t)p) != NULL, "the segment did not come back");
    ck_assert_uint_eq(pool_newest_pending_seq(general), next);
}
END_TEST

Suite *capheap_suite(void)
{
    Suite *s = suite_create("capheap");
    TCase *tc = tcase_create("in process");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_a_block_during_a_capture_comes_from_its_heap);
    tcase_add_test(tc, test_a_capture_takes_over_a_whole_free_segment_before_asking_the_driver);
    tcase_add_test(tc, test_a_released_heap_returns_its_memory_pending_on_the_next_fence);
    suite_add_tcase(s, tc);
    return s;
}
