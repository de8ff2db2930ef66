/* Graph capture (shim/capture.c) on the fake runtime, in this process and under the preload: a
 * capture stays valid and its memory private. */
#include "capheap.h"
#include "capture.h"
#include "devctx.h"
#include "device.h"
#include "fencepol.h"
#include "hit.h"
#include "options.h"
#include "slowpath.h"
#include "suites.h"

#include "../fakecuda.h"
#include "pooltest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

START_TEST(test_capture_stays_valid_and_graph_memory_stays_private)
{
    RUN_OK("tests/integration/capture", "FAKECUDA_MEM=1G");
}
END_TEST


/* In this process: a capture begun on a stream counts on the device of the stream, serves its
 * allocations from its own heap, and ends with its graph holding that memory until the graph is
 * destroyed; no call made meanwhile invalidates it. */
START_TEST(test_a_capture_counts_until_it_ends_and_its_graph_keeps_the_memory)
{
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    capture_stream_created(s, 0);
    ck_assert_int_eq(capture_stream_device(s), 0);
    ck_assert_int_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    capture_begun(s, cudaStreamCaptureModeGlobal, NULL);
    ck_assert_int_eq(device_captures(d), 1);
    gm_heap_t *heap = d->capture_heap;
    ck_assert_ptr_nonnull(heap);
    void *p = alloc_or_fail(8192);
    ck_assert_ptr_nonnull(pool_find_segment(heap, (uintptr_t)p));
    free_ok(p);
    cudaGraph_t graph = NULL;
    cudaError_t err = cudaStreamEndCapture(s, &graph);
    ck_assert_int_eq(err, cudaSuccess);
    capture_ended(s, err, graph);
    ck_assert_int_eq(device_captures(d), 0);
    struct fakecuda_stats fs;
    fakecuda_get_stats(0, &fs);
    ck_assert_uint_eq(fs.captures_invalidated, 0);
    ck_assert_uint_eq(fs.unsafe_calls, 0);
    void *q = alloc_or_fail(8192);
    ck_assert_msg(q != p, "the graph's block was handed out while the graph lives");
    free_ok(q);
    capture_graph_destroyed(graph);
    ck_assert_int_eq(cudaGraphDestroy(graph), cudaSuccess);
    ck_assert_ptr_nonnull(pool_find_segment(&d->arenas[0]->general, (uintptr_t)p));
}
END_TEST

/* Another thread's frees fence all the while (a fence per free, each querying every known
 * stream); captures begun and ended meanwhile on one of those streams all stay valid: no fence
 * queries or records on the stream between the runtime's begin and the capture being counted. */
typedef struct fencing {
    int stop;
    unsigned long long fences;
} fencing_t;

static void *fence_all_the_while(void *arg)
{
    fencing_t *f = arg;
    while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
        void *p = alloc_or_fail(4096);
        free_ok(p);
        gm_arena_t *a = d->arenas[0];
        pthread_mutex_lock(&a->lock);
        gm_ctx_t c;
        devctx_enter(d, &c);
        if (fencepol_issue(a, GMLOG_FENCE_BY_NEED) == 0)
            __atomic_add_fetch(&f->fences, 1, __ATOMIC_RELEASE);
        devctx_leave(&c);
        pthread_mutex_unlock(&a->lock);
    }
    return NULL;
}

static void wait_for_a_fence(fencing_t *f)
{
    unsigned long long seen = __atomic_load_n(&f->fences, __ATOMIC_ACQUIRE);
    double t0 = now_ms();
    while (__atomic_load_n(&f->fences, __ATOMIC_ACQUIRE) == seen && now_ms() - t0 < 10)
        sched_yield();
}

START_TEST(test_a_capture_being_begun_is_not_fenced)
{
    d->fence_frees = 1;
    d->fence_gap = 0;
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    capture_stream_created(s, 0);
    fencepol_stream_created(d, s, cudaStreamNonBlocking);
    fencing_t f = {0, 0};
    pthread_t th;
    pthread_create(&th, NULL, fence_all_the_while, &f);
    int valid = 0;
    for (int i = 0; i < 2000; i++) {
        gm_device_t *gate = capture_beginning(s);
        ck_assert_ptr_eq(gate, d);
        cudaError_t err = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
        capture_begin_done(gate, err, s, cudaStreamCaptureModeThreadLocal, NULL);
        ck_assert_int_eq(err, cudaSuccess);
        cudaGraph_t graph = NULL;
        err = cudaStreamEndCapture(s, &graph);
        capture_ended(s, err, graph);
        valid += err == cudaSuccess;
        if (graph) {
            capture_graph_destroyed(graph);
            cudaGraphDestroy(graph);
        }
        /* Every 8th capture, let the other thread fence in between (for at most 10 ms): on a
         * loaded machine back-to-back captures could otherwise refuse every fence it tries. */
        if (i % 8 == 7)
            wait_for_a_fence(&f);
    }
    __atomic_store_n(&f.stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    struct fakecuda_stats fs;
    fakecuda_get_stats(0, &fs);
    ck_assert_msg(f.fences > 0, "the other thread recorded no fence: the test tested nothing");
    ck_assert_msg(valid == 2000 && fs.captures_invalidated == 0,
                  "%d of 2000 captures stayed valid (%llu invalidated) beside %llu fences", valid,
                  fs.captures_invalidated, f.fences);
    fencepol_stream_destroyed(d, s);
    capture_stream_destroyed(s);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
}
END_TEST

Suite *capture_suite(void)
{
    Suite *s = suite_create("capture");
    TCase *tc = tcase_create("in process");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_a_capture_counts_until_it_ends_and_its_graph_keeps_the_memory);
    tcase_add_test(tc, test_a_capture_being_begun_is_not_fenced);
    suite_add_tcase(s, tc);
    tc = tcase_create("preload");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_capture_stays_valid_and_graph_memory_stays_private);
    suite_add_tcase(s, tc);
    return s;
}
