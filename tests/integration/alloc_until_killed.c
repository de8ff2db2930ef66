/* Analyzer kill test: allocates and frees in a loop, prints "ready N" once N pairs are done
 * (all of them in the log by then), and goes on until it is killed with SIGKILL. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <unistd.h>

int main(void)
{
    for (unsigned long i = 1;; i++) {
        void *p;
        if (cudaMalloc(&p, 1u << 20) != cudaSuccess)
            return 1;
        cudaFree(p);
        if (i == 5000) {
            printf("ready %lu\n", i);
            fflush(stdout);
        }
        if (i > 5000)
            usleep(1000);
    }
}
