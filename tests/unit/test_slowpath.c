/* The slow path (shim/slowpath.c): OOM release over every arena, empty_cache, a miss taking
 * in what another arena's fence covered and asking the runtime once, the cache cap's pass; under
 * the preload, an OOM released and retried once. */
#include "capheap.h"
#include "devctx.h"
#include "device.h"
#include "fencepol.h"
#include "hit.h"
#include "options.h"
#include "slowpath.h"
#include "suites.h"
#include "trim.h"

#include "../fakecuda.h"
#include "pooltest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

START_TEST(test_oom_releases_the_cache_of_every_arena)
{
    ck_assert_int_eq(device_add_arena(d), 1);
    job_t j = {.arena = 1, .size = 300u << 20};
    run_in_arena(&j);
    job_t k = {.arena = 1, .in = j.out}; /* arena 1 now caches 300 MiB */
    run_in_arena(&k);
    fakecuda_drain();
    void *big = alloc_or_fail(400u << 20); /* arena 0: only fits once arena 1's cache is gone */
    gmshim_stats_t st = stats();
    ck_assert_msg(st.oom_retries >= 1 && st.ooms == 0, "retries %llu ooms %llu", st.oom_retries, st.ooms);
    free_ok(big);
}
END_TEST

START_TEST(test_empty_cache_returns_every_arena_segment)
{
    ck_assert_int_eq(device_add_arena(d), 1);
    free_ok(alloc_or_fail(30u << 20));
    job_t j = {.arena = 1, .size = 40u << 20};
    run_in_arena(&j);
    job_t k = {.arena = 1, .in = j.out};
    run_in_arena(&k);
    size_t released = slowpath_empty_cache(d, 2);
    ck_assert_uint_eq(released, 70u << 20);
    struct fakecuda_stats f;
    fakecuda_get_stats(0, &f);
    ck_assert_uint_eq(f.bytes_in_use, 0);
}
END_TEST

/* A thread out of free blocks whose older frees another arena's fence already covers takes
 * those in: no fence of its own, no new segment. */
START_TEST(test_a_thread_out_of_blocks_reuses_frees_another_arenas_fence_covered)
{
    d->fence_frees = 0;
    d->fence_bytes = (size_t)1 << 40; /* no periodic fences but the one made below */
    ck_assert_int_eq(device_add_arena(d), 1);
    hit_use_arena(1);
    void *a = alloc_or_fail(1 << 20), *b = alloc_or_fail(1 << 20); /* one whole small segment */
    hit_use_arena(0);
    void *x = alloc_or_fail(4096);
    hit_use_arena(1);
    free_ok(a);
    hit_use_arena(0);
    d->fence_frees = 1;
    free_ok(x); /* arena 0's fence covers arena 1's free of a */
    d->fence_frees = 0;
    fakecuda_drain(); /* the fence has completed; no thread has asked yet */
    hit_use_arena(1);
    free_ok(b); /* not covered by any fence yet */
    struct fakecuda_stats before, after;
    fakecuda_get_stats(0, &before);
    unsigned long long fences = stats().fences;
    void *c = alloc_or_fail(1 << 20);
    fakecuda_get_stats(0, &after);
    ck_assert_ptr_eq(c, a);
    ck_assert_uint_eq(stats().fences, fences);
    ck_assert_uint_eq(after.event_records, before.event_records);
    ck_assert_uint_eq(after.mallocs, before.mallocs);
    free_ok(c);
}
END_TEST

/* Out of blocks while the GPU still uses the oldest freed one: one query tells that, and the
 * newer frees are not asked about (they cannot have completed before it). */
START_TEST(test_a_thread_out_of_blocks_asks_once_while_the_gpu_is_busy)
{
    d->pending_wait = 0; /* grow rather than wait: the allocation makes no wait's queries */
    d->fence_bytes = (size_t)1 << 40;
    void *a = alloc_or_fail(1 << 20), *b = alloc_or_fail(1 << 20); /* one whole small segment */
    ck_assert_int_eq(fakecuda_launch(cudaStreamLegacy, late_write, a, 200000), cudaSuccess);
    d->fence_frees = 1;
    free_ok(a); /* a fence covers it; the kernel still runs */
    d->fence_frees = 0;
    free_ok(b);
    struct fakecuda_stats before, after;
    fakecuda_get_stats(0, &before);
    void *c = alloc_or_fail(1 << 20);
    fakecuda_get_stats(0, &after);
    ck_assert_ptr_ne(c, a);
    ck_assert_ptr_ne(c, b);
    ck_assert_uint_eq(after.mallocs, before.mallocs + 1);
    ck_assert_msg(after.event_queries == before.event_queries + 1, "queries %llu records %llu", after.event_queries - before.event_queries, after.event_records - before.event_records);
    free_ok(c);
}
END_TEST

/* Two arenas each cache 96 MiB, pending; each alone keeps to the cap, together they hold more.
 * The pass brings the device under the cap once the GPU is done, with no allocation. */
START_TEST(test_cache_pass_holds_the_cap_across_every_arena)
{
    ck_assert_int_eq(device_add_arena(d), 1);
    free_three_in_arena(0);
    free_three_in_arena(1);
    /* Each arena holds at least the cap (it applies it to itself when it takes in completed
     * fences), so the device twice that or more. */
    ck_assert_uint_ge(stats().reserved.current, 2 * CACHE_CAP);
    int waiting = 1;
    for (int round = 0; round < 200 && waiting; round++) {
        fakecuda_drain(); /* the GPU catches up with the fence the pass recorded */
        waiting = 0;
        slowpath_cache_trim(d, &waiting);
    }
    gmshim_stats_t st = stats();
    struct fakecuda_stats f;
    fakecuda_get_stats(0, &f);
    ck_assert_msg(!waiting && st.reserved.current <= CACHE_CAP && f.bytes_in_use <= CACHE_CAP,
                  "after the passes: waiting %d, reserved %llu, driver %llu, cap %u", waiting, st.reserved.current,
                  f.bytes_in_use, CACHE_CAP);
    ck_assert_uint_eq(st.reserved.current, CACHE_CAP); /* the newest that fit stay cached */
}
END_TEST

/* The pass only asks: while a kernel still uses the freed blocks it returns at once, says it
 * must come again, and releases nothing. */
START_TEST(test_cache_pass_never_waits_for_the_gpu)
{
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    fencepol_stream_created(d, s, cudaStreamNonBlocking);
    void *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = alloc_or_fail(32u << 20);
    ck_assert_int_eq(fakecuda_launch(s, late_write, p[0], 400000), cudaSuccess);
    for (int i = 0; i < 4; i++)
        free_ok(p[i]);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int waiting = 0;
    unsigned long long released = slowpath_cache_trim(d, &waiting);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    ck_assert_msg(ms < 200 && waiting && !released, "the pass took %.0f ms, waiting %d, released %llu", ms,
                  waiting, released);
    ck_assert_uint_eq(stats().reserved.current, 128u << 20);
    fakecuda_drain();
    waiting = 0;
    slowpath_cache_trim(d, &waiting);
    ck_assert_msg(stats().reserved.current == CACHE_CAP, "after the kernel: reserved %llu",
                  stats().reserved.current);
}
END_TEST

/* While a capture is under way on the device the pass makes no CUDA call at all. */
START_TEST(test_cache_pass_makes_no_call_during_a_capture)
{
    void *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = alloc_or_fail(32u << 20);
    for (int i = 0; i < 4; i++)
        free_ok(p[i]);
    fakecuda_drain();
    capheap_set_captures(d, 1, NULL);
    fakecuda_reset_stats();
    int waiting = 0;
    ck_assert_uint_eq(slowpath_cache_trim(d, &waiting), 0);
    struct fakecuda_stats f;
    fakecuda_get_stats(0, &f);
    ck_assert_msg(waiting && f.frees == 0 && f.event_records == 0 && f.event_queries == 0,
                  "during a capture: waiting %d, frees %llu, records %llu, queries %llu", waiting, f.frees,
                  f.event_records, f.event_queries);
    capheap_set_captures(d, -1, NULL);
    for (int round = 0; round < 200 && waiting; round++) {
        fakecuda_drain();
        waiting = 0;
        slowpath_cache_trim(d, &waiting);
    }
    ck_assert_uint_eq(stats().reserved.current, CACHE_CAP);
}
END_TEST

START_TEST(test_oom_releases_the_cache_and_retries_once)
{
    classic_pool_test();
    RUN_OK("tests/integration/oom_retry", "FAKECUDA_MEM=256M");
}
END_TEST

Suite *slowpath_suite(void)
{
    Suite *s = suite_create("slowpath");
    TCase *tc = tcase_create("in process");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_oom_releases_the_cache_of_every_arena);
    tcase_add_test(tc, test_empty_cache_returns_every_arena_segment);
    tcase_add_test(tc, test_a_thread_out_of_blocks_reuses_frees_another_arenas_fence_covered);
    tcase_add_test(tc, test_a_thread_out_of_blocks_asks_once_while_the_gpu_is_busy);
    suite_add_tcase(s, tc);
    tc = tcase_create("cache cap");
    tcase_add_checked_fixture(tc, setup_cache_limit, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_cache_pass_holds_the_cap_across_every_arena);
    tcase_add_test(tc, test_cache_pass_never_waits_for_the_gpu);
    tcase_add_test(tc, test_cache_pass_makes_no_call_during_a_capture);
    suite_add_tcase(s, tc);
    tc = tcase_create("preload");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_oom_releases_the_cache_and_retries_once);
    suite_add_tcase(s, tc);
    return s;
}
