/* GMSHIM_WARN workloads, one per argument: a job that leaks 16 MiB a step in leak_step() until its
 * OOM, with marks ("leak-marks") or without ("leak-troughs": steps of 25 ms, longer than the
 * shim's readings; "leak-brief-troughs": steps of 1 ms, many to a reading; "leak-lean-troughs": a step's only
 * activation a 16 MiB scratch, which the kept bytes outgrow tenfold within a few steps;
 * "leak-curriculum-troughs" and "leak-curriculum-brief-troughs": a step's first activation grows by
 * 32 MiB a step for 40 steps, twice the leak's rate, and never outlives its step: run with
 * FAKECUDA_MEM=4G); jobs that must never
 * be warned about: constant steps ("steady"), a cache that fills for some steps then stays
 * ("warmup"), steps of random sizes with marks ("noisy-marks") and without ("noisy-troughs",
 * "noisy-brief-troughs"). Run with FAKECUDA_MEM=1G; linked with
 * -rdynamic so that the shim names leak_step. Prints "step N" at each step's start, then "oom at
 * step N" or "done N steps", unbuffered: in order with the shim's warning on one pipe. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB (1u << 20)

typedef int (*mark_fn)(const char *);

int leak_step(void);
int cache_grow(size_t bytes);

static void *kept[512];
static int nkept;

__attribute__((noinline)) int leak_step(void)
{
    return cudaMalloc(&kept[nkept], 16 * MiB) == cudaSuccess ? (nkept++, 0) : -1; /* the leaking line */
}

__attribute__((noinline)) int cache_grow(size_t bytes)
{
    return bytes && cudaMalloc(&kept[nkept++], bytes) != cudaSuccess ? -1 : 0;
}

/* One step's activations: n blocks of the sizes given, held for `hold_us`, then freed. */
static int activations(const size_t *sizes, int n, int (*extra)(void), unsigned hold_us)
{
    void *act[8] = {0};
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        rc = cudaMalloc(&act[i], sizes[i]) == cudaSuccess ? 0 : -1;
    if (!rc && extra)
        rc = extra();
    if (hold_us)
        usleep(hold_us);
    for (int i = n - 1; i >= 0; i--)
        if (act[i])
            cudaFree(act[i]);
    return rc;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    mark_fn mark = (mark_fn)dlsym(RTLD_DEFAULT, "gmshim_mark");
    int marks = !strstr(mode, "troughs");
    unsigned hold = marks ? 0 : strstr(mode, "brief") ? 1000 : 25000;
    int leak = !strncmp(mode, "leak", 4), noisy = !strncmp(mode, "noisy", 5), warmup = !strcmp(mode, "warmup");
    void *weights, *state = NULL;
    srand(42);
    setvbuf(stdout, NULL, _IONBF, 0); /* in order with the shim's stderr on one pipe */
    if (!mark || cudaMalloc(&weights, 64 * MiB) != cudaSuccess)
        return 1;
    size_t grow = 8 * MiB;
    int steps = leak ? 200 : 60;
    for (int step = 1; step <= steps; step++) {
        char label[32];
        snprintf(label, sizeof label, "step %d", step);
        printf("%s\n", label);
        if (marks)
            mark(label);
        size_t sizes[6] = {32 * MiB, 32 * MiB, 8 * MiB};
        int n = 3;
        if (strstr(mode, "lean"))
            sizes[0] = 16 * MiB, n = 1;
        if (strstr(mode, "curriculum"))
            sizes[0] = (size_t)(step < 40 ? step : 40) * 32 * MiB;
        if (noisy) {
            /* a state that changes size every step, and activations of random sizes */
            if (state)
                cudaFree(state);
            if (cudaMalloc(&state, (size_t)(1 + rand() % 48) * MiB) != cudaSuccess)
                return 1;
            n = 1 + rand() % 6;
            for (int i = 0; i < n; i++)
                sizes[i] = (size_t)(1 + rand() % 64) * MiB;
        }
        if (warmup) {
            /* eight steps of 8 MiB, then ever smaller additions, then nothing */
            if (cache_grow(step <= 8 ? grow : (grow >>= 1) >= 64 * 1024 ? grow : 0))
                return 1;
        }
        if (activations(sizes, n, leak ? leak_step : NULL, hold)) {
            printf("oom at step %d\n", step);
            return leak ? 0 : 1;
        }
    }
    printf("done %d steps\n", steps);
    return leak ? 1 : 0;
}
