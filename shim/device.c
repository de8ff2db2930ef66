/* A device's pool as a whole: creating it (arenas, settings read once), its arenas, the blocks
 * the driver hands out itself (pass-through, managed, pitched), lookups for frees no arena knows,
 * stats, the cap, a reset, fork. The hit path is hit.c, the slow path slowpath.c, fences
 * fencepol.c, driver segments segments.c, captures' heaps capheap.c, the table devctx.c.
 * Lock order: the table's lock, then arena locks by index, then the device's fence lock. */
#include "device.h"
#include "devctx.h"
#include "evlog.h"
#include "fencepol.h"
#include "ledger.h"
#include "logrec.h"
#include "options.h"
#include "planner.h"
#include "ranges.h"
#include "real.h"
#include "slowpath.h"
#include "tcache.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A plain mutex: its uncontended path is the cheapest; threads that keep contending move to
 * their own arena instead of spinning. */
static void mutex_init_plain(pthread_mutex_t *m)
{
    pthread_mutex_init(m, NULL);
}

/* Zeroed memory aligned to a cache line (the structures' _Alignas asks for it). */
static void *zalloc_aligned(size_t size)
{
    void *p = NULL;
    if (posix_memalign(&p, GM_CACHE_LINE, size) != 0)
        return NULL;
    memset(p, 0, size);
    return p;
}

/* GMSHIM_MAX_SPLIT for an arena's heap: none in a growable range (one range per class: a split
 * limit would only strand its free space). */
static size_t max_split_for(const gm_device_t *d)
{
    return d->ranges ? 0 : (size_t)options_get(GM_OPT_MAX_SPLIT);
}

static gm_arena_t *arena_new(gm_device_t *d, int index)
{
    gm_arena_t *a = zalloc_aligned(sizeof *a);
    if (!a)
        return NULL;
    a->dev = d;
    a->index = index;
    mutex_init_plain(&a->lock);
    pool_init(&a->general, &a->bytes, NULL);
    if (options_get(GM_OPT_WARN)) {
        leakwarn_tap_init(&a->tap);
        a->bytes.tap = &a->tap;
    }
    pool_set_max_split(&a->general, max_split_for(d));
    HASH_ADD(hh, a->live, ptr, sizeof a->sentinel.ptr, &a->sentinel);
    return a;
}

static void log_device(gm_device_t *d, size_t free_bytes)
{
    if (!evlog_enabled())
        return;
    struct cudaDeviceProp prop;
    const char *name = "unknown";
    memset(&prop, 0, sizeof prop);
    if (REAL_CALL(cudaGetDeviceProperties, &prop, d->id) == cudaSuccess)
        name = prop.name;
    logrec_device(d->id, d->total, free_bytes, name, sizeof prop.name);
}

static gm_device_t *device_create(int id)
{
    ledger_device_opening(id); /* before the runtime call that may create the context */
    fencepol_note_used(id);
    devctx_lock();
    gm_device_t *d = devctx_find_locked(id);
    if (d) {
        devctx_unlock();
        return d;
    }
    d = zalloc_aligned(sizeof *d);
    gm_arena_t *a0 = d ? arena_new(d, 0) : NULL;
    if (!a0) {
        free(d);
        devctx_unlock();
        return NULL;
    }
    d->id = id;
    d->arenas[0] = a0;
    d->narenas = 1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    d->max_arenas = cpus < 1 ? 1 : cpus > GM_MAX_ARENAS ? GM_MAX_ARENAS : (int)cpus;
    mutex_init_plain(&d->fence_lock);
    d->fence_bytes = (size_t)options_get(GM_OPT_FENCE_BYTES);
    d->fence_frees = (unsigned)options_get(GM_OPT_FENCE_FREES);
    unsigned share = (unsigned)options_get(GM_OPT_FENCE_SHARE);
    d->fence_gap = fencepol_gap_of_share(share);
    d->cache_limit = (size_t)options_get(GM_OPT_CACHE_LIMIT);
    d->trust_stream_order = (int)options_get(GM_OPT_TRUST_STREAM_ORDER);
    d->pending_wait = (int)options_get(GM_OPT_PENDING_WAIT);
    d->tcache_max = (size_t)options_get(GM_OPT_THREAD_CACHE);
    size_t free_bytes = 0, total = 0;
    gm_ctx_t c;
    devctx_enter(d, &c);
    if (REAL_CALL(cudaMemGetInfo, &free_bytes, &total) == cudaSuccess)
        d->total = total;
    devctx_leave(&c);
    d->limit = options_device_limit(id, d->total);
    ranges_setup(d);
    planner_setup(d);
    pool_set_max_split(&a0->general, max_split_for(d)); /* arena 0 came before the ranges */
    int count = 0;
    int only = !devctx_created_count() && REAL_CALL(cudaGetDeviceCount, &count) == cudaSuccess &&
               count == 1 && id == 0;
    d->gpu_order = fencepol_gpu_order_for(id);
    d->gpu_order_ever = d->gpu_order;
    devctx_publish_locked(d, only);
    devctx_unlock();
    log_device(d, free_bytes);
    if (d->limit)
        logrec_limit(d->id, device_limit(d));
    ledger_device_opened(d);
    return d;
}

gm_device_t *device_get(int id)
{
    if (unlikely(id < 0 || id >= GM_MAX_DEVICES))
        return NULL;
    gm_device_t *d = devctx_peek(id);
    return likely(d != NULL) ? d : device_create(id);
}

/* One more arena for a thread that keeps meeting others on its own; -1 if none can be made. */
int device_add_arena(gm_device_t *d)
{
    devctx_lock();
    int n = d->narenas, index = -1;
    if (n < d->max_arenas) {
        gm_arena_t *a = arena_new(d, n);
        if (a) {
            d->arenas[n] = a;
            __atomic_store_n(&d->narenas, n + 1, __ATOMIC_RELEASE);
            index = n;
        }
    }
    devctx_unlock();
    return index;
}

int device_lock_arenas(gm_device_t *d)
{
    devctx_lock(); /* no arena is added meanwhile */
    int n = d->narenas;
    for (int i = 0; i < n; i++)
        pthread_mutex_lock(&d->arenas[i]->lock);
    return n;
}

void device_unlock_arenas(gm_device_t *d, int n)
{
    for (int i = n - 1; i >= 0; i--)
        pthread_mutex_unlock(&d->arenas[i]->lock);
    devctx_unlock();
}

int device_move_arena(gm_device_t *d, int current)
{
    int n = device_add_arena(d);
    if (n > 0)
        return n;
    int have = device_narenas(d);
    if (have < 2)
        return current;
    /* All arenas exist: spread contending threads over them rather than leave them all where
     * new threads start (arena 0). */
    unsigned k = __atomic_fetch_add(&d->next_arena, 1, __ATOMIC_RELAXED);
    n = (int)(k % (unsigned)(have - 1));
    return n >= current ? n + 1 : n;
}

/* A block outside any segment (the driver's own), kept in arena 0's live map (locked); b: its
 * entry for the kinds that are freed through gmshim (NULL: none, or out of host memory). */
static void track_locked(gm_device_t *d, gm_block_t *b, int kind, unsigned flags, void *ptr, size_t size,
                         uint32_t site, uint64_t t0, uint64_t extra)
{
    gm_arena_t *a = d->arenas[0];
    if (kind == GMLOG_KIND_PASS) {
        a->n.allocs++;
        a->n.misses++;
        a->n.driver_mallocs++;
    } else {
        a->n.unpooled_allocs++;
    }
    if (b) {
        b->ptr = (uintptr_t)ptr;
        b->size = b->requested = size;
        b->state = GM_BLOCK_LIVE;
        b->kind = (uint8_t)kind;
        b->exact = (flags & GMLOG_A_EXACT) != 0;
        b->site = site;
        b->born = __atomic_load_n(&d->warn_epoch, __ATOMIC_RELAXED);
        HASH_ADD(hh, a->live, ptr, sizeof b->ptr, b);
    }
    if (b && !b->hh.tbl) {
        free(b); /* the table could not take it: untracked, its free goes to the driver as is */
    } else if (b) {
        if (kind == GMLOG_KIND_PASS) {
            gm_stat_add(&a->bytes.requested, size);
            gm_stat_add(&a->bytes.allocated, size);
            pool_stats_note(&a->bytes);
            gm_stat_add(&a->bytes.reserved, size);
            device_reserved_add(d, size);
        }
    }
    tcache_note_peak(d, a, tcache_mine(d));
    evlog_alloc(d->id, (unsigned)kind << GMLOG_KIND_SHIFT | flags, (uint64_t)(uintptr_t)ptr, size,
                kind == GMLOG_KIND_PASS ? size : extra, site, gm_now_ns(), t0);
}

static gm_block_t *external_entry(int kind)
{
    return kind == GMLOG_KIND_PASS || kind == GMLOG_KIND_MANAGED || kind == GMLOG_KIND_PITCHED
               ? calloc(1, sizeof(gm_block_t))
               : NULL;
}

static void track_external(gm_device_t *d, int kind, void *ptr, size_t size, uint32_t site, uint64_t t0,
                           uint64_t extra)
{
    gm_block_t *b = external_entry(kind);
    gm_arena_t *a = d->arenas[0];
    pthread_mutex_lock(&a->lock);
    track_locked(d, b, kind, 0, ptr, size, site, t0, extra);
    pthread_mutex_unlock(&a->lock);
}

cudaError_t device_alloc_exact(gm_device_t *d, size_t size, uint32_t site, void **out)
{
    uint64_t t0 = gm_now_ns();
    gm_block_t *b = external_entry(GMLOG_KIND_PASS); /* NULL (no host memory): logged, not kept */
    gm_arena_t *a = d->arenas[0];
    /* Under arena 0's lock: the cap's check and the driver's answer are one step. */
    pthread_mutex_lock(&a->lock);
    cudaError_t err = slowpath_exact(a, size, site, out);
    if (err == cudaSuccess && *out)
        track_locked(d, b, GMLOG_KIND_PASS, GMLOG_A_EXACT, *out, size, site, t0, 0), b = NULL;
    pthread_mutex_unlock(&a->lock);
    free(b);
    return err;
}

cudaError_t device_alloc_pass(gm_device_t *d, size_t size, uint32_t site, uint64_t t0, void **out)
{
    cudaError_t err = REAL_CALL(cudaMalloc, out, size);
    if (err != cudaSuccess || !*out)
        return err;
    track_external(d, GMLOG_KIND_PASS, *out, size, site, t0, 0);
    return cudaSuccess;
}

void device_note_unpooled(gm_device_t *d, int kind, void *ptr, size_t size, uint64_t extra,
                          uint32_t site, uint64_t t0)
{
    track_external(d, kind, ptr, size, site, t0, extra);
}

static int heap_owns(gm_heap_t *heap, uintptr_t ptr, int *kind)
{
    gm_segment_t *seg = pool_find_segment(heap, ptr);
    if (!seg)
        return 0;
    gm_block_t *b = pool_segment_find_block(seg, ptr);
    *kind = b && (b->state != GM_BLOCK_LIVE || b->tc == GM_TC_CACHED) ? GMLOG_WARN_DOUBLE_FREE
                                                                      : GMLOG_WARN_INTERIOR_FREE;
    return 1;
}

int device_owns_address(gm_device_t *d, uintptr_t ptr, int *kind)
{
    int found = d->plan && planner_owns_address(d, ptr, kind);
    for (int i = 0; i < device_narenas(d) && !found; i++) {
        gm_arena_t *a = d->arenas[i];
        pthread_mutex_lock(&a->lock);
        found = heap_owns(&a->general, ptr, kind);
        for (gm_heap_t *h = i == 0 ? d->graph_heaps : NULL; h && !found; h = h->next_heap)
            found = heap_owns(h, ptr, kind);
        pthread_mutex_unlock(&a->lock);
    }
    return found;
}

void device_note_bad_free(gm_device_t *d)
{
    gm_arena_t *a = d->arenas[0];
    pthread_mutex_lock(&a->lock);
    a->n.bad_frees++;
    pthread_mutex_unlock(&a->lock);
}

void device_note_foreign_free(gm_device_t *d)
{
    gm_arena_t *a = d->arenas[0];
    pthread_mutex_lock(&a->lock);
    a->n.foreign_frees++;
    pthread_mutex_unlock(&a->lock);
}

size_t device_cached_bytes(gm_device_t *d)
{
    size_t bytes = 0;
    for (int i = 0; i < device_narenas(d); i++) {
        gm_arena_t *a = d->arenas[i];
        pthread_mutex_lock(&a->lock);
        bytes += pool_cached_bytes(&a->general);
        pthread_mutex_unlock(&a->lock);
    }
    gm_tcache_sums_t tc;
    tcache_sum(d, &tc);
    return bytes + tc.bytes;
}

static void arena_forget(gm_arena_t *a)
{
    gm_block_t *b, *tmp;
    HASH_ITER(hh, a->live, b, tmp) {
        if (b == &a->sentinel)
            continue;
        HASH_DEL(a->live, b);
        if (!b->seg)
            free(b);
    }
    /* The block structs' storage stays: a thread cache's blocks on their way back to the arena
     * when the reset came are still read (tcache.c, give_back). */
    pool_reset(&a->general);
    pool_set_max_split(&a->general, max_split_for(a->dev));
    memset(&a->open, 0, sizeof a->open);
    gm_stat_t *all[] = {&a->bytes.requested, &a->bytes.allocated, &a->bytes.reserved, &a->bytes.cached,
                        &a->bytes.pending};
    for (size_t i = 0; i < GM_ARRAY_LEN(all); i++)
        __atomic_store_n(&all[i]->current, 0, __ATOMIC_RELAXED); /* read without the lock too */
}

void device_forget(gm_device_t *d)
{
    int n = device_narenas(d);
    for (int i = 0; i < n; i++)
        pthread_mutex_lock(&d->arenas[i]->lock);
    tcache_forget(d); /* before the blocks go, and before the fence lock (cache locks come first) */
    planner_forget(d);   /* the plan's lock: after the caches', before the fence lock */
    __atomic_add_fetch(&d->resets, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&d->fence_lock);
    uint64_t reserved = device_reserved(d), live = 0;
    for (int i = 0; i < n; i++) {
        live += d->arenas[i]->bytes.allocated.current;
        arena_forget(d->arenas[i]);
    }
    gm_heap_t *h = d->graph_heaps;
    while (h) {
        gm_heap_t *next = h->next_heap;
        pool_destroy(h);
        free(h);
        h = next;
    }
    d->graph_heaps = NULL;
    d->capture_heap = NULL;
    __atomic_store_n(&d->captures, 0, __ATOMIC_RELEASE);
    fence_forget(&d->fences);
    __atomic_store_n(&d->reserved_total, 0, __ATOMIC_RELAXED);
    logrec_reset(d->id, reserved, live);
    pthread_mutex_unlock(&d->fence_lock);
    for (int i = n - 1; i >= 0; i--)
        pthread_mutex_unlock(&d->arenas[i]->lock);
}

int device_ipc_export(gm_device_t *d, void *ptr, int *found)
{
    uintptr_t key = (uintptr_t)ptr;
    int sub = 0;
    *found = 0;
    if (!key)
        return 0;
    for (int i = 0; i < device_narenas(d) && !*found; i++) {
        gm_arena_t *a = d->arenas[i];
        gm_block_t *b;
        pthread_mutex_lock(&a->lock);
        HASH_FIND(hh, a->live, &key, sizeof key, b);
        if (b && b->tc_owner && tcache_disown(a, b) < 0)
            b = NULL; /* freed into its thread's cache: no longer the program's */
        *found = b != NULL;
        if (b && b->seg && b->seg->vmm) {
            sub = -1; /* CUDA refuses it: nothing to hold */
        } else if (b && b->seg) {
            b->ipc = 1;
            sub = b->ptr != b->seg->base;
        }
        pthread_mutex_unlock(&a->lock);
    }
    return sub;
}

static void stat_sum(gmshim_stat_t *to, const gm_stat_t *from)
{
    to->current += from->current;
    to->peak += from->peak; /* with one arena exact; with several an upper bound */
    to->total += from->total;
}

void device_take_low(gm_device_t *d, uint64_t *low, uint64_t *now)
{
    uint64_t lo = 0, cur = 0;
    int n = device_narenas(d);
    for (int i = 0; i < n; i++) {
        gm_arena_t *a = d->arenas[i];
        pthread_mutex_lock(&a->lock);
        uint64_t c = a->bytes.allocated.current;
        lo += a->bytes.tap ? leakwarn_tap_take_low(a->bytes.tap, c) : c;
        cur += c;
        pthread_mutex_unlock(&a->lock);
    }
    *low = lo;
    *now = cur;
}

leakwarn_tap_t *device_tap(gm_device_t *d)
{
    return device_narenas(d) == 1 ? d->arenas[0]->bytes.tap : NULL;
}

static int site_bytes_cmp(const void *x, const void *y)
{
    const gm_site_bytes_t *a = x, *b = y;
    return a->site < b->site ? -1 : a->site > b->site;
}

size_t device_site_bytes_merge(gm_site_bytes_t *v, size_t n)
{
    qsort(v, n, sizeof *v, site_bytes_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && v[m - 1].site == v[i].site)
            v[m - 1].bytes += v[i].bytes;
        else
            v[m++] = v[i];
    }
    return m;
}

size_t device_site_bytes(gm_device_t *d, uint32_t since, gm_site_bytes_t **out)
{
    size_t want = 0, n = 0;
    uint32_t before = __atomic_load_n(&d->warn_epoch, __ATOMIC_RELAXED) - 1;
    int narenas = device_narenas(d);
    for (int i = 0; i < narenas; i++) {
        pthread_mutex_lock(&d->arenas[i]->lock);
        want += HASH_COUNT(d->arenas[i]->live);
        pthread_mutex_unlock(&d->arenas[i]->lock);
    }
    want += want / 4 + 64; /* blocks made meanwhile; any beyond are left out */
    gm_site_bytes_t *v = malloc(want * sizeof *v); /* never under an arena lock: the host waits less */
    *out = v;
    if (!v)
        return 0;
    for (int i = 0; i < narenas; i++) {
        gm_arena_t *a = d->arenas[i];
        gm_block_t *b, *tmp;
        pthread_mutex_lock(&a->lock);
        HASH_ITER(hh, a->live, b, tmp) {
            if (n == want)
                break;
            if (b != &a->sentinel && b->tc != GM_TC_CACHED && (int32_t)(b->born - since) >= 0 &&
                (int32_t)(before - b->born) > 0)
                v[n++] = (gm_site_bytes_t){b->site, b->size};
        }
        pthread_mutex_unlock(&a->lock);
    }
    return device_site_bytes_merge(v, n);
}

void device_get_stats(gm_device_t *d, gmshim_stats_t *out)
{
    out->device = d->id;
    out->limit = device_limit(d);
    out->arenas = (unsigned long long)device_narenas(d);
    for (int i = 0; i < (int)out->arenas; i++) {
        gm_arena_t *a = d->arenas[i];
        pthread_mutex_lock(&a->lock);
        stat_sum(&out->requested, &a->bytes.requested);
        stat_sum(&out->allocated, &a->bytes.allocated);
        stat_sum(&out->reserved, &a->bytes.reserved);
        stat_sum(&out->cached, &a->bytes.cached);
        stat_sum(&out->pending, &a->bytes.pending);
        out->allocs += a->n.allocs;
        out->frees += a->n.frees;
        out->cache_hits += a->n.hits;
        out->cache_misses += a->n.misses;
        out->driver_mallocs += a->n.driver_mallocs;
        out->driver_frees += a->n.driver_frees;
        out->oom_retries += a->n.oom_retries;
        out->ooms += a->n.ooms;
        out->fences += a->n.fences;
        out->fence_waits += a->n.fence_waits;
        out->fence_wait_ns += a->n.fence_wait_ns;
        out->unpooled_allocs += a->n.unpooled_allocs;
        out->foreign_frees += a->n.foreign_frees;
        out->bad_frees += a->n.bad_frees;
        pthread_mutex_unlock(&a->lock);
    }
    /* Blocks in the threads' caches are the arenas' allocated blocks to the arenas: they are
     * pending here, their bytes and requests out of what is allocated (the peaks are the arenas'
     * figures: an upper bound while the caches hold blocks). */
    gm_tcache_sums_t tc;
    tcache_sum(d, &tc);
    out->allocs += tc.allocs;
    out->frees += tc.frees;
    out->cache_hits += tc.allocs;
    out->allocated.current -= tc.bytes;
    out->allocated.total += tc.alloc_bytes;
    out->requested.current += (unsigned long long)tc.requested_adj;
    out->requested.total += tc.requested_bytes;
    out->pending.current += tc.bytes;
    /* The planned step's blocks are the device's allocations too (its pages are in reserved):
     * the arenas' peaks and the plan's added are an upper bound, which one arena's device-wide
     * figure (tcache_note_peak: the plan's live blocks included) makes exact. */
    planner_counts_t pc;
    planner_counts(d, &pc);
    out->allocs += pc.planned;
    out->frees += pc.frees;
    out->cache_hits += pc.planned;
    out->fences += pc.fences;
    out->allocated.current += pc.allocated;
    out->allocated.peak += pc.allocated_peak;
    out->requested.current += pc.requested;
    out->requested.peak += pc.requested_peak;
    tcache_peaks(d, (int)out->arenas, &out->allocated.peak, &out->requested.peak);
    /* Reserved memory is counted device-wide as well: exact however many arenas there are. */
    out->reserved.current = device_reserved(d);
    out->reserved.peak = __atomic_load_n(&d->reserved_peak, __ATOMIC_RELAXED);
    out->plan_allocs = pc.planned;
    out->plan_online = pc.online;
    out->plan_busy = pc.busy;
    out->plan_period = pc.period;
    out->plan_bytes = pc.top;

    pthread_mutex_lock(&d->fence_lock);
    out->fence_ns = d->fence_ns;
    out->fence_polls = d->polls;
    out->fence_poll_ns = d->poll_ns;
    pthread_mutex_unlock(&d->fence_lock);
}

int device_set_limit(int id, size_t bytes)
{
    gm_device_t *d = device_get(id);
    if (!d)
        return -1;
    __atomic_store_n(&d->limit, bytes, __ATOMIC_RELAXED);
    logrec_limit(d->id, bytes);
    if (bytes && device_reserved(d) > bytes && !device_captures(d))
        slowpath_empty_cache(d, GMLOG_EMPTY_DEVICE_LIMIT);
    return 0;
}

void device_fork_prepare(void)
{
    devctx_lock();
    for (int i = 0; i < devctx_created_count(); i++) {
        gm_device_t *d = devctx_at(i);
        for (int k = 0; k < d->narenas; k++)
            pthread_mutex_lock(&d->arenas[k]->lock);
        planner_fork_lock(d);
        pthread_mutex_lock(&d->fence_lock);
    }
}

void device_fork_release(void)
{
    for (int i = devctx_created_count() - 1; i >= 0; i--) {
        gm_device_t *d = devctx_at(i);
        pthread_mutex_unlock(&d->fence_lock);
        planner_fork_unlock(d);
        for (int k = d->narenas - 1; k >= 0; k--)
            pthread_mutex_unlock(&d->arenas[k]->lock);
    }
    devctx_unlock();
}
