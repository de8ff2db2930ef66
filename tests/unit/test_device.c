/* Unit tests of a device's pool (shim/device.c, fence.c) in this process, against the fake CUDA
 * runtime: arenas, fences over non-blocking and destroyed streams, OOM release, reset. Each test
 * runs in its own forked process (Check's default), so the fake starts fresh every time. */
#include "capheap.h"
#include "devctx.h"
#include "device.h"
#include "fencepol.h"
#include "hit.h"
#include "slowpath.h"
#include "options.h"
#include "suites.h"
#include "trim.h"

#include "../fakecuda.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static gm_device_t *d;

static void setup(void)
{
    setenv("FAKECUDA_MEM", "512M", 1);
    unsetenv("GMSHIM_LOG");
    options_reset();
    d = device_get(0);
    ck_assert_ptr_nonnull(d);
    device_use_arena(0);
}

static void *alloc_or_fail(size_t n)
{
    void *p = NULL;
    cudaError_t e = device_alloc(d, n, 0, &p);
    ck_assert_msg(e == cudaSuccess, "device_alloc(%zu) = %d", n, (int)e);
    return p;
}

static void free_ok(void *p)
{
    cudaError_t e = cudaErrorUnknown;
    ck_assert_msg(device_free(d, p, 0, &e) == GM_FREE_DONE && e == cudaSuccess, "device_free(%p)", p);
}

static gmshim_stats_t stats(void)
{
    gmshim_stats_t st;
    memset(&st, 0, sizeof st);
    device_get_stats(d, &st);
    return st;
}

typedef struct job {
    int arena;
    void *in, *out;
    size_t size;
} job_t;

static void *in_arena(void *arg)
{
    job_t *j = arg;
    device_use_arena(j->arena);
    if (j->in)
        free_ok(j->in);
    if (j->size)
        j->out = alloc_or_fail(j->size);
    return NULL;
}

static void run_in_arena(job_t *j)
{
    pthread_t th;
    pthread_create(&th, NULL, in_arena, j);
    pthread_join(th, NULL);
}

START_TEST(test_a_block_is_freed_from_any_arena)
{
    ck_assert_int_eq(device_add_arena(d), 1);
    void *x = alloc_or_fail(3 << 20);                /* arena 0 */
    job_t j = {.arena = 1, .in = x, .size = 5 << 20}; /* arena 1 frees it and allocates */
    run_in_arena(&j);
    gmshim_stats_t st = stats();
    ck_assert_uint_eq(st.arenas, 2);
    ck_assert_msg(st.allocs == 2 && st.frees == 1, "allocs %llu frees %llu", st.allocs, st.frees);
    ck_assert_uint_eq(st.allocated.current, 5u << 20);
    free_ok(j.out); /* and arena 0's thread frees arena 1's block */
    st = stats();
    ck_assert_uint_eq(st.allocated.current, 0);
    struct fakecuda_stats f;
    fakecuda_get_stats(0, &f);
    ck_assert_msg(st.reserved.current == f.bytes_in_use, "reserved %llu, driver %llu", st.reserved.current,
                  f.bytes_in_use);
}
END_TEST

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

static void late_write(void *p)
{
    *(volatile int *)p = 0xAA;
}

static void mark_done(void *p)
{
    __atomic_store_n((int *)p, 1, __ATOMIC_RELEASE);
}

START_TEST(test_fence_covers_a_kernel_on_a_nonblocking_stream)
{
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    device_stream_created(d, s, cudaStreamNonBlocking);
    static int done;
    void *p = alloc_or_fail(2 << 20);
    ck_assert_int_eq(fakecuda_launch(s, late_write, p, 100000), cudaSuccess);
    ck_assert_int_eq(fakecuda_launch(s, mark_done, &done, 0), cudaSuccess);
    free_ok(p);
    void *q = alloc_or_fail(2 << 20);
    ck_assert_msg(q != p || __atomic_load_n(&done, __ATOMIC_ACQUIRE),
                  "the block came back while the kernel on the non-blocking stream still ran");
    free_ok(q);
}
END_TEST

START_TEST(test_work_of_a_destroyed_stream_is_still_fenced)
{
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    device_stream_created(d, s, cudaStreamNonBlocking);
    static int done;
    void *p = alloc_or_fail(2 << 20);
    ck_assert_int_eq(fakecuda_launch(s, late_write, p, 100000), cudaSuccess);
    ck_assert_int_eq(fakecuda_launch(s, mark_done, &done, 0), cudaSuccess);
    device_stream_destroyed(d, s);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
    free_ok(p);
    void *q = alloc_or_fail(2 << 20);
    ck_assert_msg(q != p || __atomic_load_n(&done, __ATOMIC_ACQUIRE),
                  "the block came back while the destroyed stream's kernel still ran");
    free_ok(q);
}
END_TEST

START_TEST(test_reset_forgets_every_arena)
{
    ck_assert_int_eq(device_add_arena(d), 1);
    (void)alloc_or_fail(1 << 20);
    job_t j = {.arena = 1, .size = 7 << 20};
    run_in_arena(&j);
    device_forget(d);
    ck_assert_int_eq(cudaDeviceReset(), cudaSuccess);
    gmshim_stats_t st = stats();
    ck_assert_msg(st.reserved.current == 0 && st.allocated.current == 0, "reserved %llu allocated %llu",
                  st.reserved.current, st.allocated.current);
    cudaError_t e;
    ck_assert_int_eq(device_free(d, j.out, 0, &e), GM_FREE_NOT_FOUND);
    void *p = alloc_or_fail(1 << 20);
    free_ok(p);
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
    size_t released = device_empty_cache(d, 2);
    ck_assert_uint_eq(released, 70u << 20);
    struct fakecuda_stats f;
    fakecuda_get_stats(0, &f);
    ck_assert_uint_eq(f.bytes_in_use, 0);
}
END_TEST

START_TEST(test_contending_threads_spread_over_existing_arenas_at_the_maximum)
{
    d->max_arenas = 3;
    ck_assert_int_eq(device_move_arena(d, 0), 1); /* new arenas while there is room */
    ck_assert_int_eq(device_move_arena(d, 0), 2);
    int seen[3] = {0};
    for (int k = 0; k < 6; k++) {
        int from = k % 3, to = device_move_arena(d, from);
        ck_assert_msg(to != from && to >= 0 && to < 3, "from %d to %d", from, to);
        seen[to]++;
    }
    ck_assert_msg(seen[0] && seen[1] && seen[2], "moves %d %d %d", seen[0], seen[1], seen[2]);
    ck_assert_uint_eq(stats().arenas, 3);
}
END_TEST

START_TEST(test_a_fence_recorded_by_one_arena_covers_the_frees_another_counted)
{
    enum { N = 4 };
    d->fence_frees = N;
    ck_assert_int_eq(device_add_arena(d), 1);
    void *p[N], *q[N];
    device_use_arena(1);
    for (int i = 0; i < N; i++)
        p[i] = alloc_or_fail(4096);
    device_use_arena(0);
    for (int i = 0; i < N; i++)
        q[i] = alloc_or_fail(4096);
    unsigned long long before = stats().fences;
    device_use_arena(1);
    for (int i = 0; i < N - 1; i++)
        free_ok(p[i]);
    device_use_arena(0);
    for (int i = 0; i < N; i++)
        free_ok(q[i]); /* the N-th free records a fence: it covers arena 1's frees too */
    ck_assert_uint_eq(stats().fences, before + 1);
    device_use_arena(1);
    free_ok(p[N - 1]); /* arena 1 has counted one free since that fence, not N */
    ck_assert_uint_eq(stats().fences, before + 1);
}
END_TEST

/* A thread out of free blocks whose older frees another arena's fence already covers takes
 * those in: no fence of its own, no new segment. */
START_TEST(test_a_thread_out_of_blocks_reuses_frees_another_arenas_fence_covered)
{
    d->fence_frees = 0;
    d->fence_bytes = (size_t)1 << 40; /* no periodic fences but the one made below */
    ck_assert_int_eq(device_add_arena(d), 1);
    device_use_arena(1);
    void *a = alloc_or_fail(1 << 20), *b = alloc_or_fail(1 << 20); /* one whole small segment */
    device_use_arena(0);
    void *x = alloc_or_fail(4096);
    device_use_arena(1);
    free_ok(a);
    device_use_arena(0);
    d->fence_frees = 1;
    free_ok(x); /* arena 0's fence covers arena 1's free of a */
    d->fence_frees = 0;
    fakecuda_drain(); /* the fence has completed; no thread has asked yet */
    device_use_arena(1);
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

START_TEST(test_a_thread_that_contends_one_time_in_three_moves)
{
    int moved = 0;
    for (int k = 0; k < 3000 && !moved; k++)
        moved = device_note_lock(k % 3 == 0);
    ck_assert_msg(moved, "a thread meeting another on every third lock never moved");
}
END_TEST

START_TEST(test_a_thread_that_rarely_contends_stays)
{
    for (int k = 0; k < 100000; k++)
        ck_assert_msg(!device_note_lock(k % 20 == 0), "moved after %d locks, one in 20 contended", k);
}
END_TEST

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *wait_in_arena_1(void *arg)
{
    void **block = arg;
    device_use_arena(1);
    free_ok(*block);                  /* pending behind the long kernel */
    *block = alloc_or_fail(64u << 20); /* it fits best: waits for the kernel's fence */
    return NULL;
}

START_TEST(test_a_wait_for_the_gpu_does_not_hold_up_other_arenas)
{
    ck_assert_int_eq(device_add_arena(d), 1);
    device_use_arena(1);
    void *big = alloc_or_fail(64u << 20);
    device_use_arena(0);
    void *small = alloc_or_fail(4096);
    ck_assert_int_eq(fakecuda_launch(0, NULL, NULL, 1000000), cudaSuccess); /* 1 s of GPU work */
    pthread_t th;
    pthread_create(&th, NULL, wait_in_arena_1, &big);
    usleep(100000); /* arena 1's thread is now waiting for the fence */
    free_ok(small);
    double t0 = now_ms();
    void *other = alloc_or_fail(100u << 20); /* a miss: records a fence for `small`, then grows */
    double took = now_ms() - t0;
    pthread_join(th, NULL);
    ck_assert_msg(took < 500, "an allocation in arena 0 took %.0f ms while arena 1 waited", took);
    free_ok(other);
    free_ok(big);
}
END_TEST

static atomic_int turn;

static void *take_turns(void *arg)
{
    int me = (int)(uintptr_t)arg;
    for (int k = 0; k < 200; k++) {
        while (atomic_load(&turn) != me)
            ;
        void *p = alloc_or_fail(4096u * (unsigned)(me + 1));
        free_ok(p);
        atomic_store(&turn, 1 - me);
    }
    return NULL;
}

START_TEST(test_two_threads_taking_turns_on_one_arena_end_in_two)
{
    /* They never find the lock taken, but each turn moves the arena to the other CPU. */
    pthread_t th[2];
    for (int t = 0; t < 2; t++)
        pthread_create(&th[t], NULL, take_turns, (void *)(uintptr_t)t);
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], NULL);
    ck_assert_uint_eq(stats().arenas, 2);
}
END_TEST

static void setup_gpu_order(void)
{
    setenv("GMSHIM_GPU_ORDER", "1", 1);
    setup();
    ck_assert_int_eq(d->gpu_order, 1);
}

static int outstanding(void)
{
    pthread_mutex_lock(&d->fence_lock);
    int n = fences_outstanding(&d->fences);
    pthread_mutex_unlock(&d->fence_lock);
    return n;
}

/* While a kernel on a non-blocking stream still runs, blocks come back at once (no CPU wait), no
 * fence counts as complete, and fences pile up; once it ends, one poll retires them in a batch. */
START_TEST(test_gpu_order_retires_fences_only_after_the_gpu_and_in_batches)
{
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    device_stream_created(d, s, cudaStreamNonBlocking);
    static int done;
    void *p = alloc_or_fail(4 << 20);
    ck_assert_int_eq(fakecuda_launch(s, late_write, p, 300000), cudaSuccess);
    ck_assert_int_eq(fakecuda_launch(s, mark_done, &done, 0), cudaSuccess);
    uint64_t done_before = d->fences.done;
    for (int i = 0; i < 3 * GM_FENCE_BATCH; i++) {
        free_ok(p);
        void *q = alloc_or_fail(4 << 20);
        ck_assert_ptr_eq(q, p);
    }
    ck_assert_msg(!__atomic_load_n(&done, __ATOMIC_ACQUIRE), "the kernel ended too soon for the test");
    ck_assert_uint_eq(__atomic_load_n(&d->fences.done, __ATOMIC_ACQUIRE), done_before);
    ck_assert_int_ge(outstanding(), 3 * GM_FENCE_BATCH);
    ck_assert_uint_eq(stats().fence_waits, 0);
    fakecuda_drain();
    free_ok(p);
    p = alloc_or_fail(4 << 20);
    ck_assert_int_le(outstanding(), 2);
    free_ok(p);
}
END_TEST

/* With the GPU idle, the fences of a long run of reuses stay few: their events are recycled. */
START_TEST(test_gpu_order_keeps_few_fences_outstanding)
{
    void *p = alloc_or_fail(4 << 20);
    for (int i = 0; i < 1000; i++) {
        free_ok(p);
        p = alloc_or_fail(4 << 20);
    }
    ck_assert_uint_ge(stats().fences, 1000);
    /* The fake GPU's thread can lag behind on a loaded machine (it did under ASan): once it has
     * caught up, one batch of reuses retires every fence before it. */
    fakecuda_drain();
    for (int i = 0; i < GM_FENCE_BATCH; i++) {
        free_ok(p);
        p = alloc_or_fail(4 << 20);
    }
    ck_assert_int_le(outstanding(), 2 * GM_FENCE_BATCH);
    ck_assert_uint_eq(stats().fence_waits, 0);
    free_ok(p);
}
END_TEST

/* ---- GMSHIM_CACHE_LIMIT's trimmer pass ------------------------------------------------------ */

#define CACHE_CAP (64u << 20)

static void setup_cache_limit(void)
{
    setenv("GMSHIM_CACHE_LIMIT", "64M", 1);
    setup();
    ck_assert_uint_eq(d->cache_limit, CACHE_CAP);
}

/* Three 32 MiB blocks from arena `arena`, each its own segment, freed (pending: no allocation
 * polls them). */
static void free_three_in_arena(int arena)
{
    void *p[3];
    for (int i = 0; i < 3; i++) {
        job_t j = {.arena = arena, .size = 32u << 20};
        run_in_arena(&j);
        p[i] = j.out;
    }
    for (int i = 0; i < 3; i++) {
        job_t j = {.arena = arena, .in = p[i]};
        run_in_arena(&j);
    }
}

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
        device_cache_trim(d, &waiting);
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
    device_stream_created(d, s, cudaStreamNonBlocking);
    void *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = alloc_or_fail(32u << 20);
    ck_assert_int_eq(fakecuda_launch(s, late_write, p[0], 400000), cudaSuccess);
    for (int i = 0; i < 4; i++)
        free_ok(p[i]);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int waiting = 0;
    unsigned long long released = device_cache_trim(d, &waiting);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    ck_assert_msg(ms < 200 && waiting && !released, "the pass took %.0f ms, waiting %d, released %llu", ms,
                  waiting, released);
    ck_assert_uint_eq(stats().reserved.current, 128u << 20);
    fakecuda_drain();
    waiting = 0;
    device_cache_trim(d, &waiting);
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
    device_set_captures(d, 1, NULL);
    fakecuda_reset_stats();
    int waiting = 0;
    ck_assert_uint_eq(device_cache_trim(d, &waiting), 0);
    struct fakecuda_stats f;
    fakecuda_get_stats(0, &f);
    ck_assert_msg(waiting && f.frees == 0 && f.event_records == 0 && f.event_queries == 0,
                  "during a capture: waiting %d, frees %llu, records %llu, queries %llu", waiting, f.frees,
                  f.event_records, f.event_queries);
    device_set_captures(d, -1, NULL);
    for (int round = 0; round < 200 && waiting; round++) {
        fakecuda_drain();
        waiting = 0;
        device_cache_trim(d, &waiting);
    }
    ck_assert_uint_eq(stats().reserved.current, CACHE_CAP);
}
END_TEST

Suite *device_suite(void)
{
    Suite *s = suite_create("device");
    TCase *tc = tcase_create("arenas and fences");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_a_block_is_freed_from_any_arena);
    tcase_add_test(tc, test_oom_releases_the_cache_of_every_arena);
    tcase_add_test(tc, test_fence_covers_a_kernel_on_a_nonblocking_stream);
    tcase_add_test(tc, test_work_of_a_destroyed_stream_is_still_fenced);
    tcase_add_test(tc, test_reset_forgets_every_arena);
    tcase_add_test(tc, test_empty_cache_returns_every_arena_segment);
    tcase_add_test(tc, test_contending_threads_spread_over_existing_arenas_at_the_maximum);
    tcase_add_test(tc, test_a_thread_that_contends_one_time_in_three_moves);
    tcase_add_test(tc, test_a_thread_that_rarely_contends_stays);
    tcase_add_test(tc, test_a_wait_for_the_gpu_does_not_hold_up_other_arenas);
    tcase_add_test(tc, test_two_threads_taking_turns_on_one_arena_end_in_two);
    tcase_add_test(tc, test_a_fence_recorded_by_one_arena_covers_the_frees_another_counted);
    tcase_add_test(tc, test_a_thread_out_of_blocks_reuses_frees_another_arenas_fence_covered);
    tcase_add_test(tc, test_a_thread_out_of_blocks_asks_once_while_the_gpu_is_busy);
    suite_add_tcase(s, tc);
    tc = tcase_create("GPU order");
    tcase_add_checked_fixture(tc, setup_gpu_order, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_gpu_order_retires_fences_only_after_the_gpu_and_in_batches);
    tcase_add_test(tc, test_gpu_order_keeps_few_fences_outstanding);
    suite_add_tcase(s, tc);
    tc = tcase_create("cache cap");
    tcase_add_checked_fixture(tc, setup_cache_limit, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_cache_pass_holds_the_cap_across_every_arena);
    tcase_add_test(tc, test_cache_pass_never_waits_for_the_gpu);
    tcase_add_test(tc, test_cache_pass_makes_no_call_during_a_capture);
    suite_add_tcase(s, tc);
    return s;
}
