/* CUPTI observation. The callback runs inside driver calls, maybe under a gmshim device lock:
 * it ignores calls made inside gmshim (gm_depth), takes only leaf locks, the stacks lock and the
 * log's chunk, never a pool lock, and never changes what the driver call returns. */
#include "cupti.h"
#include "common.h"
#include "devctx.h"
#include "diag.h"
#include "evlog.h"
#include "logrec.h"
#include "state.h"
#include "requester.h"
#include "stacks.h"
#include "trust.h"

/* NVIDIA's header (the include path has CUDA's directory first; ours is "cupti.h"): callback
 * types, callback ids and the parameter structs of every driver function. */
#include <cupti.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uthash.h>

#define MAX_CANDIDATES 48

typedef CUptiResult (*subscribe_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
typedef CUptiResult (*subscribe_v2_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
                                       CUpti_SubscriberParams *);
typedef CUptiResult (*unsubscribe_fn)(CUpti_SubscriberHandle);
typedef CUptiResult (*enable_fn)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
typedef CUptiResult (*result_string_fn)(CUptiResult, const char **);
typedef CUptiResult (*device_id_fn)(CUcontext, uint32_t *);
typedef CUresult (*mem_get_info_fn)(size_t *, size_t *);
typedef CUresult (*ctx_get_device_fn)(CUdevice *);
typedef CUresult (*device_name_fn)(char *, int, CUdevice);

enum { START_NONE, START_BUSY, START_RUNNING, START_FAILED };

static struct {
    int state;                  /* START_*, atomic */
    int kind;                   /* GMLOG_KIND_OBSERVED or GMLOG_KIND_FOREIGN, atomic */
    int injecting;              /* InitializeInjection is initializing: it will start CUPTI */
    void *lib;
    char path[PATH_MAX];
    subscribe_fn subscribe;
    subscribe_v2_fn subscribe_v2;
    unsubscribe_fn unsubscribe;
    enable_fn enable;
    result_string_fn result_string;
    device_id_fn device_id;
    mem_get_info_fn mem_get_info;     /* from the loaded libcuda.so.1, NULL if none */
    ctx_get_device_fn ctx_get_device;
    device_name_fn device_name;
    CUpti_SubscriberHandle subscriber;
} C;

static int warned;              /* the one CUPTI warning of the process */

/* The driver entry points that make or release memory; the ones in `required` must be
 * accepted by cuptiEnableCallback or CUPTI is unusable for gmshim. */
static const struct {
    CUpti_CallbackId cbid;
    int required;
} watched[] = {
    {CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 1},
    {CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, 1},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuMemCreate, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuMemRelease, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuMemMap, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, 0},
};

/* ---- finding libcupti ---------------------------------------------------------------------- */

typedef struct cand {
    char *out;
    size_t len;
    int max, n;
} cand_t;

static void cand_add(cand_t *c, const char *path)
{
    if (c->n >= c->max || strlen(path) >= c->len)
        return;
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->out + (size_t)i * c->len, path))
            return;
    strcpy(c->out + (size_t)c->n * c->len, path);
    c->n++;
}

static void cand_add_dir(cand_t *c, const char *dir, const char *sub)
{
    static const char *const names[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
    char p[PATH_MAX];
    for (size_t i = 0; i < GM_ARRAY_LEN(names); i++)
        if (snprintf(p, sizeof p, "%s%s/%s", dir, sub, names[i]) < (int)sizeof p)
            cand_add(c, p);
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

typedef struct dir_search {
    cand_t *c;
    const char *prefix;         /* base-name prefix of the loaded objects wanted */
    int up;                     /* path components to drop (1: the object's own directory) */
    const char *const *subs;    /* directories under what is left */
} dir_search_t;

static int cb_dirs(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    dir_search_t *s = data;
    if (!info->dlpi_name || info->dlpi_name[0] != '/' ||
        strncmp(base_name(info->dlpi_name), s->prefix, strlen(s->prefix)))
        return 0;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", info->dlpi_name);
    for (int i = 0; i < s->up; i++) {
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir)
            return 0;
        *slash = 0;
    }
    for (int i = 0; s->subs[i]; i++)
        cand_add_dir(s->c, dir, s->subs[i]);
    return 0;
}

static int env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0");
}

int cupti_candidates(char *out, size_t len, int max)
{
    cand_t c = {out, len, max, 0};
    int no_system = env_flag("GMSHIM_TEST_CUPTI_NO_SYSTEM");
    const char *home = getenv("CUDA_HOME");
    if (home && *home) {
        cand_add_dir(&c, home, "/extras/CUPTI/lib64");
        cand_add_dir(&c, home, "/lib64");
    }
    if (!no_system)
        cand_add_dir(&c, "/usr/local/cuda", "/lib64");
    static const char *const here[] = {"", NULL};
    dir_search_t cudart = {&c, "libcudart.so", 1, here};
    dl_iterate_phdr(cb_dirs, &cudart);
    dir_search_t cuda = {&c, "libcuda.so", 1, here};
    dl_iterate_phdr(cb_dirs, &cuda);
    /* site-packages/torch/lib/libtorch*.so: the CUPTI wheel is site-packages/nvidia/... */
    static const char *const wheels[] = {"/nvidia/cu13/lib", "/nvidia/cuda_cupti/lib", NULL};
    dir_search_t torch = {&c, "libtorch", 3, wheels};
    dl_iterate_phdr(cb_dirs, &torch);
    if (!no_system) {
        cand_add(&c, "libcupti.so.13");
        cand_add(&c, "libcupti.so.12");
        cand_add(&c, "libcupti.so");
    }
    return c.n;
}

static int cb_loaded_cupti(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    if (!info->dlpi_name || strncmp(base_name(info->dlpi_name), "libcupti.so", 11))
        return 0;
    snprintf(data, PATH_MAX, "%s", info->dlpi_name);
    return 1;
}

const char *cupti_loaded_path(void)
{
    return C.lib ? C.path : NULL;
}

/* Loads libcupti and resolves what gmshim uses. 0, or -1 with *why set. */
static int load_cupti(char *why, size_t why_len)
{
    char found[PATH_MAX] = "";
    void *h = NULL;
    /* One already in the process (PyTorch's profiler links one) is the one to use: a second
     * copy would compete with it for the driver's callbacks. */
    if (dl_iterate_phdr(cb_loaded_cupti, found))
        h = dlopen(found, RTLD_NOW | RTLD_NOLOAD);
    char first_error[512] = "";
    if (!h) {
        char *cand = malloc((size_t)MAX_CANDIDATES * PATH_MAX);
        int n = cand ? cupti_candidates(cand, PATH_MAX, MAX_CANDIDATES) : 0;
        for (int i = 0; i < n && !h; i++) {
            const char *p = cand + (size_t)i * PATH_MAX;
            if (strchr(p, '/')) {
                /* Only a file another user cannot have planted or changed: with its directory
                 * and those above it trusted (trust.h), the name stays that file until loaded. */
                char reason[PATH_MAX + 160];
                int fd = trust_open_path(p, O_RDONLY, reason, sizeof reason);
                if (fd < 0) {
                    if (errno != ENOENT && !first_error[0])
                        snprintf(first_error, sizeof first_error, "%.500s", reason);
                    continue;
                }
                close(fd);
            }
            h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
            if (h) {
                snprintf(found, sizeof found, "%s", p);
            } else if (strchr(p, '/') && !first_error[0]) {
                const char *e = dlerror();
                snprintf(first_error, sizeof first_error, "%s", e ? e : p);
            }
        }
        free(cand);
    }
    if (!h) {
        if (first_error[0])
            snprintf(why, why_len, "libcupti could not be loaded (%s)", first_error);
        else
            snprintf(why, why_len, "no libcupti found (looked in $CUDA_HOME, /usr/local/cuda/lib64, "
                     "next to libcudart, libcuda and libtorch, and the loader's path)");
        return -1;
    }
    C.subscribe = (subscribe_fn)dlsym(h, "cuptiSubscribe");
    C.subscribe_v2 = (subscribe_v2_fn)dlsym(h, "cuptiSubscribe_v2");
    C.unsubscribe = (unsubscribe_fn)dlsym(h, "cuptiUnsubscribe");
    C.enable = (enable_fn)dlsym(h, "cuptiEnableCallback");
    C.result_string = (result_string_fn)dlsym(h, "cuptiGetResultString");
    C.device_id = (device_id_fn)dlsym(h, "cuptiGetDeviceId");
    if (!C.subscribe || !C.enable) {
        snprintf(why, why_len, "%s has no cuptiSubscribe/cuptiEnableCallback", found);
        dlclose(h);
        return -1;
    }
    C.lib = h;
    snprintf(C.path, sizeof C.path, "%s", found);
    return 0;
}

/* The few driver functions the callback may call, from a libcuda already loaded (never load
 * one: that would start a driver in a process that did not ask for it). */
static void resolve_driver(void)
{
    if (__atomic_load_n(&C.mem_get_info, __ATOMIC_ACQUIRE))
        return;
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return;
    __atomic_store_n(&C.ctx_get_device, (ctx_get_device_fn)dlsym(h, "cuCtxGetDevice"), __ATOMIC_RELEASE);
    __atomic_store_n(&C.device_name, (device_name_fn)dlsym(h, "cuDeviceGetName"), __ATOMIC_RELEASE);
    __atomic_store_n(&C.mem_get_info, (mem_get_info_fn)dlsym(h, "cuMemGetInfo_v2"), __ATOMIC_RELEASE);
    dlclose(h); /* drops the reference NOLOAD took; the library stays */
}

static const char *result_text(CUptiResult r)
{
    const char *s = NULL;
    if (C.result_string && C.result_string(r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "error";
}

/* ---- what CUPTI saw and gmshim logged: live pointers and physical VMM allocations ---------- */

typedef struct live {
    uint64_t ptr, size;
    int dev;
    uint8_t kind;
    uint8_t vmm;                /* a cuMemMap mapping, released by cuMemUnmap */
    struct live *gone;          /* unmap_range's list of removed entries */
    UT_hash_handle hh;
} live_t;

typedef struct phys {
    uint64_t handle, size;
    int dev;
    uint32_t site, lib;
    UT_hash_handle hh;
} phys_t;

static pthread_mutex_t tab_lock = PTHREAD_MUTEX_INITIALIZER;
static live_t *live_tab;
static phys_t *phys_tab;

static void live_put(uint64_t ptr, uint64_t size, int dev, int kind, int vmm)
{
    live_t *e = malloc(sizeof *e);
    if (!e)
        return;
    memset(e, 0, sizeof *e);
    e->ptr = ptr;
    e->size = size;
    e->dev = dev;
    e->kind = (uint8_t)kind;
    e->vmm = (uint8_t)vmm;
    pthread_mutex_lock(&tab_lock);
    live_t *old = NULL;
    HASH_FIND(hh, live_tab, &ptr, sizeof ptr, old);
    if (old) { /* its free went unseen: the new allocation replaces it */
        HASH_DEL(live_tab, old);
        free(old);
    }
    HASH_ADD(hh, live_tab, ptr, sizeof e->ptr, e);
    pthread_mutex_unlock(&tab_lock);
}

/* Removes ptr; returns 1 with its device and kind if it was there. */
static int live_take(uint64_t ptr, int *dev, int *kind)
{
    live_t *e = NULL;
    pthread_mutex_lock(&tab_lock);
    HASH_FIND(hh, live_tab, &ptr, sizeof ptr, e);
    if (e && !e->vmm)
        HASH_DEL(live_tab, e);
    else
        e = NULL;
    pthread_mutex_unlock(&tab_lock);
    if (!e)
        return 0;
    *dev = e->dev;
    *kind = e->kind;
    free(e);
    return 1;
}

static void log_free(uint64_t ptr, int dev, int kind, uint64_t now)
{
    evlog_free(dev, (unsigned)kind << GMLOG_KIND_SHIFT, ptr, 0, now, now);
}

/* cuMemUnmap(ptr, size): a FREE for every mapping that starts inside the range. */
static void unmap_range(uint64_t ptr, uint64_t size, uint64_t now)
{
    uint64_t end = ptr + size < ptr ? UINT64_MAX : ptr + size;
    live_t *gone = NULL, *e, *tmp;
    pthread_mutex_lock(&tab_lock);
    uint64_t at = ptr;
    /* Mappings side by side (PyTorch's expandable segments): one lookup each. */
    while (at < end) {
        e = NULL;
        HASH_FIND(hh, live_tab, &at, sizeof at, e);
        if (!e || !e->vmm || !e->size)
            break;
        HASH_DEL(live_tab, e);
        e->gone = gone;
        gone = e;
        at += e->size;
    }
    if (at < end) {
        HASH_ITER(hh, live_tab, e, tmp) {
            if (e->vmm && e->ptr >= at && e->ptr < end) {
                HASH_DEL(live_tab, e);
                e->gone = gone;
                gone = e;
            }
        }
    }
    pthread_mutex_unlock(&tab_lock);
    while (gone) {
        e = gone;
        gone = e->gone;
        log_free(e->ptr, e->dev, e->kind, now);
        free(e);
    }
}

static void phys_put(uint64_t handle, uint64_t size, int dev, uint32_t site, uint32_t lib)
{
    phys_t *p = malloc(sizeof *p);
    if (!p)
        return;
    memset(p, 0, sizeof *p);
    p->handle = handle;
    p->size = size;
    p->dev = dev;
    p->site = site;
    p->lib = lib;
    pthread_mutex_lock(&tab_lock);
    phys_t *old = NULL;
    HASH_FIND(hh, phys_tab, &handle, sizeof handle, old);
    if (old) {
        HASH_DEL(phys_tab, old);
        free(old);
    }
    HASH_ADD(hh, phys_tab, handle, sizeof p->handle, p);
    pthread_mutex_unlock(&tab_lock);
}

static int phys_get(uint64_t handle, phys_t *out)
{
    phys_t *p = NULL;
    pthread_mutex_lock(&tab_lock);
    HASH_FIND(hh, phys_tab, &handle, sizeof handle, p);
    if (p)
        *out = *p;
    pthread_mutex_unlock(&tab_lock);
    return p != NULL;
}

static void phys_forget(uint64_t handle)
{
    phys_t *p = NULL;
    pthread_mutex_lock(&tab_lock);
    HASH_FIND(hh, phys_tab, &handle, sizeof handle, p);
    if (p)
        HASH_DEL(phys_tab, p);
    pthread_mutex_unlock(&tab_lock);
    free(p);
}

/* ---- the callback ---------------------------------------------------------------------------- */

static __thread int in_callback __attribute__((tls_model("initial-exec")));

static int device_of(CUcontext ctx)
{
    uint32_t id;
    if (ctx && C.device_id && C.device_id(ctx, &id) == CUPTI_SUCCESS && id < GMLOG_NO_DEVICE)
        return (int)id;
    ctx_get_device_fn get = __atomic_load_n(&C.ctx_get_device, __ATOMIC_ACQUIRE);
    CUdevice d;
    if (get && get(&d) == CUDA_SUCCESS && d >= 0 && d < GMLOG_NO_DEVICE)
        return d;
    return 0;
}

/* A device allocation the driver refused: an OOM record, so that `gmshim oom` finds it. */
static GM_COLD void log_oom(int dev, uint64_t request)
{
    gmlog_oom_t r;
    memset(&r, 0, sizeof r);
    r.request = request;
    r.segment = request;
    resolve_driver();
    mem_get_info_fn info = __atomic_load_n(&C.mem_get_info, __ATOMIC_ACQUIRE);
    size_t f = 0, t = 0;
    /* At the exit of the failed call, on its thread: the context is current and the call has
     * let go of the driver. Its own callback is not enabled, and in_callback guards anyway. */
    if (info && info(&f, &t) == CUDA_SUCCESS) {
        r.driver_free = f;
        r.driver_total = t;
    }
    r.site = stacks_site_skip(requester_is_machinery);
    logrec_oom(dev, 0, &r);
}

/* Injection mode has no pool to describe the devices: the first allocation seen on a device,
 * whose context is current on this thread, writes its DEVICE record, unless the pool has
 * (a call through the hooks; one made later still writes its own, which readers take twice). */
static void describe_device(int dev)
{
    static unsigned char described[GM_MAX_DEVICES];
    if (dev < 0 || dev >= GM_MAX_DEVICES || devctx_peek(dev) ||
        __atomic_exchange_n(&described[dev], 1, __ATOMIC_ACQ_REL))
        return;
    resolve_driver();
    mem_get_info_fn info = __atomic_load_n(&C.mem_get_info, __ATOMIC_ACQUIRE);
    device_name_fn get_name = __atomic_load_n(&C.device_name, __ATOMIC_ACQUIRE);
    size_t f = 0, t = 0;
    char name[256] = "";
    if (info)
        info(&f, &t);
    if (!get_name || get_name(name, (int)sizeof name, dev) != CUDA_SUCCESS)
        name[0] = 0;
    name[sizeof name - 1] = 0;
    logrec_device(dev, t, f, name, sizeof name);
}

static void at_api_enter(CUpti_CallbackId cbid, const CUpti_CallbackData *cb, int inside)
{
    uint64_t now = gm_now_ns();
    const void *prm = cb->functionParams;
    int dev, kind;
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2: {
        /* Also from inside gmshim: the hook forwards frees of memory it does not own without
         * logging a FREE. The pool's own segments were never in the table. */
        uint64_t p = ((const cuMemFree_v2_params *)prm)->dptr;
        if (p && live_take(p, &dev, &kind))
            log_free(p, dev, kind, now);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
        /* The layouts of the two are the same. From inside gmshim the hook logged it already. */
        uint64_t p = ((const cuMemFreeAsync_params *)prm)->dptr;
        if (p && live_take(p, &dev, &kind) && !inside)
            log_free(p, dev, kind, now);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost: {
        uint64_t p = (uint64_t)(uintptr_t)((const cuMemFreeHost_params *)prm)->p;
        if (p && live_take(p, &dev, &kind) && !inside)
            log_free(p, dev, kind, now);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
        const cuMemUnmap_params *u = prm;
        unmap_range(u->ptr, u->size, now);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease:
        /* Mappings of it stay live (and logged) until cuMemUnmap. */
        phys_forget(((const cuMemRelease_params *)prm)->handle);
        break;
    default:
        if (!inside && cb->correlationData)
            *cb->correlationData = now;
        break;
    }
}

/* What an allocation call asked for: where the driver writes the device (or host) pointer, and
 * the bytes. 0 for a call that is not one of these. */
static int alloc_request(CUpti_CallbackId cbid, const void *prm, CUresult res, CUdeviceptr **outp,
                         void ***host_outp, uint64_t *sizep)
{
    CUdeviceptr *out = NULL;
    void **host_out = NULL;
    uint64_t size = 0;
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
        const cuMemAlloc_v2_params *p = prm;
        out = p->dptr;
        size = p->bytesize;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
        const cuMemAllocPitch_v2_params *p = prm;
        out = p->dptr;
        size = (uint64_t)(res == CUDA_SUCCESS && p->pPitch ? *p->pPitch : p->WidthInBytes) * p->Height;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
        const cuMemAllocManaged_params *p = prm;
        out = p->dptr;
        size = p->bytesize;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
        const cuMemAllocAsync_params *p = prm;
        out = p->dptr;
        size = p->bytesize;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
        const cuMemAllocFromPoolAsync_params *p = prm;
        out = p->dptr;
        size = p->bytesize;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
        const cuMemAllocHost_v2_params *p = prm;
        host_out = p->pp;
        size = p->bytesize;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
        const cuMemHostAlloc_params *p = prm;
        host_out = p->pp;
        size = p->bytesize;
        break;
    }
    default:
        return 0;
    }
    *outp = out;
    *host_outp = host_out;
    *sizep = size;
    return 1;
}

/* Virtual memory management: physical memory created (remembered with its call site), then
 * mapped (logged then, as the allocation the program sees). */
static void at_vmm_exit(CUpti_CallbackId cbid, const CUpti_CallbackData *cb, const void *prm, CUresult res,
                        int kind, uint64_t now, uint64_t t0)
{
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
        const cuMemCreate_params *p = prm;
        int dev = p->prop && p->prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE
                      ? p->prop->location.id : device_of(cb->context);
        if (res == CUDA_ERROR_OUT_OF_MEMORY)
            log_oom(dev, p->size);
        else if (res == CUDA_SUCCESS && p->handle)
            phys_put(*p->handle, p->size, dev, stacks_site_skip(requester_is_machinery), requester_library());
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
        const cuMemMap_params *p = prm;
        phys_t ph;
        /* Imported handles (another process's memory) were never created here: not ours. */
        if (res != CUDA_SUCCESS || !p->ptr || !phys_get(p->handle, &ph))
            return;
        live_put(p->ptr, p->size, ph.dev, kind, 1);
        evlog_alloc(ph.dev, (unsigned)kind << GMLOG_KIND_SHIFT, p->ptr, p->size, ph.lib, ph.site, now, t0);
        return;
    }
    default:
        return;
    }
}

static void at_api_exit(CUpti_CallbackId cbid, const CUpti_CallbackData *cb, int inside)
{
    if (inside)
        return; /* gmshim's own call (the pool's segments) or the runtime working for a hook */
    const void *prm = cb->functionParams;
    CUresult res = cb->functionReturnValue ? *(const CUresult *)cb->functionReturnValue : CUDA_SUCCESS;
    uint64_t now = gm_now_ns();
    uint64_t t0 = cb->correlationData && *cb->correlationData ? *cb->correlationData : now;
    int kind = __atomic_load_n(&C.kind, __ATOMIC_RELAXED);
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemCreate || cbid == CUPTI_DRIVER_TRACE_CBID_cuMemMap) {
        at_vmm_exit(cbid, cb, prm, res, kind, now, t0);
        return;
    }
    CUdeviceptr *out;
    void **host_out;
    uint64_t size;
    if (!alloc_request(cbid, prm, res, &out, &host_out, &size))
        return;
    if (host_out) {
        if (res != CUDA_SUCCESS || !*host_out)
            return;
        uint64_t ptr = (uint64_t)(uintptr_t)*host_out;
        int dev = device_of(cb->context);
        live_put(ptr, size, dev, GMLOG_KIND_HOST, 0);
        evlog_alloc(dev, GMLOG_KIND_HOST << GMLOG_KIND_SHIFT, ptr, size, 0, stacks_site_skip(requester_is_machinery), now, t0);
        return;
    }
    int dev = device_of(cb->context);
    if (res == CUDA_ERROR_OUT_OF_MEMORY) {
        log_oom(dev, size);
        return;
    }
    if (res != CUDA_SUCCESS || !out || !*out)
        return;
    uint64_t ptr = *out;
    if (kind == GMLOG_KIND_OBSERVED)
        describe_device(dev);
    uint32_t site = stacks_site_skip(requester_is_machinery);
    uint32_t lib = requester_library();
    live_put(ptr, size, dev, kind, 0);
    evlog_alloc(dev, (unsigned)kind << GMLOG_KIND_SHIFT, ptr, size, lib, site, now, t0);
}

static void CUPTIAPI on_driver_call(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                    const void *data)
{
    (void)userdata;
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API || !data || in_callback)
        return;
    if (__atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) == GM_CHILD || !evlog_enabled())
        return;
    const CUpti_CallbackData *cb = data;
    int depth = gm_depth;
    in_callback = 1;
    gm_depth = 1; /* whatever runs below (backtrace, dlsym, a driver call) passes the hooks */
    if (cb->callbackSite == CUPTI_API_ENTER)
        at_api_enter(cbid, cb, depth != 0);
    else
        at_api_exit(cbid, cb, depth != 0);
    gm_depth = depth;
    in_callback = 0;
}

/* ---- starting ------------------------------------------------------------------------------ */

static int start_impl(int kind)
{
    const char *loses = kind == GMLOG_KIND_OBSERVED
        ? "injection mode records nothing"
        : "the log misses the allocations that bypass cudaMalloc (cuBLAS/cuDNN/NCCL workspaces, "
          "the driver API, a static cudart)";
    if (!evlog_enabled()) {
        diag_verbose("CUPTI observation not started: no log is being written");
        return -1;
    }
    char why[PATH_MAX + 256];
    if (load_cupti(why, sizeof why) != 0) {
        diag_warn_once(&warned, "CUPTI: %s; %s", why, loses);
        return -1;
    }
    __atomic_store_n(&C.kind, kind, __ATOMIC_RELEASE);
    requester_init();
    char other[128] = "";
    CUptiResult r;
    if (C.subscribe_v2) {
        CUpti_SubscriberParams p;
        memset(&p, 0, sizeof p);
        p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
        p.subscriberName = "gmshim";
        p.oldSubscriberName = other;
        p.oldSubscriberSize = sizeof other;
        r = C.subscribe_v2(&C.subscriber, on_driver_call, NULL, &p);
    } else {
        r = C.subscribe(&C.subscriber, on_driver_call, NULL);
    }
    other[sizeof other - 1] = 0;
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        diag_warn_once(&warned, "CUPTI is taken by %s (it allows one subscriber per process: nsys, ncu, "
                       "compute-sanitizer and profilers use it); %s", other[0] ? other : "another tool", loses);
        return -1;
    }
    if (r != CUPTI_SUCCESS) {
        diag_warn_once(&warned, "CUPTI (%s) is unusable: cuptiSubscribe: %s (%d); %s", C.path,
                       result_text(r), (int)r, loses);
        return -1;
    }
    int on = 0;
    for (size_t i = 0; i < GM_ARRAY_LEN(watched); i++) {
        CUptiResult e = C.enable(1, C.subscriber, CUPTI_CB_DOMAIN_DRIVER_API, watched[i].cbid);
        if (e == CUPTI_SUCCESS) {
            on++;
        } else if (watched[i].required) {
            if (C.unsubscribe)
                C.unsubscribe(C.subscriber);
            diag_warn_once(&warned, "CUPTI (%s) is unusable: cuptiEnableCallback: %s (%d); %s", C.path,
                           result_text(e), (int)e, loses);
            return -1;
        }
    }
    resolve_driver();
    diag_verbose("CUPTI: %s; %d allocation entry points observed, logged as %s", C.path, on,
                 kind == GMLOG_KIND_OBSERVED ? "observed" : "foreign");
    return 0;
}

static int start(int kind)
{
    int expected = START_NONE;
    if (!__atomic_compare_exchange_n(&C.state, &expected, START_BUSY, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return expected == START_RUNNING ? 0 : -1;
    /* dlopen and CUPTI may call into CUDA: those calls go straight through the hooks. */
    int depth = gm_depth;
    gm_depth = 1;
    int rc = start_impl(kind);
    gm_depth = depth;
    __atomic_store_n(&C.state, rc == 0 ? START_RUNNING : START_FAILED, __ATOMIC_RELEASE);
    return rc;
}

int cupti_start(int kind)
{
    /* Under InitializeInjection the shim's init leaves the start (and the kind) to it. */
    if (__atomic_load_n(&C.injecting, __ATOMIC_ACQUIRE))
        return 0;
    return start(kind);
}

static int injection_only;

int cupti_injection_only(void)
{
    return __atomic_load_n(&injection_only, __ATOMIC_ACQUIRE);
}

void cupti_set_injection_only(void)
{
    __atomic_store_n(&injection_only, 1, __ATOMIC_RELEASE);
}

void cupti_set_injecting(int on)
{
    __atomic_store_n(&C.injecting, on, __ATOMIC_RELEASE);
}

int cupti_start_as(int kind)
{
    return start(kind);
}
