/* A libcudart loaded with RTLD_LOCAL (as a Python extension's dependency would be) is not in
 * the global scope, so dlsym(RTLD_NEXT) finds nothing from gmshim: the fallback finds it among
 * the loaded objects. The hooks are reached through dlsym(RTLD_DEFAULT), as the extension's own
 * calls would reach them. argv[1] is the library's path. */
#include "../../shim/gmshim.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("FAIL: dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    cudaError_t (*m)(void **, size_t) = (cudaError_t (*)(void **, size_t))dlsym(RTLD_DEFAULT, "cudaMalloc");
    cudaError_t (*f)(void *) = (cudaError_t (*)(void *))dlsym(RTLD_DEFAULT, "cudaFree");
    int (*get)(int, gmshim_stats_t *) = (int (*)(int, gmshim_stats_t *))dlsym(RTLD_DEFAULT, "gmshim_get_stats");
    if (!m || !f || !get || m == dlsym(h, "cudaMalloc")) {
        printf("FAIL: not gmshim's hooks\n");
        return 1;
    }
    void *p;
    cudaError_t e = m(&p, 4096);
    if (e != cudaSuccess) {
        printf("FAIL: cudaMalloc through the hook: %d\n", e);
        return 1;
    }
    memset(p, 1, 4096);
    e = f(p);
    gmshim_stats_t st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    get(0, &st);
    printf("cudaFree=%d allocs=%llu frees=%llu\n", e, st.allocs, st.frees);
    return e == cudaSuccess && st.allocs == 1 && st.frees == 1 ? 0 : 1;
}
