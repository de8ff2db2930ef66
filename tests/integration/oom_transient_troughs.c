/* Analyzer workload, OOM cause "transient" without marks: 300 MiB of weights, then steps whose
 * temporaries (all freed at the step's end, so the pool's low-water troughs mark the steps)
 * grow by 64 MiB each step until one step's own memory does not fit. Run with FAKECUDA_MEM=1G;
 * exits 0 after the expected OOM. */
#include <cuda_runtime_api.h>
#include <stdio.h>

static __attribute__((noinline)) cudaError_t temporary(void **p)
{
    return cudaMalloc(p, 64u << 20);
}

int main(void)
{
    void *weights;
    if (cudaMalloc(&weights, 300u << 20) != cudaSuccess)
        return 1;
    static void *t[64];
    for (int step = 1; step < 64; step++) {
        for (int i = 0; i < step; i++) {
            cudaError_t e = temporary(&t[i]);
            if (e == cudaErrorMemoryAllocation) {
                printf("oom_transient_troughs: step %d, temporary %d: the expected OOM\n", step, i);
                return 0;
            }
            if (e != cudaSuccess)
                return 1;
        }
        for (int i = step - 1; i >= 0; i--)
            cudaFree(t[i]);
    }
    printf("oom_transient_troughs: no OOM\n");
    return 1;
}
