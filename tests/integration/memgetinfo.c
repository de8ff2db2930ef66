/* cudaMemGetInfo counts what the pool caches as free, and a device cap shows as the total. */
#include "itest.h"

int main(int argc, char **argv)
{
    /* FAKECUDA_MEM=1G; with argv[1] = "cap": GMSHIM_DEVICE_LIMIT=256M */
    int capped = argc > 1 && !strcmp(argv[1], "cap");
    size_t f0, t0;
    CUDA_OK(cudaMemGetInfo(&f0, &t0));
    void *p;
    CUDA_OK(cudaMalloc(&p, 100 << 20));
    size_t f1, t1;
    CUDA_OK(cudaMemGetInfo(&f1, &t1));
    CHECK(f1 <= f0 - (100u << 20), "free %zu -> %zu after allocating 100 MiB", f0, f1);
    CUDA_OK(cudaFree(p));
    size_t f2, t2;
    CUDA_OK(cudaMemGetInfo(&f2, &t2));
    CHECK(f2 == f0, "free after the free: %zu, before: %zu (cached bytes must count as free)", f2, f0);
    if (capped) {
        CHECK(t0 == 256u << 20, "total under a 256 MiB cap: %zu", t0);
        CHECK(f0 <= t0, "free %zu above the cap", f0);
        void *big;
        CHECK(cudaMalloc(&big, 300 << 20) == cudaErrorMemoryAllocation, "300 MiB under a 256 MiB cap");
        CHECK(cudaGetLastError() == cudaErrorMemoryAllocation, "last error under the cap");
        CUDA_OK(cudaMalloc(&big, 200 << 20));
        CUDA_OK(cudaFree(big));
    } else {
        CHECK(t0 == 1u << 30, "total %zu", t0);
    }
    printf("ok\n");
    return 0;
}
