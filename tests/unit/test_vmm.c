/* Growable ranges (common/vmm.c) on made-up addresses: pages mapped only where a block needs
 * them and counted as reserved, best fit across the whole range, idle pages (wholly inside free
 * blocks) given back oldest first, a refused map leaving the pool as it was. */
#include "vmm.h"
#include "heaptest.h"
#include "suites.h"

#include <stdlib.h>

#define PAGE GM_VMM_PAGE

static unsigned maps, unmaps, refuse_after = 1000000;
static uint64_t next_token = 1;

static int map_fn(void *arg, gm_segment_t *seg, uintptr_t addr, size_t n, uint64_t *tokens)
{
    (void)arg;
    ck_assert_uint_eq(addr % PAGE, 0);
    ck_assert(addr >= seg->base && addr + n * PAGE <= seg->base + seg->size);
    if (maps + n > refuse_after)
        return -1;
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(seg->page[(addr - seg->base) / PAGE + i], 0);
        tokens[i] = next_token++;
    }
    maps += (unsigned)n;
    return 0;
}

static int unmap_fn(void *arg, gm_segment_t *seg, uintptr_t addr, size_t n, const uint64_t *tokens)
{
    (void)arg;
    (void)seg;
    (void)addr;
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_ne(tokens[i], 0);
    unmaps += (unsigned)n;
    return 0;
}

/* One token for a whole run, as the shim's handles of several pages. */
static int map_run_fn(void *arg, gm_segment_t *seg, uintptr_t addr, size_t n, uint64_t *tokens)
{
    (void)arg;
    (void)seg;
    (void)addr;
    uint64_t t = next_token++;
    for (size_t i = 0; i < n; i++)
        tokens[i] = t;
    maps += (unsigned)n;
    return 0;
}

static void vsetup(void)
{
    setup();
    maps = unmaps = 0;
    refuse_after = 1000000;
}

#define CHECK()                                                                                   \
    do {                                                                                          \
        const char *why_ = pool_check(&heap);                                                     \
        ck_assert_msg(why_ == NULL, "pool_check: %s", why_);                                      \
        why_ = vmm_check(&heap);                                                                  \
        ck_assert_msg(why_ == NULL, "vmm_check: %s", why_);                                       \
    } while (0)

static gm_block_t *vmm_must(size_t req)
{
    int refused = 0;
    gm_block_t *b = vmm_alloc(&heap, pool_round(req), req, map_fn, NULL, &refused);
    ck_assert_msg(b && !refused, "no block for %zu bytes", req);
    return b;
}

START_TEST(test_a_range_reserves_only_the_pages_its_blocks_need)
{
    ck_assert_ptr_nonnull(pool_add_range(&heap, BASE, 1024 * MiB, 0, 1));
    ck_assert_uint_eq(stats.reserved.current, 0);
    ck_assert_ptr_null(pool_alloc(&heap, pool_round(3 * MiB), 3 * MiB)); /* nothing mapped yet */
    gm_block_t *b = vmm_must(3 * MiB);
    ck_assert_uint_eq(b->size, 3 * MiB); /* split exactly: no unmapped tail in a live block */
    ck_assert_uint_eq(maps, 2);
    ck_assert_uint_eq(stats.reserved.current, 4 * MiB);
    ck_assert_uint_eq(stats.cached.current, 1 * MiB);
    size_t largest = 0, count = 0;
    pool_free_summary(&heap, &largest, &count); /* the free tail holds 1 MiB of mapped memory */
    ck_assert_uint_eq(largest, 1 * MiB);
    ck_assert_uint_eq(count, 1);
    ck_assert_uint_eq(pool_cached_bytes(&heap), 1 * MiB);
    gm_block_t *c = vmm_must(1 * MiB + 512); /* the mapped rest of page 2 and one more page */
    ck_assert_uint_eq(c->ptr, BASE + 3 * MiB);
    ck_assert_uint_eq(maps, 3);
    ck_assert_ptr_nonnull(pool_alloc(&heap, pool_round(MiB + 512), MiB + 512)); /* within page 2: a hit */
    ck_assert_ptr_null(pool_alloc(&heap, pool_round(MiB + 512), MiB + 512));    /* page 3 is not mapped */
    CHECK();
}
END_TEST

START_TEST(test_best_fit_crosses_what_would_have_been_segment_edges)
{
    pool_add_range(&heap, BASE, 1024 * MiB, 0, 1);
    gm_block_t *b[6];
    for (int i = 0; i < 6; i++)
        b[i] = vmm_must(9 * MiB);
    /* Free three neighbours: 27 MiB of one hole, which classic 20 MiB segments could not hold. */
    for (int i = 1; i < 4; i++)
        pool_free_block(&heap, b[i], 10);
    unsigned before = maps;
    gm_block_t *big = vmm_must(25 * MiB);
    ck_assert_uint_eq(big->ptr, b[0]->ptr + 9 * MiB);
    ck_assert_uint_eq(maps, before); /* every page it needs was mapped */
    CHECK();
}
END_TEST

START_TEST(test_idle_pages_go_back_oldest_first_and_partial_pages_stay)
{
    pool_add_range(&heap, BASE, 1024 * MiB, 0, 1);
    size_t one_half = 3 * MiB / 2;
    gm_block_t *a = vmm_must(one_half), *b = vmm_must(8 * MiB), *c = vmm_must(8 * MiB), *e = vmm_must(one_half);
    (void)a;
    (void)e;
    ck_assert_uint_eq(stats.reserved.current, 20 * MiB); /* [0, 19) MiB: pages 0..9 */
    pool_free_block(&heap, b, 100); /* [1.5, 9.5) MiB */
    pool_free_block(&heap, c, 200); /* merged: [1.5, 17.5) MiB, free since 200 */
    ck_assert_uint_eq(vmm_idle_bytes(&heap), 14 * MiB); /* pages 1..7; pages 0 and 8 hold a and e */
    unsigned npages = 0;
    ck_assert_uint_eq(vmm_release_idle(&heap, 10 * MiB, 0, 0, unmap_fn, NULL, &npages), 4 * MiB);
    ck_assert_uint_eq(npages, 2);
    ck_assert_uint_eq(vmm_idle_bytes(&heap), 10 * MiB);
    ck_assert_uint_eq(vmm_release_idle(&heap, 0, 1000, 250, unmap_fn, NULL, &npages), 0); /* not idle long */
    ck_assert_uint_eq(vmm_release_idle(&heap, 0, 0, 0, unmap_fn, NULL, &npages), 10 * MiB);
    ck_assert_uint_eq(stats.reserved.current, 6 * MiB);
    ck_assert_uint_eq(stats.cached.current, 6 * MiB - 3 * MiB);
    ck_assert_uint_eq(unmaps, 7);
    CHECK();
    gm_block_t *again = vmm_must(16 * MiB); /* the hole, mapped again */
    ck_assert_uint_eq(again->ptr, BASE + one_half);
    ck_assert_uint_eq(stats.reserved.current, 20 * MiB);
    CHECK();
}
END_TEST

START_TEST(test_a_refused_map_leaves_the_block_free_and_what_was_mapped_idle)
{
    pool_add_range(&heap, BASE, 1024 * MiB, 0, 1);
    refuse_after = 0;
    int refused = 0;
    ck_assert_ptr_null(vmm_alloc(&heap, pool_round(5 * MiB), 5 * MiB, map_fn, NULL, &refused));
    ck_assert_int_eq(refused, 1);
    ck_assert_uint_eq(stats.reserved.current, 0);
    ck_assert_uint_eq(stats.allocated.current, 0);
    CHECK();
    refuse_after = 1000000;
    gm_block_t *b = vmm_must(5 * MiB);
    ck_assert_uint_eq(b->ptr, BASE);
    CHECK();
}
END_TEST

START_TEST(test_no_free_block_fitting_asks_for_another_range)
{
    pool_add_range(&heap, BASE, 16 * MiB, 0, 1);
    vmm_must(10 * MiB);
    ck_assert_uint_eq(vmm_pages_wanted(&heap, pool_round(8 * MiB)), SIZE_MAX);
    int refused = 0;
    ck_assert_ptr_null(vmm_alloc(&heap, pool_round(8 * MiB), 8 * MiB, map_fn, NULL, &refused));
    ck_assert_int_eq(refused, 0);
    ck_assert_uint_eq(vmm_pages_wanted(&heap, pool_round(5 * MiB)), 3); /* [10, 15) MiB: pages 5..7 */
    ck_assert_ptr_null(pool_add_range(&heap, BASE + 1, 16 * MiB, 0, 1)); /* not page-aligned */
    CHECK();
}
END_TEST

START_TEST(test_a_range_is_never_a_whole_free_segment)
{
    pool_add_range(&heap, BASE, 64 * MiB, 0, 1);
    pool_add_segment(&heap, BASE + 64 * MiB, 20 * MiB, 0, 1);
    ck_assert_uint_eq(pool_whole_free_bytes(&heap), 20 * MiB);
    ck_assert_uint_eq(pool_best_free_segment(&heap, 4 * MiB)->base, BASE + 64 * MiB);
    gm_block_t *b = vmm_must(30 * MiB); /* the classic segment cannot hold it */
    ck_assert(b->seg->vmm);
    CHECK();
}
END_TEST

START_TEST(test_a_mapping_goes_back_only_when_wholly_idle)
{
    pool_add_range(&heap, BASE, 1024 * MiB, 0, 1);
    int refused = 0;
    gm_block_t *a = vmm_alloc(&heap, pool_round(8 * MiB), 8 * MiB, map_run_fn, NULL, &refused);
    ck_assert_ptr_nonnull(a);
    pool_free_block(&heap, a, 10);
    gm_block_t *b = vmm_alloc(&heap, pool_round(2 * MiB), 2 * MiB, map_run_fn, NULL, &refused);
    ck_assert_uint_eq(b->ptr, BASE);
    ck_assert_uint_eq(maps, 4); /* a's mapping serves b */
    ck_assert_uint_eq(vmm_idle_bytes(&heap), 0); /* pages 1..3 are idle, their mapping is not */
    unsigned npages = 0;
    ck_assert_uint_eq(vmm_release_idle(&heap, 0, 0, 0, unmap_fn, NULL, &npages), 0);
    pool_free_block(&heap, b, 20);
    ck_assert_uint_eq(vmm_idle_bytes(&heap), 8 * MiB);
    ck_assert_uint_eq(vmm_release_idle(&heap, 0, 0, 0, unmap_fn, NULL, &npages), 8 * MiB);
    ck_assert_uint_eq(unmaps, 4);
    ck_assert_uint_eq(stats.reserved.current, 0);
    CHECK();
}
END_TEST

START_TEST(test_a_budget_moves_idle_pages_instead_of_mapping_more)
{
    pool_add_range(&heap, BASE, 1024 * MiB, 0, 1);
    gm_block_t *a = vmm_must(8 * MiB), *b = vmm_must(8 * MiB), *c = vmm_must(2 * MiB);
    (void)c;
    pool_free_block(&heap, a, 10); /* 4 idle pages at the bottom */
    (void)b;
    ck_assert_uint_eq(stats.reserved.current, 18 * MiB);
    /* 12 MiB fit only above c: six pages to map, over a budget of the 18 MiB reserved. */
    int refused = 0;
    unsigned moved = 0;
    gm_block_t *d = vmm_alloc_within(&heap, 12 * MiB, 12 * MiB, 18 * MiB, map_fn, unmap_fn, NULL, &refused, &moved);
    ck_assert_ptr_nonnull(d);
    ck_assert_uint_eq(d->ptr, BASE + 18 * MiB);
    ck_assert_uint_eq(moved, 4);
    ck_assert_uint_eq(stats.reserved.current, 18 * MiB + 12 * MiB - 8 * MiB);
    CHECK();
    /* Within the budget nothing moves: the freed b's pages are taken as they are. */
    pool_free_block(&heap, b, 20);
    moved = 0;
    gm_block_t *e = vmm_alloc_within(&heap, 4 * MiB, 4 * MiB, 64 * MiB, map_fn, unmap_fn, NULL, &refused, &moved);
    ck_assert_ptr_nonnull(e);
    ck_assert_uint_eq(moved, 0);
    CHECK();
}
END_TEST

START_TEST(test_a_budget_never_unmaps_the_pages_the_request_takes)
{
    pool_add_range(&heap, BASE, 1024 * MiB, 0, 1);
    gm_block_t *a = vmm_must(8 * MiB), *b = vmm_must(2 * MiB);
    (void)a;
    pool_free_block(&heap, b, 10); /* the free tail from 8 MiB: page 4 mapped and idle */
    ck_assert_uint_eq(vmm_idle_bytes(&heap), 2 * MiB);
    int refused = 0;
    unsigned moved = 0;
    /* 4 MiB from 8 MiB: page 4 as it is and page 5 mapped, over the 10 MiB budget; the only
     * idle page is the request's own. */
    gm_block_t *d = vmm_alloc_within(&heap, 4 * MiB, 4 * MiB, 10 * MiB, map_fn, unmap_fn, NULL, &refused, &moved);
    ck_assert_ptr_nonnull(d);
    ck_assert_uint_eq(d->ptr, BASE + 8 * MiB);
    ck_assert_uint_eq(moved, 0);
    ck_assert_uint_eq(unmaps, 0);
    ck_assert_uint_eq(stats.reserved.current, 12 * MiB);
    CHECK();
}
END_TEST

Suite *vmm_suite(void)
{
    Suite *s = suite_create("vmm");
    TCase *tc = tcase_create("ranges");
    tcase_add_checked_fixture(tc, vsetup, teardown);
    tcase_add_test(tc, test_a_range_reserves_only_the_pages_its_blocks_need);
    tcase_add_test(tc, test_best_fit_crosses_what_would_have_been_segment_edges);
    tcase_add_test(tc, test_idle_pages_go_back_oldest_first_and_partial_pages_stay);
    tcase_add_test(tc, test_a_refused_map_leaves_the_block_free_and_what_was_mapped_idle);
    tcase_add_test(tc, test_no_free_block_fitting_asks_for_another_range);
    tcase_add_test(tc, test_a_range_is_never_a_whole_free_segment);
    tcase_add_test(tc, test_a_mapping_goes_back_only_when_wholly_idle);
    tcase_add_test(tc, test_a_budget_moves_idle_pages_instead_of_mapping_more);
    tcase_add_test(tc, test_a_budget_never_unmaps_the_pages_the_request_takes);
    suite_add_tcase(s, tc);
    return s;
}
