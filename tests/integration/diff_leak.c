/* Analyzer workload for `gmshim diff`: `diff_leak [steady|leak] [DEVICES] [marks|troughs]`.
 * Weights, then 12 steps whose activations are allocated at three lines and freed, on each of
 * DEVICES devices (default 1); each step is marked, unless `troughs` (then the analyzer finds
 * the steps itself, from the allocations each repeats). With `leak`, one more line keeps 8 MiB every step on the last device: two
 * runs of this one binary differ by that line alone. Run with FAKECUDA_MEM=1G (and
 * FAKECUDA_DEVICES=DEVICES). */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*mark_fn)(const char *);

static void *kept[64], *weights[8];
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
    int devices = argc > 2 ? atoi(argv[2]) : 1;
    if (devices < 1 || devices > 8)
        return 1;
    int marks = !(argc > 3 && !strcmp(argv[3], "troughs"));
    mark_fn mark = marks ? (mark_fn)dlsym(RTLD_DEFAULT, "gmshim_mark") : NULL;
    for (int d = 0; d < devices; d++)
        if (cudaSetDevice(d) != cudaSuccess || cudaMalloc(&weights[d], 64u << 20) != cudaSuccess)
            return 1;
    for (int step = 1; step <= 12; step++) {
        char label[32];
        snprintf(label, sizeof label, "step %d", step);
        if (mark)
            mark(label);
        for (int d = 0; d < devices; d++) {
            void *act[3] = {0};
            if (cudaSetDevice(d) != cudaSuccess || !forward(act))
                return 1;
            if (leak && d == devices - 1 && !keep_history())
                return 1;
            for (int i = 2; i >= 0; i--)
                cudaFree(act[i]);
        }
    }
    for (int i = 0; i < nkept; i++)
        cudaFree(kept[i]);
    for (int d = 0; d < devices; d++)
        cudaSetDevice(d), cudaFree(weights[d]);
    printf("diff_leak: 12 steps on %d device%s%s\n", devices, devices == 1 ? "" : "s", leak ? ", 8 MiB kept each" : "");
    return 0;
}
