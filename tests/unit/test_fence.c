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

Suite *fence_suite(void)
{
    Suite *s = suite_create("fence");
    TCase *tc = tcase_create("events");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_a_fence_waits_for_a_kernel_on_a_known_nonblocking_stream);
    tcase_add_test(tc, test_the_last_work_of_a_retired_stream_joins_the_next_fence);
    tcase_add_test(tc, test_fences_complete_in_order_and_forget_counts_them_done);
    suite_add_tcase(s, tc);
    return s;
}
