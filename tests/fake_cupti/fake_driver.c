/* A fake libcuda.so.1 for the CUPTI tests: allocation entry points wrapped in CUPTI callbacks,
 * CUDA_INJECTION64_PATH loading, cudaMalloc/cudaFree playing the runtime calling the driver.
 * Test code only: its addresses are made up and must never be dereferenced. */
#include "fake_cupti.h"

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEV 16
#define MAX_CBID 2048
#define GRAIN ((size_t)2 << 20)

/* Declared by cuda.h only in per-thread-default-stream builds. */
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);

static fake_cupti_dispatch_fn dispatcher;            /* atomic */
static unsigned long long delivered[MAX_CBID];       /* atomic */
static __thread int cur_dev;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static size_t capacity = (size_t)16 << 30;
static size_t in_use[MAX_DEV];
static uint64_t next_va = 0x500000000000ull;
static unsigned long long next_handle = 0x100;
static unsigned correlation;

typedef struct mem {
    struct mem *next;
    uint64_t ptr;               /* device address, host pointer or VMM handle */
    size_t size;
    int dev, kind;              /* kind: 0 device, 1 host, 2 physical (handle) */
} mem_t;
static mem_t *mems;

void fake_cuda_attach_cupti(fake_cupti_dispatch_fn fn)
{
    __atomic_store_n(&dispatcher, fn, __ATOMIC_RELEASE);
}

void fake_cuda_set_device(int dev)
{
    cur_dev = dev >= 0 && dev < MAX_DEV ? dev : 0;
}

unsigned long long fake_cuda_delivered(unsigned cbid)
{
    return cbid < MAX_CBID ? __atomic_load_n(&delivered[cbid], __ATOMIC_ACQUIRE) : 0;
}

size_t fake_cuda_in_use(int dev)
{
    pthread_mutex_lock(&lock);
    size_t n = dev >= 0 && dev < MAX_DEV ? in_use[dev] : 0;
    pthread_mutex_unlock(&lock);
    return n;
}

/* ---- initialization: the capacity and the injection library -------------------------------- */

static size_t parse_size(const char *s, size_t def)
{
    if (!s || !*s)
        return def;
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'K': case 'k': v *= 1024.0; break;
    case 'M': case 'm': v *= 1024.0 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    case 'T': case 't': v *= 1024.0 * 1024 * 1024 * 1024; break;
    default: break;
    }
    return v > 0 ? (size_t)v : def;
}

static void init_once(void)
{
    capacity = parse_size(getenv("FAKECUDA_MEM"), capacity);
    const char *inj = getenv("CUDA_INJECTION64_PATH");
    if (!inj || !*inj)
        return;
    /* Global, as the real driver does it (on the H200 a static-cudart program's
     * dlsym(RTLD_DEFAULT, "cudaMalloc") found the injection library's). */
    void *h = dlopen(inj, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        fprintf(stderr, "fake libcuda: cannot load the injection library: %s\n", dlerror());
        return;
    }
    int (*fn)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
    if (!fn)
        fprintf(stderr, "fake libcuda: %s has no InitializeInjection\n", inj);
    else if (fn() != 1)
        fprintf(stderr, "fake libcuda: InitializeInjection failed\n");
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void ensure_init(void)
{
    pthread_once(&once, init_once);
}

CUresult cuInit(unsigned int flags)
{
    (void)flags;
    ensure_init();
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = cur_dev;
    return CUDA_SUCCESS;
}

CUresult cuMemGetInfo(size_t *free_bytes, size_t *total)
{
    ensure_init();
    pthread_mutex_lock(&lock);
    size_t used = in_use[cur_dev];
    pthread_mutex_unlock(&lock);
    if (free_bytes)
        *free_bytes = capacity > used ? capacity - used : 0;
    if (total)
        *total = capacity;
    return CUDA_SUCCESS;
}

/* ---- one API call: ENTER callback, the work, EXIT callback ------------------------------- */

typedef struct call {
    CUpti_CallbackData d;
    CUpti_CallbackId cbid;
    uint64_t correlation_data;
    CUresult ret;
} call_t;

static void fire(call_t *c)
{
    fake_cupti_dispatch_fn fn = __atomic_load_n(&dispatcher, __ATOMIC_ACQUIRE);
    if (fn && fn(c->cbid, &c->d))
        __atomic_add_fetch(&delivered[c->cbid], 1, __ATOMIC_ACQ_REL);
}

static void call_enter(call_t *c, CUpti_CallbackId cbid, const char *name, const void *params)
{
    memset(c, 0, sizeof *c);
    c->cbid = cbid;
    c->d.callbackSite = CUPTI_API_ENTER;
    c->d.functionName = name;
    c->d.functionParams = params;
    c->d.functionReturnValue = &c->ret;
    c->d.context = (CUcontext)(uintptr_t)(0xC0DE0000u + (unsigned)cur_dev);
    c->d.contextUid = (uint32_t)cur_dev + 1;
    c->d.correlationData = &c->correlation_data;
    c->d.correlationId = __atomic_add_fetch(&correlation, 1, __ATOMIC_RELAXED);
    fire(c);
}

static CUresult call_exit(call_t *c, CUresult ret)
{
    c->ret = ret;
    c->d.callbackSite = CUPTI_API_EXIT;
    fire(c);
    return ret;
}

#define CALL(name, params, work)                                                                  \
    do {                                                                                          \
        ensure_init();                                                                            \
        call_t c_;                                                                                \
        call_enter(&c_, CUPTI_DRIVER_TRACE_CBID_##name, #name, &(params));                        \
        CUresult r_ = (work);                                                                     \
        call_exit(&c_, r_);                                                                       \
        return r_;                                                                                \
    } while (0)

/* ---- the memory model -------------------------------------------------------------------- */

static CUresult mem_new(int kind, int dev, size_t size, uint64_t *out)
{
    if (!out || (!size && kind != 1))
        return CUDA_ERROR_INVALID_VALUE;
    size_t rounded = (size + GRAIN - 1) / GRAIN * GRAIN;
    mem_t *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    if (kind != 1 && (rounded < size || rounded > capacity - in_use[dev])) {
        pthread_mutex_unlock(&lock);
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (kind == 0) {
        m->ptr = next_va;
        next_va += rounded;
    } else if (kind == 2) {
        m->ptr = next_handle++;
    }
    if (kind != 1)
        in_use[dev] += rounded;
    m->size = kind == 1 ? size : rounded;
    m->dev = dev;
    m->kind = kind;
    m->next = mems;
    if (kind == 1) {
        void *p = malloc(size ? size : 1);
        m->ptr = (uint64_t)(uintptr_t)p;
    }
    mems = m;
    *out = m->ptr;
    pthread_mutex_unlock(&lock);
    return m->ptr ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult mem_delete(int kind, uint64_t ptr)
{
    pthread_mutex_lock(&lock);
    for (mem_t **at = &mems; *at; at = &(*at)->next) {
        mem_t *m = *at;
        if (m->kind != kind || m->ptr != ptr)
            continue;
        *at = m->next;
        if (kind != 1)
            in_use[m->dev] -= m->size;
        pthread_mutex_unlock(&lock);
        if (kind == 1)
            free((void *)(uintptr_t)ptr);
        free(m);
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return CUDA_ERROR_INVALID_VALUE;
}

static int handle_known(uint64_t h)
{
    pthread_mutex_lock(&lock);
    mem_t *m = mems;
    while (m && !(m->kind == 2 && m->ptr == h))
        m = m->next;
    pthread_mutex_unlock(&lock);
    return m != NULL;
}

static CUresult dev_alloc(CUdeviceptr *dptr, size_t size)
{
    uint64_t p = 0;
    CUresult r = mem_new(0, cur_dev, size, &p);
    if (r == CUDA_SUCCESS && dptr)
        *dptr = p;
    return dptr ? r : CUDA_ERROR_INVALID_VALUE;
}

static CUresult host_alloc(void **pp, size_t size)
{
    uint64_t p = 0;
    if (!pp)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = mem_new(1, cur_dev, size, &p);
    *pp = (void *)(uintptr_t)p;
    return r;
}

/* ---- the entry points --------------------------------------------------------------------- */

CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
{
    cuMemAlloc_v2_params p = {dptr, bytesize};
    CALL(cuMemAlloc_v2, p, dev_alloc(dptr, bytesize));
}

CUresult cuMemFree(CUdeviceptr dptr)
{
    cuMemFree_v2_params p = {dptr};
    CALL(cuMemFree_v2, p, dptr ? mem_delete(0, dptr) : CUDA_SUCCESS);
}

static CUresult pitch_alloc(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height)
{
    if (!pitch)
        return CUDA_ERROR_INVALID_VALUE;
    *pitch = (width + 511) / 512 * 512;
    return dev_alloc(dptr, *pitch * height);
}

CUresult cuMemAllocPitch(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                         unsigned int ElementSizeBytes)
{
    cuMemAllocPitch_v2_params p = {dptr, pPitch, WidthInBytes, Height, ElementSizeBytes};
    CALL(cuMemAllocPitch_v2, p, pitch_alloc(dptr, pPitch, WidthInBytes, Height));
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    cuMemAllocManaged_params p = {dptr, bytesize, flags};
    CALL(cuMemAllocManaged, p, dev_alloc(dptr, bytesize));
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    cuMemAllocAsync_params p = {dptr, bytesize, hStream};
    CALL(cuMemAllocAsync, p, dev_alloc(dptr, bytesize));
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    cuMemAllocAsync_ptsz_params p = {dptr, bytesize, hStream};
    CALL(cuMemAllocAsync_ptsz, p, dev_alloc(dptr, bytesize));
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    cuMemFreeAsync_params p = {dptr, hStream};
    CALL(cuMemFreeAsync, p, mem_delete(0, dptr));
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    cuMemFreeAsync_ptsz_params p = {dptr, hStream};
    CALL(cuMemFreeAsync_ptsz, p, mem_delete(0, dptr));
}

CUresult cuMemAllocHost(void **pp, size_t bytesize)
{
    cuMemAllocHost_v2_params p = {pp, bytesize};
    CALL(cuMemAllocHost_v2, p, host_alloc(pp, bytesize));
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    cuMemHostAlloc_params p = {pp, bytesize, Flags};
    CALL(cuMemHostAlloc, p, host_alloc(pp, bytesize));
}

CUresult cuMemFreeHost(void *ptr)
{
    cuMemFreeHost_params p = {ptr};
    CALL(cuMemFreeHost, p, mem_delete(1, (uint64_t)(uintptr_t)ptr));
}

static CUresult create(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop)
{
    if (!handle || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
        prop->location.id >= MAX_DEV || size % GRAIN)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t h = 0;
    CUresult r = mem_new(2, prop->location.id, size, &h);
    *handle = h;
    return r;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags)
{
    cuMemCreate_params p = {handle, size, prop, flags};
    CALL(cuMemCreate, p, create(handle, size, prop));
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    cuMemRelease_params p = {handle};
    CALL(cuMemRelease, p, mem_delete(2, handle));
}

static CUresult reserve(CUdeviceptr *ptr, size_t size)
{
    if (!ptr || !size)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    *ptr = next_va;
    next_va += (size + GRAIN - 1) / GRAIN * GRAIN;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

/* Not watched by gmshim: no callback needed, but the real one issues them too. */
CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags)
{
    cuMemAddressReserve_params p = {ptr, size, alignment, addr, flags};
    CALL(cuMemAddressReserve, p, reserve(ptr, size));
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    cuMemAddressFree_params p = {ptr, size};
    CALL(cuMemAddressFree, p, ptr && size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    cuMemMap_params p = {ptr, size, offset, handle, flags};
    CALL(cuMemMap, p, ptr && size && !offset && handle_known(handle) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    cuMemUnmap_params p = {ptr, size};
    CALL(cuMemUnmap, p, ptr && size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

/* ---- the runtime calling the driver ------------------------------------------------------- */

static void *next_fn(const char *name)
{
    void *fn = dlsym(RTLD_NEXT, name);
    if (!fn) {
        fprintf(stderr, "fake libcuda: no %s after it (link it before -lcudart)\n", name);
        abort();
    }
    return fn;
}

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    static cudaError_t (*real)(void **, size_t);
    if (!__atomic_load_n(&real, __ATOMIC_ACQUIRE))
        __atomic_store_n(&real, (cudaError_t(*)(void **, size_t))next_fn("cudaMalloc"), __ATOMIC_RELEASE);
    ensure_init();
    cuMemAlloc_v2_params p = {(CUdeviceptr *)devPtr, size};
    call_t c;
    call_enter(&c, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2", &p);
    cudaError_t e = real(devPtr, size);
    call_exit(&c, e == cudaSuccess ? CUDA_SUCCESS
                  : e == cudaErrorMemoryAllocation ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE);
    return e;
}

cudaError_t cudaFree(void *devPtr)
{
    static cudaError_t (*real)(void *);
    if (!__atomic_load_n(&real, __ATOMIC_ACQUIRE))
        __atomic_store_n(&real, (cudaError_t(*)(void *))next_fn("cudaFree"), __ATOMIC_RELEASE);
    ensure_init();
    cuMemFree_v2_params p = {(CUdeviceptr)(uintptr_t)devPtr};
    call_t c;
    call_enter(&c, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, "cuMemFree_v2", &p);
    /* One driver underneath: memory from cuMemAlloc can be given to cudaFree. */
    cudaError_t e = devPtr && mem_delete(0, (uint64_t)(uintptr_t)devPtr) == CUDA_SUCCESS ? cudaSuccess : real(devPtr);
    call_exit(&c, e == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
    return e;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    if (!name || len <= 0 || dev < 0 || dev >= MAX_DEV)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "Fake CUDA Driver Device %d", dev);
    return CUDA_SUCCESS;
}
