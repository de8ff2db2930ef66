/* A full cache does not make an allocation fail: gmshim releases it and retries; a real OOM
 * returns cudaErrorMemoryAllocation and leaves it as the last error, as the runtime does. */
#include "itest.h"

int main(void)
{
    /* FAKECUDA_MEM=256M */
    void *p[6];
    for (int i = 0; i < 6; i++)
        CUDA_OK(cudaMalloc(&p[i], 40 << 20));
    for (int i = 0; i < 6; i++)
        CUDA_OK(cudaFree(p[i]));
    gmshim_stats_t st;
    gm_stats(0, &st);
    CHECK(st.reserved.current == 240ull << 20, "reserved %llu", st.reserved.current);
    /* 200 MiB does not fit beside the cached 240 MiB: the cache must go first. */
    void *big;
    CUDA_OK(cudaMalloc(&big, 200 << 20));
    CHECK(cudaGetLastError() == cudaSuccess, "a recovered allocation left an error behind");
    gm_stats(0, &st);
    CHECK(st.oom_retries >= 1, "oom_retries %llu", st.oom_retries);
    CHECK(st.ooms == 0, "ooms %llu", st.ooms);
    struct fakecuda_stats f = fake_stats(0);
    CHECK(f.bytes_in_use == 200ull << 20, "driver holds %llu", f.bytes_in_use);
    /* Now a request that cannot fit at all. */
    void *q = (void *)0x1;
    cudaError_t e = cudaMalloc(&q, 100 << 20);
    CHECK(e == cudaErrorMemoryAllocation, "got %d", (int)e);
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation, "last error not set by the failed cudaMalloc");
    CHECK(cudaGetLastError() == cudaSuccess, "last error not cleared by cudaGetLastError");
    gm_stats(0, &st);
    CHECK(st.ooms == 1, "ooms %llu", st.ooms);
    CUDA_OK(cudaFree(big));
    CUDA_OK(cudaMalloc(&q, 100 << 20)); /* fits again (the freed block is reused after a wait) */
    CUDA_OK(cudaFree(q));
    printf("ok\n");
    return 0;
}
