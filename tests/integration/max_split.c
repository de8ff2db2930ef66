/* GMSHIM_MAX_SPLIT: with argv[1] = "split", a cached 128 MiB block serves a 32 MiB request by
 * splitting; with "nosplit" (GMSHIM_MAX_SPLIT=64M) it is not split: a new segment is made. In
 * both, a request just under 64 MiB, whose segment is rounded up to 64 MiB, is served. */
#include "itest.h"

int main(int argc, char **argv)
{
    int expect_split = argc > 1 && !strcmp(argv[1], "split");
    void *big, *small;
    CUDA_OK(cudaMalloc(&big, 128u << 20));
    CUDA_OK(cudaFree(big));
    fakecuda_drain();
    struct fakecuda_stats f0 = fake_stats(0);
    CUDA_OK(cudaMalloc(&small, 32u << 20));
    struct fakecuda_stats f1 = fake_stats(0);
    int split = f1.mallocs == f0.mallocs;
    CHECK(split == expect_split, "%s: the 32 MiB request %s", expect_split ? "no cap" : "max split 64M",
          split ? "split the cached 128 MiB block" : "made a new segment");
    if (split)
        CHECK(small == big, "the split block starts at the cached block");
    /* A request near the big block's size may still use it whole. */
    void *near;
    CUDA_OK(cudaMalloc(&near, 120u << 20));
    CUDA_OK(cudaFree(near));
    CUDA_OK(cudaFree(small));
    void *edge;
    size_t edge_bytes = (64u << 20) - 4096;
    CUDA_OK(cudaMalloc(&edge, edge_bytes));
    CUDA_OK(cudaMemset(edge, 7, edge_bytes));
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(((unsigned char *)edge)[edge_bytes - 1] == 7, "the block under the cap holds its bytes");
    CUDA_OK(cudaFree(edge));
    printf("ok\n");
    return 0;
}
