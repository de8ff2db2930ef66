// OOM with a full cache: fill the device in 1 GiB blocks, free them all (gmshim caches them),
// then ask for one block larger than any: it must succeed once the cache is released.
#include "gpu_common.h"
#include <vector>

int main()
{
    size_t freeb, total;
    CK(cudaMemGetInfo(&freeb, &total));
    std::vector<void *> blocks;
    size_t chunk = 1ull << 30;
    while (true) {
        void *p;
        if (cudaMalloc(&p, chunk) != cudaSuccess)
            break;
        blocks.push_back(p);
    }
    cudaError_t after_fill = cudaGetLastError();
    size_t filled = blocks.size() * chunk;
    for (void *p : blocks)
        CK(cudaFree(p));
    size_t free2, total2;
    CK(cudaMemGetInfo(&free2, &total2));
    // A single block of half the device: no cached 1 GiB segment can hold it.
    size_t big = (filled / 2) | (3u << 20);
    void *p = NULL;
    double t0 = now_s();
    cudaError_t e = cudaMalloc(&p, big);
    double dt = now_s() - t0;
    cudaError_t last = cudaGetLastError();
    printf("oom_filled_gib=%.1f fill_stop_error=%d free_after_frees_gib=%.1f big_request_gib=%.1f "
           "big_result=%d last_error_after=%d big_ms=%.1f\n",
           filled / 1073741824.0, after_fill, free2 / 1073741824.0, big / 1073741824.0, e, last, dt * 1e3);
    if (e == cudaSuccess)
        CK(cudaFree(p));
    // Past the device: the error and the sticky state.
    void *q;
    cudaError_t huge = cudaMalloc(&q, total + (1ull << 30));
    cudaError_t huge_last = cudaGetLastError();
    cudaError_t enormous = cudaMalloc(&q, 1ull << 62);
    cudaError_t enormous_last = cudaGetLastError();
    printf("over_capacity=%d over_capacity_last=%d malloc_2^62=%d malloc_2^62_last=%d\n", huge,
           huge_last, enormous, enormous_last);
    return e == cudaSuccess ? 0 : 1;
}
