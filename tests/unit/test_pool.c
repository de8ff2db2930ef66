/* Unit tests of the pool's data structure (common/pool.c): pure bookkeeping on made-up addresses;
 * under the preload, GMSHIM_MAX_SPLIT changing which blocks split. */
#include "pool.h"
#include "heaptest.h"
#include "suites.h"

#include <stdlib.h>
#include <string.h>


#define CHECK_HEAP() \
    do { const char *why_ = pool_check(&heap); ck_assert_msg(why_ == NULL, "pool_check: %s", why_); } while (0)

static gm_block_t *must_alloc(size_t req)
{
    gm_block_t *b = pool_alloc(&heap, pool_round(req), req);
    ck_assert_msg(b != NULL, "no block for %zu bytes", req);
    return b;
}

START_TEST(test_round_and_segment_policy)
{
    ck_assert_uint_eq(pool_round(1), 512);
    ck_assert_uint_eq(pool_round(512), 512);
    ck_assert_uint_eq(pool_round(513), 1024);
    ck_assert(pool_is_small(MiB));
    ck_assert(!pool_is_small(MiB + 512));
    ck_assert_uint_eq(pool_segment_size(512), 2 * MiB);
    ck_assert_uint_eq(pool_segment_size(MiB), 2 * MiB);
    ck_assert_uint_eq(pool_segment_size(5 * MiB), 20 * MiB);
    ck_assert_uint_eq(pool_segment_size(11 * MiB + 512), 12 * MiB);
}
END_TEST

START_TEST(test_small_request_splits_segment_and_stays_aligned)
{
    pool_add_segment(&heap, BASE, 2 * MiB, 1, 1);
    gm_block_t *a = must_alloc(1000);
    gm_block_t *b = must_alloc(1000);
    ck_assert_uint_eq(a->size, 1024);
    ck_assert_uint_eq(b->ptr - a->ptr, 1024);
    ck_assert_uint_eq(a->ptr % 512, 0);
    ck_assert_uint_eq(stats.allocated.current, 2048);
    ck_assert_uint_eq(stats.requested.current, 2000);
    ck_assert_uint_eq(stats.cached.current, 2 * MiB - 2048);
    CHECK_HEAP();
}
END_TEST

START_TEST(test_small_and_large_requests_never_share_segments)
{
    pool_add_segment(&heap, BASE + 64 * MiB, 2 * MiB, 1, 1);
    ck_assert_msg(pool_alloc(&heap, 2 * MiB, 2 * MiB) == NULL, "a large request took a small segment");
    pool_add_segment(&heap, BASE, 20 * MiB, 0, 1);
    gm_block_t *b = pool_alloc(&heap, 4096, 4096);
    ck_assert_msg(b && b->seg->small, "a small request took a large segment");
    CHECK_HEAP();
}
END_TEST

START_TEST(test_best_fit_takes_the_smallest_free_block_that_fits)
{
    pool_add_segment(&heap, BASE, 40 * MiB, 0, 1);
    gm_block_t *a = must_alloc(2 * MiB);
    gm_block_t *b = must_alloc(5 * MiB);
    gm_block_t *c = must_alloc(2 * MiB);
    gm_block_t *d = must_alloc(3 * MiB);
    gm_block_t *e = must_alloc(2 * MiB);
    uintptr_t pb = b->ptr, pd = d->ptr;
    pool_free_block(&heap, b, 1);
    pool_free_block(&heap, d, 1);
    CHECK_HEAP();
    /* Free: 5 MiB at b, 3 MiB at d, and the tail (26 MiB). 2.5 MiB fits d best. */
    gm_block_t *x = must_alloc(2 * MiB + MiB / 2);
    ck_assert_msg(x->ptr == pd, "best fit chose %#lx, expected d at %#lx", x->ptr, pd);
    ck_assert_uint_eq(x->size, 3 * MiB); /* 0.5 MiB left is below the large split minimum */
    gm_block_t *y = must_alloc(4 * MiB);
    ck_assert_uint_eq(y->ptr, pb);
    (void)a, (void)c, (void)e;
    CHECK_HEAP();
}
END_TEST

START_TEST(test_large_block_split_only_above_one_mib_remainder)
{
    pool_add_segment(&heap, BASE, 20 * MiB, 0, 1);
    gm_block_t *a = must_alloc(18 * MiB + MiB / 2); /* 1.5 MiB left: split */
    ck_assert_uint_eq(a->size, 18 * MiB + MiB / 2);
    gm_block_t *b = must_alloc(MiB + 512 * 2); /* 1.5 MiB - ~1 MiB = < 1 MiB left: whole */
    ck_assert_uint_eq(b->size, MiB + MiB / 2);
    CHECK_HEAP();
}
END_TEST

START_TEST(test_free_merges_with_both_neighbours)
{
    gm_segment_t *seg = pool_add_segment(&heap, BASE, 2 * MiB, 1, 1);
    gm_block_t *a = must_alloc(4096), *b = must_alloc(4096), *c = must_alloc(4096);
    ck_assert_uint_eq(seg->free_since_ns, 0);
    pool_free_block(&heap, b, 5);
    pool_free_block(&heap, a, 6);
    CHECK_HEAP();
    ck_assert(!pool_segment_is_free(seg));
    pool_free_block(&heap, c, 7);
    CHECK_HEAP();
    ck_assert(pool_segment_is_free(seg));
    ck_assert_ptr_nonnull(seg->first);
    ck_assert_ptr_null(seg->first->next);
    ck_assert_uint_eq(seg->first->size, 2 * MiB);
    ck_assert_uint_eq(seg->free_since_ns, 7);
    ck_assert_uint_eq(stats.cached.current, 2 * MiB);
    ck_assert_uint_eq(stats.allocated.current, 0);
}
END_TEST

START_TEST(test_pending_block_is_not_reused_before_its_fence)
{
    pool_add_segment(&heap, BASE, 2 * MiB, 0, 1); /* a large class segment of exactly 2 MiB */
    heap.segments->small = 0;
    gm_block_t *a = must_alloc(2 * MiB);
    uintptr_t p = a->ptr;
    pool_defer_block(&heap, a, 3);
    CHECK_HEAP();
    ck_assert_uint_eq(stats.pending.current, 2 * MiB);
    ck_assert_ptr_null(pool_alloc(&heap, 2 * MiB, 2 * MiB));
    ck_assert_uint_eq(pool_release_pending(&heap, 2, 1), 0);
    ck_assert_ptr_null(pool_alloc(&heap, 2 * MiB, 2 * MiB));
    ck_assert_uint_eq(pool_release_pending(&heap, 3, 1), 2 * MiB);
    gm_block_t *b = pool_alloc(&heap, 2 * MiB, 2 * MiB);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->ptr, p);
    ck_assert_uint_eq(stats.pending.current, 0);
    CHECK_HEAP();
}
END_TEST

START_TEST(test_pending_blocks_merge_when_released)
{
    gm_segment_t *seg = pool_add_segment(&heap, BASE, 2 * MiB, 1, 1);
    gm_block_t *a = must_alloc(MiB), *b = must_alloc(MiB);
    pool_defer_block(&heap, a, 1);
    pool_defer_block(&heap, b, 2);
    pool_release_pending(&heap, 2, 9);
    CHECK_HEAP();
    ck_assert(pool_segment_is_free(seg));
    ck_assert_uint_eq(seg->first->size, 2 * MiB);
}
END_TEST

START_TEST(test_max_split_keeps_big_blocks_whole)
{
    heap.max_split = 64 * MiB;
    pool_add_segment(&heap, BASE, 128 * MiB, 0, 1);
    ck_assert_msg(pool_alloc(&heap, 2 * MiB, 2 * MiB) == NULL,
                  "a request below max split must not cut a block above it");
    ck_assert_msg(pool_alloc(&heap, 100 * MiB, 100 * MiB) == NULL,
                  "a block more than 20 MiB larger than the request must not serve it");
    gm_block_t *b = pool_alloc(&heap, 120 * MiB, 120 * MiB);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->size, 128 * MiB); /* not split */
    CHECK_HEAP();
}
END_TEST

START_TEST(test_fresh_segment_serves_a_request_just_under_max_split)
{
    heap.max_split = 64 * MiB;
    size_t req = 64 * MiB - 4096;
    ck_assert_uint_eq(pool_segment_size(pool_round(req)), 64 * MiB); /* at the cap */
    gm_segment_t *seg = pool_add_segment(&heap, BASE, pool_segment_size(pool_round(req)), 0, 1);
    ck_assert_msg(pool_alloc(&heap, pool_round(req), req) == NULL, "best fit must not pick a block at max split");
    gm_block_t *b = pool_alloc_fresh(&heap, seg, pool_round(req), req);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->ptr, BASE);
    ck_assert_uint_eq(stats.requested.current, req);
    CHECK_HEAP();
}
END_TEST

START_TEST(test_whole_free_segment_can_be_removed)
{
    gm_segment_t *seg = pool_add_segment(&heap, BASE, 20 * MiB, 0, 1);
    gm_block_t *a = must_alloc(4 * MiB);
    ck_assert(!pool_segment_is_free(seg));
    pool_free_block(&heap, a, 2);
    ck_assert(pool_segment_is_free(seg));
    pool_remove_segment(&heap, seg);
    ck_assert_uint_eq(stats.reserved.current, 0);
    ck_assert_uint_eq(stats.cached.current, 0);
    ck_assert_uint_eq(heap.nsegments, 0);
    CHECK_HEAP();
}
END_TEST

START_TEST(test_held_block_is_never_reused_but_segment_can_go)
{
    gm_segment_t *seg = pool_add_segment(&heap, BASE, 2 * MiB, 1, 1);
    gm_block_t *a = must_alloc(MiB);
    uintptr_t p = a->ptr;
    pool_hold_block(&heap, a);
    gm_block_t *b = must_alloc(MiB);
    ck_assert_uint_ne(b->ptr, p);
    ck_assert_ptr_null(pool_alloc(&heap, MiB, MiB));
    pool_free_block(&heap, b, 3);
    ck_assert(pool_segment_is_free(seg));
    pool_remove_segment(&heap, seg);
    ck_assert_uint_eq(stats.pending.current, 0);
    CHECK_HEAP();
}
END_TEST

START_TEST(test_move_segment_with_defer_makes_free_blocks_pending)
{
    gm_heap_t other;
    pool_init(&other, &stats, NULL);
    gm_segment_t *seg = pool_add_segment(&other, BASE, 2 * MiB, 1, 1);
    gm_block_t *a = NULL;
    a = pool_alloc(&other, 512, 512);
    ck_assert_ptr_nonnull(a);
    pool_move_segment(&other, &heap, seg, 4);
    ck_assert_uint_eq(other.nsegments, 0);
    ck_assert_uint_eq(heap.nsegments, 1);
    ck_assert_ptr_null(pool_alloc(&heap, 4096, 4096));
    pool_release_pending(&heap, 4, 1);
    ck_assert_ptr_nonnull(pool_alloc(&heap, 4096, 4096));
    const char *why = pool_check(&other);
    ck_assert_msg(why == NULL, "source heap: %s", why);
    CHECK_HEAP();
    pool_adopt_storage(&heap, &other);
    pool_destroy(&other);
    CHECK_HEAP();
}
END_TEST

typedef struct live {
    gm_block_t *b;
    size_t req;
} live_t;

static int by_ptr(const void *x, const void *y)
{
    const live_t *a = x, *b = y;
    return a->b->ptr < b->b->ptr ? -1 : a->b->ptr > b->b->ptr;
}

/* Thousands of random allocations, frees, deferrals and releases; after each step the
 * invariants hold, no two live blocks overlap, and the counters add up. */
START_TEST(test_random_operations_keep_every_invariant)
{
    srand(1234 + (unsigned)_i);
    enum { MAXLIVE = 600 };
    live_t *live = calloc(MAXLIVE, sizeof *live);
    int nlive = 0;
    uintptr_t next_base = BASE;
    uint64_t seq = 0, done = 0;
    for (int step = 0; step < 20000; step++) {
        int op = rand() % 10;
        if (op < 5 && nlive < MAXLIVE) {
            size_t req;
            int kind = rand() % 4;
            if (kind == 0)
                req = 1 + (size_t)rand() % 4096;
            else if (kind == 1)
                req = 1 + (size_t)rand() % MiB;
            else if (kind == 2)
                req = MiB + 1 + (size_t)rand() % (9 * MiB);
            else
                req = 10 * MiB + (size_t)rand() % (40 * MiB);
            size_t r = pool_round(req);
            gm_block_t *b = pool_alloc(&heap, r, req);
            if (!b) {
                size_t segsz = pool_segment_size(r);
                pool_add_segment(&heap, next_base, segsz, pool_is_small(r), 1);
                next_base += gm_round_up(segsz, 2 * MiB) + 2 * MiB;
                b = pool_alloc(&heap, r, req);
            }
            ck_assert_ptr_nonnull(b);
            ck_assert_uint_ge(b->size, r);
            live[nlive].b = b;
            live[nlive].req = req;
            nlive++;
        } else if (op < 8 && nlive) {
            int i = rand() % nlive;
            if (rand() % 2)
                pool_free_block(&heap, live[i].b, (uint64_t)step + 1);
            else
                pool_defer_block(&heap, live[i].b, seq + 1);
            live[i] = live[--nlive];
        } else if (op == 8) {
            seq++;
        } else {
            done = seq;
            pool_release_pending(&heap, done, (uint64_t)step + 1);
            if (rand() % 4 == 0) {
                gm_segment_t *s = heap.segments;
                while (s) {
                    gm_segment_t *n = s->next;
                    if (pool_segment_is_free(s))
                        pool_remove_segment(&heap, s);
                    s = n;
                }
            }
        }
        if (step % 97 == 0 || step == 19999) {
            CHECK_HEAP();
            qsort(live, (size_t)nlive, sizeof *live, by_ptr);
            size_t allocated = 0, requested = 0;
            for (int i = 0; i < nlive; i++) {
                allocated += live[i].b->size;
                requested += live[i].req;
                ck_assert_int_eq(live[i].b->state, GM_BLOCK_LIVE);
                if (i)
                    ck_assert_msg(live[i - 1].b->ptr + live[i - 1].b->size <= live[i].b->ptr,
                                  "live blocks overlap at step %d", step);
            }
            ck_assert_uint_eq(stats.allocated.current, allocated);
            ck_assert_uint_eq(stats.requested.current, requested);
            size_t reserved = 0;
            for (gm_segment_t *s = heap.segments; s; s = s->next)
                reserved += s->size;
            ck_assert_uint_eq(stats.reserved.current, reserved);
            ck_assert_uint_eq(stats.reserved.current,
                              stats.allocated.current + stats.cached.current + stats.pending.current);
        }
    }
    free(live);
}
END_TEST


START_TEST(test_max_split_changes_which_blocks_split)
{
    classic_pool_test();
    const char *env[] = {"FAKECUDA_MEM=2G", NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/max_split", env, "split", &out);
    ck_assert_msg(rc == 0, "without GMSHIM_MAX_SPLIT: exit %d:\n%s", rc, out);
    free(out);
    const char *env2[] = {"FAKECUDA_MEM=2G", "GMSHIM_MAX_SPLIT=64M", NULL};
    rc = run_built("tests/integration/max_split", env2, "nosplit", &out);
    ck_assert_msg(rc == 0, "with GMSHIM_MAX_SPLIT=64M: exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

/* A reset heap is empty and valid, and cuts the same blocks again from the structs it kept. */
START_TEST(test_reset_forgets_every_block_and_reuses_their_storage)
{
    pool_add_segment(&heap, BASE, 2 * MiB, 1, 1);
    pool_add_segment(&heap, BASE + 64 * MiB, 40 * MiB, 0, 1);
    gm_block_t *kept[200];
    for (int i = 0; i < 200; i++)
        kept[i] = must_alloc(i % 10 ? 4096 : 3 * MiB / 2);
    pool_defer_block(&heap, kept[3], 7);
    pool_free_block(&heap, kept[4], 1);
    void *slabs = heap.slabs;
    pool_reset(&heap);
    memset(&stats, 0, sizeof stats);
    CHECK_HEAP();
    ck_assert_msg(!heap.segments && !heap.nsegments && !heap.pending_head && !pool_cached_bytes(&heap),
                  "after a reset: %zu segments, %zu bytes cached", heap.nsegments, pool_cached_bytes(&heap));
    ck_assert_msg(heap.stats == &stats, "the reset lost the heap's counters");
    size_t spare = 0;
    for (gm_block_t *b = heap.spare; b; b = b->fl.next)
        spare++;
    ck_assert_msg(spare >= 200, "the reset kept %zu block structs of the 200 it had", spare);
    ck_assert_msg(pool_alloc(&heap, 512, 512) == NULL, "a reset heap handed out a block");
    pool_add_segment(&heap, BASE, 2 * MiB, 1, 1);
    pool_add_segment(&heap, BASE + 64 * MiB, 40 * MiB, 0, 1);
    for (int i = 0; i < 200; i++) {
        gm_block_t *b = must_alloc(i % 10 ? 4096 : 3 * MiB / 2);
        ck_assert_msg(b->state == GM_BLOCK_LIVE && b->fence_seq == 0 && b->site == 0,
                      "block %d reused dirty: state %d, fence %llu", i, b->state, (unsigned long long)b->fence_seq);
    }
    CHECK_HEAP();
    ck_assert_msg(heap.slabs == slabs, "a reset heap took new storage for as many blocks as it had");
}
END_TEST

Suite *pool_suite(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("heap");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_round_and_segment_policy);
    tcase_add_test(tc, test_small_request_splits_segment_and_stays_aligned);
    tcase_add_test(tc, test_small_and_large_requests_never_share_segments);
    tcase_add_test(tc, test_best_fit_takes_the_smallest_free_block_that_fits);
    tcase_add_test(tc, test_large_block_split_only_above_one_mib_remainder);
    tcase_add_test(tc, test_free_merges_with_both_neighbours);
    tcase_add_test(tc, test_pending_block_is_not_reused_before_its_fence);
    tcase_add_test(tc, test_pending_blocks_merge_when_released);
    tcase_add_test(tc, test_max_split_keeps_big_blocks_whole);
    tcase_add_test(tc, test_fresh_segment_serves_a_request_just_under_max_split);
    tcase_add_test(tc, test_whole_free_segment_can_be_removed);
    tcase_add_test(tc, test_held_block_is_never_reused_but_segment_can_go);
    tcase_add_test(tc, test_move_segment_with_defer_makes_free_blocks_pending);
    tcase_add_test(tc, test_reset_forgets_every_block_and_reuses_their_storage);
    tcase_add_loop_test(tc, test_random_operations_keep_every_invariant, 0, 3);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    TCase *tc2 = tcase_create("preload");
    tcase_set_timeout(tc2, 120);
    tcase_add_test(tc2, test_max_split_changes_which_blocks_split);
    suite_add_tcase(s, tc2);
    return s;
}
