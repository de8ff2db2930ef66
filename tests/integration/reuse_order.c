/* cudaFree's guarantee: a block freed while a "kernel" on a non-blocking stream still writes it
 * is not handed out again before that kernel ends. The kernel writes 0xAA into the old buffer
 * after a delay; the program writes 0x55 into the new one and checks it after all work ended.
 * With GMSHIM_TRUST_STREAM_ORDER=1 (which drops the guarantee) this program must fail. */
#include "itest.h"

#include <unistd.h>

#define SIZE (1u << 20)

static void late_write(void *p)
{
    memset(p, 0xAA, SIZE);
}

int main(int argc, char **argv)
{
    int trials = argc > 1 ? atoi(argv[1]) : 10;
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int reused = 0, corrupted = 0;
    for (int t = 0; t < trials; t++) {
        void *old;
        CUDA_OK(cudaMalloc(&old, SIZE));
        CUDA_OK(fakecuda_launch(s, late_write, old, 50000)); /* 50 ms later */
        CUDA_OK(cudaFree(old));
        void *fresh;
        CUDA_OK(cudaMalloc(&fresh, SIZE));
        reused += fresh == old;
        memset(fresh, 0x55, SIZE);
        fakecuda_drain();
        const unsigned char *c = fresh;
        for (size_t i = 0; i < SIZE; i++)
            if (c[i] != 0x55) {
                corrupted++;
                break;
            }
        CUDA_OK(cudaFree(fresh));
    }
    printf("%d trials: %d reused the freed block, %d corrupted\n", trials, reused, corrupted);
    CHECK(corrupted == 0, "%d of %d trials read the late kernel's write", corrupted, trials);
    CUDA_OK(cudaStreamDestroy(s));
    return 0;
}
