/* A segment-sized block freed and allocated again in a loop: every free records a fence. Prints
 * the fences, the loop's duration and the fences' time, for the tests that count the log's stats
 * snapshots and add up its fences' times. */
#include "itest.h"

#include <time.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(void)
{
    CHECK(gm_present(), "run me under LD_PRELOAD=libgmshim.so");
    gmshim_stats_t before, after;
    void *p;
    uint64_t t0 = now_ns(); /* every fence of the run comes after this */
    CUDA_OK(cudaMalloc(&p, 2 << 20));
    CUDA_OK(cudaFree(p));
    gm_stats(0, &before);
    for (int i = 0; i < 2000; i++) {
        CUDA_OK(cudaMalloc(&p, 2 << 20));
        CUDA_OK(cudaFree(p));
    }
    gm_stats(0, &after);
    CHECK(after.driver_mallocs == before.driver_mallocs, "the loop grew the pool %llu times",
          after.driver_mallocs - before.driver_mallocs);
    printf("fences=%llu elapsed_ns=%llu fence_ns=%llu\n", (unsigned long long)after.fences,
           (unsigned long long)(now_ns() - t0), (unsigned long long)after.fence_ns);
    return 0;
}
