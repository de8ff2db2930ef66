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

START_TEST(test_a_fence_waits_for_a_kernel_on_a_known_nonblocking_stream)
{
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    fences_add_stream(&f, s);
    int ran = 0;
    ck_assert_int_eq(fakecuda_launch(s, mark, &ran, 100000), cudaSuccess);
    ck_assert_int_eq(fences_issue(&f), cudaSuccess);
    ck_assert_uint_eq(f.issued, 1);
    ck_assert_int_eq(fences_poll(&f), cudaSuccess);
    ck_assert_msg(f.done == 0 || __atomic_load_n(&ran, __ATOMIC_ACQUIRE),
                  "fence seen complete while the kernel before it still ran");
    fakecuda_drain();
    ck_assert_int_eq(fences_poll(&f), cudaSuccess);
    ck_assert_uint_eq(f.done, 1);
    ck_assert_int_eq(fences_outstanding(&f), 0);
}
END_TEST

START_TEST(test_the_last_work_of_a_retired_stream_joins_the_next_fence)
{
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    fences_add_stream(&f, s);
    int ran = 0;
    ck_assert_int_eq(fakecuda_launch(s, mark, &ran, 100000), cudaSuccess);
    fences_retire_stream(&f, s);
    fences_remove_stream(&f, s);
    ck_assert_int_eq(f.nstreams, 0);
    ck_assert_int_eq(fences_issue(&f), cudaSuccess);
    ck_assert_int_eq(fences_poll(&f), cudaSuccess);
    ck_assert_msg(f.done == 0 || __atomic_load_n(&ran, __ATOMIC_ACQUIRE),
                  "a fence after the stream's retirement did not wait for its last kernel");
    fakecuda_drain();
    ck_assert_int_eq(fences_poll(&f), cudaSuccess);
    ck_assert_uint_eq(f.done, 1);
}
END_TEST

START_TEST(test_fences_complete_in_order_and_forget_counts_them_done)
{
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(fences_issue(&f), cudaSuccess);
    ck_assert_uint_eq(f.issued, 3);
    ck_assert_ptr_nonnull(fences_oldest_pending_event(&f));
    fences_forget(&f);
    ck_assert_uint_eq(f.done, f.issued);
    ck_assert_int_eq(fences_outstanding(&f), 0);
    ck_assert_ptr_null(fences_oldest_pending_event(&f));
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
        ck_assert_int_eq(fences_issue(&f), cudaSuccess);
        ck_assert_int_eq(fences_order(&f), cudaSuccess);
    }
}

/* Under GPU order, with the GPU still short of the newest fences, a poll finds the newest
 * complete one by its legacy event in a few queries (not one per fence) and retires the fences
 * before it; once the GPU is through, one query retires all but the newest. */
START_TEST(test_a_gpu_order_poll_bisects_the_legacy_events)
{
    issue_ordered(40);
    fakecuda_drain(); /* fences 1..40 have completed */
    int ran = 0;
    ck_assert_int_eq(fakecuda_launch(cudaStreamLegacy, mark, &ran, 300000), cudaSuccess);
    issue_ordered(24); /* fences 41..64 wait behind the kernel */
    ck_assert_int_eq(fences_outstanding(&f), 64);
    unsigned long long q0 = event_queries();
    ck_assert_int_eq(fences_poll(&f), cudaSuccess);
    unsigned long long asked = event_queries() - q0;
    ck_assert_msg(!__atomic_load_n(&ran, __ATOMIC_ACQUIRE), "the kernel ended too soon for the test");
    ck_assert_msg(asked <= 8, "%llu event queries for 64 fences", asked);
    ck_assert_uint_eq(f.done, 39); /* fence 40, the newest complete, stays for a later poll */
    ck_assert_int_eq(fences_outstanding(&f), 25);
    fakecuda_drain();
    q0 = event_queries();
    ck_assert_int_eq(fences_poll(&f), cudaSuccess);
    ck_assert_uint_eq(event_queries() - q0, 1);
    ck_assert_uint_eq(f.done, 63);
    ck_assert_int_eq(fences_poll(&f), cudaSuccess); /* the last one alone: its events are walked */
    ck_assert_uint_eq(f.done, 64);
    ck_assert_int_eq(fences_outstanding(&f), 0);
}
END_TEST

/* Without GPU order no legacy event stands for the fences before it: a poll walks the oldest
 * fences' events and stops at the first still running, whatever the newer ones say. */
START_TEST(test_a_poll_without_gpu_order_walks_from_the_oldest_fence)
{
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    fences_add_stream(&f, s);
    int ran = 0;
    ck_assert_int_eq(fakecuda_launch(s, mark, &ran, 300000), cudaSuccess);
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(fences_issue(&f), cudaSuccess);
    ck_assert_int_eq(fences_poll(&f), cudaSuccess);
    ck_assert_msg(f.done == 0 || __atomic_load_n(&ran, __ATOMIC_ACQUIRE),
                  "a fence counted complete while the stream's kernel before it still ran");
    fakecuda_drain();
    ck_assert_int_eq(fences_poll(&f), cudaSuccess);
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
    tcase_add_test(tc, test_a_gpu_order_poll_bisects_the_legacy_events);
    tcase_add_test(tc, test_a_poll_without_gpu_order_walks_from_the_oldest_fence);
    suite_add_tcase(s, tc);
    return s;
}
