/* The trimmer never calls the driver during a capture: with GMSHIM_EMPTY_CACHE_INTERVAL=0.05 a
 * free segment waits until the capture has ended (the fake invalidates a capture on any unsafe
 * call), then goes back. */
#include "itest.h"

#include <unistd.h>

static void noop(void *p) { (void)p; }

int main(void)
{
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void *a;
    CUDA_OK(cudaMalloc(&a, 64u << 20));
    CUDA_OK(cudaFree(a));
    fakecuda_reset_stats();
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    size_t during = fake_stats(0).bytes_in_use;
    CUDA_OK(fakecuda_launch(s, noop, NULL, 0));
    usleep(400000); /* eight trimmer periods */
    CHECK(fake_stats(0).bytes_in_use == during, "memory went back during the capture");
    cudaGraph_t g;
    CUDA_OK(cudaStreamEndCapture(s, &g));
    struct fakecuda_stats f = fake_stats(0);
    CHECK(f.unsafe_calls == 0 && f.captures_invalidated == 0, "unsafe calls %llu, invalidated %llu",
          f.unsafe_calls, f.captures_invalidated);
    CUDA_OK(cudaGraphDestroy(g));
    usleep(400000);
    CHECK(fake_stats(0).bytes_in_use == 0, "after the capture the free segment stayed: %llu",
          fake_stats(0).bytes_in_use);
    printf("ok\n");
    return 0;
}
