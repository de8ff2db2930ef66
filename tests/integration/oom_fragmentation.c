/* Analyzer workload, OOM cause "fragmentation": 9 MiB blocks fill 20 MiB segments two by two
 * until the device is nearly full; every second block is freed, leaving 11 MiB holes in every
 * segment and no whole free segment; then a 12 MiB request cannot be served although half the
 * pool is free. Run with FAKECUDA_MEM=1G; exits 0 after the expected OOM. */
#include <cuda_runtime_api.h>
#include <stdio.h>

#define MiB (1u << 20)

int main(void)
{
    size_t free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess)
        return 1;
    int segments = (int)(free_b / (20 * MiB));
    static void *blocks[4096];
    int n = 0;
    for (int i = 0; i < segments * 2 && n < 4096; i++) {
        if (cudaMalloc(&blocks[n], 9 * MiB) != cudaSuccess) {
            fprintf(stderr, "oom_fragmentation: block %d did not fit\n", i);
            return 1;
        }
        n++;
    }
    for (int i = 1; i < n; i += 2)
        cudaFree(blocks[i]);
    void *big;
    cudaError_t e = cudaMalloc(&big, 12 * MiB);
    if (e == cudaErrorMemoryAllocation) {
        printf("oom_fragmentation: 12 MiB did not fit with %d MiB free in the pool: the expected OOM\n",
               (n / 2) * 11);
        return 0;
    }
    fprintf(stderr, "oom_fragmentation: no OOM (%d)\n", (int)e);
    return 1;
}
