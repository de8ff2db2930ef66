/* Injection mode against the fake driver and fake CUPTI: run without the preload and with
 * CUDA_INJECTION64_PATH=libgmshim.so, it makes every kind of driver allocation gmshim watches
 * (as a static-cudart program, a library with its own runtime, a VMM user would) and leaks 3 x
 * 64 MiB at cupti_leak_here; tests/unit/test_cupti.c reads the log. "plain" only allocates;
 * "bench N" times N driver allocation pairs (docs/cupti.md: the cost). */
#include "itest.h"
#include "fake_cupti/fake_cupti.h"

#include <cupti.h>
#include <time.h>

#define MiB ((size_t)1 << 20)

static CUdeviceptr leaked[3];

__attribute__((noinline)) void cupti_leak_here(void);
__attribute__((noinline)) void cupti_leak_here(void)
{
    for (int i = 0; i < 3; i++) {
        CUresult r = cuMemAlloc(&leaked[i], 64 * MiB);
        CHECK(r == CUDA_SUCCESS, "cuMemAlloc(64 MiB) = %d", (int)r);
    }
}

static void vmm_pair_unmapped_at_once(void)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h[2];
    CUdeviceptr va = 0;
    for (int i = 0; i < 2; i++)
        CHECK(cuMemCreate(&h[i], 2 * MiB, &prop, 0) == CUDA_SUCCESS, "cuMemCreate");
    CHECK(cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0) == CUDA_SUCCESS, "reserve");
    for (int i = 0; i < 2; i++)
        CHECK(cuMemMap(va + (CUdeviceptr)i * 2 * MiB, 2 * MiB, 0, h[i], 0) == CUDA_SUCCESS, "map");
    /* Released while mapped: the memory stays until the unmap, as in CUDA. */
    for (int i = 0; i < 2; i++)
        CHECK(cuMemRelease(h[i]) == CUDA_SUCCESS, "release");
    CHECK(cuMemUnmap(va, 4 * MiB) == CUDA_SUCCESS, "unmap of both mappings at once");
    CHECK(cuMemAddressFree(va, 4 * MiB) == CUDA_SUCCESS, "address free");
    printf("vmm_pair=0x%llx\n", (unsigned long long)va);
}

/* "bench N": N cuMemAlloc + cuMemFree pairs of 1 MiB, the mean time of a pair. */
static int bench(long n)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
        CUdeviceptr p;
        CHECK(cuMemAlloc(&p, MiB) == CUDA_SUCCESS && cuMemFree(p) == CUDA_SUCCESS, "pair %ld", i);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
    printf("pairs=%ld ns_per_pair=%.0f\n", n, ns / (double)n);
    return 0;
}

int main(int argc, char **argv)
{
    int plain = argc > 1 && !strcmp(argv[1], "plain");
    CHECK(cuInit(0) == CUDA_SUCCESS, "cuInit");
    if (argc > 2 && !strcmp(argv[1], "bench"))
        return bench(atol(argv[2]));
    Dl_info self;
    CHECK(dladdr((void *)cupti_leak_here, &self), "dladdr");
    printf("leak_fn_offset=0x%lx\n", (unsigned long)((uintptr_t)cupti_leak_here - (uintptr_t)self.dli_fbase));
    if (plain) {
        CUdeviceptr p;
        CHECK(cuMemAlloc(&p, MiB) == CUDA_SUCCESS && cuMemFree(p) == CUDA_SUCCESS, "alloc/free");
        printf("delivered=%llu\n", fake_cuda_delivered(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2));
        return 0;
    }
    /* The driver made gmshim's hooks global: one reached through them passes through, logged
     * once (as pass-through), never pooled in injection mode. */
    void *gm = dlopen(getenv("CUDA_INJECTION64_PATH"), RTLD_NOW | RTLD_NOLOAD);
    CHECK(gm != NULL, "the injection library is loaded");
    cudaError_t (*hooked_malloc)(void **, size_t) = (cudaError_t(*)(void **, size_t))dlsym(gm, "cudaMalloc");
    cudaError_t (*hooked_free)(void *) = (cudaError_t(*)(void *))dlsym(gm, "cudaFree");
    CHECK(hooked_malloc && hooked_free, "gmshim's hooks");
    void *h = NULL;
    CUDA_OK(hooked_malloc(&h, 4096));
    CUDA_OK(hooked_free(h));

    cupti_leak_here();

    /* The runtime calling the driver (a static cudart does the same). */
    void *rt = NULL;
    CUDA_OK(cudaMalloc(&rt, MiB));
    CUDA_OK(cudaFree(rt));

    /* A library with its own runtime: kept, so it is live at the end. */
    void *ws = fakeblas_workspace(8 * MiB);
    CHECK(ws != NULL, "fakeblas_workspace");

    /* Another device. */
    fake_cuda_set_device(1);
    CUdeviceptr d1;
    CHECK(cuMemAlloc(&d1, 2 * MiB) == CUDA_SUCCESS && cuMemFree(d1) == CUDA_SUCCESS, "device 1");
    fake_cuda_set_device(0);

    CUdeviceptr a, m, pch;
    CHECK(cuMemAllocAsync(&a, MiB, 0) == CUDA_SUCCESS && cuMemFreeAsync(a, 0) == CUDA_SUCCESS, "async");
    CHECK(cuMemAllocManaged(&m, MiB, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS && cuMemFree(m) == CUDA_SUCCESS,
          "managed");
    size_t pitch = 0;
    CHECK(cuMemAllocPitch(&pch, &pitch, 1000, 10, 4) == CUDA_SUCCESS && pitch == 1024, "pitch %zu", pitch);
    CHECK(cuMemFree(pch) == CUDA_SUCCESS, "pitch free");
    void *host = NULL;
    CHECK(cuMemAllocHost(&host, 4096) == CUDA_SUCCESS && cuMemFreeHost(host) == CUDA_SUCCESS, "host");

    vmm_pair_unmapped_at_once();
    CUmemGenericAllocationHandle kept;
    CUdeviceptr vk = fakeblas_vmm_map(2 * MiB, &kept);
    CHECK(vk != 0, "fakeblas_vmm_map");
    printf("vmm_kept=0x%llx\n", (unsigned long long)vk);

    /* Failures: an OOM record each; the driver's figures in the first. */
    CUdeviceptr huge;
    CHECK(cuMemAlloc(&huge, (size_t)1 << 50) == CUDA_ERROR_OUT_OF_MEMORY, "huge cuMemAlloc");
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle hh;
    CHECK(cuMemCreate(&hh, (size_t)1 << 50, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY, "huge cuMemCreate");

    printf("delivered=%llu\n", fake_cuda_delivered(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2));
    return 0;
}
