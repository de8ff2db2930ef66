/* GMSHIM_MAX_SPLIT: with argv[1] = "split", a cached 128 MiB block serves a 32 MiB request by
 * splitting; with "nosplit" (GMSHIM_MAX_SPLIT=64M) it is not split: a new segment is made. */
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
    printf("ok\n");
    return 0;
}
