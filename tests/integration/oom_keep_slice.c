/* Analyzer workload, OOM cause "leak", without marks: each step allocates 96 MiB of temporaries
 * and frees them, but keeps a 6 MiB slice (a copy of part of its output) in a list; the pool's
 * low-water troughs between steps rise by the slice until the device is full. Run with
 * FAKECUDA_MEM=1G; exits 0 after the expected OOM. */
#include <cuda_runtime_api.h>
#include <stdio.h>

#define MiB (1u << 20)

static void *kept[1024];
static int nkept;

static __attribute__((noinline)) cudaError_t keep_slice(void)
{
    cudaError_t e = cudaMalloc(&kept[nkept], 6 * MiB);
    if (e == cudaSuccess)
        nkept++;
    return e;
}

int main(void)
{
    for (int step = 0; step < 1024; step++) {
        void *tmp[4] = {0};
        cudaError_t e = cudaSuccess;
        for (int i = 0; i < 4 && e == cudaSuccess; i++)
            e = cudaMalloc(&tmp[i], 24 * MiB);
        if (e == cudaSuccess)
            e = keep_slice();
        for (int i = 0; i < 4; i++)
            if (tmp[i])
                cudaFree(tmp[i]);
        if (e == cudaErrorMemoryAllocation) {
            printf("oom_keep_slice: step %d: the expected OOM (%d slices kept)\n", step, nkept);
            return 0;
        }
        if (e != cudaSuccess)
            return 1;
    }
    printf("oom_keep_slice: no OOM\n");
    return 1;
}
