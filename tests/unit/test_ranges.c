/* Growable ranges in the shim (shim/ranges.c, GMSHIM_SEGMENTS=vmm) on the fake runtime's driver
 * calls: pages from cuMemCreate/cuMemMap counted as reserved and usable by the runtime's copies
 * across separately mapped runs; an empty cache unmapping the idle ones; GMSHIM_DEVICE_LIMIT
 * counted in pages; the classic pool where the device lacks the API; IPC refused by CUDA. */
#include "capheap.h"
#include "devctx.h"
#include "device.h"
#include "fencepol.h"
#include "hit.h"
#include "options.h"
#include "ranges.h"
#include "segments.h"
#include "slowpath.h"
#include "suites.h"

#include "gmlog.h"
#include <cuda.h>
#include "model.h"
#include "reader.h"

#include "../fakecuda.h"
#include "pooltest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

/* The fixture under vmm, with one more variable set (name NULL: none). */
static void vmm_setup_with(const char *name, const char *value)
{
    setenv("GMSHIM_SEGMENTS", "vmm", 1);
    unsetenv("FAKECUDA_NO_VMM");
    if (name)
        setenv(name, value, 1);
    setup();
}

static void vmm_setup(void)
{
    vmm_setup_with(NULL, NULL);
}

static unsigned long long fake_bytes(void)
{
    struct fakecuda_stats fs;
    fakecuda_get_stats(0, &fs);
    return fs.bytes_in_use;
}

/* Frees, waits for the fences, and takes the blocks in. */
static void settle(void)
{
    gm_arena_t *a = d->arenas[0];
    cudaDeviceSynchronize();
    pthread_mutex_lock(&a->lock);
    while (fencepol_wait_oldest(a))
        ;
    fencepol_take_in(a);
    pthread_mutex_unlock(&a->lock);
}

START_TEST(test_vmm_pages_are_reserved_and_copies_cross_mapped_runs)
{
    ck_assert_ptr_nonnull(d->ranges);
    void *small = alloc_or_fail(MiB + 512); /* the large class: page 0 of its range */
    ck_assert_uint_eq(device_reserved(d), 2 * MiB);
    ck_assert_uint_eq(fake_bytes(), 2 * MiB);
    void *p = alloc_or_fail(4 * MiB); /* the rest of page 0 and two pages mapped now */
    ck_assert_uint_eq((uintptr_t)p, (uintptr_t)small + MiB + 512);
    ck_assert_uint_eq(device_reserved(d), 6 * MiB);
    ck_assert_int_eq(cudaMemset(p, 7, 4 * MiB), cudaSuccess);
    unsigned char back[16];
    ck_assert_int_eq(cudaMemcpy(back, (char *)p + 4 * MiB - 16, 16, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_uint_eq(back[15], 7);
    ck_assert_int_eq(cudaFree(p), cudaErrorInvalidValue); /* the runtime's cudaFree knows no range */
    cudaGetLastError();
    free_ok(p);
    free_ok(small);
}
END_TEST

START_TEST(test_an_empty_cache_unmaps_and_releases_the_idle_pages)
{
    void *a = alloc_or_fail(3 * MiB), *b = alloc_or_fail(300);
    free_ok(a);
    free_ok(b);
    settle();
    ck_assert_uint_eq(device_reserved(d), 6 * MiB); /* 2 pages large, 1 page small */
    slowpath_empty_cache(d, GMLOG_EMPTY_API);
    ck_assert_uint_eq(device_reserved(d), 0);
    ck_assert_uint_eq(fake_bytes(), 0);
    ck_assert_uint_eq(stats().reserved.current, 0);
    void *c = alloc_or_fail(3 * MiB); /* the same addresses, mapped again */
    ck_assert_ptr_eq(c, a);
    free_ok(c);
}
END_TEST

/* Every wholly free page goes back, also one that a live block's neighbours once shared. */
START_TEST(test_idle_pages_go_back_one_by_one)
{
    void *a = alloc_or_fail(30 * MiB), *b = alloc_or_fail(4 * MiB);
    free_ok(a);
    settle();
    ck_assert_uint_eq(slowpath_empty_cache(d, GMLOG_EMPTY_API), 30 * MiB);
    ck_assert_uint_eq(fake_bytes(), 4 * MiB);
    void *e = alloc_or_fail(20 * MiB); /* a's addresses again */
    ck_assert_ptr_eq(e, a);
    free_ok(e);
    settle();
    void *g = alloc_or_fail(4 * MiB); /* e's first two pages */
    ck_assert_ptr_eq(g, a);
    slowpath_empty_cache(d, GMLOG_EMPTY_API);
    ck_assert_uint_eq(fake_bytes(), 8 * MiB); /* e's other eight pages went */
    free_ok(g);
    settle();
    slowpath_empty_cache(d, GMLOG_EMPTY_API);
    ck_assert_uint_eq(fake_bytes(), 4 * MiB);
    free_ok(b);
}
END_TEST

/* Pages go back only once the device is done with them, whatever let the pool reuse a block
 * early: with GMSHIM_TRUST_STREAM_ORDER a freed block is free at once, with GMSHIM_GPU_ORDER once a
 * fence is ordered; a kernel queued on it still writes there. Without the wait before cuMemUnmap
 * the fake's stream faults on the unmapped page. */
static void release_under_queued_kernel(const char *option, const char *cap)
{
    if (cap)
        setenv("GMSHIM_CACHE_LIMIT", cap, 1);
    vmm_setup_with(option, "1");
    void *p = alloc_or_fail(4 * MiB);
    ck_assert_int_eq(fakecuda_launch(0, late_write, (char *)p + 3 * MiB, 300000), cudaSuccess);
    free_ok(p);
    if (cap) {
        void *q = alloc_or_fail(300); /* takes in the ordered fence; the cap then trims */
        free_ok(q);
    } else {
        slowpath_empty_cache(d, GMLOG_EMPTY_API);
    }
    fakecuda_drain(); /* the kernel ran on mapped memory, or this process is gone */
    unsetenv(option);
    unsetenv("GMSHIM_CACHE_LIMIT");
}

START_TEST(test_pages_go_back_only_after_the_device_is_done_trusting_stream_order)
{
    release_under_queued_kernel("GMSHIM_TRUST_STREAM_ORDER", NULL);
    ck_assert_uint_eq(device_reserved(d), 0);
}
END_TEST

START_TEST(test_pages_go_back_only_after_the_device_is_done_under_gpu_order)
{
    release_under_queued_kernel("GMSHIM_GPU_ORDER", "1M");
}
END_TEST

/* A capture that begins between the size a range wanted and the grow: the classic segment that
 * serves it holds the whole request. */
START_TEST(test_a_capture_beginning_mid_grow_gets_a_segment_for_the_whole_request)
{
    gm_arena_t *a = d->arenas[0];
    pthread_mutex_lock(&a->lock);
    size_t rounded = 50 * MiB;
    __atomic_store_n(&d->captures, 1, __ATOMIC_RELEASE);
    gm_block_t *b = NULL;
    ck_assert_int_eq(segments_grow(a, &a->general, 2 * MiB, rounded, rounded, &b), cudaSuccess);
    __atomic_store_n(&d->captures, 0, __ATOMIC_RELEASE);
    ck_assert_ptr_nonnull(b);
    ck_assert(!b->seg->vmm);
    ck_assert_uint_ge(b->seg->size, rounded);
    ck_assert_uint_eq(b->size, rounded);
    ck_assert_ptr_null(pool_check(&a->general));
    pthread_mutex_unlock(&a->lock);
}
END_TEST

START_TEST(test_the_device_cap_counts_pages_and_releases_idle_ones_first)
{
    __atomic_store_n(&d->limit, (size_t)8 << 20, __ATOMIC_RELAXED);
    void *a = alloc_or_fail(6 * MiB);
    void *p = NULL;
    ck_assert_int_eq(hit_alloc(d, 4 * MiB, 0, &p), cudaErrorMemoryAllocation);
    cudaGetLastError();
    free_ok(a);
    settle();
    void *b = alloc_or_fail(7 * MiB); /* a's pages serve it */
    free_ok(b);
    ck_assert_uint_le(device_reserved(d), 8 * MiB);
    slowpath_empty_cache(d, GMLOG_EMPTY_API);
    /* A hole too small for the request, its pages idle: they go back so that the tail fits. */
    void *hole = alloc_or_fail(4 * MiB), *live = alloc_or_fail(2 * MiB);
    free_ok(hole);
    settle();
    ck_assert_uint_eq(device_reserved(d), 6 * MiB);
    void *tail = alloc_or_fail(5 * MiB);
    ck_assert_uint_eq((uintptr_t)tail, (uintptr_t)live + 2 * MiB);
    ck_assert_uint_eq(device_reserved(d), 8 * MiB);
    ck_assert_uint_eq(fake_bytes(), 8 * MiB);
    free_ok(tail);
    free_ok(live);
}
END_TEST

START_TEST(test_a_device_without_the_api_gets_the_classic_pool)
{
    vmm_setup_with("FAKECUDA_NO_VMM", "1");
    ck_assert_ptr_null(d->ranges);
    void *p = alloc_or_fail(3 * MiB);
    struct fakecuda_stats fs;
    fakecuda_get_stats(0, &fs);
    ck_assert_uint_eq(fs.mallocs, 1); /* a classic segment from cudaMalloc */
    free_ok(p);
    unsetenv("FAKECUDA_NO_VMM");
}
END_TEST

/* A driver that offers the API but refuses to map (not for want of memory) costs the host nothing:
 * the request that met the refusal and every later one come from classic segments, the blocks
 * mapped before stay usable and are freed as ever. */
START_TEST(test_a_driver_that_refuses_to_map_gets_the_classic_pool)
{
    vmm_setup_with("FAKECUDA_VMM_MAP_REFUSE", "2");
    ck_assert_ptr_nonnull(d->ranges);
    void *p[5];
    for (int i = 0; i < 5; i++) {
        p[i] = alloc_or_fail(3 * MiB);
        ck_assert_int_eq(cudaMemset(p[i], i + 1, 3 * MiB), cudaSuccess);
    }
    ck_assert_int_eq(ranges_usable(d), 0);
    struct fakecuda_stats fs;
    fakecuda_get_stats(0, &fs);
    ck_assert_uint_ge(fs.mallocs, 1); /* classic segments from cudaMalloc after the refusal */
    for (int i = 0; i < 5; i++) {
        unsigned char c = 0;
        ck_assert_int_eq(cudaMemcpy(&c, (char *)p[i] + 3 * MiB - 1, 1, cudaMemcpyDeviceToHost), cudaSuccess);
        ck_assert_uint_eq(c, (unsigned)(i + 1));
        free_ok(p[i]);
    }
    unsetenv("FAKECUDA_VMM_MAP_REFUSE");
}
END_TEST

START_TEST(test_ipc_on_a_range_block_is_cudas_error_and_holds_nothing)
{
    void *p = alloc_or_fail(4 * MiB);
    int found = 0;
    ck_assert_int_eq(device_ipc_export(d, p, &found), -1);
    ck_assert_int_eq(found, 1);
    cudaIpcMemHandle_t h;
    ck_assert_int_eq(cudaIpcGetMemHandle(&h, p), cudaErrorInvalidValue);
    cudaGetLastError();
    free_ok(p);
    settle();
    void *q = alloc_or_fail(4 * MiB); /* not held: the same block again */
    ck_assert_ptr_eq(q, p);
    free_ok(q);
}
END_TEST

/* ---- programs under the preload ----------------------------------------------------------- */

#define VMM "GMSHIM_SEGMENTS=vmm", "GMSHIM_LOG=off"

/* The fragmentation OOMs of the analyzer's workloads: free space stranded in classic segments;
 * in a range it is one hole, or whole pages that go back, and the request fits. */
START_TEST(test_an_oom_that_fragmentation_caused_does_not_happen_under_vmm)
{
    classic_pool_test();
    static const char *const cases[][3] = {
        {"tests/integration/oom_fragmentation", "FAKECUDA_MEM=1G", NULL},
        {"tests/integration/oom_fragmentation", "FAKECUDA_MEM=1G", "GMSHIM_DEVICE_LIMIT=930M"},
        {"tests/integration/oom_capped_fragmentation", "FAKECUDA_MEM=1G", "GMSHIM_DEVICE_LIMIT=512M"},
        {"tests/integration/oom_split", "FAKECUDA_MEM=1G", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        for (int vmm = 0; vmm < 2; vmm++) {
            const char *env[] = {cases[i][1], "GMSHIM_LOG=off", vmm ? "GMSHIM_SEGMENTS=vmm" : "GMSHIM_SEGMENTS=classic",
                                 cases[i][2], NULL};
            char *out = NULL;
            run_built(cases[i][0], env, NULL, &out);
            int fits = strstr(out, "no OOM (0)") != NULL, oom = strstr(out, "the expected OOM") != NULL;
            ck_assert_msg(vmm ? fits : oom, "%s %s under %s: %s", cases[i][0], cases[i][2] ? cases[i][2] : "",
                          vmm ? "vmm" : "classic", out);
            free(out);
        }
    }
}
END_TEST

/* The pool's guarantees under vmm, by the programs that prove them for classic segments. */
START_TEST(test_a_freed_block_waits_for_the_kernel_still_using_it_under_vmm)
{
    RUN_OK("tests/integration/reuse_order", "FAKECUDA_MEM=1G", VMM);
}
END_TEST

START_TEST(test_captures_take_classic_segments_and_give_them_back_under_vmm)
{
    RUN_OK("tests/integration/capture", "FAKECUDA_MEM=1G", VMM);
    RUN_OK("tests/integration/trim_capture", "FAKECUDA_MEM=1G", "GMSHIM_EMPTY_CACHE_INTERVAL=0.05", VMM);
}
END_TEST

START_TEST(test_the_cache_limits_and_idle_release_work_in_pages)
{
    classic_pool_test();
    RUN_OK("tests/integration/cache_limit", "FAKECUDA_MEM=2G", "GMSHIM_CACHE_LIMIT=64M", VMM);
    RUN_OK("tests/integration/trim_idle", "FAKECUDA_MEM=1G", "GMSHIM_IDLE_RELEASE=0.6", "GMSHIM_EMPTY_CACHE_INTERVAL=0.1",
           VMM);
    RUN_OK("tests/integration/memgetinfo", "FAKECUDA_MEM=1G", VMM);
    const char *env[] = {"FAKECUDA_MEM=1G", "GMSHIM_DEVICE_LIMIT=256M", VMM, NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/memgetinfo", env, "cap", &out);
    ck_assert_msg(rc == 0, "memgetinfo cap exited %d:\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_threads_devices_forks_and_resets_work_under_vmm)
{
    RUN_OK("tests/integration/threads", "FAKECUDA_MEM=4G", VMM);
    RUN_OK("tests/integration/two_devices", "FAKECUDA_MEM=1G", "FAKECUDA_DEVICES=2", VMM);
    RUN_OK("tests/integration/fork_child", "FAKECUDA_MEM=1G", VMM);
    RUN_OK("tests/integration/device_reset", "FAKECUDA_MEM=1G", VMM);
    RUN_OK("tests/integration/thread_exit_alloc", "FAKECUDA_MEM=1G", VMM);
}
END_TEST

/* A bounded log under vmm: its checkpoints repeat the mapped pages, and its reader's figures agree
 * with themselves (every page freed was mapped, nothing reserved below what is live). */
START_TEST(test_a_wrapped_log_under_vmm_repeats_the_mapped_pages)
{
    const char *env[] = {"GMSHIM_SEGMENTS=vmm", "PAIRS=700000", "THREADS=4", "FAKECUDA_MEM=4G", NULL};
    rd_log_t lf;
    model_t m;
    const char *log = wrapped_log_model("vmm-ckpt.gmlog", env, 0, &lf, &m);
    ck_assert_uint_eq(m.dev[0]->reserved % (2 * MiB), 0);
    model_free(&m);
    rd_close(&lf);
    rd_open_path(&lf, log);
    rd_rec_t rec;
    unsigned long long pages = 0, other = 0;
    while (rd_next(&lf, &rec))
        if (rec.type == GMLOG_SEGMENT_ALLOC) {
            const gmlog_segment_t *sg = (const gmlog_segment_t *)rec.p;
            if ((rec.flags & GMLOG_SEG_VMM) && sg->size == 2 * MiB)
                pages++;
            else
                other++;
        }
    rd_close(&lf);
    ck_assert_uint_gt(pages, 0);
    ck_assert_uint_eq(other, 0);
    unlink(log);
}
END_TEST

/* Every device that can reach the pool's device gets read-write access to its pages. */
START_TEST(test_peers_get_access_to_every_page)
{
    vmm_setup_with("FAKECUDA_DEVICES", "3");
    ck_assert_ptr_nonnull(d->ranges);
    void *p = alloc_or_fail(6 * MiB);
    ck_assert_uint_eq(fakecuda_vmm_access(p), 0x7);
    ck_assert_uint_eq(fakecuda_vmm_access((char *)p + 5 * MiB), 0x7);
    free_ok(p);
    unsetenv("FAKECUDA_DEVICES");
}
END_TEST

/* The fake driver's virtual memory calls keep the real rules, or the tests above would prove
 * nothing about a GPU: 2 MiB granularity, no mapping over another, whole mappings unmapped, a
 * range freed only unmapped, memory counted from cuMemCreate to its release. */
START_TEST(test_the_fake_driver_keeps_the_granularity_rules)
{
    setenv("FAKECUDA_MEM", "512M", 1);
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    size_t g = 0;
    ck_assert_int_eq(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    ck_assert_uint_eq(g, 2 * MiB);
    CUdeviceptr base = 0;
    ck_assert_int_eq(cuMemAddressReserve(&base, 3 * MiB, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAddressReserve(&base, 64 * MiB, 0, 0, 0), CUDA_SUCCESS);
    ck_assert_uint_eq(base % (2 * MiB), 0);
    CUmemGenericAllocationHandle h;
    ck_assert_int_eq(cuMemCreate(&h, 1 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemCreate(&h, 4 * MiB, &prop, 0), CUDA_SUCCESS);
    ck_assert_uint_eq(fake_bytes(), 4 * MiB);
    ck_assert_int_eq(cuMemMap(base + MiB, 4 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemMap(base + 62 * MiB, 4 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* past the range */
    ck_assert_int_eq(cuMemMap(base, 4 * MiB, 0, h, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemMap(base + 2 * MiB, 2 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* over it */
    CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    ck_assert_int_eq(cuMemSetAccess(base, 6 * MiB, &acc, 1), CUDA_ERROR_INVALID_VALUE); /* not all mapped */
    ck_assert_int_eq(cuMemSetAccess(base, 4 * MiB, &acc, 1), CUDA_SUCCESS);
    ck_assert_int_eq(cudaMemset((void *)base, 1, 4 * MiB), cudaSuccess);
    ck_assert_int_eq(cudaFree((void *)base), cudaErrorInvalidValue);
    cudaGetLastError();
    ck_assert_int_eq(cuMemRelease(h), CUDA_SUCCESS);
    ck_assert_uint_eq(fake_bytes(), 4 * MiB); /* still mapped */
    ck_assert_int_eq(cuMemUnmap(base, 2 * MiB), CUDA_ERROR_INVALID_VALUE); /* half a mapping */
    ck_assert_int_eq(cuMemAddressFree(base, 64 * MiB), CUDA_ERROR_INVALID_VALUE); /* still mapped */
    ck_assert_int_eq(cuMemUnmap(base, 4 * MiB), CUDA_SUCCESS);
    ck_assert_uint_eq(fake_bytes(), 0);
    ck_assert_int_eq(cuMemAddressFree(base, 64 * MiB), CUDA_SUCCESS);
}
END_TEST

Suite *ranges_suite(void)
{
    Suite *s = suite_create("ranges");
    TCase *tc = tcase_create("in process");
    tcase_add_checked_fixture(tc, vmm_setup, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_vmm_pages_are_reserved_and_copies_cross_mapped_runs);
    tcase_add_test(tc, test_an_empty_cache_unmaps_and_releases_the_idle_pages);
    tcase_add_test(tc, test_idle_pages_go_back_one_by_one);
    tcase_add_test(tc, test_a_capture_beginning_mid_grow_gets_a_segment_for_the_whole_request);
    tcase_add_test(tc, test_the_device_cap_counts_pages_and_releases_idle_ones_first);
    tcase_add_test(tc, test_a_driver_that_refuses_to_map_gets_the_classic_pool);
    tcase_add_test(tc, test_ipc_on_a_range_block_is_cudas_error_and_holds_nothing);
    suite_add_tcase(s, tc);
    TCase *prog = tcase_create("under the preload");
    tcase_set_timeout(prog, 300);
    tcase_add_test(prog, test_an_oom_that_fragmentation_caused_does_not_happen_under_vmm);
    tcase_add_test(prog, test_a_freed_block_waits_for_the_kernel_still_using_it_under_vmm);
    tcase_add_test(prog, test_captures_take_classic_segments_and_give_them_back_under_vmm);
    tcase_add_test(prog, test_the_cache_limits_and_idle_release_work_in_pages);
    tcase_add_test(prog, test_threads_devices_forks_and_resets_work_under_vmm);
    tcase_add_test(prog, test_a_wrapped_log_under_vmm_repeats_the_mapped_pages);
    suite_add_tcase(s, prog);
    TCase *bare = tcase_create("own settings");
    tcase_set_timeout(bare, 30);
    tcase_add_test(bare, test_a_device_without_the_api_gets_the_classic_pool);
    tcase_add_test(bare, test_the_fake_driver_keeps_the_granularity_rules);
    tcase_add_test(bare, test_peers_get_access_to_every_page);
    tcase_add_test(bare, test_pages_go_back_only_after_the_device_is_done_trusting_stream_order);
    tcase_add_test(bare, test_pages_go_back_only_after_the_device_is_done_under_gpu_order);
    suite_add_tcase(s, bare);
    return s;
}
