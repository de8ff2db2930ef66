/* Fences (shim/fence.c) on the fake runtime: a fence is complete only once the work issued
 * before it has run on the legacy stream and on every non-blocking stream it knows, and the
 * last work of a retired stream joins the next fence. Each test runs in its own process. */
#include "fence.h"
#include "suites.h"

#include "../fakecuda.h"

#include <stdlib.h>
#include <string.h>

static gm_fences_t f;

static void setup(void)
{
    setenv("FAKECUDA_MEM", "64M", 1);
    memset(&f, 0, sizeof f);
    ck_assert_int_eq(cudaFree(NULL), cudaSuccess);
}

static void mark(void *p)
{
    __atomic_store_n((int *)p, 1, __ATOMIC_RELEASE);
}

/* Creates n non-blocking streams that the fences know. */
static void known_streams(cudaStream_t *s, int n)
{
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking), cudaSuccess);
        fence_add_stream(&f, s[i]);
    }
}

START_TEST(test_a_fence_waits_for_a_kernel_on_a_known_nonblocking_stream)
{
    cudaStream_t s;
    known_streams(&s, 1);
    int ran = 0;
    ck_assert_int_eq(fakecuda_launch(s, mark, &ran, 100000), cudaSuccess);
    ck_assert_int_eq(fence_issue(&f, 1), cudaSuccess);
    ck_assert_uint_eq(f.issued, 1);
    ck_assert_int_eq(fence_poll(&f), cudaSuccess);
    ck_assert_msg(f.done == 0 || __atomic_load_n(&ran, __ATOMIC_ACQUIRE),
                  "fence seen complete while the kernel before it still ran");
    fakecuda_drain();
    ck_assert_int_eq(fence_poll(&f), cudaSuccess);
    ck_assert_uint_eq(f.done, 1);
    ck_assert_int_eq(fence_outstanding(&f), 0);
}
END_TEST

START_TEST(test_the_last_work_of_a_retired_stream_joins_the_next_fence)
{
    cudaStream_t s;
    known_streams(&s, 1);
    int ran = 0;
    ck_assert_int_eq(fakecuda_launch(s, mark, &ran, 100000), cudaSuccess);
    fence_retire_stream(&f, s);
    fence_remove_stream(&f, s);
    ck_assert_int_eq(f.nstreams, 0);
    ck_assert_int_eq(fence_issue(&f, 1), cudaSuccess);
    ck_assert_int_eq(fence_poll(&f), cudaSuccess);
    ck_assert_msg(f.done == 0 || __atomic_load_n(&ran, __ATOMIC_ACQUIRE),
                  "a fence after the stream's retirement did not wait for its last kernel");
    fakecuda_drain();
    ck_assert_int_eq(fence_poll(&f), cudaSuccess);
    ck_assert_uint_eq(f.done, 1);
}
END_TEST

START_TEST(test_fences_complete_in_order_and_forget_counts_them_done)
{
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(fence_issue(&f, 1), cudaSuccess);
    ck_assert_uint_eq(f.issued, 3);
    ck_assert_ptr_nonnull(fence_oldest_pending_event(&f));
    fence_forget(&f);
    ck_assert_uint_eq(f.done, f.issued);
    ck_assert_int_eq(fence_outstanding(&f), 0);
    ck_assert_ptr_null(fence_oldest_pending_event(&f));
}
END_TEST

static unsigned long long event_queries(void)
{
    struct fakecuda_stats st;
    fakecuda_get_stats(0, &st);
    return st.event_queries;
}

static void issue_ordered(int n)
{
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(fence_issue(&f, 0), cudaSuccess);
        ck_assert_int_eq(fence_order(&f), cudaSuccess);
    }
}

/* The ring's fence i (0 = the oldest outstanding). */
static gm_fence_t *fence_at(int i)
{
    return &f.ring[(f.head + i) % f.ring_cap];
}

static unsigned long long stream_queries(void)
{
    struct fakecuda_stats st;
    fakecuda_get_stats(0, &st);
    return st.stream_queries;
}

static void busy_streams(cudaStream_t *s, int n, int *flag, unsigned us)
{
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(fakecuda_launch(s[i], mark, flag, us), cudaSuccess);
}

/* Under GPU order a fence asks no stream whether it is idle: it records an event on each. */
START_TEST(test_a_fence_that_does_not_ask_records_an_event_on_every_stream)
{
    enum { NS = 5 };
    cudaStream_t s[NS];
    known_streams(s, NS);
    unsigned long long q0 = stream_queries();
    ck_assert_int_eq(fence_issue(&f, 0), cudaSuccess);
    ck_assert_uint_eq(stream_queries() - q0, 0);
    ck_assert_int_eq(fence_at(0)->nev, 1 + NS);
    fakecuda_drain(); /* the events recorded, the streams are idle again */
    ck_assert_int_eq(fence_issue(&f, 1), cudaSuccess);
    ck_assert_uint_eq(stream_queries() - q0, NS);
    ck_assert_int_eq(fence_at(1)->nev, 1); /* the idle streams need none */
}
END_TEST

/* Under GPU order the legacy stream's event after its waits answers for a fence's events on busy
 * streams: once the GPU is through, one query retires a fence of 1 + NS events. */
START_TEST(test_a_gpu_order_poll_retires_a_fence_of_many_events_in_one_query)
{
    enum { NS = 12 };
    cudaStream_t s[NS];
    known_streams(s, NS);
    int ran = 0;
    busy_streams(s, NS, &ran, 200000);
    issue_ordered(1);
    ck_assert_msg(!__atomic_load_n(&ran, __ATOMIC_ACQUIRE), "the kernels ended too soon for the test");
    ck_assert_int_eq(fence_at(0)->nev, 1 + NS);
    ck_assert_ptr_nonnull(fence_at(0)->all);
    ck_assert_int_eq(fence_poll(&f), cudaSuccess);
    ck_assert_uint_eq(f.done, 0);
    fakecuda_drain();
    unsigned long long q0 = event_queries();
    ck_assert_int_eq(fence_poll(&f), cudaSuccess);
    ck_assert_uint_eq(f.done, 1);
    ck_assert_uint_eq(event_queries() - q0, 1);
}
END_TEST

/* A GPU-order fence is not complete while work on its streams still runs, though its event on the
 * legacy stream completed and the fence before it did. */
START_TEST(test_a_gpu_order_fence_waits_for_its_streams_though_its_legacy_event_completed)
{
    enum { NS = 12 };
    cudaStream_t s[NS];
    known_streams(s, NS);
    int first = 0, second = 0;
    /* Long kernels: a slow machine (TSan) must still find them running when the fences come. */
    busy_streams(s, NS, &first, 200000);
    issue_ordered(1); /* the streams are busy: an event on each */
    ck_assert_msg(!__atomic_load_n(&first, __ATOMIC_ACQUIRE), "the kernels ended too soon for the test");
    fakecuda_drain(); /* fence 1 has completed */
    busy_streams(s, NS, &second, 1000000);
    issue_ordered(2); /* fence 2's legacy event completes at once; its events on the streams do not */
    ck_assert_int_eq(cudaEventSynchronize(fence_at(1)->ev[0]), cudaSuccess);
    unsigned long long q0 = event_queries();
    ck_assert_int_eq(fence_poll(&f), cudaSuccess);
    unsigned long long asked = event_queries() - q0;
    ck_assert_msg(!__atomic_load_n(&second, __ATOMIC_ACQUIRE), "the kernels ended too soon for the test");
    ck_assert_uint_eq(f.done, 1);
    ck_assert_msg(asked <= 2, "%llu event queries to retire one fence and find the next running", asked);
    fakecuda_drain();
    ck_assert_int_eq(fence_poll(&f), cudaSuccess);
    ck_assert_uint_eq(f.done, 3);
}
END_TEST

/* With the GPU far behind, a GPU-order poll costs what the walk from the oldest fence costs: a
 * query of the oldest fence's event and one of the next, not one per fence outstanding. */
START_TEST(test_a_gpu_order_poll_far_behind_the_gpu_asks_little)
{
    issue_ordered(1);
    fakecuda_drain();
    int ran = 0;
    ck_assert_int_eq(fakecuda_launch(cudaStreamLegacy, mark, &ran, 1000000), cudaSuccess);
    issue_ordered(39);
    unsigned long long q0 = event_queries();
    ck_assert_int_eq(fence_poll(&f), cudaSuccess);
    unsigned long long asked = event_queries() - q0;
    ck_assert_msg(!__atomic_load_n(&ran, __ATOMIC_ACQUIRE), "the kernel ended too soon for the test");
    ck_assert_uint_eq(f.done, 1);
    ck_assert_msg(asked <= 3, "%llu event queries for %d fences", asked, fence_outstanding(&f) + 1);
    fakecuda_drain();
    q0 = event_queries();
    ck_assert_int_eq(fence_poll(&f), cudaSuccess);
    ck_assert_uint_eq(f.done, 40);
    ck_assert_msg(event_queries() - q0 <= 2, "%llu event queries once the GPU is through",
                  event_queries() - q0);
}
END_TEST

/* Without GPU order no legacy event stands for the fences before it: a poll walks the oldest
 * fences' events and stops at the first still running, whatever the newer ones say. */
START_TEST(test_a_poll_without_gpu_order_walks_from_the_oldest_fence)
{
    cudaStream_t s;
    known_streams(&s, 1);
    int ran = 0;
    ck_assert_int_eq(fakecuda_launch(s, mark, &ran, 300000), cudaSuccess);
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(fence_issue(&f, 1), cudaSuccess);
    ck_assert_int_eq(fence_poll(&f), cudaSuccess);
    ck_assert_msg(f.done == 0 || __atomic_load_n(&ran, __ATOMIC_ACQUIRE),
                  "a fence counted complete while the stream's kernel before it still ran");
    fakecuda_drain();
    ck_assert_int_eq(fence_poll(&f), cudaSuccess);
    ck_assert_uint_eq(f.done, 20);
}
END_TEST

Suite *fence_suite(void)
{
    Suite *s = suite_create("fence");
    TCase *tc = tcase_create("events");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_a_fence_waits_for_a_kernel_on_a_known_nonblocking_stream);
    tcase_add_test(tc, test_the_last_work_of_a_retired_stream_joins_the_next_fence);
    tcase_add_test(tc, test_fences_complete_in_order_and_forget_counts_them_done);
    tcase_add_test(tc, test_a_fence_that_does_not_ask_records_an_event_on_every_stream);
    tcase_add_test(tc, test_a_gpu_order_poll_retires_a_fence_of_many_events_in_one_query);
    tcase_add_test(tc, test_a_gpu_order_fence_waits_for_its_streams_though_its_legacy_event_completed);
    tcase_add_test(tc, test_a_gpu_order_poll_far_behind_the_gpu_asks_little);
    tcase_add_test(tc, test_a_poll_without_gpu_order_walks_from_the_oldest_fence);
    suite_add_tcase(s, tc);
    return s;
}
