/* Analyzer workload, OOM cause "leak", without marks: a training step's forward (activations of
 * three sizes at three lines), a 16 MiB output kept in a list, a backward, the activations
 * freed, until the device is full; the steps are found from the allocations each step repeats.
 * Run with FAKECUDA_MEM=1G; exits 0 after the expected OOM, printing the step it came in. */
#include <cuda_runtime_api.h>
#include <stdio.h>

#define MiB (1u << 20)

static void *kept[1024];
static int nkept;

static __attribute__((noinline)) cudaError_t activation(void **p, size_t bytes)
{
    return cudaMalloc(p, bytes);
}

static __attribute__((noinline)) cudaError_t gradient(void **p)
{
    return cudaMalloc(p, 6 * MiB);
}

static __attribute__((noinline)) cudaError_t keep_output(void)
{
    cudaError_t e = cudaMalloc(&kept[nkept], 16 * MiB);
    if (e == cudaSuccess)
        nkept++;
    return e;
}

int main(void)
{
    void *weights;
    if (cudaMalloc(&weights, 64 * MiB) != cudaSuccess)
        return 1;
    for (int step = 1; step < 1024; step++) {
        static const size_t sizes[] = {12 * MiB, 12 * MiB, 3 * MiB, 1 * MiB};
        void *act[4] = {0}, *grad = NULL;
        cudaError_t e = cudaSuccess;
        for (int i = 0; i < 4 && e == cudaSuccess; i++)
            e = activation(&act[i], sizes[i]);
        if (e == cudaSuccess)
            e = keep_output();
        if (e == cudaSuccess)
            e = gradient(&grad);
        if (grad)
            cudaFree(grad);
        for (int i = 3; i >= 0; i--)
            if (act[i])
                cudaFree(act[i]);
        if (e == cudaErrorMemoryAllocation) {
            printf("oom_unmarked_leak: step %d: the expected OOM (%d outputs kept)\n", step, nkept);
            return 0;
        }
        if (e != cudaSuccess)
            return 1;
    }
    printf("oom_unmarked_leak: no OOM\n");
    return 1;
}
