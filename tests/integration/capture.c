/* Allocations and frees during a global-mode capture leave it valid (the real cudaMalloc and
 * cudaFree would invalidate it); memory used in the capture stays with the graph until the
 * graph and its instance are destroyed; another thread may allocate meanwhile. */
#include "itest.h"

#include <pthread.h>

static void fill(void *p)
{
    memset(p, 7, 4096);
}

static volatile int other_err = -1;

static void *other_thread(void *arg)
{
    (void)arg;
    void *p;
    cudaError_t e = cudaMalloc(&p, 12345);
    if (e == cudaSuccess)
        e = cudaFree(p);
    other_err = e;
    return NULL;
}

int main(void)
{
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void *before;
    CUDA_OK(cudaMalloc(&before, 1 << 20));
    CUDA_OK(cudaFree(before));
    fakecuda_reset_stats();

    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    void *a, *b, *c;
    CUDA_OK(cudaMalloc(&a, 4096));
    CUDA_OK(fakecuda_launch(s, fill, a, 0));
    CUDA_OK(cudaMalloc(&b, 64 << 20)); /* needs a new segment: a driver call during capture */
    CUDA_OK(cudaFree(a));
    CUDA_OK(cudaMalloc(&c, 4096));
    pthread_t th;
    pthread_create(&th, NULL, other_thread, NULL);
    pthread_join(th, NULL);
    CHECK(other_err == cudaSuccess, "another thread's malloc/free during the capture: %d", other_err);
    cudaGraph_t graph;
    CUDA_OK(cudaStreamEndCapture(s, &graph));
    struct fakecuda_stats f = fake_stats(0);
    CHECK(f.unsafe_calls == 0, "gmshim made %llu unsafe calls during the capture", f.unsafe_calls);
    CHECK(f.captures_invalidated == 0, "the capture was invalidated");

    cudaGraphExec_t exec;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_OK(cudaGraphDestroy(graph));
    CUDA_OK(cudaGraphLaunch(exec, s));
    CUDA_OK(cudaStreamSynchronize(s));
    /* c and b were allocated in the capture; freeing them returns them to the graph's pool,
     * so an allocation outside must not get them while the instance lives. */
    CUDA_OK(cudaFree(c));
    CUDA_OK(cudaFree(b));
    void *outside;
    CUDA_OK(cudaMalloc(&outside, 64 << 20));
    CHECK(outside != b, "graph memory was handed out while the graph instance still exists");
    CUDA_OK(cudaFree(outside));
    gmshim_stats_t st;
    gm_stats(0, &st);
    unsigned long long reserved_with_graph = st.reserved.current;
    CUDA_OK(cudaGraphExecDestroy(exec));
    /* The fake is faithful to the H200 here: cudaStreamGetDevice on a capturing stream
     * invalidates the capture (gmshim must never ask it). */
    cudaStream_t s2;
    CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeRelaxed));
    int dev = -1;
    CHECK(cudaStreamGetDevice(s2, &dev) == cudaErrorStreamCaptureUnsupported, "cudaStreamGetDevice in a capture");
    cudaGraph_t g2 = NULL;
    CHECK(cudaStreamEndCapture(s2, &g2) == cudaErrorStreamCaptureInvalidated, "capture not invalidated");
    cudaGetLastError();
    /* Now the graph's memory is back in the general pool: a large request reuses it. */
    struct fakecuda_stats f0 = fake_stats(0);
    void *again;
    CUDA_OK(cudaMalloc(&again, 64 << 20));
    CUDA_OK(cudaMalloc(&outside, 64 << 20));
    struct fakecuda_stats f1 = fake_stats(0);
    CHECK(f1.mallocs == f0.mallocs, "after the graph was destroyed its memory was not reused "
          "(%llu new driver mallocs)", f1.mallocs - f0.mallocs);
    gm_stats(0, &st);
    CHECK(st.reserved.current == reserved_with_graph, "reserved %llu then %llu", reserved_with_graph,
          st.reserved.current);
    printf("ok\n");
    return 0;
}
