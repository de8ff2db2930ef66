/* Preload plus GMSHIM_CUPTI=1 against the fake runtime, driver and CUPTI: the pool's segments
 * reach the driver (the fake driver's cudaMalloc plays the runtime) but must not be logged as
 * foreign; a library with its own runtime and the program's own driver calls must. Modes:
 * "full" (default), "threads" (8 threads racing foreign and pooled calls), "plain" (a few
 * pooled calls; the unavailable/busy cases), "bench N" (the cost of observing a foreign
 * allocation: docs/cupti.md). tests/unit/test_cupti.c reads the log. */
#include "itest.h"
#include "fake_cupti/fake_cupti.h"

#include <cupti.h>
#include <pthread.h>
#include <time.h>

#define MiB ((size_t)1 << 20)

static void pooled_calls(void)
{
    void *p[3];
    for (int i = 0; i < 3; i++)
        CUDA_OK(cudaMalloc(&p[i], MiB));
    for (int i = 0; i < 3; i++)
        CUDA_OK(cudaFree(p[i]));
    void *big;
    CUDA_OK(cudaMalloc(&big, 64 * MiB));
    CUDA_OK(cudaFree(big));
}

static void *racer(void *arg)
{
    (void)arg;
    for (int i = 0; i < 200; i++) {
        void *ws = fakeblas_workspace(MiB);
        CHECK(ws != NULL, "workspace");
        void *p;
        CUDA_OK(cudaMalloc(&p, 4096));
        CHECK(fakeblas_release(ws) == CUDA_SUCCESS, "release");
        CUDA_OK(cudaFree(p));
    }
    return NULL;
}

/* "bench N": N foreign 1 MiB allocation pairs (a library's own driver calls), the mean time. */
static int bench(long n)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++)
        CHECK(fakeblas_release(fakeblas_workspace(MiB)) == CUDA_SUCCESS, "pair %ld", i);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
    printf("pairs=%ld ns_per_pair=%.0f\n", n, ns / (double)n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "full";
    if (argc > 2 && !strcmp(mode, "bench")) {
        void *p;
        CUDA_OK(cudaMalloc(&p, 512)); /* gmshim's init (and CUPTI's start) out of the timing */
        CUDA_OK(cudaFree(p));
        return bench(atol(argv[2]));
    }
    pooled_calls();
    unsigned long long seen = fake_cuda_delivered(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2);
    printf("segment_callbacks=%llu\n", seen);
    if (!strcmp(mode, "plain"))
        return 0;
    /* Enter and exit of at least the two segments: CUPTI did see the pool's own calls. */
    CHECK(seen >= 4, "the pool's segment allocations reached CUPTI only %llu times", seen);

    if (!strcmp(mode, "threads")) {
        /* One foreign allocation on one thread first: the stack module table learns the newly
         * loaded libcupti before the race starts. */
        CHECK(fakeblas_release(fakeblas_workspace(MiB)) == CUDA_SUCCESS, "warm-up");
        pthread_t t[8];
        for (int i = 0; i < 8; i++)
            CHECK(pthread_create(&t[i], NULL, racer, NULL) == 0, "pthread_create");
        for (int i = 0; i < 8; i++)
            pthread_join(t[i], NULL);
        return 0;
    }

    void *ws = fakeblas_workspace(8 * MiB);           /* foreign, libfakeblas.so, kept */
    CHECK(ws != NULL, "workspace");
    CUdeviceptr own;
    CHECK(cuMemAlloc(&own, 3 * MiB) == CUDA_SUCCESS, "cuMemAlloc");   /* foreign, the program */
    CHECK(cuMemFree(own) == CUDA_SUCCESS, "cuMemFree");
    void *ws2 = fakeblas_workspace(4 * MiB);
    CHECK(ws2 != NULL, "workspace 2");
    /* Freed through the hooked cudaFree: the hook forwards it and CUPTI logs the free. */
    CUDA_OK(cudaFree(ws2));
    CUmemGenericAllocationHandle h1, h2;
    CUdeviceptr v1 = fakeblas_vmm_map(2 * MiB, &h1), v2 = fakeblas_vmm_map(2 * MiB, &h2);
    CHECK(v1 && v2, "vmm");
    fakeblas_vmm_unmap(v1, 2 * MiB, h1);              /* v2 stays mapped */
    CUdeviceptr huge;
    CHECK(cuMemAlloc(&huge, (size_t)1 << 50) == CUDA_ERROR_OUT_OF_MEMORY, "huge");
    printf("ws=%p own=0x%llx ws2=%p v1=0x%llx v2=0x%llx\n", ws, (unsigned long long)own, ws2,
           (unsigned long long)v1, (unsigned long long)v2);
    return 0;
}
