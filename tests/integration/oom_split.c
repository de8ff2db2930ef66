/* Analyzer workload, OOM cause "fragmentation" that a split limit cures: 400 MiB of weights, a
 * 400 MiB workspace used once and freed (a cached segment), then 12 MiB buffers that cut it into
 * pieces, every second one kept; the workspace asked for again does not fit, although live memory
 * plus the request fit in the device. GMSHIM_MAX_SPLIT keeps the large block whole. Run with
 * FAKECUDA_MEM=1G; prints "expected OOM" after it, "no OOM" when it fits (both exit 0). */
#include <cuda_runtime_api.h>
#include <stdio.h>

#define MiB (1u << 20)

static __attribute__((noinline)) cudaError_t workspace(void **p)
{
    return cudaMalloc(p, 400 * MiB);
}

int main(void)
{
    void *weights, *ws, *buf[20];
    if (cudaMalloc(&weights, 400 * MiB) != cudaSuccess || workspace(&ws) != cudaSuccess)
        return 1;
    cudaFree(ws);
    for (int i = 0; i < 20; i++)
        if (cudaMalloc(&buf[i], 12 * MiB) != cudaSuccess) {
            fprintf(stderr, "oom_split: buffer %d did not fit\n", i);
            return 1;
        }
    for (int i = 0; i < 20; i += 2)
        cudaFree(buf[i]);
    cudaError_t e = workspace(&ws);
    if (e == cudaErrorMemoryAllocation) {
        printf("oom_split: the workspace did not fit again: the expected OOM\n");
        return 0;
    }
    printf("oom_split: no OOM (%d)\n", (int)e);
    return e == cudaSuccess ? 0 : 1;
}
