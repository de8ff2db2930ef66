/* Every odd argument of semantics.md behaves as the real runtime does (the fake follows what
 * CUDA 13.0 returned on an H200: see bench/results/gpu-runs.md for the same calls on the GPU). */
#include "itest.h"

int main(void)
{
    CHECK(cudaFree(NULL) == cudaSuccess, "cudaFree(NULL)");
    void *p = (void *)0x1234;
    CHECK(cudaMalloc(&p, 0) == cudaSuccess && p == NULL, "cudaMalloc(&p, 0) gave %p", p);
    CHECK(cudaMalloc(NULL, 16) == cudaErrorInvalidValue, "cudaMalloc(NULL, 16)");
    CHECK(cudaGetLastError() == cudaErrorInvalidValue, "last error after cudaMalloc(NULL, 16)");
    size_t total = 0, freeb = 0;
    CHECK(cudaMemGetInfo(NULL, &total) == cudaSuccess && total > 0, "cudaMemGetInfo(NULL, &t)");
    CHECK(cudaMemGetInfo(&freeb, NULL) == cudaSuccess && freeb > 0, "cudaMemGetInfo(&f, NULL)");

    void *a;
    CUDA_OK(cudaMalloc(&a, 4096));
    CHECK(((uintptr_t)a % 512) == 0, "pointer %p not 512-aligned", a);
    CHECK(cudaFree((char *)a + 512) == cudaErrorInvalidValue, "interior free");
    CHECK(cudaGetLastError() == cudaErrorInvalidValue, "last error after an interior free");
    CUDA_OK(cudaFree(a));
    CHECK(cudaFree(a) == cudaErrorInvalidValue, "double free");
    CHECK(cudaGetLastError() == cudaErrorInvalidValue, "last error after a double free");
    int on_stack;
    CHECK(cudaFree(&on_stack) == cudaErrorInvalidValue, "free of a host pointer");
    cudaGetLastError();

    /* A pointer from the real runtime, not from gmshim: forwarded to the real cudaFree. */
    void *h = dlopen("libcudart.so.13", RTLD_NOLOAD | RTLD_LAZY);
    CHECK(h != NULL, "libcudart not loaded");
    cudaError_t (*real_malloc)(void **, size_t) = (cudaError_t (*)(void **, size_t))dlsym(h, "cudaMalloc");
    void *foreign;
    CHECK(real_malloc && real_malloc(&foreign, 1 << 20) == cudaSuccess, "real cudaMalloc");
    struct fakecuda_stats f0 = fake_stats(0);
    CUDA_OK(cudaFree(foreign));
    struct fakecuda_stats f1 = fake_stats(0);
    CHECK(f1.frees == f0.frees + 1, "the foreign pointer did not reach the real cudaFree");
    gmshim_stats_t st;
    gm_stats(0, &st);
    /* Pooled: the interior and double frees are refused by gmshim, the host pointer and the real
     * runtime's pointer are forwarded. Pass-through (GMSHIM_POOL=0): all four are forwarded. */
    const char *pool = getenv("GMSHIM_POOL");
    int pooled = !pool || strcmp(pool, "0");
    CHECK(st.bad_frees == (pooled ? 2u : 0u), "bad frees %llu", st.bad_frees);
    CHECK(st.foreign_frees + st.bad_frees == 4, "foreign frees %llu", st.foreign_frees);
    /* The pool is intact after all that. */
    void *b[64];
    for (int i = 0; i < 64; i++) {
        CUDA_OK(cudaMalloc(&b[i], 4096));
        memset(b[i], i, 4096);
    }
    for (int i = 0; i < 64; i++) {
        const unsigned char *c = b[i];
        CHECK(c[0] == i && c[4095] == i, "block %d overwritten", i);
        CUDA_OK(cudaFree(b[i]));
    }
    printf("ok\n");
    return 0;
}
