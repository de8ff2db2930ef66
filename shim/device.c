/* Per-device pool policy. The hit path is a lock, a best fit and a hash insert; everything that
 * talks to the driver (fences, waits, growth, OOM release and retry) is in the slow functions,
 * made in relaxed capture mode with the device current. Never a driver free during a capture. */
#include "device.h"
#include "diag.h"
#include "evlog.h"
#include "init.h"
#include "options.h"
#include "real.h"

#include <stdlib.h>
#include <string.h>

#define GM_FENCE_EVERY 64 /* frees: a fence at least this often */
#define GM_POLL_EVERY 32  /* allocations: completed fences polled at least this often */

static gm_device_t *devices[GM_MAX_DEVICES];
static int created[GM_MAX_DEVICES]; /* ids in creation order */
static int ncreated;
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;

static void log_device(gm_device_t *d, size_t free_bytes);
static void log_empty(gm_device_t *d, int reason, size_t bytes, unsigned nseg, uint64_t t0);
static void poll_now(gm_device_t *d);

static void log_limit(gm_device_t *d)
{
    if (!evlog_enabled())
        return;
    gmlog_limit_t rec;
    evlog_hdr(&rec.h, GMLOG_LIMIT, sizeof rec, d->id, 0);
    rec.bytes = d->limit;
    evlog_append(&rec, sizeof rec, gm_now_ns());
}

void device_lock(gm_device_t *d) { pthread_mutex_lock(&d->lock); }
void device_unlock(gm_device_t *d) { pthread_mutex_unlock(&d->lock); }

void device_ctx_enter(gm_device_t *d, gm_ctx_t *c)
{
    c->saved_mode = cudaStreamCaptureModeRelaxed;
    if (REAL_CALL(cudaThreadExchangeStreamCaptureMode, &c->saved_mode) != cudaSuccess)
        c->saved_mode = (enum cudaStreamCaptureMode)-1;
    c->switched = 0;
    if (d && REAL_CALL(cudaGetDevice, &c->saved_device) == cudaSuccess && c->saved_device != d->id &&
        REAL_CALL(cudaSetDevice, d->id) == cudaSuccess)
        c->switched = 1;
}

void device_ctx_leave(gm_ctx_t *c)
{
    if (c->switched)
        REAL_CALL(cudaSetDevice, c->saved_device);
    if ((int)c->saved_mode != -1)
        REAL_CALL(cudaThreadExchangeStreamCaptureMode, &c->saved_mode);
}

static gm_device_t *device_create(int id)
{
    pthread_mutex_lock(&create_lock);
    gm_device_t *d = devices[id];
    if (d) {
        pthread_mutex_unlock(&create_lock);
        return d;
    }
    d = calloc(1, sizeof *d);
    if (!d) {
        pthread_mutex_unlock(&create_lock);
        return NULL;
    }
    d->id = id;
    /* Critical sections are a few hundred ns: spin a little before sleeping, so that threads
     * hammering one device queue up instead of bouncing through futex sleeps. */
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&d->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    heap_init(&d->general, &d->bytes, NULL);
    HASH_ADD(hh, d->live, ptr, sizeof d->sentinel.ptr, &d->sentinel);
    d->general.max_split = (size_t)options_get(GM_OPT_MAX_SPLIT);
    d->fence_bytes = (size_t)options_get(GM_OPT_FENCE_BYTES);
    d->cache_limit = (size_t)options_get(GM_OPT_CACHE_LIMIT);
    d->trust_stream_order = (int)options_get(GM_OPT_TRUST_STREAM_ORDER);
    d->pending_wait = (int)options_get(GM_OPT_PENDING_WAIT);
    size_t free_bytes = 0, total = 0;
    gm_ctx_t c;
    device_ctx_enter(d, &c);
    if (REAL_CALL(cudaMemGetInfo, &free_bytes, &total) == cudaSuccess)
        d->total = total;
    device_ctx_leave(&c);
    d->limit = options_device_limit(id, d->total);
    created[ncreated++] = id;
    __atomic_store_n(&devices[id], d, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&create_lock);
    log_device(d, free_bytes);
    if (d->limit)
        log_limit(d);
    return d;
}

gm_device_t *device_get(int id)
{
    if (unlikely(id < 0 || id >= GM_MAX_DEVICES))
        return NULL;
    gm_device_t *d = __atomic_load_n(&devices[id], __ATOMIC_ACQUIRE);
    return likely(d != NULL) ? d : device_create(id);
}

gm_device_t *device_peek(int id)
{
    if (id < 0 || id >= GM_MAX_DEVICES)
        return NULL;
    return __atomic_load_n(&devices[id], __ATOMIC_ACQUIRE);
}

int device_created_count(void)
{
    return __atomic_load_n(&ncreated, __ATOMIC_ACQUIRE);
}

gm_device_t *device_at(int index)
{
    return index < device_created_count() ? device_peek(created[index]) : NULL;
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
    gmlog_device_t rec;
    memset(&rec, 0, sizeof rec);
    size_t len = strnlen(name, sizeof prop.name);
    evlog_hdr(&rec.h, GMLOG_DEVICE, sizeof rec + gm_round_up(len, 8), d->id, 0);
    rec.total = d->total;
    rec.free_at_start = free_bytes;
    rec.name_len = (uint32_t)len;
    evlog_append2(&rec, sizeof rec, name, len, gm_now_ns());
}

/* ---- fences --------------------------------------------------------------------------------- */

static int sticky_warned;

static void note_cuda_failure(gm_device_t *d, const char *what, cudaError_t err)
{
    diag_warn_once(&sticky_warned, "%s failed on device %d with CUDA error %d; freed memory stays "
                                   "pending until the runtime recovers", what, d->id, (int)err);
    evlog_warning(GMLOG_WARN_STICKY, d->id, 0, 0, (uint32_t)err);
}

static void enforce_cache_limit(gm_device_t *d);

/* Released pending blocks once fences completed; returns bytes released. Caller is inside
 * device_ctx_enter (the cache cap may give segments back). */
static size_t release_done(gm_device_t *d)
{
    size_t bytes = heap_release_pending(&d->general, d->fences.done, gm_now_ns());
    if (bytes && d->cache_limit)
        enforce_cache_limit(d);
    return bytes;
}

static size_t harvest(gm_device_t *d)
{
    if (!fences_outstanding(&d->fences))
        return 0;
    cudaError_t err = fences_poll(&d->fences);
    if (err != cudaSuccess)
        note_cuda_failure(d, "cudaEventQuery", err);
    return release_done(d);
}

/* Whether some pending block waits for a fence not yet recorded. */
static int open_set_waiting(const gm_device_t *d)
{
    const gm_block_t *tail = d->general.pending_tail;
    return tail && tail->fence_seq > d->fences.issued;
}

/* Records a fence covering every free so far. Caller is inside device_ctx_enter. */
static int fence_issue(gm_device_t *d)
{
    cudaError_t err = fences_issue(&d->fences);
    if (err != cudaSuccess) {
        note_cuda_failure(d, "cudaEventRecord", err);
        return -1;
    }
    d->n.fences++;
    d->open_bytes = 0;
    d->open_count = 0;
    if (evlog_enabled()) {
        gmlog_fence_t rec;
        memset(&rec, 0, sizeof rec);
        evlog_hdr(&rec.h, GMLOG_FENCE, sizeof rec, d->id, 0);
        rec.seq = d->fences.issued;
        rec.pending_bytes = d->bytes.pending.current;
        rec.events = (uint32_t)(1 + d->fences.nstreams);
        uint64_t now = gm_now_ns();
        evlog_append(&rec, sizeof rec, now);
        /* Fences come with the rhythm of the program: a good moment for a stats snapshot. */
        gmlog_stats_t st;
        memset(&st, 0, sizeof st);
        evlog_hdr(&st.h, GMLOG_STATS, sizeof st, d->id, 0);
        st.requested = d->bytes.requested.current;
        st.allocated = d->bytes.allocated.current;
        st.reserved = d->bytes.reserved.current;
        st.cached = d->bytes.cached.current;
        st.pending = d->bytes.pending.current;
        st.hits = d->n.hits;
        st.misses = d->n.misses;
        evlog_append(&st, sizeof st, now);
    }
    return 0;
}

/* Blocks for the oldest fence; returns bytes released, or 0 if nothing could be waited for. */
static size_t wait_oldest(gm_device_t *d)
{
    if (!fences_outstanding(&d->fences) && (!open_set_waiting(d) || fence_issue(d)))
        return 0;
    uint64_t t0 = gm_now_ns();
    uint64_t seq = d->fences.done + 1;
    cudaError_t err = fences_wait_oldest(&d->fences);
    if (err != cudaSuccess) {
        note_cuda_failure(d, "cudaEventSynchronize", err);
        return 0;
    }
    d->n.fence_waits++;
    uint64_t now = gm_now_ns();
    d->n.fence_wait_ns += now - t0;
    if (evlog_enabled()) {
        gmlog_fence_wait_t rec;
        memset(&rec, 0, sizeof rec);
        evlog_hdr(&rec.h, GMLOG_FENCE_WAIT, sizeof rec, d->id, 0);
        rec.seq = seq;
        rec.dur_ns = evlog_dur(now, t0);
        evlog_append(&rec, sizeof rec, now);
    }
    return release_done(d) + 1;
}

/* ---- growing and releasing -------------------------------------------------------------- */

static void log_segment(gm_device_t *d, int type, gm_segment_t *seg, uint64_t t0)
{
    if (evlog_enabled())
        evlog_segment(type, d->id, seg->base, seg->size, seg->heap->graph_id, gm_now_ns(), t0);
}

/* Asks the driver for a segment of `size` into `heap`. */
static cudaError_t driver_segment(gm_device_t *d, gm_heap_t *heap, size_t size, int small)
{
    void *p = NULL;
    uint64_t t0 = gm_now_ns();
    cudaError_t err = REAL_CALL(cudaMalloc, &p, size);
    if (err != cudaSuccess)
        return err;
    gm_segment_t *seg = heap_add_segment(heap, (uintptr_t)p, size, small, gm_now_ns());
    if (!seg) {
        REAL_CALL(cudaFree, p);
        gm_fall_back("out of host memory for the pool's bookkeeping");
        return cudaErrorMemoryAllocation;
    }
    d->n.driver_mallocs++;
    log_segment(d, GMLOG_SEGMENT_ALLOC, seg, t0);
    return cudaSuccess;
}

/* Frees every whole free segment of the general heap; caller is inside device_ctx_enter and
 * no capture is under way. */
static size_t release_free_segments(gm_device_t *d, unsigned *nseg)
{
    size_t bytes = 0;
    gm_segment_t *seg = d->general.segments;
    while (seg) {
        gm_segment_t *next = seg->next;
        if (heap_segment_is_free(seg)) {
            uint64_t t0 = gm_now_ns();
            log_segment(d, GMLOG_SEGMENT_FREE, seg, t0);
            cudaError_t err = REAL_CALL(cudaFree, (void *)seg->base);
            if (err == cudaSuccess) {
                bytes += seg->size;
                (*nseg)++;
                d->n.driver_frees++;
                heap_remove_segment(&d->general, seg);
            } else {
                note_cuda_failure(d, "cudaFree", err);
            }
        }
        seg = next;
    }
    return bytes;
}

/* GMSHIM_CACHE_LIMIT: give back the oldest wholly free segments while more than the cap is
 * cached. Caller is inside device_ctx_enter. */
static void enforce_cache_limit(gm_device_t *d)
{
    size_t cap = d->cache_limit;
    if (!cap || d->captures)
        return;
    size_t whole = 0;
    for (gm_segment_t *seg = d->general.segments; seg; seg = seg->next)
        if (heap_segment_is_free(seg))
            whole += seg->size;
    if (whole <= cap)
        return;
    uint64_t t0 = gm_now_ns();
    size_t bytes = 0;
    unsigned nseg = 0;
    while (whole > cap) {
        gm_segment_t *oldest = NULL;
        for (gm_segment_t *seg = d->general.segments; seg; seg = seg->next)
            if (heap_segment_is_free(seg) && (!oldest || seg->free_since_ns < oldest->free_since_ns))
                oldest = seg;
        if (!oldest)
            break;
        size_t size = oldest->size;
        log_segment(d, GMLOG_SEGMENT_FREE, oldest, gm_now_ns());
        if (REAL_CALL(cudaFree, (void *)oldest->base) != cudaSuccess)
            break;
        heap_remove_segment(&d->general, oldest);
        d->n.driver_frees++;
        whole -= size;
        bytes += size;
        nseg++;
    }
    if (nseg)
        log_empty(d, GMLOG_EMPTY_CACHE_LIMIT, bytes, nseg, t0);
}

static void log_empty(gm_device_t *d, int reason, size_t bytes, unsigned nseg, uint64_t t0)
{
    if (!evlog_enabled())
        return;
    gmlog_empty_cache_t rec;
    memset(&rec, 0, sizeof rec);
    evlog_hdr(&rec.h, GMLOG_EMPTY_CACHE, sizeof rec, d->id, (unsigned)reason);
    uint64_t now = gm_now_ns();
    rec.bytes = bytes;
    rec.segments = nseg;
    rec.dur_ns = evlog_dur(now, t0);
    evlog_append(&rec, sizeof rec, now);
}

size_t device_trim(gm_device_t *d, uint64_t idle_ns)
{
    pthread_mutex_lock(&d->lock);
    if (d->captures) {
        pthread_mutex_unlock(&d->lock);
        return 0;
    }
    gm_ctx_t c;
    device_ctx_enter(d, &c);
    uint64_t t0 = gm_now_ns();
    harvest(d); /* completed fences only: the trimmer never waits for the GPU */
    size_t bytes = 0;
    unsigned nseg = 0;
    gm_segment_t *seg = d->general.segments;
    while (seg) {
        gm_segment_t *next = seg->next;
        if (heap_segment_is_free(seg) && (!idle_ns || t0 - seg->free_since_ns >= idle_ns)) {
            log_segment(d, GMLOG_SEGMENT_FREE, seg, gm_now_ns());
            if (REAL_CALL(cudaFree, (void *)seg->base) == cudaSuccess) {
                bytes += seg->size;
                nseg++;
                d->n.driver_frees++;
                heap_remove_segment(&d->general, seg);
            }
        }
        seg = next;
    }
    if (nseg)
        log_empty(d, idle_ns ? GMLOG_EMPTY_IDLE : GMLOG_EMPTY_PERIODIC, bytes, nseg, t0);
    device_ctx_leave(&c);
    pthread_mutex_unlock(&d->lock);
    return bytes;
}

static size_t empty_cache_locked(gm_device_t *d, int reason)
{
    if (d->captures)
        return 0;
    uint64_t t0 = gm_now_ns();
    while (wait_oldest(d))
        ;
    unsigned nseg = 0;
    size_t bytes = release_free_segments(d, &nseg);
    log_empty(d, reason, bytes, nseg, t0);
    return bytes;
}

size_t device_empty_cache(gm_device_t *d, int reason)
{
    gm_ctx_t c;
    pthread_mutex_lock(&d->lock);
    device_ctx_enter(d, &c);
    size_t bytes = empty_cache_locked(d, reason);
    device_ctx_leave(&c);
    pthread_mutex_unlock(&d->lock);
    return bytes;
}

static void log_oom(gm_device_t *d, size_t request, size_t segment, size_t drv_free,
                    size_t drv_total, unsigned flags, uint32_t site)
{
    if (!evlog_enabled())
        return;
    gmlog_oom_t rec;
    memset(&rec, 0, sizeof rec);
    evlog_hdr(&rec.h, GMLOG_OOM, sizeof rec, d->id, flags);
    rec.request = request;
    rec.segment = segment;
    rec.driver_free = drv_free;
    rec.driver_total = drv_total;
    rec.reserved = d->bytes.reserved.current;
    rec.allocated = d->bytes.allocated.current;
    rec.requested = d->bytes.requested.current;
    rec.cached = d->bytes.cached.current;
    rec.pending = d->bytes.pending.current;
    size_t largest, count;
    heap_free_summary(&d->general, &largest, &count);
    rec.largest_free = largest;
    rec.free_blocks = (uint32_t)count;
    rec.site = site;
    evlog_append(&rec, sizeof rec, gm_now_ns());
}

/* Whether a segment for `rounded` fits under the device cap; may shrink *seg to the request and,
 * if allowed, release the cache to make room. */
static int fits_limit(gm_device_t *d, size_t *seg, size_t rounded, int may_release)
{
    size_t tight = pool_is_small(rounded) ? *seg : gm_round_up(rounded, GM_LARGE_ROUND);
    for (int pass = 0; pass < 2; pass++) {
        size_t reserved = d->bytes.reserved.current;
        if (reserved + *seg <= d->limit)
            return 1;
        if (reserved + tight <= d->limit) {
            *seg = tight;
            return 1;
        }
        if (!may_release || pass || d->captures)
            break;
        empty_cache_locked(d, GMLOG_EMPTY_DEVICE_LIMIT);
    }
    return 0;
}

/* A new segment for the request; on OOM: release the cache, retry once. */
static gm_block_t *grow(gm_device_t *d, size_t rounded, size_t size, uint32_t site,
                        unsigned *flags, cudaError_t *errp)
{
    int small = pool_is_small(rounded);
    size_t seg = pool_segment_size(rounded);
    if (d->limit && !fits_limit(d, &seg, rounded, 1)) {
        gm_block_t *b = heap_alloc(&d->general, rounded, size); /* room the release made */
        if (b)
            return b;
        d->n.ooms++;
        *errp = cudaErrorMemoryAllocation;
        log_oom(d, size, seg, 0, 0, GMLOG_OOM_LIMIT | GMLOG_OOM_RELEASED, site);
        return NULL;
    }
    cudaError_t before = REAL_CALL(cudaPeekAtLastError);
    cudaError_t err = driver_segment(d, &d->general, seg, small);
    if (err == cudaSuccess) {
        *flags |= GMLOG_A_MISS;
        return heap_alloc(&d->general, rounded, size);
    }
    if (err != cudaErrorMemoryAllocation) {
        *errp = err;
        return NULL;
    }
    /* Out of memory: what the driver says now, for the log, then release and retry. */
    size_t drv_free = 0, drv_total = 0;
    REAL_CALL(cudaMemGetInfo, &drv_free, &drv_total);
    unsigned oflags = GMLOG_OOM_RELEASED;
    d->n.oom_retries++;
    size_t waited_fences = d->n.fence_waits;
    empty_cache_locked(d, GMLOG_EMPTY_OOM);
    if (d->n.fence_waits != waited_fences)
        oflags |= GMLOG_OOM_WAITED;
    gm_block_t *b = heap_alloc(&d->general, rounded, size);
    if (!b) {
        oflags |= GMLOG_OOM_RETRIED;
        err = driver_segment(d, &d->general, seg, small);
        size_t tight = gm_round_up(rounded, GM_LARGE_ROUND);
        if (err == cudaErrorMemoryAllocation && !small && tight < seg)
            err = driver_segment(d, &d->general, seg = tight, small);
        if (err == cudaSuccess) {
            *flags |= GMLOG_A_MISS;
            b = heap_alloc(&d->general, rounded, size);
        }
    }
    if (b) {
        oflags |= GMLOG_OOM_RECOVERED;
        if (before == cudaSuccess)
            REAL_CALL(cudaGetLastError); /* the failed attempt must not reach the program */
    } else {
        d->n.ooms++;
        *errp = err;
    }
    log_oom(d, size, seg, drv_free, drv_total, oflags, site);
    return b;
}

/* Waits until fence `seq` has completed (recording it first if it is still to come). */
static void wait_for(gm_device_t *d, uint64_t seq)
{
    if (seq > d->fences.issued && fence_issue(d))
        return;
    while (d->fences.done < seq && wait_oldest(d))
        ;
}

static gm_block_t *alloc_slow(gm_device_t *d, size_t rounded, size_t size, uint32_t site,
                              unsigned *flags, cudaError_t *err)
{
    gm_ctx_t c;
    device_ctx_enter(d, &c);
    int small = pool_is_small(rounded);
    gm_block_t *b = NULL;
    /* Frees since the last fence can only become reusable after one: record it now (cheap),
     * then take whatever has completed. */
    if (open_set_waiting(d))
        fence_issue(d);
    harvest(d);
    const gm_heap_t *h = &d->general;
    for (int rounds = 0; !b && rounds < 1 << 16; rounds++) {
        uint64_t want = d->pending_wait ? heap_better_pending(h, rounded) : 0;
        if (want) {
            /* A pending block fits better than any free one: wait for the GPU to finish with
             * it rather than cut a larger block or grow (what makes a pool creep up when the
             * program runs ahead of the GPU). */
            wait_for(d, want);
            continue;
        }
        b = heap_alloc(&d->general, rounded, size);
        if (b || !d->pending_wait || !h->pending_bytes[small] ||
            h->pending_bytes[small] + h->free_bytes[small] < rounded || !wait_oldest(d))
            break;
    }
    if (!b)
        b = grow(d, rounded, size, site, flags, err);
    device_ctx_leave(&c);
    return b;
}

/* During a capture: the capture's private heap, fed by whole free segments of the general heap
 * or by the driver (in relaxed mode); never released while the capture runs. */
static gm_block_t *alloc_captured(gm_device_t *d, size_t rounded, size_t size, uint32_t site,
                                  unsigned *flags, cudaError_t *err)
{
    gm_heap_t *heap = d->capture_heap;
    *flags |= GMLOG_A_GRAPH;
    gm_block_t *b = heap_alloc(heap, rounded, size);
    if (b)
        return b;
    int small = pool_is_small(rounded);
    gm_segment_t *best = NULL;
    for (gm_segment_t *seg = d->general.segments; seg; seg = seg->next)
        if (seg->small == small && !seg->ipc && seg->size >= rounded && heap_segment_is_free(seg) &&
            (!best || seg->size < best->size))
            best = seg;
    if (best) {
        heap_move_segment(&d->general, heap, best, 0);
        if ((b = heap_alloc(heap, rounded, size)))
            return b;
    }
    gm_ctx_t c;
    device_ctx_enter(d, &c);
    size_t seg = pool_segment_size(rounded);
    cudaError_t e = d->limit && !fits_limit(d, &seg, rounded, 0) ? cudaErrorMemoryAllocation
                                                                   : driver_segment(d, heap, seg, small);
    if (e == cudaSuccess) {
        *flags |= GMLOG_A_MISS;
        b = heap_alloc(heap, rounded, size);
    } else {
        size_t drv_free = 0, drv_total = 0;
        REAL_CALL(cudaMemGetInfo, &drv_free, &drv_total);
        d->n.ooms++;
        *err = e;
        log_oom(d, size, seg, drv_free, drv_total, GMLOG_OOM_CAPTURE, site);
    }
    device_ctx_leave(&c);
    return b;
}

cudaError_t device_alloc(gm_device_t *d, size_t size, uint32_t site, void **out)
{
    size_t rounded = pool_round(size);
    unsigned flags = 0;
    cudaError_t err = cudaErrorMemoryAllocation;
    uint64_t t0 = 0; /* only a slow path is timed: a hit costs less than reading the clock twice */
    gm_block_t *b;
    pthread_mutex_lock(&d->lock);
    if (unlikely(d->captures)) {
        t0 = gm_now_ns();
        b = alloc_captured(d, rounded, size, site, &flags, &err);
    } else {
        /* Every so often, take in what completed fences released, so that hits choose among
         * all the reusable blocks (freed neighbours merged), not a stale subset. */
        if (unlikely(++d->since_poll >= GM_POLL_EVERY) && fences_outstanding(&d->fences))
            poll_now(d);
        /* A large request that a pending block would fit better goes the slow way. */
        b = !pool_is_small(rounded) && d->pending_wait && heap_better_pending(&d->general, rounded)
                ? NULL
                : heap_alloc(&d->general, rounded, size);
        if (unlikely(!b)) {
            t0 = gm_now_ns();
            b = alloc_slow(d, rounded, size, site, &flags, &err);
        }
    }
    if (likely(b != NULL)) {
        HASH_ADD(hh, d->live, ptr, sizeof b->ptr, b);
        d->n.allocs++;
        if (flags & GMLOG_A_MISS)
            d->n.misses++;
        else
            d->n.hits++;
        if (evlog_enabled()) {
            uint64_t now = gm_now_ns(); /* inside the lock: after the free that made b reusable */
            evlog_alloc(d->id, flags, b->ptr, size, b->size, site, now, t0 ? t0 : now);
        }
        *out = (void *)b->ptr;
        err = cudaSuccess;
    }
    pthread_mutex_unlock(&d->lock);
    return err;
}

cudaError_t device_alloc_pass(gm_device_t *d, size_t size, uint32_t site, uint64_t t0, void **out)
{
    cudaError_t err = REAL_CALL(cudaMalloc, out, size);
    if (err != cudaSuccess || !*out)
        return err;
    gm_block_t *b = calloc(1, sizeof *b);
    pthread_mutex_lock(&d->lock);
    d->n.allocs++;
    d->n.misses++;
    d->n.driver_mallocs++;
    if (b) {
        b->ptr = (uintptr_t)*out;
        b->size = size;
        b->requested = size;
        b->state = GM_BLOCK_LIVE;
        b->kind = GMLOG_KIND_PASS;
        HASH_ADD(hh, d->live, ptr, sizeof b->ptr, b);
        gm_stat_add(&d->bytes.requested, size);
        gm_stat_add(&d->bytes.allocated, size);
        gm_stat_add(&d->bytes.reserved, size);
    }
    evlog_alloc(d->id, GMLOG_KIND_PASS << GMLOG_KIND_SHIFT, (uint64_t)(uintptr_t)*out, size, size,
                site, gm_now_ns(), t0);
    pthread_mutex_unlock(&d->lock);
    return cudaSuccess;
}

/* ---- freeing -------------------------------------------------------------------------------- */

static GM_NOINLINE void poll_now(gm_device_t *d)
{
    gm_ctx_t c;
    d->since_poll = 0;
    device_ctx_enter(d, &c);
    harvest(d);
    device_ctx_leave(&c);
}

static void fence_now(gm_device_t *d)
{
    gm_ctx_t c;
    device_ctx_enter(d, &c);
    if (fence_issue(d) == 0)
        harvest(d);
    device_ctx_leave(&c);
}

/* Freed bytes that make a fence worth recording now: without one they cannot be reused until
 * the next miss, and a miss would then have to wait for all of them. */
static size_t fence_threshold(const gm_device_t *d)
{
    if (d->fence_bytes)
        return d->fence_bytes;
    size_t t = d->bytes.reserved.current / 64;
    return t > 2 * GM_MiB ? t : 2 * GM_MiB;
}

gm_free_result_t device_free(gm_device_t *d, void *ptr, uint32_t site, cudaError_t *err)
{
    uintptr_t key = (uintptr_t)ptr;
    gm_block_t *b;
    if (!key)
        return GM_FREE_NOT_FOUND; /* the sentinel's key */
    pthread_mutex_lock(&d->lock);
    HASH_FIND(hh, d->live, &key, sizeof key, b);
    if (!b) {
        pthread_mutex_unlock(&d->lock);
        return GM_FREE_NOT_FOUND;
    }
    HASH_DEL(d->live, b);
    d->n.frees++;
    /* Inside the lock, before the block can be reused: its free is logged before any realloc. */
    uint64_t now = evlog_enabled() ? gm_now_ns() : 0, t0 = now;
    *err = cudaSuccess;
    if (!b->seg) { /* pass-through, managed or pitched: the driver's own */
        evlog_free(d->id, (unsigned)b->kind << GMLOG_KIND_SHIFT, key, site, now, t0);
        if (b->kind == GMLOG_KIND_PASS) {
            gm_stat_sub(&d->bytes.requested, b->requested);
            gm_stat_sub(&d->bytes.allocated, b->size);
            gm_stat_sub(&d->bytes.reserved, b->size);
            d->n.driver_frees++;
        }
        pthread_mutex_unlock(&d->lock);
        free(b);
        *err = REAL_CALL(cudaFree, ptr);
        return GM_FREE_DONE;
    }
    gm_heap_t *heap = b->seg->heap;
    unsigned flags = 0;
    size_t size = b->size;
    uint64_t tnow = now ? now : gm_now_ns(); /* a segment's idle time starts here */
    if (heap != &d->general) {
        flags = GMLOG_F_GRAPH;
        evlog_free(d->id, flags, key, site, now, t0);
        heap_free_block(heap, b, tnow);
    } else if (b->ipc) {
        evlog_free(d->id, GMLOG_F_DEFERRED, key, site, now, t0);
        heap_hold_block(heap, b);
    } else if (d->trust_stream_order) {
        gm_segment_t *seg = b->seg;
        evlog_free(d->id, 0, key, site, now, t0);
        heap_free_block(heap, b, tnow);
        if (d->cache_limit && !d->captures && seg->free_since_ns) {
            gm_ctx_t c;
            device_ctx_enter(d, &c);
            enforce_cache_limit(d);
            device_ctx_leave(&c);
        }
    } else {
        evlog_free(d->id, GMLOG_F_DEFERRED, key, site, now, t0);
        heap_defer_block(heap, b, d->fences.issued + 1);
        d->open_bytes += size;
        d->open_count++;
        if ((d->open_bytes >= fence_threshold(d) || d->open_count >= GM_FENCE_EVERY) && !d->captures)
            fence_now(d);
    }
    pthread_mutex_unlock(&d->lock);
    return GM_FREE_DONE;
}

static int heap_owns(gm_heap_t *heap, uintptr_t ptr, int *kind)
{
    gm_segment_t *seg = heap_find_segment(heap, ptr);
    if (!seg)
        return 0;
    gm_block_t *b = segment_find_block(seg, ptr);
    *kind = b && b->state != GM_BLOCK_LIVE ? GMLOG_WARN_DOUBLE_FREE : GMLOG_WARN_INTERIOR_FREE;
    return 1;
}

int device_owns_address(gm_device_t *d, uintptr_t ptr, int *kind)
{
    pthread_mutex_lock(&d->lock);
    int found = heap_owns(&d->general, ptr, kind);
    for (gm_heap_t *h = d->graph_heaps; h && !found; h = h->next_heap)
        found = heap_owns(h, ptr, kind);
    pthread_mutex_unlock(&d->lock);
    return found;
}

/* ---- the rest ---------------------------------------------------------------------------- */

size_t device_cached_bytes(gm_device_t *d)
{
    pthread_mutex_lock(&d->lock);
    const gm_heap_t *h = &d->general;
    size_t bytes = h->free_bytes[0] + h->free_bytes[1] + h->pending_bytes[0] + h->pending_bytes[1];
    pthread_mutex_unlock(&d->lock);
    return bytes;
}

void device_forget(gm_device_t *d)
{
    pthread_mutex_lock(&d->lock);
    uint64_t reserved = d->bytes.reserved.current, live = d->bytes.allocated.current;
    gm_block_t *b, *tmp;
    HASH_ITER(hh, d->live, b, tmp) {
        if (b == &d->sentinel)
            continue;
        HASH_DEL(d->live, b);
        if (!b->seg)
            free(b);
    }
    heap_destroy(&d->general);
    heap_init(&d->general, &d->bytes, NULL);
    gm_heap_t *h = d->graph_heaps;
    while (h) {
        gm_heap_t *next = h->next_heap;
        heap_destroy(h);
        free(h);
        h = next;
    }
    d->graph_heaps = NULL;
    d->capture_heap = NULL;
    d->captures = 0;
    fences_forget(&d->fences);
    d->open_bytes = 0;
    d->bytes.requested.current = d->bytes.allocated.current = d->bytes.reserved.current = 0;
    d->bytes.cached.current = d->bytes.pending.current = 0;
    if (evlog_enabled()) {
        gmlog_reset_t rec;
        memset(&rec, 0, sizeof rec);
        evlog_hdr(&rec.h, GMLOG_RESET, sizeof rec, d->id, 0);
        rec.reserved_bytes = reserved;
        rec.live_bytes = live;
        evlog_append(&rec, sizeof rec, gm_now_ns());
    }
    pthread_mutex_unlock(&d->lock);
}

void device_stream_created(gm_device_t *d, cudaStream_t s, unsigned flags)
{
    if (!(flags & cudaStreamNonBlocking))
        return; /* the legacy stream's event covers blocking streams */
    pthread_mutex_lock(&d->lock);
    fences_add_stream(&d->fences, s);
    pthread_mutex_unlock(&d->lock);
}

void device_stream_destroyed(gm_device_t *d, cudaStream_t s)
{
    pthread_mutex_lock(&d->lock);
    fences_remove_stream(&d->fences, s);
    /* Work queued on the stream still runs after cudaStreamDestroy returns: blocks freed from
     * now on must wait for it too. The last event on it joins the next fence. */
    gm_ctx_t c;
    device_ctx_enter(d, &c);
    fences_retire_stream(&d->fences, s);
    device_ctx_leave(&c);
    pthread_mutex_unlock(&d->lock);
}

int device_ipc_export(gm_device_t *d, void *ptr, int *found)
{
    uintptr_t key = (uintptr_t)ptr;
    gm_block_t *b;
    int sub = 0;
    *found = 0;
    if (!key)
        return 0;
    pthread_mutex_lock(&d->lock);
    HASH_FIND(hh, d->live, &key, sizeof key, b);
    *found = b != NULL;
    if (b && b->seg) {
        b->ipc = 1;
        sub = b->ptr != b->seg->base;
    }
    pthread_mutex_unlock(&d->lock);
    return sub;
}

void device_get_stats(gm_device_t *d, gmshim_stats_t *out)
{
    pthread_mutex_lock(&d->lock);
    out->device = d->id;
    out->requested = d->bytes.requested;
    out->allocated = d->bytes.allocated;
    out->reserved = d->bytes.reserved;
    out->cached = d->bytes.cached;
    out->pending = d->bytes.pending;
    out->allocs = d->n.allocs;
    out->frees = d->n.frees;
    out->cache_hits = d->n.hits;
    out->cache_misses = d->n.misses;
    out->driver_mallocs = d->n.driver_mallocs;
    out->driver_frees = d->n.driver_frees;
    out->oom_retries = d->n.oom_retries;
    out->ooms = d->n.ooms;
    out->fences = d->n.fences;
    out->fence_waits = d->n.fence_waits;
    out->fence_wait_ns = d->n.fence_wait_ns;
    out->unpooled_allocs = d->n.unpooled_allocs;
    out->foreign_frees = d->n.foreign_frees;
    out->bad_frees = d->n.bad_frees;
    out->limit = d->limit;
    pthread_mutex_unlock(&d->lock);
}

int device_set_limit(int id, size_t bytes)
{
    gm_device_t *d = device_get(id);
    if (!d)
        return -1;
    pthread_mutex_lock(&d->lock);
    d->limit = bytes;
    log_limit(d);
    if (bytes && d->bytes.reserved.current > bytes && !d->captures) {
        gm_ctx_t c;
        device_ctx_enter(d, &c);
        empty_cache_locked(d, GMLOG_EMPTY_DEVICE_LIMIT);
        device_ctx_leave(&c);
    }
    pthread_mutex_unlock(&d->lock);
    return 0;
}

void device_adopt_heap_locked(gm_device_t *d, gm_heap_t *heap)
{
    uint64_t seq = d->fences.issued + 1;
    while (heap->segments)
        heap_move_segment(heap, &d->general, heap->segments, seq);
    gm_heap_t **link = &d->graph_heaps;
    while (*link && *link != heap)
        link = &(*link)->next_heap;
    if (*link)
        *link = heap->next_heap;
    if (d->capture_heap == heap)
        d->capture_heap = NULL;
    heap_adopt_storage(&d->general, heap);
    heap_destroy(heap);
    free(heap);
}

void device_fork_prepare(void)
{
    pthread_mutex_lock(&create_lock);
    for (int i = 0; i < ncreated; i++)
        pthread_mutex_lock(&devices[created[i]]->lock);
}

void device_fork_release(void)
{
    for (int i = ncreated - 1; i >= 0; i--)
        pthread_mutex_unlock(&devices[created[i]]->lock);
    pthread_mutex_unlock(&create_lock);
}
