/* Analyzer workload for `gmshim top` on a log still being written: weights, then STEPS marked
 * steps whose activations are allocated and freed while one line keeps KEEP bytes each step;
 * prints "ready STEPS KEEP" once all of it is in the log, then sleeps until it is killed. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

#define STEPS 8
#define KEEP (4u << 20)

typedef int (*mark_fn)(const char *);

static void *kept[STEPS];

static __attribute__((noinline)) int keep_state(int step)
{
    return cudaMalloc(&kept[step], KEEP) == cudaSuccess; /* the growing line */
}

int main(void)
{
    mark_fn mark = (mark_fn)dlsym(RTLD_DEFAULT, "gmshim_mark");
    void *weights, *act;
    if (!mark || cudaMalloc(&weights, 64u << 20) != cudaSuccess)
        return 1;
    for (int step = 0; step < STEPS; step++) {
        char label[32];
        snprintf(label, sizeof label, "step %d", step + 1);
        mark(label);
        if (cudaMalloc(&act, 32u << 20) != cudaSuccess || !keep_state(step))
            return 1;
        cudaFree(act);
    }
    printf("ready %d %u\n", STEPS, KEEP);
    fflush(stdout);
    for (;;)
        pause();
}
