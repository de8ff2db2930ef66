// GMSHIM_SEGMENTS=vmm on a real GPU, under the preload: (1) kernels write and the runtime copies
// across blocks whose pages were mapped by separate calls; (2) the fragmentation workload of
// tests/integration/oom_fragmentation.c under GMSHIM_DEVICE_LIMIT (9 MiB blocks, every second one
// freed, then 12 MiB): "frag_fits 1" where the pool does not fragment; (3) what a page costs:
// the mean over N allocations of 2 MiB that each map a fresh page, and over the empty cache that
// unmaps them; (4) what
// cudaIpcGetMemHandle returns on a block of a range; (5) an empty cache leaves nothing reserved;
// (6) the driver's own cost of a page, one handle per page against one handle per 32 pages
// (cuMemCreate + cuMemMap + cuMemSetAccess, then cuMemUnmap + cuMemRelease, called directly).
// Prints key=value lines; exit 0 when every check held.
#include "gpu_common.h"
#include "../../shim/gmshim.h"

#include <cuda.h>
#include <dlfcn.h>
#include <string.h>

#define MiB (1ull << 20)

__global__ void fill(unsigned *p, size_t n, unsigned v)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = v + (unsigned)i;
}

static unsigned long long reserved_now(int (*get)(int, gmshim_stats_t *))
{
    gmshim_stats_t st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    get(0, &st);
    return st.reserved.current;
}

typedef CUresult (*reserve_t)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*create_t)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
typedef CUresult (*map_t)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*access_t)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*unmap_t)(CUdeviceptr, size_t);
typedef CUresult (*release_t)(CUmemGenericAllocationHandle);

/* Maps `total` bytes of a fresh reservation in handles of `chunk` bytes, then unmaps them: the
 * microseconds per 2 MiB page of each. */
static void driver_cost(size_t chunk, size_t total, double *map_us, double *unmap_us)
{
    *map_us = *unmap_us = -1;
    void *cu = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD); /* the runtime loaded it RTLD_LOCAL */
    if (!cu)
        return;
    reserve_t reserve = (reserve_t)dlsym(cu, "cuMemAddressReserve");
    create_t create = (create_t)dlsym(cu, "cuMemCreate");
    map_t map = (map_t)dlsym(cu, "cuMemMap");
    access_t access = (access_t)dlsym(cu, "cuMemSetAccess");
    unmap_t unmap = (unmap_t)dlsym(cu, "cuMemUnmap");
    release_t release = (release_t)dlsym(cu, "cuMemRelease");
    CUdeviceptr base;
    if (!reserve || !create || !map || !access || !unmap || !release || reserve(&base, total, 0, 0, 0))
        return;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.location = prop.location;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    size_t n = total / chunk;
    CUmemGenericAllocationHandle *h = (CUmemGenericAllocationHandle *)calloc(n, sizeof *h);
    double t0 = now_s();
    for (size_t i = 0; i < n; i++)
        if (create(&h[i], chunk, &prop, 0) || map(base + i * chunk, chunk, 0, h[i], 0) ||
            access(base + i * chunk, chunk, &d, 1))
            return;
    *map_us = (now_s() - t0) / (total / (2 * MiB)) * 1e6;
    t0 = now_s();
    for (size_t i = 0; i < n; i++)
        if (unmap(base + i * chunk, chunk) || release(h[i]))
            return;
    *unmap_us = (now_s() - t0) / (total / (2 * MiB)) * 1e6;
    free(h);
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
    // (1) a block over pages mapped by two calls
    void *a, *b;
    CK(cudaMalloc(&a, MiB + 512));
    CK(cudaMalloc(&b, 6 * MiB));
    int ok = check_block(a, MiB + 512, 7) && check_block(b, 6 * MiB, 11);
    printf("cross_mapped_ok=%d\n", ok);
    fails += !ok;
    printf("reserved_after_two=%llu\n", reserved_now(get));
    CK(cudaFree(a));
    CK(cudaFree(b));
    // (4) IPC on a block of a range
    void *c;
    CK(cudaMalloc(&c, 4 * MiB));
    cudaIpcMemHandle_t ih;
    cudaError_t ie = cudaIpcGetMemHandle(&ih, c);
    printf("ipc_result=%d ipc_error=%s\n", (int)ie, cudaGetErrorName(ie));
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
    printf("page_map_us=%.2f\npage_unmap_us=%.2f\nemptied_bytes=%llu\n", map_s / N * 1e6, unmap_s / N * 1e6, back);
    // (5) nothing stays reserved
    void *big;
    CK(cudaMalloc(&big, 1024 * MiB));
    CK(cudaFree(big));
    CK(cudaDeviceSynchronize());
    empty();
    unsigned long long left = reserved_now(get);
    printf("reserved_after_empty=%llu\n", left);
    fails += left != 0;
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
    printf("frag_blocks=%d\nfrag_fits=%d\n", n, fe == cudaSuccess);
    printf("frag_reserved=%llu\n", reserved_now(get));
    // (1 again) the new block works too
    if (fe == cudaSuccess) {
        int ok2 = check_block(twelve, 12 * MiB, 3);
        printf("frag_block_ok=%d\n", ok2);
        fails += !ok2;
    }
    double m1, u1, m32, u32;
    driver_cost(2 * MiB, 256 * MiB, &m1, &u1);
    driver_cost(64 * MiB, 512 * MiB, &m32, &u32);
    printf("driver_page_map_us=%.2f driver_page_unmap_us=%.2f driver_run32_map_us_per_page=%.2f "
           "driver_run32_unmap_us_per_page=%.2f\n", m1, u1, m32, u32);
    printf("fails=%d\n", fails);
    return fails ? 1 : 0;
}
