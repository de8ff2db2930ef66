/* Analyzer workload for `gmshim diff`: weights, then 12 marked steps whose activations are
 * allocated at three lines and freed. With the argument `leak`, one more line keeps 8 MiB every
 * step: two runs of this one binary differ by that line alone. Run with FAKECUDA_MEM=1G. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int (*mark_fn)(const char *);

static void *kept[64];
static int nkept;

static __attribute__((noinline)) int forward(void *act[3])
{
    return cudaMalloc(&act[0], 32u << 20) == cudaSuccess && cudaMalloc(&act[1], 16u << 20) == cudaSuccess &&
           cudaMalloc(&act[2], 8u << 20) == cudaSuccess;
}

static __attribute__((noinline)) int keep_history(void)
{
    return cudaMalloc(&kept[nkept++], 8u << 20) == cudaSuccess; /* the leaking line */
}

int main(int argc, char **argv)
{
    int leak = argc > 1 && !strcmp(argv[1], "leak");
    mark_fn mark = (mark_fn)dlsym(RTLD_DEFAULT, "gmshim_mark");
    void *weights;
    if (cudaMalloc(&weights, 64u << 20) != cudaSuccess)
        return 1;
    for (int step = 1; step <= 12; step++) {
        char label[32];
        snprintf(label, sizeof label, "step %d", step);
        if (mark)
            mark(label);
        void *act[3] = {0};
        if (!forward(act))
            return 1;
        if (leak && !keep_history())
            return 1;
        for (int i = 2; i >= 0; i--)
            cudaFree(act[i]);
    }
    for (int i = 0; i < nkept; i++)
        cudaFree(kept[i]);
    cudaFree(weights);
    printf("diff_leak: 12 steps%s\n", leak ? ", 8 MiB kept each" : "");
    return 0;
}
