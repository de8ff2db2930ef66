/* Analyzer workload, OOM cause "outside": 600 MiB taken straight from the runtime, around the
 * pool (as a library with its own static cudart would), then pooled allocations until the rest
 * is full. Run with FAKECUDA_MEM=1G; exits 0 after the expected OOM. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>

typedef cudaError_t (*malloc_fn)(void **, size_t);

int main(void)
{
    /* The runtime's own cudaMalloc, not the preloaded one. */
    void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
    malloc_fn raw = rt ? (malloc_fn)dlsym(rt, "cudaMalloc") : NULL;
    void *outside;
    if (!raw || raw(&outside, 600u << 20) != cudaSuccess) {
        fprintf(stderr, "oom_outside: no direct runtime cudaMalloc\n");
        return 1;
    }
    static void *p[64];
    for (int i = 0; i < 64; i++) {
        cudaError_t e = cudaMalloc(&p[i], 64u << 20);
        if (e == cudaErrorMemoryAllocation) {
            printf("oom_outside: buffer %d did not fit: the expected OOM\n", i);
            return 0;
        }
        if (e != cudaSuccess)
            return 1;
    }
    fprintf(stderr, "oom_outside: no OOM\n");
    return 1;
}
