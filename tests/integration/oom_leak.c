/* Analyzer workload, OOM cause "leak": weights, then marked steps that free their activations
 * but keep one 40 MiB tensor each, until the device is full. Run with FAKECUDA_MEM=1G; exits 0
 * after the expected OOM. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>

typedef int (*mark_fn)(const char *);

static void *kept[256];
static int nkept;

static __attribute__((noinline)) cudaError_t remember_output(void)
{
    return cudaMalloc(&kept[nkept], 40u << 20) == cudaSuccess ? (nkept++, cudaSuccess) : cudaErrorMemoryAllocation;
}

int main(void)
{
    mark_fn mark = (mark_fn)dlsym(RTLD_DEFAULT, "gmshim_mark");
    void *weights;
    if (cudaMalloc(&weights, 128u << 20) != cudaSuccess)
        return 1;
    for (int step = 1; step < 200; step++) {
        char label[32];
        snprintf(label, sizeof label, "step %d", step);
        if (mark)
            mark(label);
        void *act[4] = {0};
        cudaError_t e = cudaSuccess;
        for (int i = 0; i < 4 && e == cudaSuccess; i++)
            e = cudaMalloc(&act[i], 64u << 20);
        if (e == cudaSuccess)
            e = remember_output();
        for (int i = 3; i >= 0; i--)
            if (act[i])
                cudaFree(act[i]);
        if (e == cudaErrorMemoryAllocation) {
            printf("oom_leak: step %d: the expected OOM (%d outputs kept)\n", step, nkept);
            return 0;
        }
        if (e != cudaSuccess)
            return 1;
    }
    fprintf(stderr, "oom_leak: no OOM\n");
    return 1;
}
