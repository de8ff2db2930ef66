/* PyTorch's cudaMallocAsync backend in miniature: a loop keeps an 8 MiB stream-ordered allocation
 * a step (a mark each) and frees a 4 MiB one, until the runtime refuses for memory. The program
 * sees the runtime's own error, its last error included; gmshim logs the refusal as an OOM. Run
 * with FAKECUDA_MEM=256M; prints the step of the refusal. */
#include "itest.h"

#define MiB (1ull << 20)

static __attribute__((noinline)) cudaError_t keep_activation(void **p, cudaStream_t s)
{
    cudaError_t e = cudaMallocAsync(p, 8 * MiB, s);
    __asm__ volatile("" ::: "memory");
    return e;
}

int main(void)
{
    int (*mark)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "gmshim_mark");
    cudaStream_t s;
    CUDA_OK(cudaStreamCreate(&s));
    static void *kept[4096];
    for (int step = 1; step < 4096; step++) {
        if (mark)
            mark("step");
        void *scratch = NULL;
        CUDA_OK(cudaMallocAsync(&scratch, 4 * MiB, s));
        cudaError_t e = keep_activation(&kept[step], s);
        if (e != cudaSuccess) {
            CHECK(e == cudaErrorMemoryAllocation, "refused with %d", (int)e);
            CHECK(cudaGetLastError() == cudaErrorMemoryAllocation, "the last error was not the refusal");
            printf("async_oom: refused at step %d\n", step);
            return 0;
        }
        CUDA_OK(cudaFreeAsync(scratch, s));
        CUDA_OK(cudaStreamSynchronize(s));
    }
    CHECK(0, "never refused");
    return 1;
}
