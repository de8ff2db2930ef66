/* A small workload for the hostile-environment sweep (test_integration.c): allocations of every
 * size class, frees while a kernel on a non-blocking stream still runs, enough pairs to fence
 * and poll, the API and cudaMemGetInfo. Whatever GMSHIM_* says, it must end normally and print
 * "ok" — allocation failures are allowed (a valid but tiny device cap makes them), crashes and
 * wrong results are not. */
#include "itest.h"

static void touch(void *p)
{
    *(volatile char *)p = 1;
}

int main(void)
{
    static const size_t sizes[] = {100, 4096, 300000, 3u << 20, 12u << 20, 64u << 20};
    enum { NS = sizeof sizes / sizeof *sizes };
    CUDA_OK(cudaFree(NULL));
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void *p[NS] = {0};
    int failed = 0;
    for (int i = 0; i < NS; i++)
        failed += cudaMalloc(&p[i], sizes[i]) != cudaSuccess;
    if (p[NS - 1])
        CUDA_OK(fakecuda_launch(s, touch, p[NS - 1], 2000));
    for (int i = 0; i < NS; i++)
        if (p[i])
            CUDA_OK(cudaFree(p[i]));
    for (int k = 0; k < 300; k++) {
        void *q = NULL;
        if (cudaMalloc(&q, sizes[k % NS]) != cudaSuccess) {
            failed++;
            continue;
        }
        memset(q, k, 64); /* fake device memory is host memory */
        CHECK(((unsigned char *)q)[63] == (unsigned char)k, "block %d does not hold what was written", k);
        CUDA_OK(cudaFree(q));
    }
    cudaGetLastError(); /* a failed allocation leaves its error, as the runtime does */
    size_t free_b = 0, total = 0;
    CUDA_OK(cudaMemGetInfo(&free_b, &total));
    CHECK(free_b <= total, "free %zu > total %zu", free_b, total);
    gmshim_stats_t st;
    gm_stats(0, &st);
    int (*mark)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "gmshim_mark");
    if (mark)
        mark("sweep");
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaDeviceSynchronize());
    printf("ok (%d allocations failed)\n", failed);
    return 0;
}
