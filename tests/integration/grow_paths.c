/* Every turn of the grow sequence (common/grow.c) in one run, for the test that replays it and
 * checks the replay comes to the shim's outcomes: a grow that fits only once the cache went back
 * (the driver's OOM, or GMSHIM_DEVICE_LIMIT's release), one that fits only as the tight segment,
 * one that fails; a caching allocator's exact segments (its code in libc10_cuda.so) that fit at
 * once, fail with nothing to release, and fit once gmshim's cache went back. Run with
 * FAKECUDA_MEM=1G, or FAKECUDA_MEM=2G GMSHIM_DEVICE_LIMIT=1G: the same turns. Prints the shim's
 * failures and peak reserved: "ooms N peak_reserved N". */
#include "itest.h"

cudaError_t standin_segment_alloc(void **p, size_t size);
cudaError_t standin_segment_free(void *p);

#define MiB ((size_t)1 << 20)
#define NFILL 45

static void *must(size_t size)
{
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, size));
    return p;
}

static void *must_exact(size_t size)
{
    void *p = NULL;
    CUDA_OK(standin_segment_alloc(&p, size));
    return p;
}

/* A failed attempt the retry recovered from must not reach the program. */
static void recovered(const char *what)
{
    CHECK(cudaGetLastError() == cudaSuccess, "%s: the retried attempt's error reached the program", what);
}

static void must_fail(cudaError_t err, const char *what)
{
    CHECK(err == cudaErrorMemoryAllocation, "%s: %d, not out of memory", what, (int)err);
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation, "%s: the last error is not the failure's", what);
}

int main(void)
{
    void *fill[NFILL], *p;
    for (int i = 0; i < NFILL; i++)
        fill[i] = must(20 * MiB); /* 900 MiB, a segment each */
    for (int i = 0; i < NFILL; i += 5)
        CUDA_OK(cudaFree(fill[i])); /* 180 MiB of whole segments cached */
    CUDA_OK(cudaDeviceSynchronize());
    void *big = must(300 * MiB);     /* only once the cache went back: 1020 MiB */
    recovered("300 MiB");
    must_fail(cudaMalloc(&p, 30 * MiB), "30 MiB beyond the capacity");
    void *tail = must(4 * MiB); /* 20 MiB does not fit, the tight 4 MiB does: 1024 MiB */
    recovered("4 MiB");
    must_fail(standin_segment_alloc(&p, 8 * MiB), "an exact segment with nothing cached");
    CUDA_OK(cudaFree(big));
    CUDA_OK(cudaFree(tail));
    CUDA_OK(cudaDeviceSynchronize());
    void *exact = must_exact(200 * MiB); /* only once the 300 MiB segment went back */
    recovered("an exact 200 MiB");
    void *again = must_exact(16 * MiB);  /* fits at once */
    CUDA_OK(standin_segment_free(exact));
    CUDA_OK(standin_segment_free(again));
    for (int i = 0; i < NFILL; i++)
        if (i % 5)
            CUDA_OK(cudaFree(fill[i]));
    gmshim_stats_t st;
    CHECK(gm_stats(0, &st), "no gmshim statistics");
    printf("ooms %llu peak_reserved %llu\n", st.ooms, st.reserved.peak);
    return 0;
}
