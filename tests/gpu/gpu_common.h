/* Shared by the GPU check programs (most built with nvcc -cudart shared, so that the preload sees
 * the runtime calls): error checks and a host clock. */
#pragma once
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(call)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "%s:%d: %s -> %d %s\n", __FILE__, __LINE__, #call, (int)e_,           \
                    cudaGetErrorName(e_));                                                        \
            exit(2);                                                                              \
        }                                                                                         \
    } while (0)

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
