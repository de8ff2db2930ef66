/* A caching allocator's segments (its code in a library named libc10_cuda.so, PyTorch's cache on)
 * are the driver's, at exactly the size asked, as without gmshim: its cudaMalloc gets no 20 MiB
 * pool segment for a 2 MiB ask, its cudaFree gives the memory back at once (after the GPU's work
 * before it, as the real cudaFree does), and the program's own freed segment stays in gmshim's
 * cache. Modes:
 *   own      PyTorch's cache off (PYTORCH_NO_CUDA_MEMORY_CACHING=1): its frees are every tensor's,
 *            and gmshim's pool keeps them.
 *   limit    under GMSHIM_DEVICE_LIMIT=1G: a segment that fits only once gmshim's cache is released
 *            gets it; one beyond the cap fails with cudaErrorMemoryAllocation, the runtime's last
 *            error as the real call's would be, and an OOM is counted.
 *   capture  a segment asked during a capture in relaxed mode (as PyTorch asks during graph
 *            capture) comes from the driver and leaves the capture valid. */
#include "itest.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

cudaError_t standin_segment_alloc(void **p, size_t size);
cudaError_t standin_segment_free(void *p);

#define MiB (1ull << 20)
#define SEG (400ull << 20)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void noop(void *p) { (void)p; }

static int during_capture(void)
{
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    size_t held = fake_stats(0).bytes_in_use;
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDA_OK(fakecuda_launch(s, noop, NULL, 0));
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    CUDA_OK(cudaThreadExchangeStreamCaptureMode(&mode));
    void *seg;
    CUDA_OK(standin_segment_alloc(&seg, 2 * MiB));
    CUDA_OK(cudaThreadExchangeStreamCaptureMode(&mode));
    CHECK(fake_stats(0).bytes_in_use == held + 2 * MiB, "not the driver's 2 MiB: %zu -> %llu", held,
          fake_stats(0).bytes_in_use);
    cudaGraph_t g;
    CUDA_OK(cudaStreamEndCapture(s, &g));
    struct fakecuda_stats f = fake_stats(0);
    CHECK(f.captures_invalidated == 0, "invalidated %llu", f.captures_invalidated);
    CUDA_OK(cudaGraphDestroy(g));
    CUDA_OK(standin_segment_free(seg));
    CHECK(fake_stats(0).bytes_in_use == held, "not back: %zu -> %llu", held, fake_stats(0).bytes_in_use);
    printf("ok\n");
    return 0;
}

static int under_limit(void)
{
    void *mine, *a, *b = NULL;
    CUDA_OK(cudaMalloc(&mine, SEG));
    CUDA_OK(cudaFree(mine)); /* cached by gmshim */
    size_t cached = fake_stats(0).bytes_in_use;
    CHECK(cached >= SEG, "the program's segment is not cached: %zu", cached);
    CUDA_OK(standin_segment_alloc(&a, 700 * MiB)); /* fits under 1 GiB only without the cache */
    CHECK(fake_stats(0).bytes_in_use == 700 * MiB, "gmshim's cache not released for it: %llu",
          fake_stats(0).bytes_in_use);
    cudaError_t err = standin_segment_alloc(&b, 700 * MiB);
    CHECK(err == cudaErrorMemoryAllocation, "beyond the cap: %d", (int)err);
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation, "the last error is not the failure's");
    CHECK(cudaGetLastError() == cudaSuccess, "the last error is sticky");
    size_t f = 0, t = 0;
    CUDA_OK(cudaMemGetInfo(&f, &t));
    CHECK(t == 1024 * MiB && f == 324 * MiB, "cudaMemGetInfo under the cap: free %zu total %zu", f, t);
    CUDA_OK(standin_segment_free(a));
    gmshim_stats_t st;
    gm_stats(0, &st);
    CHECK(st.ooms == 1 && st.reserved.current == 0, "ooms %llu, reserved %llu", st.ooms, st.reserved.current);
    printf("ok\n");
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "capture"))
        return during_capture();
    if (!strcmp(mode, "limit"))
        return under_limit();
    int own = !strcmp(mode, "own");
    void *torch_seg, *small, *mine;
    CUDA_OK(standin_segment_alloc(&small, 2 * MiB));
    size_t one = fake_stats(0).bytes_in_use;
    CHECK(own ? one >= 20 * MiB : one == 2 * MiB, "PyTorch's 2 MiB segment took %zu from the driver", one);
    CUDA_OK(standin_segment_free(small));
    CHECK(own || fake_stats(0).bytes_in_use == 0, "its free did not reach the driver: %llu",
          fake_stats(0).bytes_in_use);
    CUDA_OK(standin_segment_alloc(&torch_seg, SEG));
    CUDA_OK(cudaMalloc(&mine, SEG));
    size_t held = fake_stats(0).bytes_in_use;
    CHECK(held >= 2 * SEG, "both segments held: %zu", held);
    /* Work issued before the frees, still running when they are called: neither may go before it. */
    CUDA_OK(fakecuda_launch(0, NULL, NULL, 300000));
    double t0 = now_s();
    CUDA_OK(cudaFree(mine));
    CHECK(now_s() - t0 < 0.1, "the program's cudaFree blocked for %.3f s", now_s() - t0);
    CHECK(fake_stats(0).bytes_in_use == held, "released while the GPU still used it: %zu -> %llu", held,
          fake_stats(0).bytes_in_use);
    CUDA_OK(standin_segment_free(torch_seg));
    size_t after = fake_stats(0).bytes_in_use;
    if (own) {
        usleep(200000);
        after = fake_stats(0).bytes_in_use;
        CHECK(after == held, "PyTorch's cache off: a tensor's free went to the driver: %zu -> %zu", held, after);
    } else {
        CHECK(now_s() - t0 >= 0.25, "PyTorch's segment went back before the GPU's work was done");
        CHECK(after == held - SEG, "not back at its cudaFree: %zu -> %zu", held, after);
    }
    gmshim_stats_t st;
    gm_stats(0, &st);
    CHECK(st.allocated.current == 0, "allocated %llu", st.allocated.current);
    printf("ok\n");
    return 0;
}
