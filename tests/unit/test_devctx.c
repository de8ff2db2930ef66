/* Device context lookups (shim/devctx.c) on the fake runtime with two devices: the current
 * device follows cudaSetDevice without asking cudaGetDevice each time, the pool's calls run on
 * its device in relaxed capture mode and leave the caller's device and mode as they were, and
 * the table lists pools in creation order. */
#include "devctx.h"
#include "device.h"
#include "options.h"
#include "suites.h"

#include "../fakecuda.h"

#include <stdlib.h>

static void setup(void)
{
    setenv("FAKECUDA_MEM", "64M", 1);
    setenv("FAKECUDA_DEVICES", "2", 1);
    unsetenv("GMSHIM_LOG");
    options_reset();
}

START_TEST(test_the_current_device_follows_cudaSetDevice)
{
    ck_assert_ptr_nonnull(device_get(0));
    ck_assert_int_eq(devctx_is_only(), 0);
    int dev = -1;
    ck_assert_int_eq(devctx_current(&dev), 0);
    ck_assert_int_eq(dev, 0);
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    ck_assert_int_eq(devctx_current(&dev), 0);
    ck_assert_int_eq(dev, 1);
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    ck_assert_int_eq(devctx_current(&dev), 0);
    ck_assert_int_eq(dev, 0);
}
END_TEST

START_TEST(test_a_pool_call_runs_on_its_device_and_restores_the_callers)
{
    gm_device_t *d1 = device_get(1);
    ck_assert_ptr_nonnull(d1);
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    gm_ctx_t c;
    devctx_enter(d1, &c);
    int dev = -1;
    ck_assert_int_eq(cudaGetDevice(&dev), cudaSuccess);
    ck_assert_int_eq(dev, 1);
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
    ck_assert_int_eq(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
    ck_assert_int_eq(mode, cudaStreamCaptureModeRelaxed);
    ck_assert_int_eq(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess); /* relaxed again */
    devctx_leave(&c);
    ck_assert_int_eq(cudaGetDevice(&dev), cudaSuccess);
    ck_assert_int_eq(dev, 0);
    mode = cudaStreamCaptureModeRelaxed;
    ck_assert_int_eq(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
    ck_assert_int_eq(mode, cudaStreamCaptureModeGlobal);
}
END_TEST

START_TEST(test_the_table_lists_pools_in_creation_order)
{
    ck_assert_int_eq(devctx_created_count(), 0);
    ck_assert_ptr_null(devctx_peek(1));
    gm_device_t *d1 = device_get(1), *d0 = device_get(0);
    ck_assert_int_eq(devctx_created_count(), 2);
    ck_assert_ptr_eq(devctx_at(0), d1);
    ck_assert_ptr_eq(devctx_at(1), d0);
    ck_assert_ptr_null(devctx_at(2));
    ck_assert_ptr_eq(devctx_peek(1), d1);
    ck_assert_ptr_null(devctx_peek(GM_MAX_DEVICES));
}
END_TEST

Suite *devctx_suite(void)
{
    Suite *s = suite_create("devctx");
    TCase *tc = tcase_create("two devices");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_the_current_device_follows_cudaSetDevice);
    tcase_add_test(tc, test_a_pool_call_runs_on_its_device_and_restores_the_callers);
    tcase_add_test(tc, test_the_table_lists_pools_in_creation_order);
    suite_add_tcase(s, tc);
    return s;
}
