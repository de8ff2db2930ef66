/* Analyzer workload, OOM cause "fragmentation" under GMSHIM_DEVICE_LIMIT: 75 blocks of 6 MiB
 * fill 25 segments of 20 MiB three at a time; the first and last of each three are freed, so
 * every segment keeps a 6 MiB block between holes of 6 and 8 MiB; a 16 MiB request then finds no
 * hole and no room under the cap, although live memory plus the request fit in it. Run with
 * GMSHIM_DEVICE_LIMIT=512M (any FAKECUDA_MEM above it); prints "expected OOM" after it, "no OOM"
 * when it fits (both exit 0). */
#include <cuda_runtime_api.h>
#include <stdio.h>

#define MiB (1u << 20)

int main(void)
{
    static void *b[75];
    int n = 75;
    for (int i = 0; i < n; i++)
        if (cudaMalloc(&b[i], 6 * MiB) != cudaSuccess) {
            fprintf(stderr, "oom_capped_fragmentation: block %d did not fit\n", i);
            return 1;
        }
    for (int i = 0; i < n; i++)
        if (i % 3 != 1)
            cudaFree(b[i]);
    void *big;
    cudaError_t e = cudaMalloc(&big, 16 * MiB);
    if (e == cudaErrorMemoryAllocation) {
        printf("oom_capped_fragmentation: 16 MiB did not fit beside %d MiB live: the expected OOM\n", n / 3 * 6);
        return 0;
    }
    printf("oom_capped_fragmentation: no OOM (%d)\n", (int)e);
    return e == cudaSuccess ? 0 : 1;
}
