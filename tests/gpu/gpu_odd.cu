// What the runtime returns for odd calls; run with and without gmshim, the lines must match.
#include "gpu_common.h"
#include <stdint.h>

#define SHOW(name, expr)                                                                          \
    do {                                                                                          \
        cudaError_t r_ = (expr);                                                                  \
        cudaError_t l_ = cudaGetLastError();                                                      \
        printf("%s=%d last=%d\n", name, (int)r_, (int)l_);                                         \
    } while (0)

int main()
{
    SHOW("cudaFree(NULL)", cudaFree(NULL));
    void *p = (void *)0x1;
    cudaError_t e = cudaMalloc(&p, 0);
    printf("cudaMalloc(&p,0)=%d p_is_null=%d last=%d\n", e, p == NULL, cudaGetLastError());
    SHOW("cudaMalloc(NULL,16)", cudaMalloc(NULL, 16));
    size_t t;
    SHOW("cudaMemGetInfo(NULL,&t)", cudaMemGetInfo(NULL, &t));
    void *a, *b;
    CK(cudaMalloc(&a, 1000));
    CK(cudaMalloc(&b, 1000));
    printf("two_1000B_mallocs_apart=%lld\n", (long long)((char *)b - (char *)a));
    printf("ptr_align_512=%d\n", ((uintptr_t)a % 512) == 0);
    void *m;
    CK(cudaMalloc(&m, 1 << 20));
    printf("1MiB_ptr_align_2MiB=%d\n", ((uintptr_t)m % (2 << 20)) == 0);
    SHOW("interior_free", cudaFree((char *)m + 4096));
    CK(cudaFree(m));
    SHOW("double_free", cudaFree(m));
    int host;
    SHOW("host_pointer_free", cudaFree(&host));
    SHOW("after_bad_frees_malloc_ok", cudaMalloc(&m, 4096));
    CK(cudaFree(m));
    CK(cudaFree(a));
    CK(cudaFree(b));
    return 0;
}
