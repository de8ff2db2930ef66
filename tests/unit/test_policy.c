/* Unit tests of the device-level pool policy (common/policy.c) that the shim and the replay
 * share: each decision on made-up heaps, with the actions (releases, waits) recorded. */
#include "policy.h"
#include "heaptest.h"
#include "suites.h"

#include <string.h>


/* What the release callback was given, in order; fail_at: the base it refuses. */
static uintptr_t released[16];
static unsigned nreleased;
static uintptr_t fail_at;

static int release(void *arg, gm_segment_t *seg)
{
    (void)arg;
    if (seg->base == fail_at)
        return -1;
    if (nreleased < 16)
        released[nreleased++] = seg->base;
    pool_remove_segment(&heap, seg);
    return 0;
}

START_TEST(test_tight_segment_is_the_small_segment_or_the_request_in_2_mib)
{
    ck_assert_uint_eq(policy_tight_segment(512), 2 * MiB);
    ck_assert_uint_eq(policy_tight_segment(MiB), 2 * MiB);
    ck_assert_uint_eq(policy_tight_segment(5 * MiB + 512), 6 * MiB);
    ck_assert_uint_eq(policy_tight_segment(64 * MiB), 64 * MiB);
}
END_TEST

START_TEST(test_fits_limit_shrinks_to_the_tight_segment_only_when_it_must)
{
    size_t seg = 20 * MiB; /* a 5 MiB request's segment */
    ck_assert_msg(policy_fits_limit(100 * MiB, 80 * MiB, &seg, 5 * MiB) && seg == 20 * MiB,
                  "room for the whole segment: seg %zu", seg);
    ck_assert_msg(policy_fits_limit(100 * MiB, 90 * MiB, &seg, 5 * MiB) && seg == 6 * MiB,
                  "room for the request only: seg %zu", seg);
    seg = 20 * MiB;
    ck_assert_msg(!policy_fits_limit(100 * MiB, 95 * MiB, &seg, 5 * MiB) && seg == 20 * MiB,
                  "no room: fits, or seg changed to %zu", seg);
    seg = 2 * MiB; /* a small request never shrinks its segment */
    ck_assert_msg(!policy_fits_limit(100 * MiB, 99 * MiB, &seg, 4096) && seg == 2 * MiB, "small: seg %zu", seg);
}
END_TEST

START_TEST(test_release_free_takes_idle_segments_and_keeps_used_ones)
{
    pool_add_segment(&heap, BASE, 2 * MiB, 1, 10);              /* free since 10 */
    pool_add_segment(&heap, BASE + 64 * MiB, 20 * MiB, 0, 100);
    ck_assert(pool_alloc(&heap, 5 * MiB, 5 * MiB) != NULL);      /* in use */
    pool_add_segment(&heap, BASE + 128 * MiB, 20 * MiB, 0, 280); /* free since 280 */
    nreleased = 0, fail_at = 0;
    unsigned n = 0;
    size_t bytes = policy_release_free(&heap, 50, 300, release, NULL, &n);
    ck_assert_msg(n == 1 && bytes == 2 * MiB && released[0] == BASE, "idle 50 at 300: %u segments, %zu bytes", n,
                  bytes);
    n = 0;
    bytes = policy_release_free(&heap, 0, 300, release, NULL, &n);
    ck_assert_msg(n == 1 && bytes == 20 * MiB && heap.nsegments == 1, "all free: %u segments, %zu left", n,
                  heap.nsegments);
    ck_assert_msg(!pool_segment_is_free(heap.segments), "the segment in use went");
}
END_TEST

START_TEST(test_release_free_counts_only_what_was_given_back)
{
    pool_add_segment(&heap, BASE, 2 * MiB, 1, 1);
    pool_add_segment(&heap, BASE + 64 * MiB, 20 * MiB, 0, 1);
    nreleased = 0, fail_at = BASE;
    unsigned n = 0;
    size_t bytes = policy_release_free(&heap, 0, 2, release, NULL, &n);
    ck_assert_msg(n == 1 && bytes == 20 * MiB && heap.nsegments == 1, "%u released, %zu bytes, %zu left", n, bytes,
                  heap.nsegments);
}
END_TEST

START_TEST(test_cache_limit_gives_back_the_longest_free_first_until_under_the_cap)
{
    pool_add_segment(&heap, BASE, 20 * MiB, 0, 300);
    pool_add_segment(&heap, BASE + 64 * MiB, 20 * MiB, 0, 100);
    pool_add_segment(&heap, BASE + 128 * MiB, 20 * MiB, 0, 200);
    pool_add_segment(&heap, BASE + 192 * MiB, 20 * MiB, 0, 50);
    ck_assert(pool_alloc(&heap, 20 * MiB, 20 * MiB) != NULL); /* one is in use: never a candidate */
    nreleased = 0, fail_at = 0;
    unsigned n = 0;
    size_t bytes = policy_enforce_cache_limit(&heap, 25 * MiB, release, NULL, &n);
    ck_assert_msg(n == 2 && bytes == 40 * MiB, "%u released, %zu bytes", n, bytes);
    ck_assert_msg(pool_whole_free_bytes(&heap) == 20 * MiB, "%zu bytes still free", pool_whole_free_bytes(&heap));
    for (unsigned i = 0; i < n; i++) /* the kept one is the newest free */
        ck_assert_msg(released[i] != BASE, "the segment free since 300 went (release %u)", i);
    n = 0;
    ck_assert_msg(policy_enforce_cache_limit(&heap, 20 * MiB, release, NULL, &n) == 0 && n == 0,
                  "under the cap: %u released", n);
}
END_TEST

/* The waits recorded; each completes every pending fence up to the one asked for. */
static uint64_t waited_for[8], oldest_waits;
static unsigned nwaits;

static void wait_for(void *arg, uint64_t seq)
{
    (void)arg;
    if (nwaits < 8)
        waited_for[nwaits] = seq;
    nwaits++;
    pool_release_pending(&heap, seq, 1);
}

static int wait_oldest(void *arg)
{
    (void)arg;
    uint64_t seq = pool_oldest_pending_seq(&heap);
    oldest_waits++;
    if (seq)
        pool_release_pending(&heap, seq, 1);
    return seq != 0;
}

static const policy_waits_t waits = {wait_for, wait_oldest, NULL};

START_TEST(test_pending_wait_waits_for_a_pending_block_that_fits_better)
{
    pool_add_segment(&heap, BASE, 64 * MiB, 0, 1);
    gm_block_t *small = pool_alloc(&heap, 8 * MiB, 8 * MiB);
    gm_block_t *rest = pool_alloc(&heap, 56 * MiB, 56 * MiB);
    pool_add_segment(&heap, BASE + 128 * MiB, 40 * MiB, 0, 1);
    ck_assert(small && rest);
    pool_defer_block(&heap, small, 7); /* an exact fit, pending on fence 7; the free 40 MiB would be cut */
    nwaits = 0, oldest_waits = 0;
    ck_assert_msg(policy_alloc_waiting(&heap, 8 * MiB, 8 * MiB, 0, &waits) != NULL && nwaits == 0,
                  "without pending wait: %u waits", nwaits);
    teardown();
    setup();
    pool_add_segment(&heap, BASE, 64 * MiB, 0, 1);
    small = pool_alloc(&heap, 8 * MiB, 8 * MiB);
    rest = pool_alloc(&heap, 56 * MiB, 56 * MiB);
    pool_add_segment(&heap, BASE + 128 * MiB, 40 * MiB, 0, 1);
    pool_defer_block(&heap, small, 7);
    nwaits = 0;
    gm_block_t *b = policy_alloc_waiting(&heap, 8 * MiB, 8 * MiB, 1, &waits);
    ck_assert_msg(nwaits == 1 && waited_for[0] == 7, "%u waits, the first for fence %llu", nwaits,
                  (unsigned long long)waited_for[0]);
    ck_assert_msg(b && b->ptr == BASE, "the request was not served by the block it waited for");
}
END_TEST

START_TEST(test_pending_wait_waits_for_the_oldest_fence_while_pending_bytes_could_serve)
{
    pool_add_segment(&heap, BASE, 2 * MiB, 1, 1);
    gm_block_t *a = pool_alloc(&heap, MiB, MiB);
    gm_block_t *c = pool_alloc(&heap, MiB, MiB);
    ck_assert(a && c);
    pool_defer_block(&heap, a, 3);
    nwaits = 0, oldest_waits = 0;
    ck_assert_msg(policy_alloc_waiting(&heap, MiB, MiB, 0, &waits) == NULL && oldest_waits == 0,
                  "without pending wait it must grow: %llu waits", (unsigned long long)oldest_waits);
    gm_block_t *b = policy_alloc_waiting(&heap, MiB, MiB, 1, &waits);
    ck_assert_msg(b == a && oldest_waits == 1, "after %llu waits for the oldest fence: block %p, pending one %p",
                  (unsigned long long)oldest_waits, (void *)b, (void *)a);
    oldest_waits = 0; /* nothing pending: no wait, grow */
    ck_assert_msg(policy_alloc_waiting(&heap, MiB, MiB, 1, &waits) == NULL && oldest_waits == 0,
                  "%llu waits with nothing pending", (unsigned long long)oldest_waits);
}
END_TEST

Suite *policy_suite(void)
{
    Suite *s = suite_create("policy");
    TCase *tc = tcase_create("decisions");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_tight_segment_is_the_small_segment_or_the_request_in_2_mib);
    tcase_add_test(tc, test_fits_limit_shrinks_to_the_tight_segment_only_when_it_must);
    tcase_add_test(tc, test_release_free_takes_idle_segments_and_keeps_used_ones);
    tcase_add_test(tc, test_release_free_counts_only_what_was_given_back);
    tcase_add_test(tc, test_cache_limit_gives_back_the_longest_free_first_until_under_the_cap);
    tcase_add_test(tc, test_pending_wait_waits_for_a_pending_block_that_fits_better);
    tcase_add_test(tc, test_pending_wait_waits_for_the_oldest_fence_while_pending_bytes_could_serve);
    suite_add_tcase(s, tc);
    return s;
}
