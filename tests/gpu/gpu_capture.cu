// cudaMalloc and cudaFree during a global-mode capture on a non-blocking stream (which the real
// runtime refuses with error 900 and an invalidated capture), a second thread allocating
// meanwhile, then replay of the graph: the result must be the eager one.
#include "gpu_common.h"
#include <pthread.h>
#include <string.h>

__global__ void add(float *y, const float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = y[i] + a * x[i];
}

static cudaError_t other_err = cudaErrorUnknown;
static void *other(void *)
{
    void *p;
    other_err = cudaMalloc(&p, 3 << 20);
    if (other_err == cudaSuccess)
        other_err = cudaFree(p);
    return NULL;
}

int main(int argc, char **argv)
{
    int with_thread = !(argc > 1 && !strcmp(argv[1], "nothread"));
    const int n = 1 << 20;
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *x, *y;
    CK(cudaMalloc(&x, n * 4));
    CK(cudaMalloc(&y, n * 4));
    float *hx = (float *)malloc(n * 4);
    for (int i = 0; i < n; i++)
        hx[i] = (float)(i % 97);
    CK(cudaMemcpy(x, hx, n * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(y, 0, n * 4));
    cudaError_t begin = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    cudaError_t m1 = cudaErrorUnknown, f1 = cudaErrorUnknown, m2 = cudaErrorUnknown;
    float *tmp = NULL, *tmp2 = NULL;
    if (begin == cudaSuccess) {
        m1 = cudaMalloc(&tmp, n * 4);
        if (m1 == cudaSuccess) {
            add<<<n / 256, 256, 0, s>>>(tmp, x, 0.f, n); // tmp = garbage + 0: overwrite next
            cudaMemsetAsync(tmp, 0, n * 4, s);
            add<<<n / 256, 256, 0, s>>>(tmp, x, 2.f, n);  // tmp = 2x
            add<<<n / 256, 256, 0, s>>>(y, tmp, 1.f, n);  // y += 2x
            f1 = cudaFree(tmp);
            m2 = cudaMalloc(&tmp2, n * 4);
            if (m2 == cudaSuccess) {
                cudaMemsetAsync(tmp2, 0, n * 4, s);
                add<<<n / 256, 256, 0, s>>>(tmp2, x, 1.f, n); // tmp2 = x
                add<<<n / 256, 256, 0, s>>>(y, tmp2, 1.f, n); // y += x
            }
        }
        if (with_thread) {
            pthread_t th;
            pthread_create(&th, NULL, other, NULL);
            pthread_join(th, NULL);
        } else {
            other_err = cudaSuccess;
        }
    }
    cudaGraph_t g = NULL;
    cudaError_t end = cudaStreamEndCapture(s, &g);
    int ok = 0, replays = 3;
    if (end == cudaSuccess) {
        cudaGraphExec_t ex;
        CK(cudaGraphInstantiate(&ex, g, 0));
        for (int r = 0; r < replays; r++)
            CK(cudaGraphLaunch(ex, s));
        CK(cudaStreamSynchronize(s));
        float *hy = (float *)malloc(n * 4);
        CK(cudaMemcpy(hy, y, n * 4, cudaMemcpyDeviceToHost));
        ok = 1;
        for (int i = 0; i < n; i++)
            if (hy[i] != replays * 3.f * hx[i]) {
                ok = 0;
                break;
            }
        CK(cudaGraphExecDestroy(ex));
        CK(cudaGraphDestroy(g));
        if (tmp2)
            CK(cudaFree(tmp2));
    }
    cudaGetLastError();
    printf("capture_begin=%d malloc_in_capture=%d free_in_capture=%d second_malloc=%d other_thread=%d "
           "end_capture=%d replay_correct=%d\n",
           begin, m1, f1, m2, other_err, end, ok);
    return end == cudaSuccess && ok ? 0 : 1;
}
