/* GMSHIM_IDLE_RELEASE=0.6 with GMSHIM_EMPTY_CACHE_INTERVAL=0.1: a free segment goes back to the
 * driver after about 0.6 s idle, not before; a segment in use stays. */
#include "itest.h"

#include <unistd.h>

int main(void)
{
    void *keep, *idle;
    CUDA_OK(cudaMalloc(&keep, 32u << 20));
    CUDA_OK(cudaMalloc(&idle, 64u << 20));
    CUDA_OK(cudaFree(idle));
    fakecuda_drain();
    void *probe; /* a miss harvests the completed fence: the segment is now free */
    CUDA_OK(cudaMalloc(&probe, 1 << 20));
    size_t held = fake_stats(0).bytes_in_use;
    usleep(250000);
    CHECK(fake_stats(0).bytes_in_use == held, "released after 0.25 s: %llu -> %llu", (unsigned long long)held,
          fake_stats(0).bytes_in_use);
    usleep(900000);
    size_t after = fake_stats(0).bytes_in_use;
    CHECK(after <= held - (64u << 20), "not released after 1.15 s: %zu -> %zu", held, after);
    CHECK(after >= (32u << 20), "the live segment went too: %zu", after);
    gmshim_stats_t st;
    gm_stats(0, &st);
    CHECK(st.allocated.current == (32u << 20) + (1u << 20), "allocated %llu", st.allocated.current);
    CUDA_OK(cudaFree(keep));
    CUDA_OK(cudaFree(probe));
    printf("ok\n");
    return 0;
}
