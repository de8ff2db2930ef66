/* Thread caches (shim/tcache.c) on the fake runtime: a thread's freed small block handed back to
 * it without the arena lock once its fence completed, never before; frees from other threads, a
 * double free, the caches' blocks taken back (before the pool grows, by an empty cache, when a
 * thread ends, over the cap), stats and peaks, captures, a reset. Each test runs forked. */
#include "capheap.h"
#include "devctx.h"
#include "device.h"
#include "fencepol.h"
#include "hit.h"
#include "options.h"
#include "slowpath.h"
#include "suites.h"
#include "tcache.h"

#include "../fakecuda.h"
#include "pooltest.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

/* Every fence so far recorded, completed on the fake GPU and polled. */
static void fences_done(void)
{
    complete_fences();
    ck_assert_uint_eq(device_done(d), device_issued(d));
}

static gm_tcache_sums_t sums(void)
{
    gm_tcache_sums_t s;
    tcache_sum(d, &s);
    return s;
}

/* ---- hits ----------------------------------------------------------------------------------- */

typedef struct holder {
    atomic_int state; /* 1: the arena lock is held; 2: let it go */
} holder_t;

static void *hold_arena_lock(void *arg)
{
    holder_t *h = arg;
    pthread_mutex_lock(&d->arenas[0]->lock);
    atomic_store(&h->state, 1);
    while (atomic_load(&h->state) != 2)
        usleep(100);
    pthread_mutex_unlock(&d->arenas[0]->lock);
    return NULL;
}

START_TEST(test_a_freed_block_comes_back_to_its_thread_without_the_arena_lock)
{
    void *p = alloc_or_fail(4096);
    free_ok(p);
    fences_done();
    holder_t h = {0};
    pthread_t th;
    pthread_create(&th, NULL, hold_arena_lock, &h);
    while (atomic_load(&h.state) != 1)
        usleep(100);
    /* Were the hit to take the arena lock, it would wait here until the test's timeout. */
    void *q = NULL, *r = NULL;
    ck_assert_int_eq(hit_alloc(d, 4096, 0, &q), cudaSuccess);
    free_ok(q);
    atomic_store(&h.state, 2);
    pthread_join(th, NULL);
    ck_assert_ptr_eq(q, p);
    fences_done();
    ck_assert_int_eq(hit_alloc(d, 4000, 0, &r), cudaSuccess); /* the same rounded size */
    ck_assert_ptr_eq(r, p);
    gmshim_stats_t st = stats();
    ck_assert_msg(st.allocs == 3 && st.frees == 2 && st.cache_hits == 2, "allocs %llu frees %llu hits %llu",
                  st.allocs, st.frees, st.cache_hits);
    free_ok(r);
}
END_TEST

START_TEST(test_a_cached_block_is_not_reused_while_the_gpu_may_still_use_it)
{
    void *p = alloc_or_fail(4096);
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    ck_assert_int_eq(fakecuda_launch(s, late_write, p, 200000), cudaSuccess); /* writes p 0.2 s on */
    free_ok(p);
    gm_arena_t *a = d->arenas[0];
    pthread_mutex_lock(&a->lock);
    ck_assert_int_eq(fencepol_issue(a, GMLOG_FENCE_BY_NEED), 0); /* the fence covers the kernel */
    fencepol_harvest(a, 1);
    pthread_mutex_unlock(&a->lock);
    for (int i = 0; i < 100; i++) {
        void *q = alloc_or_fail(4096);
        ck_assert_msg(q != p || device_done(d) == device_issued(d),
                      "the block came back at allocation %d while its kernel could still write it", i);
        free_ok(q);
    }
    fakecuda_drain();
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
}
END_TEST

static void setup_no_caches(void)
{
    setenv("GMSHIM_THREAD_CACHE", "0", 1);
    setup();
}

START_TEST(test_gmshim_thread_cache_0_keeps_every_free_in_the_arena)
{
    ck_assert_uint_eq(d->tcache_max, 0);
    free_ok(alloc_or_fail(4096));
    ck_assert_ptr_null(tcache_mine(d));
    ck_assert_uint_eq(pool_pending_bytes(&d->arenas[0]->general), 4096);
}
END_TEST

/* ---- frees ---------------------------------------------------------------------------------- */

static void *free_it(void *p)
{
    free_ok(p);
    return NULL;
}

START_TEST(test_a_block_freed_by_another_thread_goes_to_the_arena)
{
    void *p = alloc_or_fail(8192);
    pthread_t th;
    pthread_create(&th, NULL, free_it, p);
    pthread_join(th, NULL);
    ck_assert_uint_eq(sums().bytes, 0);
    ck_assert_uint_eq(pool_pending_bytes(&d->arenas[0]->general), 8192);
    gmshim_stats_t st = stats();
    ck_assert_msg(st.frees == 1 && st.allocated.current == 0, "frees %llu allocated %llu", st.frees,
                  st.allocated.current);
    /* The block is no longer this thread's: its free again is a double free, refused. */
    cudaError_t e;
    ck_assert_int_eq(hit_free(d, p, 0, &e), GM_FREE_NOT_FOUND);
}
END_TEST

static void *free_refused(void *p)
{
    cudaError_t e = cudaSuccess;
    ck_assert_int_eq(hit_free(d, p, 0, &e), GM_FREE_NOT_FOUND);
    return NULL;
}

START_TEST(test_a_double_free_of_a_cached_block_is_refused_as_one)
{
    void *p = alloc_or_fail(4096);
    free_ok(p);
    ck_assert_uint_eq(sums().bytes, 4096);
    cudaError_t e = cudaSuccess;
    ck_assert_int_eq(hit_free(d, p, 0, &e), GM_FREE_NOT_FOUND);
    int kind = -1;
    ck_assert_int_eq(device_owns_address(d, (uintptr_t)p, &kind), 1);
    ck_assert_int_eq(kind, GMLOG_WARN_DOUBLE_FREE);
    /* From another thread too, and the cache still holds it once. */
    pthread_t th;
    pthread_create(&th, NULL, free_refused, p);
    pthread_join(th, NULL);
    ck_assert_uint_eq(sums().bytes, 4096);
}
END_TEST

/* ---- taken back ------------------------------------------------------------------------------ */

typedef struct filler {
    size_t size;
    int n;
    void *p[8];
    atomic_int state; /* 1: blocks freed into the cache; 2: may end */
} filler_t;

static void *fill_and_wait(void *arg)
{
    filler_t *f = arg;
    for (int i = 0; i < f->n; i++)
        f->p[i] = alloc_or_fail(f->size);
    for (int i = 0; i < f->n; i++)
        free_ok(f->p[i]);
    atomic_store(&f->state, 1);
    while (atomic_load(&f->state) != 2)
        usleep(100);
    return NULL;
}

START_TEST(test_the_pool_takes_cached_blocks_back_before_it_grows)
{
    filler_t f = {.size = 1u << 20, .n = 2}; /* one small segment, freed into another thread's cache */
    pthread_t th;
    pthread_create(&th, NULL, fill_and_wait, &f);
    while (atomic_load(&f.state) != 1)
        usleep(100);
    ck_assert_uint_eq(sums().bytes, 2u << 20);
    fences_done();
    unsigned long long mallocs = stats().driver_mallocs;
    void *p = alloc_or_fail((1u << 20) - 512); /* another size: that thread's cache cannot serve it */
    ck_assert_msg(stats().driver_mallocs == mallocs, "the pool grew while a cache held a free segment");
    ck_assert_ptr_eq(p, f.p[0]);
    ck_assert_uint_eq(sums().bytes, 0);
    free_ok(p);
    atomic_store(&f.state, 2);
    pthread_join(th, NULL);
}
END_TEST

START_TEST(test_empty_cache_takes_back_every_cached_block)
{
    free_ok(alloc_or_fail(4096));
    fences_done();
    ck_assert_uint_eq(stats().reserved.current, 2u << 20);
    slowpath_empty_cache(d, GMLOG_EMPTY_API);
    gmshim_stats_t st = stats();
    ck_assert_msg(st.reserved.current == 0 && sums().bytes == 0, "reserved %llu, cached in threads %llu",
                  st.reserved.current, (unsigned long long)sums().bytes);
}
END_TEST

static void *fill_and_end(void *arg)
{
    filler_t *f = arg;
    for (int i = 0; i < f->n; i++)
        f->p[i] = alloc_or_fail(f->size);
    for (int i = 0; i < f->n; i++)
        free_ok(f->p[i]);
    return NULL;
}

START_TEST(test_a_thread_that_ends_gives_its_cached_blocks_back)
{
    filler_t f = {.size = 65536, .n = 3};
    pthread_t th;
    pthread_create(&th, NULL, fill_and_end, &f);
    pthread_join(th, NULL);
    ck_assert_uint_eq(sums().bytes, 0);
    gm_heap_t *h = &d->arenas[0]->general;
    ck_assert_uint_eq(pool_pending_bytes(h) + h->free_bytes[1], 2u << 20);
    /* Its cache waits for the next thread, which starts empty. */
    pthread_create(&th, NULL, fill_and_end, &f);
    pthread_join(th, NULL);
    int caches = 0;
    for (gm_tcache_t *tc = d->tcaches; tc; tc = tc->next)
        caches++;
    ck_assert_int_eq(caches, 1);
}
END_TEST

static void setup_small_caches(void)
{
    setenv("GMSHIM_THREAD_CACHE", "1M", 1);
    setup();
}

START_TEST(test_a_cache_over_its_size_gives_its_oldest_blocks_back)
{
    ck_assert_uint_eq(d->tcache_max, 1u << 20);
    void *p[12];
    for (int i = 0; i < 12; i++)
        p[i] = alloc_or_fail(128u << 10);
    for (int i = 0; i < 12; i++)
        free_ok(p[i]);
    gm_tcache_sums_t s = sums();
    ck_assert_msg(s.bytes <= (1u << 20) && s.bytes >= (768u << 10), "the cache holds %llu bytes, its size 1 MiB",
                  (unsigned long long)s.bytes);
    ck_assert_uint_eq(pool_pending_bytes(&d->arenas[0]->general) + s.bytes, 12u * (128u << 10));
    /* The oldest went back: the first block freed is the arena's, the last the cache's. */
    gm_tcache_t *tc = tcache_mine(d);
    ck_assert_ptr_eq((void *)tc->newest->ptr, p[11]);
    ck_assert_msg(tc->oldest->ptr != (uintptr_t)p[0], "the oldest block stayed in the cache");
}
END_TEST

/* ---- what the pool reports ----------------------------------------------------------------- */

START_TEST(test_stats_count_cached_blocks_as_pending_and_peaks_stay_exact)
{
    void *p = alloc_or_fail(3000);
    void *q = alloc_or_fail(70000);
    free_ok(p);
    gmshim_stats_t st = stats();
    ck_assert_uint_eq(st.allocated.current, 70144);
    ck_assert_uint_eq(st.requested.current, 70000);
    ck_assert_uint_eq(st.pending.current, 3072);
    fences_done();
    p = alloc_or_fail(2900); /* a hit, asking less than the block's first request */
    st = stats();
    ck_assert_uint_eq(st.allocated.current, 70144 + 3072);
    ck_assert_uint_eq(st.requested.current, 72900);
    ck_assert_uint_eq(st.allocated.peak, 70144 + 3072);
    ck_assert_uint_eq(st.requested.peak, 73000);
    free_ok(p);
    free_ok(q);
    void *r = alloc_or_fail(4096); /* the arena's, while both sit in the cache */
    st = stats();
    ck_assert_msg(st.allocated.peak == 70144 + 3072 && st.allocated.current == 4096,
                  "peak %llu current %llu: the cached blocks counted as allocated", st.allocated.peak,
                  st.allocated.current);
    free_ok(r);
    size_t cached = device_cached_bytes(d);
    ck_assert_uint_eq(cached, stats().reserved.current);
}
END_TEST

START_TEST(test_a_capture_never_takes_from_a_cache)
{
    void *p = alloc_or_fail(4096);
    void *keep = alloc_or_fail(4096); /* its segment is never wholly free: no capture takes it over */
    free_ok(p);
    fences_done();
    gm_heap_t *heap = capheap_graph_heap(d, &heap, 11);
    capheap_set_captures(d, 1, heap);
    void *q = alloc_or_fail(4096);
    ck_assert_msg(pool_find_segment(heap, (uintptr_t)q) != NULL, "%p is not in the capture's heap", q);
    free_ok(q);
    capheap_set_captures(d, -1, NULL);
    void *r = alloc_or_fail(4096);
    ck_assert_ptr_eq(r, p);
    free_ok(r);
    free_ok(keep);
}
END_TEST

START_TEST(test_a_reset_forgets_the_caches)
{
    void *p = alloc_or_fail(4096);
    free_ok(p);
    void *q = alloc_or_fail(8192);
    device_forget(d);
    ck_assert_uint_eq(sums().bytes, 0);
    cudaError_t e;
    ck_assert_int_eq(hit_free(d, q, 0, &e), GM_FREE_NOT_FOUND);
    void *r = alloc_or_fail(4096);
    free_ok(r);
    ck_assert_uint_eq(sums().bytes, 4096);
}
END_TEST

Suite *tcache_suite(void)
{
    Suite *s = suite_create("tcache");
    TCase *tc = tcase_create("in process");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_a_freed_block_comes_back_to_its_thread_without_the_arena_lock);
    tcase_add_test(tc, test_a_cached_block_is_not_reused_while_the_gpu_may_still_use_it);
    tcase_add_test(tc, test_a_block_freed_by_another_thread_goes_to_the_arena);
    tcase_add_test(tc, test_a_double_free_of_a_cached_block_is_refused_as_one);
    tcase_add_test(tc, test_the_pool_takes_cached_blocks_back_before_it_grows);
    tcase_add_test(tc, test_empty_cache_takes_back_every_cached_block);
    tcase_add_test(tc, test_a_thread_that_ends_gives_its_cached_blocks_back);
    tcase_add_test(tc, test_stats_count_cached_blocks_as_pending_and_peaks_stay_exact);
    tcase_add_test(tc, test_a_capture_never_takes_from_a_cache);
    tcase_add_test(tc, test_a_reset_forgets_the_caches);
    suite_add_tcase(s, tc);
    tc = tcase_create("settings");
    tcase_add_checked_fixture(tc, setup_no_caches, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_gmshim_thread_cache_0_keeps_every_free_in_the_arena);
    suite_add_tcase(s, tc);
    tc = tcase_create("a small cache");
    tcase_add_checked_fixture(tc, setup_small_caches, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_a_cache_over_its_size_gives_its_oldest_blocks_back);
    suite_add_tcase(s, tc);
    return s;
}
