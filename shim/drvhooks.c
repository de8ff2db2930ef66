/* Entry points for streams made through the driver API. GPU order is safe only if every stream
 * that can touch pool memory is made to wait for the fences, so gmshim must see the streams that
 * libraries create below the runtime it hooks: through libcuda's own symbols, through
 * cuGetProcAddress (how every CUDA runtime, a static one inside NCCL included, and
 * cudaGetDriverEntryPoint reach the driver), or through dlsym on libcuda's handle (how a runtime
 * finds cuGetProcAddress). So this file exports cuStreamCreate, cuStreamCreateWithPriority,
 * cuStreamDestroy(_v2), cuGreenCtxStreamCreate, cuGetProcAddress(_v2) and dlsym: dlsym hands out
 * the wrappers for those names and jumps to glibc's for every other, with the caller's return
 * address intact (RTLD_NEXT keeps its meaning); cuGetProcAddress hands out the wrappers in place
 * of the driver's functions. A driver stream of the device's primary context joins the fences as
 * a runtime stream does; any other (a context of its own, a green context), a driver function
 * gmshim cannot wrap, or gmshim not being the process's dlsym makes fencepol_streams_unwatched
 * stop GMSHIM_GPU_ORDER=auto. The driver's mapping calls (cuMemAddressReserve, cuMemCreate,
 * cuMemMap, cuMemUnmap, cuMemRelease) handed out by cuGetProcAddress are wrapped too: PyTorch's
 * expandable segments make no cudaMalloc, so their first mapping is where the PyTorch bridge
 * attaches (torchload.h); the physical memory other libraries create and map (NCCL's buffers) is
 * logged as theirs (drvmem.h), PyTorch's own left to the bridge once it follows the allocator.
 * cuMemAlloc_v2 and cuMemFree_v2, handed out by cuGetProcAddress or dlsym, are wrapped to log
 * what libraries with their own runtime take from the driver, named by the library (drvmem.h):
 * the card's ledger. Each wrapper's driver call runs inside gmshim, so that CUPTI does not log
 * it again. */
#include "drvhooks.h"
#include "alloc.h"
#include "drvmem.h"
#include "fencepol.h"
#include "init.h"
#include "torchload.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

/* dlsym runs for sanitizers' own start-up lookups, before their runtime can check memory: the path
 * from dlsym to glibc's is never instrumented, and compares names without library calls. */
#define GM_UNCHECKED __attribute__((no_sanitize("address", "undefined", "thread")))

typedef int cu_result_t;
typedef void *(*dlsym_fn)(void *, const char *);
typedef cu_result_t (*create_fn)(void **, unsigned);
typedef cu_result_t (*create_prio_fn)(void **, unsigned, int);
typedef cu_result_t (*destroy_fn)(void *);
typedef cu_result_t (*green_fn)(void **, void *, unsigned, int);
typedef cu_result_t (*proc_fn)(const char *, void **, int, unsigned long long);
typedef cu_result_t (*proc2_fn)(const char *, void **, int, unsigned long long, int *);
typedef cu_result_t (*reserve_fn)(unsigned long long *, size_t, size_t, unsigned long long, unsigned long long);
typedef cu_result_t (*mem_create_fn)(unsigned long long *, size_t, const void *, unsigned long long);
typedef cu_result_t (*mem_map_fn)(unsigned long long, size_t, size_t, unsigned long long, unsigned long long);
typedef cu_result_t (*mem_unmap_fn)(unsigned long long, size_t);
typedef cu_result_t (*mem_release_fn)(unsigned long long);
typedef cu_result_t (*mem_alloc_fn)(unsigned long long *, size_t);
typedef cu_result_t (*mem_free_fn)(unsigned long long);

enum kind { K_CREATE, K_CREATE_PRIO, K_DESTROY, K_GREEN, K_PROC, K_PROC2, K_RESERVE, K_MEM_CREATE, K_MEM_MAP,
            K_MEM_UNMAP, K_MEM_RELEASE, K_MEM_ALLOC, K_MEM_FREE, K_COUNT };
#define COPIES 4 /* distinct driver functions one kind may come as (versions, aliases) */

static const struct {
    const char *name;
    enum kind kind;
} watched[] = {
    {"cuStreamCreate", K_CREATE},       {"cuStreamCreateWithPriority", K_CREATE_PRIO},
    {"cuStreamDestroy", K_DESTROY},     {"cuStreamDestroy_v2", K_DESTROY},
    {"cuGreenCtxStreamCreate", K_GREEN}, {"cuGetProcAddress", K_PROC},
    {"cuGetProcAddress_v2", K_PROC2},  /* the exported ones end here (exported_real's indexes) */
    {"cuMemAddressReserve", K_RESERVE}, {"cuMemCreate", K_MEM_CREATE},
    {"cuMemMap", K_MEM_MAP},            {"cuMemUnmap", K_MEM_UNMAP},
    {"cuMemRelease", K_MEM_RELEASE},    {"cuMemAlloc_v2", K_MEM_ALLOC},
    {"cuMemFree_v2", K_MEM_FREE},
};

/* The driver's functions behind each wrapper copy (set once, by compare-and-swap). */
static void *real[K_COUNT][COPIES];
/* The driver's functions behind the exported symbols, in `watched` order (resolved at first call). */
static void *exported_real[GM_ARRAY_LEN(watched)];

dlsym_fn gm_real_dlsym __attribute__((visibility("hidden")));

/* ---- what a new stream means ---------------------------------------------------------------- */

typedef cu_result_t (*ctx_get_fn)(void **);
typedef cu_result_t (*dev_get_fn)(int *);
typedef cu_result_t (*primary_state_fn)(int, unsigned *, int *);
typedef cu_result_t (*primary_retain_fn)(void **, int);
typedef cu_result_t (*primary_release_fn)(int);

static struct {
    ctx_get_fn ctx_current;
    dev_get_fn ctx_device;
    primary_state_fn primary_state;
    primary_retain_fn primary_retain;
    primary_release_fn primary_release;
    int resolved;
} drv;

static pthread_mutex_t drv_lock = PTHREAD_MUTEX_INITIALIZER;

/* The context helpers, from the object that holds the driver function `fn` (once they are all
 * found; under drv_lock). */
static void resolve_context_calls_locked(void *fn)
{
    Dl_info info;
    if (drv.resolved || !dladdr(fn, &info) || !info.dli_fname)
        return;
    void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return;
    drv.ctx_current = (ctx_get_fn)gm_real_dlsym(h, "cuCtxGetCurrent");
    drv.ctx_device = (dev_get_fn)gm_real_dlsym(h, "cuCtxGetDevice");
    drv.primary_state = (primary_state_fn)gm_real_dlsym(h, "cuDevicePrimaryCtxGetState");
    drv.primary_retain = (primary_retain_fn)gm_real_dlsym(h, "cuDevicePrimaryCtxRetain");
    drv.primary_release = (primary_release_fn)gm_real_dlsym(h, "cuDevicePrimaryCtxRelease_v2");
    dlclose(h);
    drv.resolved = drv.ctx_current && drv.ctx_device && drv.primary_state && drv.primary_retain && drv.primary_release;
}

/* Whether the calling thread's current context (the new stream's) is its device's primary one,
 * the context the runtime, and so the pool's fences, use. */
static int in_primary_context(void *fn)
{
    void *ctx = NULL, *primary = NULL;
    int dev = -1, active = 0, same = 0;
    unsigned flags = 0;
    pthread_mutex_lock(&drv_lock);
    resolve_context_calls_locked(fn);
    if (drv.resolved && drv.ctx_current(&ctx) == 0 && ctx && drv.ctx_device(&dev) == 0 &&
        drv.primary_state(dev, &flags, &active) == 0 && active &&
        drv.primary_retain(&primary, dev) == 0) { /* active: retaining only counts a reference */
        drv.primary_release(dev);
        same = primary == ctx;
    }
    pthread_mutex_unlock(&drv_lock);
    return same;
}

static void stream_made(void *fn, void *s, unsigned flags, int green)
{
    /* The runtime's own cudaStreamCreate* reach here too: its hook registers the stream. */
    if (gm_in_stream_hook || !s || !gm_enter())
        return;
    if (green)
        fencepol_streams_unwatched("a stream of a green context was created (cuGreenCtxStreamCreate)");
    else if (!in_primary_context(fn))
        fencepol_streams_unwatched("a stream was created in a context other than its device's primary one");
    else
        alloc_stream_created((cudaStream_t)s, flags & cudaStreamNonBlocking);
    gm_leave();
}

static void stream_unmaking(void *s)
{
    if (gm_in_stream_hook || !s || !gm_enter())
        return;
    alloc_stream_destroying((cudaStream_t)s);
    gm_leave();
}

/* A mapping call from `caller`: the first from PyTorch's allocator library attaches the bridge
 * (its allocator exists by then: only its malloc maps memory; the attach takes that device's
 * lock, which this thread holds, and it is recursive). One load and a branch once settled. */
static void mapping_made_by(const void *caller)
{
    if (likely(__atomic_load_n(&torchload_settled, __ATOMIC_RELAXED)) || !gm_enter())
        return;
    if (__atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) != GM_CHILD)
        torchload_note_malloc(caller);
    gm_leave();
}

/* The head of the driver's CUmemAllocationProp: where the memory lies. */
typedef struct mem_prop_head {
    int type, handle_types;
    struct {
        int type, id;
    } location;
} mem_prop_head_t;
#define CU_MEM_LOCATION_TYPE_DEVICE 1
#define CU_OUT_OF_MEMORY 2

/* A cuMemCreate from `caller` returned r: physical memory a library took (drvmem.h), unless it is
 * PyTorch's allocator's own while the bridge follows it (its segments are the bridge's events).
 * The properties are read only once the driver has read them (success or out of memory). */
static void handle_created(const void *caller, cu_result_t r, const unsigned long long *h, size_t size,
                           const void *prop, uint64_t t0)
{
    if ((r != 0 && r != CU_OUT_OF_MEMORY) || !prop || torchload_maps_followed(caller))
        return;
    const mem_prop_head_t *p = prop;
    if (p->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return; /* host memory (NUMA nodes): not the card's */
    drvmem_created(r, r == 0 && h ? *h : 0, size, p->location.id, t0);
}

/* ---- the wrappers ------------------------------------------------------------------------------ */

static void *wrap(enum kind k, void *fn);
static void *wrap_proc_result(const char *symbol, void *fn, int version);

#define COPY(i)                                                                                   \
    static cu_result_t create_##i(void **ph, unsigned flags)                                      \
    {                                                                                             \
        cu_result_t r = ((create_fn)real[K_CREATE][i])(ph, flags);                                \
        if (r == 0 && ph)                                                                         \
            stream_made(real[K_CREATE][i], *ph, flags, 0);                                        \
        return r;                                                                                 \
    }                                                                                             \
    static cu_result_t create_prio_##i(void **ph, unsigned flags, int prio)                       \
    {                                                                                             \
        cu_result_t r = ((create_prio_fn)real[K_CREATE_PRIO][i])(ph, flags, prio);                \
        if (r == 0 && ph)                                                                         \
            stream_made(real[K_CREATE_PRIO][i], *ph, flags, 0);                                   \
        return r;                                                                                 \
    }                                                                                             \
    static cu_result_t destroy_##i(void *s)                                                       \
    {                                                                                             \
        stream_unmaking(s);                                                                       \
        return ((destroy_fn)real[K_DESTROY][i])(s);                                               \
    }                                                                                             \
    static cu_result_t green_##i(void **ph, void *g, unsigned flags, int prio)                    \
    {                                                                                             \
        cu_result_t r = ((green_fn)real[K_GREEN][i])(ph, g, flags, prio);                         \
        if (r == 0 && ph)                                                                         \
            stream_made(real[K_GREEN][i], *ph, flags, 1);                                         \
        return r;                                                                                 \
    }                                                                                             \
    static cu_result_t proc_##i(const char *sym, void **pfn, int ver, unsigned long long flags)  \
    {                                                                                             \
        cu_result_t r = ((proc_fn)real[K_PROC][i])(sym, pfn, ver, flags);                         \
        if (r == 0 && pfn && *pfn)                                                                \
            *pfn = wrap_proc_result(sym, *pfn, ver);                                                   \
        return r;                                                                                 \
    }                                                                                             \
    static cu_result_t proc2_##i(const char *sym, void **pfn, int ver, unsigned long long flags, \
                                 int *status)                                                     \
    {                                                                                             \
        cu_result_t r = ((proc2_fn)real[K_PROC2][i])(sym, pfn, ver, flags, status);               \
        if (r == 0 && pfn && *pfn)                                                                \
            *pfn = wrap_proc_result(sym, *pfn, ver);                                                   \
        return r;                                                                                 \
    }                                                                                             \
    static cu_result_t reserve_##i(unsigned long long *p, size_t size, size_t align,              \
                                   unsigned long long addr, unsigned long long flags)             \
    {                                                                                             \
        mapping_made_by(__builtin_return_address(0));                                             \
        return ((reserve_fn)real[K_RESERVE][i])(p, size, align, addr, flags);                     \
    }                                                                                             \
    static cu_result_t mem_create_##i(unsigned long long *h, size_t size, const void *prop,       \
                                      unsigned long long flags)                                   \
    {                                                                                             \
        const void *caller = __builtin_return_address(0);                                         \
        mapping_made_by(caller);                                                                  \
        if (!gm_enter())                                                                          \
            return ((mem_create_fn)real[K_MEM_CREATE][i])(h, size, prop, flags);                  \
        uint64_t t0 = gm_now_ns();                                                                \
        cu_result_t r = ((mem_create_fn)real[K_MEM_CREATE][i])(h, size, prop, flags);             \
        handle_created(caller, r, h, size, prop, t0);                                             \
        gm_leave();                                                                               \
        return r;                                                                                 \
    }                                                                                             \
    static cu_result_t mem_map_##i(unsigned long long p, size_t size, size_t offset,              \
                                   unsigned long long h, unsigned long long flags)                \
    {                                                                                             \
        mapping_made_by(__builtin_return_address(0));                                             \
        if (!gm_enter())                                                                          \
            return ((mem_map_fn)real[K_MEM_MAP][i])(p, size, offset, h, flags);                   \
        cu_result_t r = ((mem_map_fn)real[K_MEM_MAP][i])(p, size, offset, h, flags);              \
        if (r == 0)                                                                               \
            drvmem_mapped(p, h);                                                                  \
        gm_leave();                                                                               \
        return r;                                                                                 \
    }                                                                                             \
    static cu_result_t mem_unmap_##i(unsigned long long p, size_t size)                           \
    {                                                                                             \
        if (!gm_enter())                                                                          \
            return ((mem_unmap_fn)real[K_MEM_UNMAP][i])(p, size);                                 \
        cu_result_t r = ((mem_unmap_fn)real[K_MEM_UNMAP][i])(p, size);                            \
        if (r == 0)                                                                               \
            drvmem_unmapped(p, size);                                                             \
        gm_leave();                                                                               \
        return r;                                                                                 \
    }                                                                                             \
    static cu_result_t mem_release_##i(unsigned long long h)                                      \
    {                                                                                             \
        if (!gm_enter())                                                                          \
            return ((mem_release_fn)real[K_MEM_RELEASE][i])(h);                                   \
        cu_result_t r = ((mem_release_fn)real[K_MEM_RELEASE][i])(h);                              \
        if (r == 0)                                                                               \
            drvmem_released(h);                                                                   \
        gm_leave();                                                                               \
        return r;                                                                                 \
    }                                                                                             \
    static cu_result_t mem_alloc_##i(unsigned long long *p, size_t size)                          \
    {                                                                                             \
        if (!gm_enter())                                                                          \
            return ((mem_alloc_fn)real[K_MEM_ALLOC][i])(p, size);                                 \
        uint64_t t0 = gm_now_ns();                                                                \
        cu_result_t r = ((mem_alloc_fn)real[K_MEM_ALLOC][i])(p, size);                            \
        drvmem_alloc(r, r == 0 && p ? *p : 0, size, t0);                                          \
        gm_leave();                                                                               \
        return r;                                                                                 \
    }                                                                                             \
    static cu_result_t mem_free_##i(unsigned long long p)                                         \
    {                                                                                             \
        if (!gm_enter())                                                                          \
            return ((mem_free_fn)real[K_MEM_FREE][i])(p);                                         \
        drvmem_free(p);                                                                           \
        cu_result_t r = ((mem_free_fn)real[K_MEM_FREE][i])(p);                                    \
        gm_leave();                                                                               \
        return r;                                                                                 \
    }
COPY(0)
COPY(1)
COPY(2)
COPY(3)

#define COPIES_OF(f) {(void *)f##_0, (void *)f##_1, (void *)f##_2, (void *)f##_3}
static void *const copies[K_COUNT][COPIES] = {
    COPIES_OF(create), COPIES_OF(create_prio), COPIES_OF(destroy),
    COPIES_OF(green),  COPIES_OF(proc),        COPIES_OF(proc2),
    COPIES_OF(reserve), COPIES_OF(mem_create), COPIES_OF(mem_map),
    COPIES_OF(mem_unmap), COPIES_OF(mem_release), COPIES_OF(mem_alloc),
    COPIES_OF(mem_free),
};

GM_UNCHECKED static int same_name(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

GM_UNCHECKED static int watched_index(const char *name)
{
    /* Every watched name starts "cuStream", "cuGreenCtx", "cuGetProc" or "cuMem": one compare for most. */
    if (!name || name[0] != 'c' || name[1] != 'u' || (name[2] != 'S' && name[2] != 'G' && name[2] != 'M'))
        return -1;
    for (size_t i = 0; i < GM_ARRAY_LEN(watched); i++)
        if (same_name(name, watched[i].name))
            return (int)i;
    return -1;
}

GM_UNCHECKED static int is_ours(void *fn);

/* The wrapper copy for driver function `fn` of kind k (fn itself if gmshim cannot wrap it). */
GM_UNCHECKED static void *wrap(enum kind k, void *fn)
{
    if (is_ours(fn))
        return fn;
    for (int i = 0; i < COPIES; i++) {
        void *seen = __atomic_load_n(&real[k][i], __ATOMIC_ACQUIRE);
        if (!seen && __atomic_compare_exchange_n(&real[k][i], &seen, fn, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return copies[k][i];
        if (seen == fn)
            return copies[k][i];
    }
    if (k < K_RESERVE)
        fencepol_streams_unwatched("the driver handed out more stream functions than gmshim can follow");
    return fn;
}

/* cuGetProcAddress(symbol, version) gave fn. Only the watched names are wrapped;
 * "cuGetProcAddress" itself is the _v2 function (one more parameter) when asked for CUDA 12.5 or
 * later (cudaTypedefs.h: PFN_cuGetProcAddress_v12050), unless it is one of libcuda's exported
 * symbols, which name their version. */
static void *wrap_proc_result(const char *symbol, void *fn, int version)
{
    int w = watched_index(symbol);
    if (w < 0)
        return fn;
    if (watched[w].kind != K_PROC && watched[w].kind != K_PROC2)
        return wrap(watched[w].kind, fn);
    Dl_info info;
    void *h = dladdr(fn, &info) && info.dli_fname ? dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD) : NULL;
    void *v1 = h ? gm_real_dlsym(h, "cuGetProcAddress") : NULL, *v2 = h ? gm_real_dlsym(h, "cuGetProcAddress_v2") : NULL;
    if (h)
        dlclose(h);
    if (fn == v2)
        return wrap(K_PROC2, fn);
    if (fn == v1)
        return wrap(K_PROC, fn);
    if (is_ours(fn))
        return fn;
    return wrap(version >= 12050 ? K_PROC2 : K_PROC, fn);
}

/* ---- dlsym ------------------------------------------------------------------------------------- */

/* glibc's dlsym: the default version since 2.34, else the first (x86-64's since 2002). */
GM_UNCHECKED static dlsym_fn find_real_dlsym(void)
{
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
    for (size_t i = 0; i < GM_ARRAY_LEN(versions); i++) {
        void *fn = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
        if (fn && !is_ours(fn))
            return (dlsym_fn)fn;
    }
    return NULL;
}

/* Called by the dlsym below before anything else: a wrapper for a watched name, else NULL (the
 * caller's lookup then goes to glibc untouched). RTLD_NEXT lookups are left alone: they are
 * relative to their caller, and an interposer asking for the next cuGetProcAddress wraps it
 * itself. */
__attribute__((visibility("hidden"), used)) GM_UNCHECKED void *drvhooks_dlsym_filter(void *handle, const char *name)
{
    if (unlikely(!gm_real_dlsym))
        __atomic_store_n(&gm_real_dlsym, find_real_dlsym(), __ATOMIC_RELEASE);
    int w = watched_index(name);
    /* The mapping calls only as cuGetProcAddress hands them out (PyTorch's path): gmshim's own
     * pool finds the driver's by dlsym and must get them, not its wrappers. */
    enum kind k = w < 0 ? K_COUNT : watched[w].kind;
    if (w < 0 || (k >= K_RESERVE && k <= K_MEM_RELEASE) || handle == RTLD_NEXT || !gm_real_dlsym)
        return NULL;
    void *fn = gm_real_dlsym(handle, name);
    return fn ? wrap(watched[w].kind, fn) : NULL;
}

#if defined(__x86_64__)
/* The exported dlsym: the filter's answer, or a jump to glibc's with the stack as the caller left
 * it (glibc reads its caller from the return address); NULL if glibc's was not found. */
__asm__(".pushsection .text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        ".globl drvhooks_dlsym_entry\n"
        ".hidden drvhooks_dlsym_entry\n"
        "drvhooks_dlsym_entry:\n"
        "    .cfi_startproc\n"
        "    pushq %rdi\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    pushq %rsi\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    subq $8, %rsp\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    call drvhooks_dlsym_filter\n"
        "    addq $8, %rsp\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    popq %rsi\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    popq %rdi\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    testq %rax, %rax\n"
        "    jnz 1f\n"
        "    movq gm_real_dlsym(%rip), %rax\n"
        "    testq %rax, %rax\n"
        "    jz 1f\n"
        "    jmp *%rax\n"
        "1:  ret\n"
        "    .cfi_endproc\n"
        "    .size dlsym, .-dlsym\n"
        ".popsection\n");
#define GM_DLSYM_INTERPOSED 1
#endif

/* ---- the exported driver functions --------------------------------------------------------------- */

/* The driver's function behind exported symbol `w` (libcuda's, found after gmshim). */
static void *exported(int w)
{
    void *fn = __atomic_load_n(&exported_real[w], __ATOMIC_ACQUIRE);
    if (likely(fn != NULL))
        return fn;
    if (!gm_real_dlsym)
        __atomic_store_n(&gm_real_dlsym, find_real_dlsym(), __ATOMIC_RELEASE);
    fn = gm_real_dlsym ? gm_real_dlsym(RTLD_NEXT, watched[w].name) : NULL;
    if (!fn && gm_real_dlsym) {
        /* libcuda loaded privately (RTLD_LOCAL, as Python loads an extension linked with it): not
         * in the global scope, but loaded. */
        void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            fn = gm_real_dlsym(h, watched[w].name);
            dlclose(h);
        }
    }
    if (fn)
        __atomic_store_n(&exported_real[w], fn, __ATOMIC_RELEASE);
    return fn;
}

#define CU_NOT_FOUND 500 /* CUDA_ERROR_NOT_FOUND */

GM_EXPORT cu_result_t cuStreamCreate(void **ph, unsigned flags)
{
    create_fn fn = (create_fn)exported(0);
    cu_result_t r = fn ? fn(ph, flags) : CU_NOT_FOUND;
    if (r == 0 && ph)
        stream_made((void *)fn, *ph, flags, 0);
    return r;
}

GM_EXPORT cu_result_t cuStreamCreateWithPriority(void **ph, unsigned flags, int prio)
{
    create_prio_fn fn = (create_prio_fn)exported(1);
    cu_result_t r = fn ? fn(ph, flags, prio) : CU_NOT_FOUND;
    if (r == 0 && ph)
        stream_made((void *)fn, *ph, flags, 0);
    return r;
}

/* Both destroy symbols: the stream leaves the fences first, then the driver's function `w`. */
static cu_result_t destroy_through(int w, void *s)
{
    destroy_fn fn = (destroy_fn)exported(w);
    if (!fn)
        return CU_NOT_FOUND;
    stream_unmaking(s);
    return fn(s);
}

GM_EXPORT cu_result_t cuStreamDestroy(void *s)
{
    return destroy_through(2, s);
}

GM_EXPORT cu_result_t cuStreamDestroy_v2(void *s)
{
    return destroy_through(3, s);
}

GM_EXPORT cu_result_t cuGreenCtxStreamCreate(void **ph, void *g, unsigned flags, int prio)
{
    green_fn fn = (green_fn)exported(4);
    cu_result_t r = fn ? fn(ph, g, flags, prio) : CU_NOT_FOUND;
    if (r == 0 && ph)
        stream_made((void *)fn, *ph, flags, 1);
    return r;
}

GM_EXPORT cu_result_t cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags)
{
    proc_fn fn = (proc_fn)exported(5);
    cu_result_t r = fn ? fn(sym, pfn, ver, flags) : CU_NOT_FOUND;
    if (r == 0 && pfn && *pfn)
        *pfn = wrap_proc_result(sym, *pfn, ver);
    return r;
}

GM_EXPORT cu_result_t cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags,
                                          int *status)
{
    proc2_fn fn = (proc2_fn)exported(6);
    cu_result_t r = fn ? fn(sym, pfn, ver, flags, status) : CU_NOT_FOUND;
    if (r == 0 && pfn && *pfn)
        *pfn = wrap_proc_result(sym, *pfn, ver);
    return r;
}

GM_UNCHECKED static int is_ours(void *fn)
{
    static void *const exports[] = {(void *)cuStreamCreate, (void *)cuStreamCreateWithPriority,
                                    (void *)cuStreamDestroy, (void *)cuStreamDestroy_v2,
                                    (void *)cuGreenCtxStreamCreate, (void *)cuGetProcAddress,
                                    (void *)cuGetProcAddress_v2};
    for (size_t i = 0; i < GM_ARRAY_LEN(exports); i++)
        if (fn == exports[i])
            return 1;
    for (int k = 0; k < K_COUNT; k++)
        for (int i = 0; i < COPIES; i++)
            if (fn == copies[k][i])
                return 1;
#ifdef GM_DLSYM_INTERPOSED
    extern char drvhooks_dlsym_entry[];
    if (fn == (void *)drvhooks_dlsym_entry)
        return 1;
#endif
    return 0;
}

/* At load: the watch holds only if this dlsym is the one every library calls (gmshim preloaded,
 * ahead of any other definition). */
__attribute__((constructor)) GM_UNCHECKED static void drvhooks_check(void)
{
#ifdef GM_DLSYM_INTERPOSED
    if (!gm_real_dlsym)
        __atomic_store_n(&gm_real_dlsym, find_real_dlsym(), __ATOMIC_RELEASE);
    void *global = gm_real_dlsym ? gm_real_dlsym(RTLD_DEFAULT, "dlsym") : NULL;
    if (!gm_real_dlsym || !is_ours(global))
        fencepol_streams_unwatched("gmshim is not the process's dlsym (not preloaded), so streams made "
                                   "through the driver cannot be watched");
#else
    fencepol_streams_unwatched("streams made through the driver are watched only on x86-64");
#endif
}
