/* Managed, pitched, 3D, pinned-host and stream-ordered allocations are forwarded, counted as not
 * pooled, and their frees reach the real runtime. An IPC handle on a block that is not at the
 * start of its segment draws one warning. */
#include "itest.h"

int main(void)
{
    void *m, *pitched, *host, *host2, *async;
    size_t pitch;
    struct cudaPitchedPtr p3;
    CUDA_OK(cudaMallocManaged(&m, 1 << 20, cudaMemAttachGlobal));
    CUDA_OK(cudaMallocPitch(&pitched, &pitch, 1000, 10));
    struct cudaExtent ext = {256, 4, 4};
    CUDA_OK(cudaMalloc3D(&p3, ext));
    CUDA_OK(cudaMallocHost(&host, 4096));
    CUDA_OK(cudaHostAlloc(&host2, 4096, cudaHostAllocDefault));
    cudaStream_t s;
    CUDA_OK(cudaStreamCreate(&s));
    CUDA_OK(cudaMallocAsync(&async, 8192, s));
    gmshim_stats_t st;
    gm_stats(0, &st);
    CHECK(st.unpooled_allocs == 6, "unpooled %llu", st.unpooled_allocs);
    CHECK(st.allocs == 0, "pooled allocs %llu", st.allocs);
    struct fakecuda_stats f0 = fake_stats(0);
    CUDA_OK(cudaFree(m));
    CUDA_OK(cudaFree(pitched));
    CUDA_OK(cudaFree(p3.ptr));
    struct fakecuda_stats f1 = fake_stats(0);
    CHECK(f1.frees == f0.frees + 3, "frees reaching the driver: %llu", f1.frees - f0.frees);
    gm_stats(0, &st);
    CHECK(st.foreign_frees == 0, "tracked frees counted as foreign: %llu", st.foreign_frees);
    CUDA_OK(cudaFreeHost(host));
    CUDA_OK(cudaFreeHost(host2));
    CUDA_OK(cudaFreeAsync(async, s));
    CUDA_OK(cudaStreamSynchronize(s));

    void *a, *b;
    CUDA_OK(cudaMalloc(&a, 4096));
    CUDA_OK(cudaMalloc(&b, 4096)); /* b is inside a's segment, not at its start */
    cudaIpcMemHandle_t h;
    CUDA_OK(cudaIpcGetMemHandle(&h, a));
    CUDA_OK(cudaIpcGetMemHandle(&h, b));
    CUDA_OK(cudaFree(a));
    CUDA_OK(cudaFree(b));
    printf("ok\n");
    return 0;
}
