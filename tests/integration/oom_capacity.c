/* Analyzer workload, OOM cause "capacity": persistent "weights" allocated until the device is
 * full, no marks and no iterations, so everything live counts as persistent. Run with
 * FAKECUDA_MEM=1G under the preload; exits 0 after the expected OOM. */
#include <cuda_runtime_api.h>
#include <stdio.h>

static __attribute__((noinline)) cudaError_t load_layer(void **p, size_t bytes)
{
    return cudaMalloc(p, bytes);
}

int main(void)
{
    static void *layers[1024];
    for (int i = 0; i < 1024; i++) {
        cudaError_t e = load_layer(&layers[i], 64u << 20);
        if (e == cudaErrorMemoryAllocation) {
            printf("oom_capacity: layer %d did not fit: the expected OOM\n", i);
            for (int k = 0; k < i; k++)
                cudaFree(layers[k]);
            return 0;
        }
        if (e != cudaSuccess) {
            fprintf(stderr, "oom_capacity: cudaMalloc: %s\n", cudaGetErrorString(e));
            return 1;
        }
    }
    fprintf(stderr, "oom_capacity: no OOM\n");
    return 1;
}
