// A library with its own static CUDA runtime (as NCCL is built): the streams it creates never pass
// the shared runtime's hooks; its runtime reaches the driver through dlsym and cuGetProcAddress.
#include <cuda_runtime.h>

extern "C" __attribute__((visibility("default"))) int static_runtime_stream(cudaStream_t *s)
{
    return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking) == cudaSuccess ? 0 : -1;
}
