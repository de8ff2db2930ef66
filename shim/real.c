/* Resolution of the real CUDA runtime: dlsym(RTLD_NEXT) finds the libcudart after us in the
 * global scope; a libcudart loaded RTLD_LOCAL (e.g. by a Python extension) is found through
 * dl_iterate_phdr and dlopen(RTLD_NOLOAD). A function found in our own object is refused. */
#include "real.h"
#include "common.h"
#include "diag.h"
#include "state.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>

gm_real_t gm_real;

static const char *const real_names[] = {
#define GM_REAL_NAME(name, ret, params) #name,
    GM_REAL_FUNCS(GM_REAL_NAME)
#undef GM_REAL_NAME
};

static int is_ours(void *fn)
{
    Dl_info self, other;
    if (!fn || !dladdr((void *)real_resolve, &self) || !dladdr(fn, &other))
        return 0;
    return self.dli_fbase == other.dli_fbase;
}

static int find_cudart_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *base = strrchr(info->dlpi_name, '/');
    base = base ? base + 1 : info->dlpi_name;
    if (strncmp(base, "libcudart.so", 12) != 0)
        return 0;
    void **handle = data;
    *handle = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    return *handle != NULL;
}

/* A libcudart already loaded but not in the global scope; NULL if there is none. */
static void *local_cudart(void)
{
    static void *handle;
    if (handle)
        return handle;
    void *h = NULL;
    /* Not in a fork child: the loader's lock that dl_iterate_phdr takes may have been copied
     * held (another thread was in it at the fork). */
    if (__atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) != GM_CHILD)
        dl_iterate_phdr(find_cudart_cb, &h);
    if (!h)
        h = dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libcudart.so.12", RTLD_LAZY | RTLD_NOLOAD);
    if (h)
        handle = h;
    return h;
}

static void *lookup(const char *name)
{
    void *fn = dlsym(RTLD_NEXT, name);
    if (fn && !is_ours(fn))
        return fn;
    void *h = local_cudart();
    if (h) {
        fn = dlsym(h, name);
        if (fn && !is_ours(fn))
            return fn;
    }
    return NULL;
}

int real_resolve(void)
{
    void **slots = (void **)&gm_real;
    int found = 0;
    for (size_t i = 0; i < GM_ARRAY_LEN(real_names); i++) {
        if (!__atomic_load_n(&slots[i], __ATOMIC_ACQUIRE))
            __atomic_store_n(&slots[i], lookup(real_names[i]), __ATOMIC_RELEASE);
        found += slots[i] != NULL;
    }
    return found;
}

void *real_retry(const char *name, void **slot)
{
    void *fn = lookup(name);
    if (fn)
        __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
    return fn;
}

cudaError_t real_missing(const char *name)
{
    static int once;
    diag_warn_once(&once, "no real CUDA runtime function %s found (is libcudart loaded?); "
                          "returning cudaErrorInitializationError", name);
    return cudaErrorInitializationError;
}

static void *lookup_driver(const char *name)
{
    void *fn = dlsym(RTLD_DEFAULT, name);
    if (fn && !is_ours(fn))
        return fn;
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    fn = h ? dlsym(h, name) : NULL;
    if (h)
        dlclose(h); /* NOLOAD took a reference; the runtime keeps its own */
    return fn && !is_ours(fn) ? fn : NULL;
}

int real_driver_ctx(gm_cu_ctx_get_current_t *get_current, gm_cu_ctx_get_device_t *get_device)
{
    void *c = lookup_driver("cuCtxGetCurrent"), *d = lookup_driver("cuCtxGetDevice");
    if (!c || !d)
        return -1;
    *get_current = (gm_cu_ctx_get_current_t)c;
    *get_device = (gm_cu_ctx_get_device_t)d;
    return 0;
}

int real_driver_vmm(gm_vmm_api_t *api)
{
    static const char *const names[] = {"cuMemAddressReserve", "cuMemAddressFree", "cuMemCreate", "cuMemRelease",
                                        "cuMemMap", "cuMemUnmap", "cuMemSetAccess", "cuMemGetAllocationGranularity",
                                        "cuDeviceGetAttribute", "cuDeviceCanAccessPeer"};
    void *fn[sizeof names / sizeof *names];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!(fn[i] = lookup_driver(names[i])))
            return -1;
    _Static_assert(sizeof *api == sizeof fn, "one pointer per name");
    memcpy(api, fn, sizeof fn);
    return 0;
}
