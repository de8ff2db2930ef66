/* A stand-in for PyTorch's libc10_cuda.so in the integration tests: a library of that name whose
 * cudaMalloc and cudaFree calls come from inside it, as a caching allocator's segments do. Each
 * call is checked afterwards, as C10_CUDA_CHECK does: a tail call would return straight into the
 * program, and the hook would see the program as the caller. */
#include <cuda_runtime_api.h>

cudaError_t standin_segment_alloc(void **p, size_t size);
cudaError_t standin_segment_free(void *p);

__attribute__((visibility("default"))) cudaError_t standin_segment_alloc(void **p, size_t size)
{
    cudaError_t err = cudaMalloc(p, size);
    __asm__ volatile("" ::: "memory");
    return err;
}

__attribute__((visibility("default"))) cudaError_t standin_segment_free(void *p)
{
    cudaError_t err = cudaFree(p);
    __asm__ volatile("" ::: "memory");
    return err;
}
