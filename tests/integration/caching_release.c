/* A caching allocator's cudaFree (its code in a library named libc10_cuda.so, PyTorch's cache on)
 * gives the segment back to the driver once the GPU is done with the work issued before it, and
 * without blocking in cudaFree; the program's own free of the same size stays in gmshim's cache.
 * `own`: PyTorch's cache off (PYTORCH_NO_CUDA_MEMORY_CACHING=1), its frees are every tensor's,
 * and gmshim's pool keeps them too. `capture`: see during_capture. */
#include "itest.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

cudaError_t standin_segment_alloc(void **p, size_t size);
cudaError_t standin_segment_free(void *p);

#define SEG (400u << 20)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void noop(void *p) { (void)p; }

/* `capture`: the segment given back while another stream captures in global mode stays until
 * the capture ends (no driver call, no fence then: the fake would invalidate the capture). */
static int during_capture(void)
{
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void *seg;
    CUDA_OK(standin_segment_alloc(&seg, SEG));
    size_t held = fake_stats(0).bytes_in_use;
    fakecuda_reset_stats();
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDA_OK(fakecuda_launch(s, noop, NULL, 0));
    CUDA_OK(standin_segment_free(seg));
    usleep(300000); /* thirty trimmer polls */
    CHECK(fake_stats(0).bytes_in_use == held, "released during the capture: %zu -> %llu", held,
          fake_stats(0).bytes_in_use);
    cudaGraph_t g;
    CUDA_OK(cudaStreamEndCapture(s, &g));
    struct fakecuda_stats f = fake_stats(0);
    CHECK(f.unsafe_calls == 0 && f.captures_invalidated == 0, "unsafe calls %llu, invalidated %llu",
          f.unsafe_calls, f.captures_invalidated);
    CUDA_OK(cudaGraphDestroy(g));
    size_t after = held;
    for (int i = 0; i < 100 && after > held - SEG; i++) {
        usleep(10000);
        after = fake_stats(0).bytes_in_use;
    }
    CHECK(after <= held - SEG, "not back 1 s after the capture: %zu -> %zu", held, after);
    printf("ok\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "capture"))
        return during_capture();
    int own = argc > 1 && !strcmp(argv[1], "own");
    void *torch_seg, *mine;
    CUDA_OK(standin_segment_alloc(&torch_seg, SEG));
    CUDA_OK(cudaMalloc(&mine, SEG));
    size_t held = fake_stats(0).bytes_in_use;
    CHECK(held >= 2ull * SEG, "both segments held: %zu", held);
    /* Work issued before the frees, still running when they return: neither may go before it. */
    CUDA_OK(fakecuda_launch(0, NULL, NULL, 300000));
    double t0 = now_s();
    CUDA_OK(standin_segment_free(torch_seg));
    CUDA_OK(cudaFree(mine));
    double took = now_s() - t0;
    CHECK(took < 0.1, "cudaFree blocked for %.3f s", took);
    usleep(150000);
    CHECK(fake_stats(0).bytes_in_use == held, "released while the GPU still used it: %zu -> %llu", held,
          fake_stats(0).bytes_in_use);
    size_t after = held;
    for (int i = 0; i < 100 && after > held - SEG; i++) {
        usleep(10000);
        after = fake_stats(0).bytes_in_use;
    }
    if (own) {
        usleep(200000);
        after = fake_stats(0).bytes_in_use;
        CHECK(after == held, "PyTorch's cache off: a tensor's free went to the driver: %zu -> %zu", held, after);
    } else {
        CHECK(after <= held - SEG, "not back 1.15 s after the GPU finished: %zu -> %zu", held, after);
        CHECK(after >= SEG, "the program's own freed segment went too: %zu", after);
    }
    gmshim_stats_t st;
    gm_stats(0, &st);
    CHECK(st.allocated.current == 0, "allocated %llu", st.allocated.current);
    printf("ok\n");
    return 0;
}
