/* The slow path (slowpath.h): everything an allocation does when no free block fits, in relaxed
 * capture mode with the device current, and the passes that give memory back. Never a driver
 * free during a capture; while one arena is held, another is only ever try-locked (an OOM in two
 * arenas at once must not deadlock). */
#include "slowpath.h"
#include "devctx.h"
#include "fencepol.h"
#include "grow.h"
#include "logrec.h"
#include "policy.h"
#include "ranges.h"
#include "real.h"
#include "segments.h"
#include "tcache.h"

#include <stdlib.h>

size_t slowpath_trim(gm_device_t *d, uint64_t idle_ns)
{
    size_t bytes = 0;
    for (int i = 0; i < device_narenas(d); i++) {
        gm_arena_t *a = d->arenas[i];
        pthread_mutex_lock(&a->lock);
        if (!device_captures(d)) {
            gm_ctx_t c;
            devctx_enter(d, &c);
            uint64_t t0 = gm_now_ns();
            tcache_drain(a, NULL, GM_TCACHE_ALL); /* an idle thread's cache holds its segments too */
            /* Frees GMSHIM_FENCE_SHARE left without a fence get one: the next pass finds them done. */
            if (fencepol_open_set_waiting(a))
                fencepol_issue(a, GMLOG_FENCE_BY_TRIM);
            fencepol_harvest(a, 1); /* completed fences only: the trimmer never waits for the GPU */
            unsigned nseg = 0;
            size_t b = segments_release_free(a, idle_ns, t0, &nseg);
            if (nseg)
                logrec_empty_cache(d->id, idle_ns ? GMLOG_EMPTY_IDLE : GMLOG_EMPTY_PERIODIC, b, nseg, t0);
            bytes += b;
            devctx_leave(&c);
        }
        pthread_mutex_unlock(&a->lock);
    }
    return bytes;
}

/* GMSHIM_CACHE_LIMIT across the device: the whole free segments of every arena, newest first, are
 * kept while they fit under the cap; the rest go back. Segments are told apart by base address
 * (the arena lock is dropped between looking and releasing). */
typedef struct cached_seg {
    uint64_t free_since_ns;
    uintptr_t base;
    size_t size;
} cached_seg_t;

static int newer_first(const void *x, const void *y)
{
    const cached_seg_t *a = x, *b = y;
    if (a->free_since_ns != b->free_since_ns)
        return a->free_since_ns > b->free_since_ns ? -1 : 1;
    return a->base > b->base ? -1 : a->base < b->base;
}

/* Whether segment key (t, base) is as old as the cutoff or older. */
static int not_newer(uint64_t t, uintptr_t base, const cached_seg_t *cut)
{
    return t < cut->free_since_ns || (t == cut->free_since_ns && base <= cut->base);
}

/* GMSHIM_CACHE_LIMIT over the arenas' idle pages (GMSHIM_SEGMENTS=vmm): each arena keeps its
 * share of what the cap leaves beside the whole free segments, its oldest idle pages go. */
static size_t cache_trim_ranges(gm_device_t *d, size_t cap, size_t whole)
{
    int n = device_narenas(d);
    size_t idle[GM_MAX_ARENAS] = {0}, total = 0, released = 0;
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&d->arenas[i]->lock);
        total += idle[i] = ranges_idle_bytes(d->arenas[i]);
        pthread_mutex_unlock(&d->arenas[i]->lock);
    }
    size_t room = cap > whole ? cap - whole : 0;
    if (total <= room)
        return 0;
    for (int i = 0; i < n; i++) {
        gm_arena_t *a = d->arenas[i];
        if (!idle[i])
            continue;
        size_t keep = (size_t)((unsigned __int128)idle[i] * room / total);
        gm_ctx_t c;
        pthread_mutex_lock(&a->lock);
        devctx_enter(d, &c);
        uint64_t t0 = gm_now_ns();
        unsigned npages = 0;
        size_t bytes = ranges_release_idle(a, keep, 0, 0, &npages);
        if (npages)
            logrec_empty_cache(d->id, GMLOG_EMPTY_CACHE_LIMIT, bytes, npages, t0);
        released += bytes;
        devctx_leave(&c);
        pthread_mutex_unlock(&a->lock);
    }
    return released;
}

unsigned long long slowpath_cache_trim(gm_device_t *d, int *waiting)
{
    size_t cap = d->cache_limit;
    if (!cap)
        return 0;
    cached_seg_t *segs = NULL;
    size_t n = 0, room = 0, whole = 0, pending = 0;
    int n_arenas = device_narenas(d), capturing = 0, unfenced = -1;
    /* First every arena: take in what completed fences released (queries only), and note its
     * whole free segments and what still waits. */
    for (int i = 0; i < n_arenas && !capturing; i++) {
        gm_arena_t *a = d->arenas[i];
        pthread_mutex_lock(&a->lock);
        capturing = device_captures(d);
        if (!capturing) {
            gm_ctx_t c;
            devctx_enter(d, &c);
            tcache_drain(a, NULL, GM_TCACHE_ALL);
            fencepol_harvest(a, 1);
            devctx_leave(&c);
            const gm_heap_t *h = &a->general;
            pending += pool_pending_bytes(h);
            if (unfenced < 0 && fencepol_open_set_waiting(a))
                unfenced = i;
            for (gm_segment_t *seg = pool_segments(h); seg; seg = seg->next) {
                if (!pool_segment_is_free(seg))
                    continue;
                if (n == room) {
                    size_t nroom = room ? room * 2 : 64;
                    cached_seg_t *m = realloc(segs, nroom * sizeof *m);
                    if (!m)
                        break; /* short of host memory: what is listed still counts */
                    segs = m;
                    room = nroom;
                }
                segs[n++] = (cached_seg_t){seg->free_since_ns, seg->base, seg->size};
                whole += seg->size;
            }
        }
        pthread_mutex_unlock(&a->lock);
    }
    /* Frees no fence covers yet can only come in after one: record it (one covers every arena),
     * only when they are what keeps the cache over its cap. */
    if (!capturing && pending && whole + pending > cap && unfenced >= 0) {
        gm_arena_t *a = d->arenas[unfenced];
        pthread_mutex_lock(&a->lock);
        if (fencepol_open_set_waiting(a) && !device_captures(d)) {
            gm_ctx_t c;
            devctx_enter(d, &c);
            fencepol_issue(a, GMLOG_FENCE_BY_TRIM);
            devctx_leave(&c);
        }
        pthread_mutex_unlock(&a->lock);
    }
    if (capturing || (pending && whole + pending > cap))
        *waiting = 1; /* poll again: after the capture, or once the GPU is done with them */
    unsigned long long released = 0;
    if (!capturing && whole > cap) {
        qsort(segs, n, sizeof *segs, newer_first);
        size_t kept = 0, k = 0;
        while (k < n && kept + segs[k].size <= cap)
            kept += segs[k++].size;
        cached_seg_t cut = segs[k]; /* this one and everything older go */
        for (int i = 0; i < n_arenas; i++) {
            gm_arena_t *a = d->arenas[i];
            pthread_mutex_lock(&a->lock);
            if (device_captures(d)) {
                pthread_mutex_unlock(&a->lock);
                *waiting = 1;
                break;
            }
            gm_ctx_t c;
            devctx_enter(d, &c);
            uint64_t t0 = gm_now_ns();
            size_t bytes = 0;
            unsigned nseg = 0;
            for (gm_segment_t *seg = pool_segments(&a->general), *next; seg; seg = next) {
                next = seg->next;
                size_t size = seg->size;
                if (pool_segment_is_free(seg) && not_newer(seg->free_since_ns, seg->base, &cut) &&
                    segments_release(a, seg) == 0) {
                    bytes += size;
                    nseg++;
                }
            }
            if (nseg)
                logrec_empty_cache(d->id, GMLOG_EMPTY_CACHE_LIMIT, bytes, nseg, t0);
            released += bytes;
            devctx_leave(&c);
            pthread_mutex_unlock(&a->lock);
        }
    }
    free(segs);
    if (d->ranges && !capturing)
        released += cache_trim_ranges(d, cap, whole > cap ? cap : whole);
    return released;
}

/* Waits for every fence, then frees the arena's whole free segments. Arena lock held. */
static size_t empty_cache_locked(gm_arena_t *a, int reason)
{
    if (device_captures(a->dev))
        return 0;
    uint64_t t0 = gm_now_ns();
    tcache_drain(a, NULL, GM_TCACHE_ALL);
    while (fencepol_wait_oldest(a))
        ;
    fencepol_take_in(a);
    unsigned nseg = 0;
    size_t bytes = segments_release_free(a, 0, t0, &nseg);
    logrec_empty_cache(a->dev->id, reason, bytes, nseg, t0);
    return bytes;
}

/* The other arenas' caches, for an OOM in arena `self`: only those whose lock is free right now
 * (a blocking lock here could deadlock with a thread doing the same from another arena). */
static size_t empty_other_arenas(gm_arena_t *self, int reason)
{
    gm_device_t *d = self->dev;
    size_t bytes = 0;
    for (int i = 0; i < device_narenas(d); i++) {
        gm_arena_t *a = d->arenas[i];
        if (a == self || pthread_mutex_trylock(&a->lock) != 0)
            continue;
        bytes += empty_cache_locked(a, reason);
        pthread_mutex_unlock(&a->lock);
    }
    return bytes;
}

size_t slowpath_empty_cache(gm_device_t *d, int reason)
{
    size_t bytes = 0;
    for (int i = 0; i < device_narenas(d); i++) {
        gm_arena_t *a = d->arenas[i];
        gm_ctx_t c;
        pthread_mutex_lock(&a->lock);
        devctx_enter(d, &c);
        bytes += empty_cache_locked(a, reason);
        devctx_leave(&c);
        pthread_mutex_unlock(&a->lock);
    }
    if (d->plan_give_back)
        bytes += d->plan_give_back(d, reason);
    return bytes;
}

/* The pool and the driver as they are at a failure; flags are filled in afterwards. */
void slowpath_oom_figures(gm_arena_t *a, gmlog_oom_t *rec, size_t request, size_t segment,
                          size_t drv_free, size_t drv_total, uint32_t site)
{
    gm_device_t *d = a->dev;
    memset(rec, 0, sizeof *rec);
    rec->request = request;
    rec->segment = segment;
    rec->driver_free = drv_free;
    rec->driver_total = drv_total;
    rec->reserved = device_reserved(d);
    rec->allocated = a->bytes.allocated.current;
    rec->requested = a->bytes.requested.current;
    rec->cached = a->bytes.cached.current;
    rec->pending = a->bytes.pending.current;
    if (device_narenas(d) == 1) {
        /* Blocks the threads' caches hold are the program's frees, waiting as pending ones do. */
        gm_tcache_sums_t tc;
        tcache_sum(d, &tc);
        rec->allocated -= tc.bytes;
        rec->requested += (uint64_t)tc.requested_adj;
        rec->pending += tc.bytes;
        /* The planned step's live blocks (GMSHIM_PLAN) are the device's allocations too. */
        rec->allocated += __atomic_load_n(&d->plan_allocated, __ATOMIC_RELAXED);
        rec->requested += __atomic_load_n(&d->plan_requested, __ATOMIC_RELAXED);
    }
    size_t largest, count;
    pool_free_summary(&a->general, &largest, &count);
    rec->largest_free = largest;
    rec->free_blocks = (uint32_t)count;
    rec->site = site;
}

/* One grow or exact segment of arena a, as common/grow.c runs it: the request, the error the
 * driver gave last, the runtime's error before the first driver call, the OOM record. */
typedef struct slowpath_grow {
    gm_arena_t *a;
    size_t size;
    uint32_t site;
    unsigned asked;   /* driver calls made */
    cudaError_t err;  /* the last driver call's (out of memory until one is made) */
    cudaError_t before;
    void **out;       /* an exact segment's pointer */
    gmlog_oom_t rec;
} slowpath_grow_t;

static size_t limit_cb(void *arg)
{
    return device_limit(((slowpath_grow_t *)arg)->a->dev);
}

static size_t reserved_cb(void *arg)
{
    return device_reserved(((slowpath_grow_t *)arg)->a->dev);
}

static int capturing_cb(void *arg)
{
    return device_captures(((slowpath_grow_t *)arg)->a->dev);
}

/* The driver's answer as the sequence reads it; the error stays here. */
static int driver_said(slowpath_grow_t *g, cudaError_t err)
{
    g->err = err;
    return err == cudaSuccess ? GROW_OK : err == cudaErrorMemoryAllocation ? GROW_OOM : GROW_FAILED;
}

static int segment_cb(void *arg, size_t seg, size_t rounded, size_t size, gm_block_t **bp)
{
    slowpath_grow_t *g = arg;
    if (!g->asked++)
        g->before = REAL_CALL(cudaPeekAtLastError);
    return driver_said(g, segments_grow(g->a, &g->a->general, seg, rounded, size, bp));
}

/* The caller's own context and capture mode: the call the caching allocator made. */
static int exact_segment_cb(void *arg, size_t seg, size_t rounded, size_t size, gm_block_t **bp)
{
    slowpath_grow_t *g = arg;
    if (!g->asked++)
        g->before = REAL_CALL(cudaPeekAtLastError);
    else
        g->a->n.oom_retries++;
    return driver_said(g, REAL_CALL(cudaMalloc, g->out, size));
}

/* This arena's cache, then the others' whose lock is free, then the planned step's idle pages. */
static size_t release_cb(void *arg, int reason, int *waited)
{
    gm_arena_t *a = ((slowpath_grow_t *)arg)->a;
    uint64_t fence_waits = a->n.fence_waits;
    size_t bytes = empty_cache_locked(a, reason);
    bytes += empty_other_arenas(a, reason);
    if (a->dev->plan_give_back) /* the planned step's idle pages (the plan's lock after ours) */
        bytes += a->dev->plan_give_back(a->dev, reason);
    *waited = a->n.fence_waits != fence_waits;
    return bytes;
}

/* An exact segment's caller is outside the pool's context: the release enters it. */
static size_t exact_release_cb(void *arg, int reason, int *waited)
{
    gm_ctx_t c;
    devctx_enter(((slowpath_grow_t *)arg)->a->dev, &c);
    size_t bytes = release_cb(arg, reason, waited);
    devctx_leave(&c);
    return bytes;
}

/* The driver and the pool as they are at the OOM, for the log (the driver's free and the pool's
 * figures at the same moment). */
static void oom_seen(slowpath_grow_t *g, size_t seg)
{
    size_t drv_free = 0, drv_total = 0;
    REAL_CALL(cudaMemGetInfo, &drv_free, &drv_total);
    slowpath_oom_figures(g->a, &g->rec, g->size, seg, drv_free, drv_total, g->site);
}

static void oom_seen_cb(void *arg, size_t seg)
{
    slowpath_grow_t *g = arg;
    oom_seen(g, seg);
    g->a->n.oom_retries++; /* the pool's room is asked again, whatever the driver says */
}

static void exact_oom_seen_cb(void *arg, size_t seg)
{
    oom_seen(arg, seg);
}

/* Recovered: the failed attempt's error cleared (if none was pending before it); else a failure
 * counted. Logged either way. */
static void oom_end_cb(void *arg, unsigned flags, size_t seg)
{
    slowpath_grow_t *g = arg;
    gm_arena_t *a = g->a;
    if (flags & GMLOG_OOM_LIMIT) /* no driver call: the pool as the release left it */
        slowpath_oom_figures(a, &g->rec, g->size, seg, 0, 0, g->site);
    g->rec.segment = seg;
    if (!(flags & GMLOG_OOM_RECOVERED))
        a->n.ooms++;
    else if (g->before == cudaSuccess)
        REAL_CALL(cudaGetLastError); /* the failed attempt must not reach the program */
    logrec_oom(a->dev->id, flags, &g->rec);
}

static const grow_ops_t grow_ops = {limit_cb, reserved_cb, capturing_cb, segment_cb,
                                    release_cb, oom_seen_cb, oom_end_cb};
static const grow_ops_t exact_ops = {limit_cb, reserved_cb, capturing_cb, exact_segment_cb,
                                     exact_release_cb, exact_oom_seen_cb, oom_end_cb};

/* A new segment for the request (common/grow.c): on OOM, release the cache, retry once. */
static gm_block_t *grow(gm_arena_t *a, size_t rounded, size_t size, uint32_t site, unsigned *flags,
                        cudaError_t *errp)
{
    gm_device_t *d = a->dev;
    /* A growable range maps only the pages the best fit lacks. */
    size_t seg = ranges_usable(d) ? ranges_bytes_wanted(a, rounded) : pool_segment_size(rounded);
    slowpath_grow_t g = {.a = a, .size = size, .site = site, .err = cudaErrorMemoryAllocation};
    int fresh;
    gm_block_t *b = grow_alloc(&grow_ops, &g, &a->general, seg, rounded, size, &fresh);
    if (fresh)
        *flags |= GMLOG_A_MISS;
    if (!b)
        *errp = g.err;
    return b;
}

cudaError_t slowpath_exact(gm_arena_t *a, size_t size, uint32_t site, void **out)
{
    slowpath_grow_t g = {.a = a, .size = size, .site = site, .err = cudaErrorMemoryAllocation, .out = out};
    gm_block_t *unused;
    grow_exact(&exact_ops, &g, size, &unused);
    return g.err;
}

static void wait_for_cb(void *a, uint64_t seq)
{
    fencepol_wait_for(a, seq);
}

static int wait_oldest_cb(void *a)
{
    return fencepol_wait_oldest(a) != 0;
}

GM_NOINLINE gm_block_t *slowpath_alloc(gm_arena_t *a, gm_tcache_t *tc, size_t rounded, size_t size,
                                             uint32_t site, unsigned *flags, cudaError_t *err)
{
    gm_device_t *d = a->dev;
    gm_ctx_t c;
    devctx_enter(d, &c);
    int small = pool_is_small(rounded);
    gm_block_t *b = NULL;
    const gm_heap_t *h = &a->general;
    const policy_waits_t waits = {wait_for_cb, wait_oldest_cb, a};
    /* Every fence covers every arena's frees: with several threads, fences that others recorded
     * often cover this arena's older frees already. Take in what they released first, asking the
     * runtime only if they are not known to be reusable yet, and record a fence of this arena's
     * own only when that does not serve the request. */
    int busy = 0; /* the runtime said the oldest covered free is still in use */
    uint64_t oldest = pool_oldest_pending_seq(h);
    if (oldest && oldest <= device_issued(d)) {
        if (device_reusable(d) < oldest) {
            fencepol_harvest(a, 1);
            busy = device_reusable(d) < oldest;
        } else {
            fencepol_take_in(a);
        }
        if (!(d->pending_wait && !small && pool_better_pending(h, rounded)))
            b = pool_alloc(&a->general, rounded, size);
    }
    /* Frees since the last fence can only become reusable after one: record it now (cheap),
     * then take whatever has completed (nothing newer has when the oldest is still in use). */
    if (!b && fencepol_open_set_waiting(a))
        fencepol_issue(a, GMLOG_FENCE_BY_ALLOC);
    if (!b && !busy)
        fencepol_harvest(a, 1);
    if (!b)
        b = policy_alloc_waiting(&a->general, rounded, size, d->pending_wait, &waits);
    /* The calling thread's own freed block of this size, if the fence just recorded or polled
     * made it reusable. */
    if (!b && tc)
        b = tcache_take(tc, rounded, size, site);
    /* Before the pool grows, the threads' caches give this arena's other blocks back and the
     * arena decides again with them, as if they had been freed to it. */
    if (!b && tcache_drain(a, tc, rounded))
        b = policy_alloc_waiting(&a->general, rounded, size, d->pending_wait, &waits);
    if (!b)
        b = grow(a, rounded, size, site, flags, err);
    devctx_leave(&c);
    return b;
}

