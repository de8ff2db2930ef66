// Reuse ordering with real kernels on two non-blocking streams: a long kernel on stream A sums
// a buffer; the host frees the buffer, allocates the same size and a kernel on stream C
// overwrites the new buffer at once. The sum must be intact (the real cudaFree synchronizes;
// gmshim must keep that guarantee without blocking in cudaFree).
#include "gpu_common.h"
#include <string.h>

__global__ void reader(const unsigned *buf, size_t n, int reps, unsigned long long *out)
{
    unsigned long long s = 0;
    for (int r = 0; r < reps; r++)
        for (size_t i = threadIdx.x; i < n; i += blockDim.x)
            s += ((volatile const unsigned *)buf)[i];
    atomicAdd(out, s);
}

__global__ void writer(unsigned *buf, size_t n, unsigned v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        buf[i] = v;
}

int main(int argc, char **argv)
{
    int trials = argc > 1 ? atoi(argv[1]) : 20;
    const size_t bytes = 16u << 20, n = bytes / 4;
    const int reps = 20;
    cudaStream_t a, c;
    CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking));
    unsigned long long *sum;
    CK(cudaMalloc(&sum, sizeof *sum));
    int reused = 0, corrupted = 0;
    double t_free = 0;
    for (int t = 0; t < trials; t++) {
        unsigned *buf;
        CK(cudaMalloc(&buf, bytes));
        writer<<<256, 256, 0, a>>>(buf, n, 1u);
        CK(cudaMemsetAsync(sum, 0, sizeof *sum, a));
        CK(cudaStreamSynchronize(a));
        reader<<<1, 1024, 0, a>>>(buf, n, reps, sum);
        double t0 = now_s();
        CK(cudaFree(buf));
        t_free += now_s() - t0;
        unsigned *fresh;
        CK(cudaMalloc(&fresh, bytes));
        reused += fresh == buf;
        writer<<<256, 256, 0, c>>>(fresh, n, 7u);
        CK(cudaDeviceSynchronize());
        unsigned long long got;
        CK(cudaMemcpy(&got, sum, sizeof got, cudaMemcpyDeviceToHost));
        corrupted += got != (unsigned long long)n * reps;
        CK(cudaFree(fresh));
    }
    printf("reuse_trials=%d reused=%d corrupted=%d mean_free_us=%.1f\n", trials, reused, corrupted,
           t_free / trials * 1e6);
    return corrupted ? 1 : 0;
}
