/* libfakenccl.so: a library with its own runtime, as NCCL and cuBLAS are: it takes device memory
 * from the driver functions cuGetProcAddress hands it, never from the runtime's cudaMalloc:
 * cuMemAlloc_v2 (fakenccl_buffers), or, as newer NCCL does, physical memory created, mapped at a
 * reserved range and at a second one (a peer's view), made accessible (fakenccl_vmm_buffers).
 * The driver here is the fake runtime (tests/fake/fake_driver.c), found as a static runtime finds
 * libcuda: by dlsym on its handle. Test code only. */
#include <cuda.h>
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

typedef int (*proc2_fn)(const char *, void **, int, unsigned long long, int *);
typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*free_fn)(unsigned long long);

void *fakenccl_buffers(size_t bytes, int *result);
int fakenccl_release(void *p);
void *fakenccl_vmm_buffers(size_t bytes, int *result);
int fakenccl_vmm_release(void *p);

static void *driver_function(const char *name)
{
    void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
    proc2_fn proc = h ? (proc2_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
    if (h)
        dlclose(h);
    void *fn = NULL;
    int status = 0;
    return proc && proc(name, &fn, 13000, 0, &status) == 0 ? fn : NULL;
}

void *fakenccl_buffers(size_t bytes, int *result)
{
    alloc_fn fn = (alloc_fn)driver_function("cuMemAlloc_v2");
    unsigned long long p = 0;
    *result = fn ? fn(&p, bytes) : 500;
    return *result == 0 ? (void *)(size_t)p : NULL;
}

int fakenccl_release(void *p)
{
    free_fn fn = (free_fn)driver_function("cuMemFree_v2");
    return fn ? fn((unsigned long long)(size_t)p) : 500;
}

/* A buffer made of one handle mapped twice. */
typedef struct vmm_buffer {
    CUdeviceptr va, peer;
    size_t size;
    CUmemGenericAllocationHandle handle;
} vmm_buffer_t;

static vmm_buffer_t buffers[16];

#define VMM(name) ((__typeof__(&name))driver_function(#name))

void *fakenccl_vmm_buffers(size_t bytes, int *result)
{
    vmm_buffer_t *b = NULL;
    for (size_t i = 0; i < sizeof buffers / sizeof *buffers && !b; i++)
        if (!buffers[i].va)
            b = &buffers[i];
    __typeof__(&cuMemCreate) create = VMM(cuMemCreate);
    __typeof__(&cuMemAddressReserve) reserve = VMM(cuMemAddressReserve);
    __typeof__(&cuMemMap) map = VMM(cuMemMap);
    __typeof__(&cuMemSetAccess) access = VMM(cuMemSetAccess);
    if (!b || !create || !reserve || !map || !access) {
        *result = 500;
        return NULL;
    }
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    if ((*result = create(&b->handle, bytes, &prop, 0)) != 0)
        return NULL;
    CUmemAccessDesc rw;
    memset(&rw, 0, sizeof rw);
    rw.location = prop.location;
    rw.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if ((*result = reserve(&b->va, bytes, 0, 0, 0)) != 0 || (*result = map(b->va, bytes, 0, b->handle, 0)) != 0 ||
        (*result = access(b->va, bytes, &rw, 1)) != 0 || (*result = reserve(&b->peer, bytes, 0, 0, 0)) != 0 ||
        (*result = map(b->peer, bytes, 0, b->handle, 0)) != 0)
        return NULL;
    b->size = bytes;
    return (void *)(size_t)b->va;
}

/* As NCCL frees a buffer: the handle released while still mapped, then every mapping unmapped
 * (the memory goes with the last), then the ranges freed. */
int fakenccl_vmm_release(void *p)
{
    __typeof__(&cuMemUnmap) unmap = VMM(cuMemUnmap);
    __typeof__(&cuMemRelease) release = VMM(cuMemRelease);
    __typeof__(&cuMemAddressFree) address_free = VMM(cuMemAddressFree);
    for (size_t i = 0; i < sizeof buffers / sizeof *buffers; i++) {
        vmm_buffer_t *b = &buffers[i];
        if (!b->va || b->va != (CUdeviceptr)(size_t)p)
            continue;
        int r = !unmap || !release || !address_free ? 500 : release(b->handle);
        if (!r)
            r = unmap(b->va, b->size);
        if (!r)
            r = unmap(b->peer, b->size);
        if (!r)
            r = address_free(b->va, b->size);
        if (!r)
            r = address_free(b->peer, b->size);
        memset(b, 0, sizeof *b);
        return r;
    }
    return 1;
}
