/* The driver API's context and stream calls, as libcuda has them (CUresult: 0 success, 1 invalid
 * value, 400 invalid handle, 500 not found), with cuGetProcAddress handing out the fake's inner
 * functions as libcuda hands out addresses that are not its exported symbols. Contexts: one
 * primary context per device; fakecuda_private_context(1) makes the calling thread's current
 * context another one (as cuCtxCreate would). */
#include "fake_internal.h"

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

static char fk_contexts[FK_MAX_DEV];
static char fk_private[FK_MAX_DEV];
static _Thread_local int fk_private_on;

void fakecuda_private_context(int on)
{
    fk_private_on = on;
}

static int cu_of(cudaError_t e)
{
    return e == cudaSuccess ? 0 : e == cudaErrorInvalidValue ? 1 : 400;
}

static int ctx_get_current(void **ctx)
{
    if (!ctx)
        return 1;
    *ctx = fk_private_on ? &fk_private[fk_cur_dev] : &fk_contexts[fk_cur_dev];
    return 0;
}

static int ctx_get_device(int *device)
{
    if (!device)
        return 1;
    *device = fk_cur_dev;
    return 0;
}

static int primary_get_state(int dev, unsigned *flags, int *active)
{
    if (dev < 0 || dev >= fk_ndev || !flags || !active)
        return 1;
    *flags = 0;
    *active = 1;
    return 0;
}

static int primary_retain(void **ctx, int dev)
{
    if (!ctx || dev < 0 || dev >= fk_ndev)
        return 1;
    *ctx = &fk_contexts[dev];
    return 0;
}

static int primary_release(int dev)
{
    return dev < 0 || dev >= fk_ndev;
}

static int stream_create(void **ph, unsigned flags)
{
    return cu_of(fk_stream_create((cudaStream_t *)ph, flags, 0));
}

static int stream_create_prio(void **ph, unsigned flags, int prio)
{
    return cu_of(fk_stream_create((cudaStream_t *)ph, flags, prio));
}

static int stream_destroy(void *s)
{
    return cu_of(fk_stream_destroy((cudaStream_t)s));
}

static int green_stream_create(void **ph, void *green, unsigned flags, int prio)
{
    (void)green;
    return cu_of(fk_stream_create((cudaStream_t *)ph, flags, prio));
}

/* cuMemAlloc_v2 / cuMemFree_v2, as a library with its own runtime reaches them: device memory
 * counted against the device's capacity like the runtime's (CUDA_ERROR_OUT_OF_MEMORY = 2). */
static int mem_alloc(unsigned long long *p, size_t n)
{
    if (fk_enter() != cudaSuccess)
        return 3; /* CUDA_ERROR_NOT_INITIALIZED */
    void *out = NULL;
    cudaError_t e = !p || !n ? cudaErrorInvalidValue : fk_dev_alloc(fk_cur_dev, n, FK_M_DEVICE, &out);
    if (e == cudaSuccess)
        *p = (unsigned long long)(uintptr_t)out;
    pthread_mutex_unlock(&fk_mu);
    return e == cudaSuccess ? 0 : e == cudaErrorMemoryAllocation ? 2 : 1;
}

static int mem_free(unsigned long long p)
{
    if (fk_enter() != cudaSuccess)
        return 3;
    struct fk_alloc *a = fk_find_alloc((void *)(uintptr_t)p);
    int ok = a && a->base == (char *)(uintptr_t)p && a->kind == FK_M_DEVICE;
    if (ok)
        fk_dev_release(a);
    pthread_mutex_unlock(&fk_mu);
    return ok ? 0 : 1;
}

static int get_proc(const char *sym, void **pfn, int ver, unsigned long long flags);
static int get_proc2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status);

static const struct {
    const char *name;
    void *fn;
} procs[] = {
    {"cuCtxGetCurrent", (void *)ctx_get_current},
    {"cuCtxGetDevice", (void *)ctx_get_device},
    {"cuDevicePrimaryCtxGetState", (void *)primary_get_state},
    {"cuDevicePrimaryCtxRetain", (void *)primary_retain},
    {"cuDevicePrimaryCtxRelease", (void *)primary_release},
    {"cuStreamCreate", (void *)stream_create},
    {"cuStreamCreateWithPriority", (void *)stream_create_prio},
    {"cuStreamDestroy", (void *)stream_destroy},
    {"cuGreenCtxStreamCreate", (void *)green_stream_create},
    {"cuMemAlloc_v2", (void *)mem_alloc},
    {"cuMemFree_v2", (void *)mem_free},
};

/* As libcuda: "cuGetProcAddress" asked for CUDA 12.5 or later is the _v2 one. */
static int get_proc2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status)
{
    (void)flags;
    if (status)
        *status = 0;
    if (!sym || !pfn)
        return 1;
    *pfn = NULL;
    if (!strcmp(sym, "cuGetProcAddress")) {
        *pfn = ver >= 12050 ? (void *)get_proc2 : (void *)get_proc;
        return 0;
    }
    for (size_t i = 0; i < sizeof procs / sizeof *procs; i++)
        if (!strcmp(sym, procs[i].name)) {
            *pfn = procs[i].fn;
            return 0;
        }
    if ((*pfn = fk_vmm_proc(sym))) /* the mapping calls, as PyTorch's expandable segments ask for them */
        return 0;
    if (status)
        *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    return 500;
}

static int get_proc(const char *sym, void **pfn, int ver, unsigned long long flags)
{
    return get_proc2(sym, pfn, ver, flags, NULL);
}

/* The exported symbols. */
int cuCtxGetCurrent(void **ctx);
int cuCtxGetDevice(int *device);
int cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active);
int cuDevicePrimaryCtxRetain(void **ctx, int dev);
int cuDevicePrimaryCtxRelease_v2(int dev);
int cuStreamCreate(void **ph, unsigned flags);
int cuStreamCreateWithPriority(void **ph, unsigned flags, int prio);
int cuStreamDestroy(void *s);
int cuStreamDestroy_v2(void *s);
int cuGreenCtxStreamCreate(void **ph, void *green, unsigned flags, int prio);
int cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags);
int cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status);

int cuCtxGetCurrent(void **ctx) { return ctx_get_current(ctx); }
int cuCtxGetDevice(int *device) { return ctx_get_device(device); }
int cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active) { return primary_get_state(dev, flags, active); }
int cuDevicePrimaryCtxRetain(void **ctx, int dev) { return primary_retain(ctx, dev); }
int cuDevicePrimaryCtxRelease_v2(int dev) { return primary_release(dev); }
int cuStreamCreate(void **ph, unsigned flags) { return stream_create(ph, flags); }
int cuStreamCreateWithPriority(void **ph, unsigned flags, int prio) { return stream_create_prio(ph, flags, prio); }
int cuStreamDestroy(void *s) { return stream_destroy(s); }
int cuStreamDestroy_v2(void *s) { return stream_destroy(s); }
int cuGreenCtxStreamCreate(void **ph, void *green, unsigned flags, int prio)
{
    return green_stream_create(ph, green, flags, prio);
}
int cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags)
{
    return get_proc(sym, pfn, ver, flags);
}
int cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status)
{
    return get_proc2(sym, pfn, ver, flags, status);
}

/* As the runtime: the driver's cuGetProcAddress_v2 is found by dlsym on the driver's handle (so a
 * preloaded dlsym sees the lookup), then asked for the symbol. */
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                             unsigned long long flags, enum cudaDriverEntryPointQueryResult *status)
{
    if (!symbol || !funcPtr)
        return cudaErrorInvalidValue;
    void *h = dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD);
    int (*proc2)(const char *, void **, int, unsigned long long, int *) =
        h ? (int (*)(const char *, void **, int, unsigned long long, int *))dlsym(h, "cuGetProcAddress_v2") : NULL;
    if (h)
        dlclose(h);
    int st = 1;
    int r = proc2 ? proc2(symbol, funcPtr, (int)cudaVersion, flags, &st) : 500;
    if (status)
        *status = r == 0 ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess; /* as the runtime: a missing symbol is said in the status */
}
