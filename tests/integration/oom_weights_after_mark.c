/* Analyzer workload, OOM cause "capacity": one mark ("load"), then weights loaded after it
 * until the device is full. The memory of the current iteration is all there is: with one
 * iteration in the log, nothing says it would have been freed, so it is capacity, not a transient
 * peak. Run with FAKECUDA_MEM=1G; exits 0 after the expected OOM. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>

typedef int (*mark_fn)(const char *);

static __attribute__((noinline)) cudaError_t load_weight(void **p)
{
    return cudaMalloc(p, 48u << 20);
}

int main(void)
{
    mark_fn mark = (mark_fn)dlsym(RTLD_DEFAULT, "gmshim_mark");
    if (mark)
        mark("load");
    static void *w[256];
    for (int i = 0; i < 256; i++) {
        cudaError_t e = load_weight(&w[i]);
        if (e == cudaErrorMemoryAllocation) {
            printf("oom_weights_after_mark: weight %d did not fit: the expected OOM\n", i);
            return 0;
        }
        if (e != cudaSuccess)
            return 1;
    }
    printf("oom_weights_after_mark: no OOM\n");
    return 1;
}
