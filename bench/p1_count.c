/* P1 by instruction count: a fixed number of cudaMalloc+cudaFree pairs of one size after 5 000 to
 * warm up, for callgrind (deterministic where timings are not). The count a pair is the difference
 * of two runs' totals over the difference of their pairs:
 *   LD_PRELOAD=build/libgmshim.so valgrind --tool=callgrind build/bench/p1_count 20000 512
 *   ... p1_count 60000 512    ->  (I refs(60000) - I refs(20000)) / 40000 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    size_t size = argc > 2 ? strtoull(argv[2], NULL, 0) : 512;
    void *p;
    if (n < 0 || !size || cudaFree(NULL) != cudaSuccess) {
        fprintf(stderr, "usage: p1_count PAIRS [SIZE] (a CUDA runtime needed)\n");
        return 2;
    }
    for (long i = 0; i < 5000 + n; i++) {
        if (cudaMalloc(&p, size) != cudaSuccess || cudaFree(p) != cudaSuccess) {
            fprintf(stderr, "p1_count: pair %ld failed\n", i);
            return 1;
        }
    }
    return 0;
}
