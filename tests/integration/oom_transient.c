/* Analyzer workload, OOM cause "transient": small persistent weights, then marked steps whose
 * activations (all freed at the end of each step) grow with the step until one step's own
 * memory no longer fits. Run with FAKECUDA_MEM=1G; exits 0 after the expected OOM. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>

typedef int (*mark_fn)(const char *);

static __attribute__((noinline)) cudaError_t activation(void **p)
{
    return cudaMalloc(p, 50u << 20);
}

int main(void)
{
    mark_fn mark = (mark_fn)dlsym(RTLD_DEFAULT, "gmshim_mark");
    void *weights;
    if (cudaMalloc(&weights, 200u << 20) != cudaSuccess)
        return 1;
    static void *act[64];
    for (int step = 1; step <= 4; step++) {
        char label[32];
        snprintf(label, sizeof label, "step %d", step);
        if (mark)
            mark(label);
        int n = 6 * step; /* 300 MiB, 600 MiB, 900 MiB of activations */
        for (int i = 0; i < n; i++) {
            cudaError_t e = activation(&act[i]);
            if (e == cudaErrorMemoryAllocation) {
                printf("oom_transient: step %d, activation %d: the expected OOM\n", step, i);
                for (int k = 0; k < i; k++)
                    cudaFree(act[k]);
                cudaFree(weights);
                return 0;
            }
            if (e != cudaSuccess)
                return 1;
        }
        for (int i = n - 1; i >= 0; i--)
            cudaFree(act[i]);
    }
    fprintf(stderr, "oom_transient: no OOM\n");
    return 1;
}
