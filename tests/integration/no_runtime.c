/* A program without any CUDA runtime calls cudaMalloc through gmshim's hook (dlsym): with no
 * real function to forward to, the call returns cudaErrorInitializationError and gmshim says so
 * once; nothing crashes. (Linked --as-needed: no libcudart is loaded.) */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>

int main(void)
{
    if (dlopen("libcudart.so.13", RTLD_NOLOAD | RTLD_LAZY)) {
        printf("FAIL: a libcudart is loaded\n");
        return 1;
    }
    cudaError_t (*m)(void **, size_t) = (cudaError_t (*)(void **, size_t))dlsym(RTLD_DEFAULT, "cudaMalloc");
    cudaError_t (*f)(void *) = (cudaError_t (*)(void *))dlsym(RTLD_DEFAULT, "cudaFree");
    if (!m || !f) {
        printf("FAIL: gmshim's hooks are not there\n");
        return 1;
    }
    void *p = NULL;
    cudaError_t e1 = m(&p, 1024), e2 = m(&p, 2048), e3 = f(p);
    printf("cudaMalloc=%d cudaMalloc=%d cudaFree=%d\n", e1, e2, e3);
    return e1 == cudaErrorInitializationError && e2 == cudaErrorInitializationError &&
                   e3 == cudaErrorInitializationError ? 0 : 1;
}
