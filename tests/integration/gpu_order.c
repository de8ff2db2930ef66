/* GMSHIM_GPU_ORDER: a block freed while a "kernel" still writes it is handed out again at once,
 * and the new owner's work waits for that kernel on the GPU, on whichever stream it runs.
 *   gpu_order OLD:NEW EXPECT
 * OLD is the stream of the late kernel (nb: non-blocking, blocking, legacy); NEW the stream of
 * the new owner's memset (nb2: another non-blocking stream, blocking, legacy, perthread, later: a
 * non-blocking stream created after the allocation). EXPECT: "ordered" (no allocation waits for
 * the kernel) or "waited" (each waits, as without GMSHIM_GPU_ORDER). The new block must be the
 * freed one in every trial, and never hold the kernel's late write. */
#include "itest.h"

#define SIZE (4u << 20) /* large: a pending block of its size is preferred over a free remainder */
#define TRIALS 6

static void late_write(void *p)
{
    memset(p, 0xAA, SIZE);
}

static cudaStream_t stream_of(const char *kind)
{
    cudaStream_t s = NULL;
    if (!strcmp(kind, "legacy"))
        return cudaStreamLegacy;
    if (!strcmp(kind, "perthread"))
        return cudaStreamPerThread;
    if (!strcmp(kind, "blocking"))
        CUDA_OK(cudaStreamCreate(&s));
    else if (!strcmp(kind, "nb") || !strcmp(kind, "nb2"))
        CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    else
        CHECK(0, "unknown stream kind '%s'", kind);
    return s;
}

int main(int argc, char **argv)
{
    CHECK(argc == 3, "usage: gpu_order OLD:NEW ordered|waited");
    char old_kind[32], new_kind[32];
    CHECK(sscanf(argv[1], "%31[^:]:%31s", old_kind, new_kind) == 2, "bad OLD:NEW '%s'", argv[1]);
    int expect_ordered = !strcmp(argv[2], "ordered");
    cudaStream_t olds = stream_of(old_kind);
    int later = !strcmp(new_kind, "later");
    cudaStream_t news = later ? NULL : stream_of(new_kind);
    gmshim_stats_t before, after;
    gm_stats(0, &before);
    int reused = 0, corrupted = 0;
    for (int t = 0; t < TRIALS; t++) {
        void *old, *fresh;
        CUDA_OK(cudaMalloc(&old, SIZE));
        CUDA_OK(cudaMemset(old, 0, SIZE));
        CUDA_OK(fakecuda_launch(olds, late_write, old, 50000)); /* writes 50 ms from now */
        CUDA_OK(cudaFree(old));
        CUDA_OK(cudaMalloc(&fresh, SIZE));
        reused += fresh == old;
        if (later)
            CUDA_OK(cudaStreamCreateWithFlags(&news, cudaStreamNonBlocking));
        CUDA_OK(cudaMemsetAsync(fresh, 0x55, SIZE, news));
        fakecuda_drain();
        const unsigned char *c = fresh;
        for (size_t i = 0; i < SIZE; i++)
            if (c[i] != 0x55) {
                corrupted++;
                break;
            }
        CUDA_OK(cudaFree(fresh));
        if (later)
            CUDA_OK(cudaStreamDestroy(news));
    }
    gm_stats(0, &after);
    unsigned long long waits = after.fence_waits - before.fence_waits;
    printf("%s: %d trials, %d reused the freed block, %d corrupted, %llu waits for a fence\n",
           argv[1], TRIALS, reused, corrupted, waits);
    CHECK(corrupted == 0, "%d of %d trials read the late kernel's write", corrupted, TRIALS);
    CHECK(reused == TRIALS, "only %d of %d trials got the freed block back", reused, TRIALS);
    if (expect_ordered)
        CHECK(waits == 0, "%llu allocations waited for the kernel on the CPU", waits);
    else
        CHECK(waits >= TRIALS, "%llu waits for %d trials", waits, TRIALS);
    return 0;
}
