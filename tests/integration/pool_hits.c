/* Many allocations and frees of a few sizes: after warm-up the driver sees no new calls. */
#include "itest.h"

int main(void)
{
    CHECK(gm_present(), "run me under LD_PRELOAD=libgmshim.so");
    size_t sizes[] = {100, 4096, 300000, 3 << 20, 64 << 20};
    void *p[5];
    for (int i = 0; i < 5; i++) {
        CUDA_OK(cudaMalloc(&p[i], sizes[i]));
        memset(p[i], i + 1, sizes[i]); /* fake device memory is host memory */
    }
    for (int i = 0; i < 5; i++)
        CUDA_OK(cudaFree(p[i]));
    struct fakecuda_stats warm = fake_stats(0);
    for (int it = 0; it < 1000; it++) {
        for (int i = 0; i < 5; i++)
            CUDA_OK(cudaMalloc(&p[i], sizes[i]));
        for (int i = 0; i < 5; i++)
            CUDA_OK(cudaFree(p[i]));
    }
    struct fakecuda_stats after = fake_stats(0);
    CHECK(after.mallocs == warm.mallocs, "the driver saw %llu new cudaMalloc calls after warm-up",
          after.mallocs - warm.mallocs);
    CHECK(after.frees == warm.frees, "the driver saw %llu cudaFree calls", after.frees - warm.frees);
    gmshim_stats_t st;
    gm_stats(0, &st);
    CHECK(st.allocs == 5005 && st.frees == 5005, "allocs %llu frees %llu", st.allocs, st.frees);
    CHECK(st.cache_hits >= 5000, "cache hits %llu", st.cache_hits);
    CHECK(st.driver_mallocs == warm.mallocs, "gmshim counts %llu driver mallocs, the driver %llu",
          st.driver_mallocs, warm.mallocs);
    CHECK(st.allocated.current == 0 && st.requested.current == 0, "still allocated %llu",
          st.allocated.current);
    CHECK(st.reserved.current == after.bytes_in_use, "reserved %llu, driver in use %llu",
          st.reserved.current, after.bytes_in_use);
    CHECK(st.requested.peak == 100 + 4096 + 300000 + (3 << 20) + (64 << 20), "peak requested %llu",
          st.requested.peak);
    printf("ok: %llu driver mallocs for 5005 allocations\n", st.driver_mallocs);
    return 0;
}
