/* The background trimmer (shim/trim.c), under the preload: the cache cap held, after the GPU
 * and after a capture; idle segments released after the interval; no call during a capture. */
#include "suites.h"

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

START_TEST(test_cache_limit_is_never_exceeded)
{
    RUN_OK("tests/integration/cache_limit", "FAKECUDA_MEM=2G", "GMSHIM_CACHE_LIMIT=64M");
}
END_TEST

/* After the last free no allocation comes to poll the fences: the trimmer does, every 10 ms
 * (docs/options.md), and fences the frees itself when they did not (GMSHIM_FENCE_FREES=0 and
 * bytes far past what is freed). The bound is 25 poll periods, for loaded and sanitized runs. */
START_TEST(test_cache_limit_holds_once_the_gpu_is_done_without_another_allocation)
{
    const char *fenced[] = {"FAKECUDA_MEM=2G", "GMSHIM_CACHE_LIMIT=64M", NULL};
    const char *unfenced[] = {"FAKECUDA_MEM=2G", "GMSHIM_CACHE_LIMIT=64M", "GMSHIM_FENCE_FREES=0",
                              "GMSHIM_FENCE_BYTES=16G", NULL};
    const char *const *envs[] = {fenced, unfenced};
    for (int i = 0; i < 2; i++) {
        char *out = NULL;
        int rc = run_built("tests/integration/cache_limit", envs[i], "idle", &out);
        ck_assert_msg(rc == 0, "%s: exit %d:\n%s", i ? "frees without a fence" : "fenced frees", rc, out);
        free(out);
    }
}
END_TEST

START_TEST(test_cache_limit_waits_for_the_end_of_a_capture)
{
    const char *env[] = {"FAKECUDA_MEM=2G", "GMSHIM_CACHE_LIMIT=64M", NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/cache_limit", env, "capture", &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_idle_segments_go_back_after_the_interval_not_before)
{
    classic_pool_test();
    RUN_OK("tests/integration/trim_idle", "FAKECUDA_MEM=1G", "GMSHIM_IDLE_RELEASE=0.6",
           "GMSHIM_EMPTY_CACHE_INTERVAL=0.1");
}
END_TEST

START_TEST(test_trimmer_makes_no_driver_call_during_a_capture)
{
    RUN_OK("tests/integration/trim_capture", "FAKECUDA_MEM=1G", "GMSHIM_EMPTY_CACHE_INTERVAL=0.05");
}
END_TEST

/* tests/integration/caching_release in `mode` (NULL: the default) with one more setting. */
static void caching_release(const char *mode, const char *setting)
{
    const char *env[] = {"FAKECUDA_MEM=2G", setting, NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/caching_release", env, mode, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    free(out);
}

/* PyTorch's cache under gmshim: its segments are the driver's at their exact size, and its
 * cudaFree (from libc10_cuda.so, a stand-in here) gives them back at once, as without gmshim;
 * the program's own freed segment stays in gmshim's cache. */
START_TEST(test_a_caching_allocators_segments_are_the_drivers_at_their_exact_size)
{
    caching_release(NULL, NULL);
}
END_TEST

START_TEST(test_with_pytorchs_cache_off_its_frees_stay_in_the_pool)
{
    classic_pool_test();
    caching_release("own", "PYTORCH_NO_CUDA_MEMORY_CACHING=1");
}
END_TEST

START_TEST(test_a_caching_allocators_segments_obey_the_device_limit_after_gmshims_cache)
{
    caching_release("limit", "GMSHIM_DEVICE_LIMIT=1G");
}
END_TEST

START_TEST(test_a_caching_allocators_segment_during_a_relaxed_capture_is_the_drivers)
{
    caching_release("capture", NULL);
}
END_TEST

Suite *trim_suite(void)
{
    Suite *s = suite_create("trim");
    TCase *tc = tcase_create("preload");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_cache_limit_is_never_exceeded);
    tcase_add_test(tc, test_cache_limit_holds_once_the_gpu_is_done_without_another_allocation);
    tcase_add_test(tc, test_cache_limit_waits_for_the_end_of_a_capture);
    tcase_add_test(tc, test_idle_segments_go_back_after_the_interval_not_before);
    tcase_add_test(tc, test_trimmer_makes_no_driver_call_during_a_capture);
    tcase_add_test(tc, test_a_caching_allocators_segments_are_the_drivers_at_their_exact_size);
    tcase_add_test(tc, test_a_caching_allocators_segments_obey_the_device_limit_after_gmshims_cache);
    tcase_add_test(tc, test_with_pytorchs_cache_off_its_frees_stay_in_the_pool);
    tcase_add_test(tc, test_a_caching_allocators_segment_during_a_relaxed_capture_is_the_drivers);
    suite_add_tcase(s, tc);
    return s;
}
