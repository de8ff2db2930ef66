// Built with nvcc's DEFAULT static cudart, whose cudaMalloc a preload never sees: under
// CUDA_INJECTION64_PATH=libgmshim.so the log must still show the 3 x 64 MiB that
// cupti_static_leak_here() never frees (192 MiB) at that function; everything else is freed.
// "bench N": N cudaMalloc + cudaFree pairs of 2 MiB, the mean time (docs/cupti.md: the cost).
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_common.h"

__global__ void fill(char *p, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = 1;
}

extern "C" __attribute__((noinline)) void cupti_static_leak_here(void **out)
{
    for (int i = 0; i < 3; i++) {
        CK(cudaMalloc(&out[i], (size_t)64 << 20));
        fill<<<256, 256>>>((char *)out[i], 65536);
    }
    CK(cudaDeviceSynchronize());
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "bench")) {
        long n = atol(argv[2]);
        void *p;
        CK(cudaMalloc(&p, 512)); // context creation out of the timing
        CK(cudaFree(p));
        double t0 = now_s();
        for (long i = 0; i < n; i++) {
            CK(cudaMalloc(&p, (size_t)2 << 20));
            CK(cudaFree(p));
        }
        printf("pairs=%ld us_per_pair=%.2f\n", n, (now_s() - t0) * 1e6 / (double)n);
        return 0;
    }
    void *leaked[3];
    cupti_static_leak_here(leaked);
    void *tmp;
    CK(cudaMalloc(&tmp, (size_t)16 << 20));
    CK(cudaFree(tmp));
    printf("leaked=3x64MiB at cupti_static_leak_here\n");
    return 0;
}
