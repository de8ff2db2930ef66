/* Growable ranges (ranges.h): the driver's virtual memory calls for the pool. */
#include "ranges.h"
#include "devctx.h"
#include "diag.h"
#include "evlog.h"
#include "fallback.h"
#include "options.h"
#include "real.h"
#include "vmm.h"

#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PAGE GM_VMM_PAGE
#define GM_MAX_PEERS 64

struct gm_ranges {
    CUmemAllocationProp prop;
    CUmemAccessDesc access[GM_MAX_PEERS]; /* the device first, then its peers */
    size_t naccess;
    size_t range_size;
    int refused; /* the driver refused a mapping for a reason other than memory (atomic) */
};

static gm_vmm_api_t api; /* resolved once, before the first device uses it */
static pthread_once_t api_once = PTHREAD_ONCE_INIT;
static int api_found;

static void resolve_api(void)
{
    api_found = real_driver_vmm(&api) == 0;
}

static const char *why_unavailable(gm_device_t *d, struct gm_ranges *r)
{
    pthread_once(&api_once, resolve_api);
    if (!api_found)
        return "the driver has no virtual memory API";
    int ok = 0;
    if (api.attribute(&ok, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d->id) != 0 || !ok)
        return "the device does not support virtual memory management";
    r->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    r->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    r->prop.location.id = d->id;
    size_t g = 0;
    if (api.granularity(&g, &r->prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != 0 || !g || PAGE % g)
        return "the driver's allocation granularity does not divide 2 MiB";
    return NULL;
}

void ranges_setup(gm_device_t *d)
{
    /* GMSHIM_PLAN learns in growable ranges and serves from one. */
    if (strcmp(options_get_str(GM_OPT_SEGMENTS), "vmm") != 0 && !options_get(GM_OPT_PLAN))
        return;
    struct gm_ranges *r = calloc(1, sizeof *r);
    const char *why = r ? why_unavailable(d, r) : "out of host memory";
    if (why) {
        static int once;
        diag_warn_once(&once, "GMSHIM_SEGMENTS=vmm: %s on device %d; the classic pool serves it", why, d->id);
        evlog_warning(GMLOG_WARN_VMM, d->id, 0, 0, GMLOG_VMM_UNAVAILABLE);
        free(r);
        return;
    }
    int count = 0;
    if (REAL_CALL(cudaGetDeviceCount, &count) != cudaSuccess || count < 1)
        count = 1;
    r->access[r->naccess++] = (CUmemAccessDesc){{CU_MEM_LOCATION_TYPE_DEVICE, d->id}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    for (int p = 0; p < count && r->naccess < GM_MAX_PEERS; p++) {
        int can = 0;
        if (p != d->id && api.can_access_peer(&can, p, d->id) == 0 && can)
            r->access[r->naccess++] = (CUmemAccessDesc){{CU_MEM_LOCATION_TYPE_DEVICE, p},
                                                        CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    }
    /* As large as the device (a range runs out only when its addresses are cut up finely). */
    r->range_size = gm_round_up(d->total ? d->total : (size_t)64 << 30, PAGE);
    d->ranges = r;
}

/* A SEGMENT record a page of the run from addr: the first with the calls' start. */
static void log_page_run(int dev, int type, uintptr_t addr, size_t n, uint64_t now, uint64_t t0)
{
    for (size_t i = 0; i < n; i++)
        evlog_segment(type, dev, addr + i * PAGE, PAGE, 0, GMLOG_SEG_VMM, now, i ? now : t0);
}

uint32_t ranges_cut_pages(int dev, uintptr_t base, const uint64_t *tokens, size_t npages, int write, uint64_t now)
{
    uint32_t n = 0;
    for (size_t i = 0; i < npages; i++) {
        if (!tokens[i])
            continue;
        if (write)
            log_page_run(dev, GMLOG_SEGMENT_ALLOC, base + i * PAGE, 1, now, now);
        n++;
    }
    return n;
}

static void log_pages(gm_arena_t *a, int type, uintptr_t addr, size_t n, uint64_t t0)
{
    if (!evlog_enabled())
        return;
    uint64_t now = gm_now_ns();
    arena_note_stamp(a, now); /* under the arena's lock, as log_segment */
    log_page_run(a->dev->id, type, addr, n, now, t0);
}

/* One driver handle a page. A handle costs the driver about 40 us whatever its size and a page
 * 1-2 us more (bench/results/gpu-runs.md runs 71-72: create + map + access 43-44 us a page with one handle
 * each, 1.7-2.2 us a page with 32 pages a handle), but only whole handles can be unmapped: with
 * handles of 16 pages, idle pages that shared a handle with a live block stayed mapped and
 * tests/integration/oom_split ran out of memory as with classic segments. One page a handle
 * keeps every wholly free page releasable; the cost is paid where the pool grows. */

/* Undoes the first n pages mapped from addr. */
static void unwind(uintptr_t addr, const uint64_t *tokens, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        api.unmap(addr + i * PAGE, PAGE);
        api.release(tokens[i]);
    }
}

static inline int refused(const struct gm_ranges *r)
{
    return __atomic_load_n(&r->refused, __ATOMIC_ACQUIRE);
}

/* The driver refused a mapping for a reason other than memory: the device's ranges map nothing
 * more (what they hold stays and is freed as ever), and the classic pool serves its new memory,
 * with one warning and one WARNING record; the request that met it is served classic too. */
static void refuse(gm_device_t *d, uintptr_t addr, const char *call, int rc)
{
    if (__atomic_exchange_n(&d->ranges->refused, 1, __ATOMIC_ACQ_REL))
        return;
    static int once;
    diag_warn_once(&once, "GMSHIM_SEGMENTS=vmm: %s failed on device %d (CUDA error %d); the classic pool serves "
                          "its new memory from now on", call, d->id, rc);
    evlog_warning(GMLOG_WARN_VMM, d->id, addr, (uint32_t)rc, GMLOG_VMM_REFUSED);
}

int ranges_usable(gm_device_t *d)
{
    return d->ranges && !device_captures(d) && !refused(d->ranges);
}

/* Maps n fresh pages at addr for the device (a handle each, one access call for the run), their
 * handles into tokens, and counts them reserved; within the device's limit, never during a
 * capture. 0, or -1 with nothing mapped. */
static int map_pages(gm_device_t *d, uintptr_t addr, size_t n, uint64_t *tokens)
{
    struct gm_ranges *r = d->ranges;
    size_t limit = device_limit(d);
    if (device_captures(d) || (limit && device_reserved(d) + n * PAGE > limit))
        return -1;
    if (refused(r))
        return -1;
    size_t done = 0;
    int rc = 0;
    const char *call = "cuMemCreate";
    for (; done < n; done++) {
        unsigned long long h = 0;
        if ((rc = api.create(&h, PAGE, &r->prop, 0)) != 0)
            break;
        if ((rc = api.map(addr + done * PAGE, PAGE, 0, h, 0)) != 0) {
            call = "cuMemMap";
            api.release(h);
            break;
        }
        tokens[done] = h;
    }
    if (!rc && (rc = api.set_access(addr, n * PAGE, r->access, r->naccess)) != 0) /* one call for the run */
        call = "cuMemSetAccess";
    if (rc) {
        unwind(addr, tokens, done);
        if (rc != CUDA_ERROR_OUT_OF_MEMORY)
            refuse(d, addr, call, rc);
        return -1;
    }
    device_reserved_add(d, n * PAGE);
    return 0;
}

static int map_cb(void *arg, gm_segment_t *seg, uintptr_t addr, size_t n, uint64_t *tokens)
{
    (void)seg;
    gm_arena_t *a = arg;
    uint64_t t0 = gm_now_ns();
    if (map_pages(a->dev, addr, n, tokens) != 0)
        return -1;
    a->n.driver_mallocs += n;
    log_pages(a, GMLOG_SEGMENT_ALLOC, addr, n, t0);
    return 0;
}

/* One pass that gives idle pages back: the arena, and whether the device was waited for. */
typedef struct unmap_pass {
    gm_arena_t *a;
    int synced;
} unmap_pass_t;

static int unmap_cb(void *arg, gm_segment_t *seg, uintptr_t addr, size_t n, const uint64_t *tokens)
{
    (void)seg;
    unmap_pass_t *pass = arg;
    gm_arena_t *a = pass->a;
    if (device_captures(a->dev))
        return -1;
    /* cuMemUnmap does not wait for work still using the memory, as cudaFree does: before the
     * first unmap of a pass the device finishes what it has queued, on every stream (also those
     * gmshim never saw created, and the work GMSHIM_GPU_ORDER or GMSHIM_TRUST_STREAM_ORDER let
     * the pool reuse memory ahead of). */
    if (!pass->synced) {
        if (REAL_CALL(cudaDeviceSynchronize) != cudaSuccess) {
            devctx_note_cuda_failure(a->dev, "cudaDeviceSynchronize", cudaErrorUnknown);
            return -1;
        }
        pass->synced = 1;
    }
    uint64_t t0 = gm_now_ns();
    if (api.unmap(addr, n * PAGE) != 0) { /* one mapping: one page (vmm.c gives them one by one) */
        devctx_note_cuda_failure(a->dev, "cuMemUnmap", cudaErrorInvalidValue);
        return -1;
    }
    api.release(tokens[0]);
    device_reserved_sub(a->dev, n * PAGE);
    a->n.driver_frees += n;
    log_pages(a, GMLOG_SEGMENT_FREE, addr, n, t0);
    return 0;
}

/* map_cb for a pass that may also unmap (vmm_alloc_within hands both the same argument). */
static int map_in_pass(void *arg, gm_segment_t *seg, uintptr_t addr, size_t n, uint64_t *tokens)
{
    return map_cb(((unmap_pass_t *)arg)->a, seg, addr, n, tokens);
}

/* The best fit with its pages mapped. While GMSHIM_PLAN learns a step (d->plan_moves), the
 * pages it lacks are first taken from idle ones while mapping would lift the arena's reservation
 * past its peak so far (vmm_alloc_within): the step is learnt near its floor. */
static gm_block_t *range_alloc(gm_arena_t *a, size_t rounded, size_t requested, int *refused)
{
    gm_heap_t *h = &a->general;
    if (!__atomic_load_n(&a->dev->plan_moves, __ATOMIC_RELAXED))
        return vmm_alloc(h, rounded, requested, map_cb, a, refused);
    unmap_pass_t pass = {a, 0};
    unsigned moved = 0;
    return vmm_alloc_within(h, rounded, requested, a->bytes.reserved.peak, map_in_pass, unmap_cb, &pass, refused,
                            &moved);
}

cudaError_t ranges_grow(gm_arena_t *a, size_t rounded, size_t requested, gm_block_t **bp)
{
    gm_heap_t *h = &a->general;
    int map_failed = 0;
    if ((*bp = range_alloc(a, rounded, requested, &map_failed)))
        return cudaSuccess;
    if (refused(a->dev->ranges))
        return cudaErrorNotSupported; /* the driver maps no more: a classic segment */
    if (map_failed)
        return cudaErrorMemoryAllocation;
    size_t size = a->dev->ranges->range_size;
    if (size < rounded)
        size = gm_round_up(rounded, PAGE);
    unsigned long long base = 0;
    if (api.reserve(&base, size, PAGE, 0, 0) != 0)
        return cudaErrorNotSupported; /* no addresses left: the caller takes a classic segment */
    if (!pool_add_range(h, (uintptr_t)base, size, pool_is_small(rounded), gm_now_ns())) {
        api.address_free(base, size);
        fallback_engage("out of host memory for the pool's bookkeeping");
        return cudaErrorMemoryAllocation;
    }
    *bp = range_alloc(a, rounded, requested, &map_failed);
    return *bp ? cudaSuccess : cudaErrorMemoryAllocation;
}

size_t ranges_bytes_wanted(gm_arena_t *a, size_t rounded)
{
    size_t pages = vmm_pages_wanted(&a->general, rounded);
    return pages == SIZE_MAX ? gm_round_up(rounded, PAGE) : pages * PAGE;
}

size_t ranges_release_idle(gm_arena_t *a, size_t keep, uint64_t idle_ns, uint64_t now, unsigned *npages)
{
    if (!a->dev->ranges || device_captures(a->dev))
        return 0;
    unmap_pass_t pass = {a, 0};
    return vmm_release_idle(&a->general, keep, idle_ns, now, unmap_cb, &pass, npages);
}

size_t ranges_idle_bytes(gm_arena_t *a)
{
    return a->dev->ranges ? vmm_idle_bytes(&a->general) : 0;
}

/* ---- The planned step's range (plan.c) ------------------------------------------------------ */

int ranges_plan_reserve(gm_device_t *d, size_t size, uintptr_t *base)
{
    (void)d;
    unsigned long long b = 0;
    if (api.reserve(&b, size, PAGE, 0, 0) != 0)
        return -1;
    *base = (uintptr_t)b;
    return 0;
}

int ranges_plan_map(gm_device_t *d, uintptr_t addr, size_t n, uint64_t *tokens, uint64_t *last_stamp)
{
    uint64_t t0 = gm_now_ns();
    if (map_pages(d, addr, n, tokens) != 0) {
        memset(tokens, 0, n * sizeof *tokens);
        return -1;
    }
    if (evlog_enabled()) {
        uint64_t now = gm_now_ns();
        if (now > *last_stamp)
            *last_stamp = now; /* the plan's allocation in these pages is logged after them */
        log_page_run(d->id, GMLOG_SEGMENT_ALLOC, addr, n, now, t0);
    }
    return 0;
}

int ranges_plan_unmap(gm_device_t *d, uintptr_t addr, size_t n, uint64_t *tokens, int *synced,
                      uint64_t *last_stamp)
{
    if (device_captures(d))
        return -1;
    /* As unmap_cb: cuMemUnmap does not wait for work still using the pages. */
    if (!*synced) {
        if (REAL_CALL(cudaDeviceSynchronize) != cudaSuccess) {
            devctx_note_cuda_failure(d, "cudaDeviceSynchronize", cudaErrorUnknown);
            return -1;
        }
        *synced = 1;
    }
    uint64_t t0 = gm_now_ns();
    size_t done = 0;
    for (; done < n; done++) { /* one handle a page (ranges_plan_map) */
        if (api.unmap(addr + done * PAGE, PAGE) != 0) {
            devctx_note_cuda_failure(d, "cuMemUnmap", cudaErrorInvalidValue);
            break;
        }
        api.release(tokens[done]);
        tokens[done] = 0;
    }
    if (!done)
        return -1;
    device_reserved_sub(d, done * PAGE);
    if (evlog_enabled()) {
        uint64_t now = gm_now_ns();
        if (now > *last_stamp)
            *last_stamp = now;
        log_page_run(d->id, GMLOG_SEGMENT_FREE, addr, done, now, t0);
    }
    return done == n ? 0 : -1;
}
