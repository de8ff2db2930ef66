// GMSHIM_SEGMENTS=vmm on a real GPU, under the preload: (1) kernels write and the runtime copies
// across blocks whose pages were mapped by separate calls; (2) the fragmentation workload of
// tests/integration/oom_fragmentation.c under GMSHIM_DEVICE_LIMIT (9 MiB blocks, every second one
// freed, then 12 MiB): "frag_fits 1" where the pool does not fragment; (3) what a page costs:
// the mean over N allocations of 2 MiB that each map a fresh page, and over the empty cache that
// unmaps them; (4) what
// cudaIpcGetMemHandle returns on a block of a range; (5) an empty cache gives the driver its
// memory back (cudaMemGetInfo). Prints "key value" lines; exit 0 when every check held.
#include "gpu_common.h"
#include "../../shim/gmshim.h"

#include <dlfcn.h>
#include <string.h>

#define MiB (1ull << 20)

__global__ void fill(unsigned *p, size_t n, unsigned v)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = v + (unsigned)i;
}

static int check_block(void *p, size_t bytes, unsigned v)
{
    size_t n = bytes / 4;
    fill<<<256, 256>>>((unsigned *)p, n, v);
    CK(cudaGetLastError());
    unsigned *h = (unsigned *)malloc(bytes);
    CK(cudaMemcpy(h, p, bytes, cudaMemcpyDeviceToHost));
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++)
        ok = h[i] == v + (unsigned)i;
    free(h);
    return ok;
}

int main(void)
{
    int fails = 0;
    unsigned long long (*empty)(void) = (unsigned long long (*)(void))dlsym(RTLD_DEFAULT, "gmshim_empty_cache");
    int (*get)(int, gmshim_stats_t *) = (int (*)(int, gmshim_stats_t *))dlsym(RTLD_DEFAULT, "gmshim_get_stats");
    if (!empty || !get) {
        printf("not_under_gmshim 1\n");
        return 1;
    }
    gmshim_stats_t st;
    // (1) a block over pages mapped by two calls
    void *a, *b;
    CK(cudaMalloc(&a, MiB + 512));
    CK(cudaMalloc(&b, 6 * MiB));
    int ok = check_block(a, MiB + 512, 7) && check_block(b, 6 * MiB, 11);
    printf("cross_mapped_ok %d\n", ok);
    fails += !ok;
    memset(&st, 0, sizeof st);
    get(0, &st);
    printf("reserved_after_two %llu\n", st.reserved.current);
    CK(cudaFree(a));
    CK(cudaFree(b));
    // (4) IPC on a block of a range
    void *c;
    CK(cudaMalloc(&c, 4 * MiB));
    cudaIpcMemHandle_t ih;
    cudaError_t ie = cudaIpcGetMemHandle(&ih, c);
    printf("ipc_result %d %s\n", (int)ie, cudaGetErrorName(ie));
    cudaGetLastError();
    CK(cudaFree(c));
    CK(cudaDeviceSynchronize());
    empty();
    // (3) the cost of a page: N fresh pages mapped, then unmapped
    enum { N = 256 };
    static void *p[N];
    double t0 = now_s();
    for (int i = 0; i < N; i++)
        CK(cudaMalloc(&p[i], 2 * MiB));
    double map_s = now_s() - t0;
    for (int i = 0; i < N; i++)
        CK(cudaFree(p[i]));
    CK(cudaDeviceSynchronize());
    t0 = now_s();
    unsigned long long back = empty();
    double unmap_s = now_s() - t0;
    printf("page_map_us %.2f\npage_unmap_us %.2f\nemptied_bytes %llu\n", map_s / N * 1e6, unmap_s / N * 1e6, back);
    // (5) the driver sees it back
    size_t f0, t;
    CK(cudaMemGetInfo(&f0, &t));
    void *big;
    CK(cudaMalloc(&big, 1024 * MiB));
    CK(cudaFree(big));
    CK(cudaDeviceSynchronize());
    empty();
    size_t f1;
    CK(cudaMemGetInfo(&f1, &t));
    memset(&st, 0, sizeof st);
    get(0, &st);
    printf("reserved_after_empty %llu\nfree_before %zu free_after %zu\n", st.reserved.current, f0, f1);
    fails += st.reserved.current != 0;
    // (2) the fragmentation workload under a 2 GiB cap set through the API
    int (*set)(int, unsigned long long) = (int (*)(int, unsigned long long))dlsym(RTLD_DEFAULT, "gmshim_set_limit");
    set(0, 2048 * MiB);
    int blocks = (int)(2048 * MiB / (20 * MiB)) * 2;
    static void *q[4096];
    int n = 0;
    for (int i = 0; i < blocks; i++)
        if (cudaMalloc(&q[n], 9 * MiB) == cudaSuccess)
            n++;
    cudaGetLastError();
    for (int i = 1; i < n; i += 2)
        CK(cudaFree(q[i]));
    void *twelve = NULL;
    cudaError_t fe = cudaMalloc(&twelve, 12 * MiB);
    cudaGetLastError();
    printf("frag_blocks %d\nfrag_fits %d\n", n, fe == cudaSuccess);
    memset(&st, 0, sizeof st);
    get(0, &st);
    printf("frag_reserved %llu\n", st.reserved.current);
    // (1 again) the new block works too
    if (fe == cudaSuccess) {
        int ok2 = check_block(twelve, 12 * MiB, 3);
        printf("frag_block_ok %d\n", ok2);
        fails += !ok2;
    }
    printf("fails %d\n", fails);
    return fails ? 1 : 0;
}
