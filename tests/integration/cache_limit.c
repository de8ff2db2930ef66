/* GMSHIM_CACHE_LIMIT=64M: after every free the driver never holds more than the live blocks'
 * segments plus the cap (plus the block whose fence may still be in flight). */
#include "itest.h"

#define N 16
#define SIZE (32u << 20) /* each its own 32 MiB segment */

int main(void)
{
    void *p[N];
    for (int i = 0; i < N; i++)
        CUDA_OK(cudaMalloc(&p[i], SIZE));
    size_t cap = 64u << 20;
    for (int i = 0; i < N; i++) {
        CUDA_OK(cudaFree(p[i]));
        fakecuda_drain();
        /* An allocation miss (a small one, in its own small segment) harvests completed fences
         * and applies the cap. */
        void *probe;
        CUDA_OK(cudaMalloc(&probe, 1 << 20));
        CUDA_OK(cudaFree(probe));
        size_t live = (size_t)(N - 1 - i) * SIZE;
        struct fakecuda_stats f = fake_stats(0);
        CHECK(f.bytes_in_use <= live + cap + SIZE + (2u << 20),
              "after %d frees the driver holds %llu bytes: live %zu + cap %zu (+ one in flight)",
              i + 1, f.bytes_in_use, live, cap);
    }
    gmshim_stats_t st;
    gm_stats(0, &st);
    CHECK(st.driver_frees >= N - 3, "driver frees %llu", st.driver_frees);
    printf("ok: %llu segments returned\n", st.driver_frees);
    return 0;
}
