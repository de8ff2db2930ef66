/* The hit path (hit.h): an arena lock, a best fit, a hash insert, a record; a free is a hash
 * delete, a record and a list push. A reader should take it in at once: whatever is rare goes
 * through a call to slowpath_alloc (the miss), capheap_alloc (a capture) or the fence
 * policy. A free is logged inside the arena lock, before its block can be reused. */
#include "hit.h"
#include "capheap.h"
#include "device.h"
#include "devctx.h"
#include "evlog.h"
#include "fallback.h"
#include "fencepol.h"
#include "planner.h"
#include "real.h"
#include "segments.h"
#include "slowpath.h"
#include "tcache.h"
#include "trim.h"

#include <stdlib.h>

#define GM_POLL_EVERY 32  /* allocations: completed fences polled at least this often */
#define GM_CONTENDED 32   /* contended lock attempts after which a thread moves to another arena */
#define GM_FORGIVEN 16    /* uncontended acquisitions that cancel one contended attempt */

static __thread unsigned char my_arena __attribute__((tls_model("initial-exec")));
static __thread unsigned char my_contention __attribute__((tls_model("initial-exec")));
static __thread unsigned char my_uncontended __attribute__((tls_model("initial-exec")));

void hit_use_arena(int index)
{
    my_arena = (unsigned char)(index < 0 ? 0 : index);
}

int hit_my_arena(void)
{
    return my_arena;
}

int hit_note_lock(int contended)
{
    if (!contended) {
        if (my_contention && ++my_uncontended >= GM_FORGIVEN) {
            my_uncontended = 0;
            my_contention--;
        }
        return 0;
    }
    if (++my_contention < GM_CONTENDED)
        return 0;
    my_contention = my_uncontended = 0;
    return 1;
}

/* The arena this thread allocates from, locked. While a capture runs on the device everything
 * goes to arena 0, where the capture's heap is. */
static gm_arena_t *arena_lock_for_alloc(gm_device_t *d)
{
    int i = my_arena < device_narenas(d) ? my_arena : 0;
    if (unlikely(device_captures(d)))
        i = 0;
    gm_arena_t *a = d->arenas[i];
    const void *me = &my_arena;
    int move;
    if (likely(pthread_mutex_trylock(&a->lock) == 0)) {
        /* Two threads taking turns on one arena rarely find its lock taken, but every turn
         * moves the arena's cache lines to the other CPU: that counts as meeting too. */
        int met = a->last_user != me;
        a->last_user = me;
        if (likely(!hit_note_lock(met)) || device_captures(d))
            return a;
        pthread_mutex_unlock(&a->lock); /* the table's lock comes before arena locks */
        move = 1;
    } else {
        move = hit_note_lock(1) && !device_captures(d);
    }
    if (move) {
        int n = device_move_arena(d, i);
        if (n != i) {
            my_arena = (unsigned char)n;
            a = d->arenas[n];
        }
    }
    pthread_mutex_lock(&a->lock);
    a->last_user = me;
    return a;
}

/* Under a's lock: the live-block table could not take b (out of host memory). A block the
 * table does not know could neither be freed nor join a thread's cache: it goes back to its heap
 * and the call to the driver, gmshim to pass-through. */
static GM_COLD gm_block_t *live_insert_failed(gm_block_t *b)
{
    pool_free_block(b->seg->heap, b, gm_now_ns());
    fallback_engage("out of host memory for the table of live blocks");
    return NULL;
}

/* The pool's allocation: the thread's cache, else the arena (the miss a call out). */
static inline __attribute__((always_inline)) cudaError_t pool_path(gm_device_t *d, size_t size, uint32_t site,
                                                                   void **out)
{
    size_t rounded = pool_round(size);
    /* A small request: the thread's own cache first, without the arena lock. */
    gm_tcache_t *tc = NULL;
    int cache_said = GM_TC_MISS;
    if (rounded <= GM_TCACHE_MAX_REQUEST && (tc = tcache_get(d)) != NULL &&
        (cache_said = tcache_alloc(tc, rounded, size, site, out)) == GM_TC_HIT)
        return cudaSuccess;
    unsigned flags = 0;
    cudaError_t err = cudaErrorMemoryAllocation;
    uint64_t t0 = 0; /* only a slow path is timed (timing a hit would double its clock reads) */
    gm_block_t *b;
    gm_arena_t *a = arena_lock_for_alloc(d);
    if (unlikely(a->index != 0 && device_captures(d))) {
        /* A capture began meanwhile: its allocations live in arena 0. */
        pthread_mutex_unlock(&a->lock);
        a = d->arenas[0];
        pthread_mutex_lock(&a->lock);
    }
    if (unlikely(a->index == 0 && d->captures)) {
        t0 = gm_now_ns();
        b = capheap_alloc(a, rounded, size, site, &flags, &err);
    } else {
        /* Every so often, take in what completed fences released, so that hits choose among
         * all the reusable blocks (freed neighbours merged), not a stale subset. */
        /* The cache's block of this size may be reusable by now: its fence was recorded. */
        if (unlikely(++a->since_poll >= GM_POLL_EVERY || cache_said == GM_TC_POLL)) {
            uint64_t oldest = pool_oldest_pending_seq(&a->general);
            if (oldest && oldest <= device_issued(d))
                fencepol_poll_now(a);
        }
        /* A large request that a pending block would fit better goes the slow way. */
        b = !pool_is_small(rounded) && d->pending_wait && pool_better_pending(&a->general, rounded)
                ? NULL
                : pool_alloc(&a->general, rounded, size);
        if (unlikely(!b)) {
            t0 = gm_now_ns();
            b = slowpath_alloc(a, tc, rounded, size, site, &flags, &err);
        }
    }
    if (likely(b != NULL) && !b->tc_owner) {
        HASH_ADD(hh, a->live, ptr, sizeof b->ptr, b);
        if (unlikely(!b->hh.tbl))
            b = live_insert_failed(b), err = cudaErrorMemoryAllocation;
    }
    if (likely(b != NULL)) {
        /* Freed by this thread, it goes to its cache (one the slow path took from the cache is
         * in it, and live, already). */
        if (!b->tc_owner) {
            b->site = site;
            b->born = __atomic_load_n(&d->warn_epoch, __ATOMIC_RELAXED);
            if (tc && b->size == rounded && b->seg->heap == &a->general)
                tcache_adopt(tc, b);
        } else {
            flags |= GMLOG_A_CACHED;
        }
        tcache_note_peak(d, a, tc ? tc : tcache_mine(d));
        a->n.allocs++;
        if (flags & GMLOG_A_MISS)
            a->n.misses++;
        else
            a->n.hits++;
        if (evlog_enabled()) {
            /* A miss (timed from t0) reads the ordered clock: after t0 and any segment it made. */
            uint64_t now = arena_stamp(a, t0 ? gm_now_ns() : gm_now_unordered_ns());
            evlog_alloc(d->id, flags, b->ptr, size, b->size, site, now, t0 ? t0 : now);
        }
        *out = (void *)b->ptr;
        err = cudaSuccess;
    }
    pthread_mutex_unlock(&a->lock);
    return err;
}

/* GMSHIM_PLAN: the planned step first; the pool serves the rest, and what it serves is what the
 * plan learns from. */
static GM_NOINLINE cudaError_t planned_alloc(gm_device_t *d, size_t size, uint32_t site, void **out)
{
    if (planner_alloc(d, size, site, out))
        return cudaSuccess;
    cudaError_t err = pool_path(d, size, site, out);
    if (err == cudaSuccess)
        planner_note_online(d, size, site, (uintptr_t)*out);
    return err;
}

cudaError_t hit_alloc(gm_device_t *d, size_t size, uint32_t site, void **out)
{
    if (unlikely(d->plan != NULL))
        return planned_alloc(d, size, site, out);
    return pool_path(d, size, site, out);
}

/* A free the plan may own: its block's fence counted as an arena's free is (under this thread's
 * arena lock, after the plan's). PLANNER_NOT_MINE when the pool is to look. */
static GM_NOINLINE int planned_free(gm_device_t *d, uintptr_t key, uint32_t site, cudaError_t *err)
{
    size_t bytes = 0;
    uint64_t issued = 0;
    int said = planner_free(d, key, site, &bytes, &issued);
    if (said != PLANNER_FREED)
        return said;
    *err = cudaSuccess;
    if (issued != UINT64_MAX) {
        int n = device_narenas(d);
        gm_arena_t *a = d->arenas[my_arena < n ? my_arena : 0];
        pthread_mutex_lock(&a->lock);
        fencepol_count_free(a, bytes, issued);
        pthread_mutex_unlock(&a->lock);
    }
    return PLANNER_FREED;
}

/* A block the driver handed out itself (pass-through, managed, pitched): forgotten, forwarded. */
static gm_free_result_t free_external(gm_arena_t *a, gm_block_t *b, uint32_t site, uint64_t now,
                                      cudaError_t *err)
{
    gm_device_t *d = a->dev;
    uintptr_t key = b->ptr;
    evlog_free(d->id, (unsigned)b->kind << GMLOG_KIND_SHIFT, key, site, now, now);
    if (b->kind == GMLOG_KIND_PASS) {
        gm_stat_sub(&a->bytes.requested, b->requested);
        gm_stat_sub(&a->bytes.allocated, b->size);
        pool_stats_note(&a->bytes);
        gm_stat_sub(&a->bytes.reserved, b->size);
        device_reserved_sub(d, b->size);
        a->n.driver_frees++;
    }
    pthread_mutex_unlock(&a->lock);
    free(b);
    *err = REAL_CALL(cudaFree, (void *)key);
    return GM_FREE_DONE;
}

/* Frees a block found in arena a (locked); unlocks. A block a thread's cache holds freed is a
 * double free: not found. */
static gm_free_result_t free_in_arena(gm_arena_t *a, gm_block_t *b, uint32_t site, cudaError_t *err)
{
    gm_device_t *d = a->dev;
    uintptr_t key = b->ptr;
    if (b->tc_owner && tcache_disown(a, b) < 0) {
        pthread_mutex_unlock(&a->lock);
        return GM_FREE_NOT_FOUND;
    }
    HASH_DEL(a->live, b);
    a->n.frees++;
    /* Inside the lock, before the block can be reused: its free is logged before any realloc. */
    uint64_t now = evlog_enabled() ? arena_stamp(a, gm_now_unordered_ns()) : 0, t0 = now;
    *err = cudaSuccess;
    if (!b->seg)
        return free_external(a, b, site, now, err);
    gm_heap_t *heap = b->seg->heap;
    size_t size = b->size;
    if (heap != &a->general) {
        evlog_free(d->id, GMLOG_F_GRAPH, key, site, now, t0);
        pool_free_block(heap, b, now ? now : gm_now_unordered_ns()); /* a segment's idle time starts here */
    } else if (b->ipc) {
        evlog_free(d->id, GMLOG_F_DEFERRED, key, site, now, t0);
        pool_hold_block(heap, b);
    } else if (d->trust_stream_order) {
        gm_segment_t *seg = b->seg;
        evlog_free(d->id, 0, key, site, now, t0);
        pool_free_block(heap, b, now ? now : gm_now_unordered_ns());
        if (d->cache_limit && !device_captures(d) && seg->free_since_ns) {
            gm_ctx_t c;
            devctx_enter(d, &c);
            segments_enforce_cache_limit(a);
            devctx_leave(&c);
        }
    } else {
        evlog_free(d->id, GMLOG_F_DEFERRED, key, site, now, t0);
        uint64_t issued = device_issued(d);
        pool_defer_block(heap, b, issued + 1);
        fencepol_count_free(a, size, issued);
    }
    /* Over the cache cap: the trimmer sees it through once the GPU is done with the memory, even
     * if no allocation comes to poll. */
    if (unlikely(d->cache_limit) && heap == &a->general && device_reserved(d) > d->cache_limit)
        trim_cache_kick();
    pthread_mutex_unlock(&a->lock);
    return GM_FREE_DONE;
}

/* After a free into the thread's cache: the fence its frees call for (recorded as an arena's
 * free would record it, under this thread's arena lock), the cache cut back to its size. */
static GM_NOINLINE void cache_free_after(gm_device_t *d, gm_tcache_t *tc, int said)
{
    if (said & GM_TC_FENCE) {
        int n = device_narenas(d);
        gm_arena_t *a = d->arenas[my_arena < n ? my_arena : 0];
        pthread_mutex_lock(&a->lock);
        fencepol_fence_now(a, &tc->open);
        pthread_mutex_unlock(&a->lock);
    }
    if (said & GM_TC_OVER)
        tcache_shrink(tc);
}

gm_free_result_t hit_free(gm_device_t *d, void *ptr, uint32_t site, cudaError_t *err)
{
    uintptr_t key = (uintptr_t)ptr;
    if (!key)
        return GM_FREE_NOT_FOUND; /* the sentinel's key */
    int planned = unlikely(d->plan != NULL) ? planned_free(d, key, site, err) : PLANNER_NOT_MINE;
    if (unlikely(planned != PLANNER_NOT_MINE))
        return planned == PLANNER_FREED ? GM_FREE_DONE : GM_FREE_NOT_FOUND;
    gm_tcache_t *tc = tcache_mine(d);
    int said = tc ? tcache_free(tc, key, site) : 0;
    if (likely(said)) {
        *err = cudaSuccess;
        if (unlikely(said != GM_TC_FREED))
            cache_free_after(d, tc, said);
        if (unlikely(d->cache_limit) && device_reserved(d) > d->cache_limit)
            trim_cache_kick();
        return GM_FREE_DONE;
    }
    int n = device_narenas(d), i = my_arena < n ? my_arena : 0;
    for (int k = 0; k < n; k++, i = i + 1 < n ? i + 1 : 0) { /* no division on the hit path */
        gm_arena_t *a = d->arenas[i];
        gm_block_t *b;
        pthread_mutex_lock(&a->lock);
        HASH_FIND(hh, a->live, &key, sizeof key, b);
        if (b)
            return free_in_arena(a, b, site, err);
        pthread_mutex_unlock(&a->lock);
    }
    return GM_FREE_NOT_FOUND;
}
