/* cudaDeviceReset kills every pointer of the device: gmshim forgets its segments first, so it
 * never hands out, frees or counts memory that no longer exists. */
#include "itest.h"

int main(void)
{
    void *a, *b;
    CUDA_OK(cudaMalloc(&a, 3 << 20));
    CUDA_OK(cudaMalloc(&b, 1000));
    CUDA_OK(cudaFree(b));
    CUDA_OK(cudaDeviceReset());
    struct fakecuda_stats f = fake_stats(0);
    CHECK(f.bytes_in_use == 0, "the driver still holds %llu bytes", f.bytes_in_use);
    gmshim_stats_t st;
    gm_stats(0, &st);
    CHECK(st.reserved.current == 0 && st.allocated.current == 0 && st.cached.current == 0,
          "reserved %llu allocated %llu cached %llu", st.reserved.current, st.allocated.current,
          st.cached.current);
    /* The old pointer is unknown now: the real runtime refuses it. */
    CHECK(cudaFree(a) == cudaErrorInvalidValue, "free of a pointer killed by the reset");
    cudaGetLastError();
    void *c;
    CUDA_OK(cudaMalloc(&c, 3 << 20));
    memset(c, 1, 3 << 20);
    CUDA_OK(cudaFree(c));
    f = fake_stats(0);
    CHECK(f.bytes_in_use > 0, "new allocation after reset");
    printf("ok\n");
    return 0;
}
