/* The fence policy (fencepol.h). Fences are shared by every arena of a device: one covers every
 * free made before it, whichever arena made it. Lock order: arena lock, then the fence lock;
 * waits on the GPU happen outside the fence lock. */
#include "fencepol.h"
#include "devctx.h"
#include "diag.h"
#include "evlog.h"
#include "logrec.h"
#include "options.h"
#include "real.h"
#include "segments.h"

#include <string.h>

#define GM_STATS_EVERY_NS 10000000u /* the log's stats snapshots: at most one per 10 ms per device */
/* GMSHIM_FENCE_SHARE's quiet time is at most this: a fence that took long because its thread was
 * descheduled does not stop the frees' fences for long. */
#define GM_FENCE_QUIET_MAX_NS 20000000u
#define GM_FENCE_RECHECK 16 /* frees between two looks at the clock while the device is quiet */

size_t fencepol_take_in(gm_arena_t *a)
{
    uint64_t done = device_reusable(a->dev);
    uint64_t oldest = pool_oldest_pending_seq(&a->general);
    if (!oldest || oldest > done)
        return 0; /* nothing to release: no clock read */
    size_t bytes = pool_release_pending(&a->general, done, gm_now_ns());
    if (bytes && a->dev->cache_limit)
        segments_enforce_cache_limit(a);
    return bytes;
}

/* Under the fence lock, after the fences moved (polled since t0, or ordered on the GPU): the
 * seq up to which freed blocks became reusable, logged when it moved, at t0 — before any
 * thread could see it move — so that a replay reuses them where the recording could. */
static void note_reusable(gm_device_t *d, unsigned how, uint64_t t0)
{
    uint64_t seq = device_reusable(d);
    if (seq <= d->reusable_logged)
        return;
    d->reusable_logged = seq;
    if (evlog_enabled())
        logrec_fence_reusable(d->id, seq, how, gm_now_ns(), t0);
}

/* Advances the device's completed fences under the fence lock (kept); `every`: whatever their
 * number (what completed is asked for, not only events to recycle). */
static cudaError_t poll_held(gm_device_t *d, int every)
{
    gm_fences_t *f = &d->fences;
    /* GPU order: what the fences cover is reusable already; polling only recycles events. */
    int batch = !every && device_gpu_order(d) && f->ordered == f->issued ? GM_FENCE_BATCH : 1;
    cudaError_t err = cudaSuccess;
    if (fence_outstanding(f) >= batch) {
        uint64_t t0 = gm_now_ns();
        err = fence_poll(f);
        d->polls++;
        d->poll_ns += gm_now_ns() - t0;
        note_reusable(d, 0, t0);
    }
    return err;
}

/* poll_held; the caller holds the fence lock, which this releases. */
static void poll_locked(gm_device_t *d, int every)
{
    cudaError_t err = poll_held(d, every);
    pthread_mutex_unlock(&d->fence_lock);
    if (err != cudaSuccess)
        devctx_note_cuda_failure(d, "cudaEventQuery", err);
}

size_t fencepol_harvest(gm_arena_t *a, int blocking)
{
    gm_device_t *d = a->dev;
    if (blocking)
        pthread_mutex_lock(&d->fence_lock);
    else if (pthread_mutex_trylock(&d->fence_lock) != 0)
        return fencepol_take_in(a);
    poll_locked(d, 0);
    return fencepol_take_in(a);
}

int fencepol_open_set_waiting(gm_arena_t *a)
{
    uint64_t newest = pool_newest_pending_seq(&a->general);
    return newest && newest > device_issued(a->dev);
}

static void log_fence(gm_arena_t *a, unsigned why, uint64_t seq, unsigned events, uint64_t now, uint64_t t0)
{
    gm_device_t *d = a->dev;
    logrec_fence(d->id, why, seq, a->bytes.pending.current, events, now, t0);
    /* Fences come with the rhythm of the program: a good moment for a snapshot of the arena's
     * figures, at most one per GM_STATS_EVERY_NS on the device (a program that frees and
     * allocates a segment-sized block in a loop records a fence per pair). */
    uint64_t last = __atomic_load_n(&d->stats_logged_ns, __ATOMIC_RELAXED);
    if (last && now - last < GM_STATS_EVERY_NS)
        return;
    __atomic_store_n(&d->stats_logged_ns, now, __ATOMIC_RELAXED);
    logrec_stats(d->id, &a->bytes, a->n.hits, a->n.misses, now);
}

/* Records a fence covering every free so far, on every arena, for reason `why` (enum
 * gmlog_fence_why). Caller holds the arena lock and is inside devctx_enter, with the fence
 * lock held, which this releases. */
static int no_host_memory_warned;

static int issue_locked(gm_device_t *d, gm_arena_t *a, unsigned why)
{
    if (device_captures(d) || __atomic_load_n(&d->captures_beginning, __ATOMIC_SEQ_CST)) {
        pthread_mutex_unlock(&d->fence_lock);
        return -1; /* an event on a capturing stream would join the capture, a query end it */
    }
    uint64_t t0 = gm_now_ns(); /* two clock reads against tens of runtime calls */
    cudaError_t err = fence_issue(&d->fences, !device_gpu_order(d));
    cudaError_t order_err = err == cudaSuccess && device_gpu_order(d) ? fence_order(&d->fences) : cudaSuccess;
    if (order_err == cudaSuccess && err == cudaSuccess)
        note_reusable(d, device_gpu_order(d) ? GMLOG_REUSABLE_ORDERED : 0, t0);
    uint64_t t1 = gm_now_ns();
    d->fence_ns += t1 - t0;
    if (d->fence_gap) {
        /* GMSHIM_FENCE_SHARE: the next periodic fence comes after fence_gap / 100 times this
         * one's cost. With many streams a fence is a hundred runtime calls. */
        uint64_t quiet = (t1 - t0) * d->fence_gap / 100;
        __atomic_store_n(&d->fence_quiet_ns, t1 + (quiet < GM_FENCE_QUIET_MAX_NS ? quiet : GM_FENCE_QUIET_MAX_NS),
                         __ATOMIC_RELAXED);
    }
    uint64_t seq = d->fences.issued;
    unsigned events = err == cudaSuccess ? (unsigned)fence_newest_events(&d->fences) : 0;
    pthread_mutex_unlock(&d->fence_lock);
    if (order_err != cudaSuccess) /* the fence stands: its blocks wait for it on the CPU */
        devctx_note_cuda_failure(d, "cudaStreamWaitEvent", order_err);
    if (err != cudaSuccess) {
        if (d->fences.failed)
            devctx_note_cuda_failure(d, d->fences.failed, err);
        else /* the host's memory, not the runtime's: the next fence may find some */
            diag_warn_once(&no_host_memory_warned, "no host memory for a fence on device %d; freed memory "
                                                   "stays pending until a later fence is recorded", d->id);
        return -1;
    }
    if (!a) { /* the plan's fence (fencepol_issue_device): no arena's figures to log with it */
        if (evlog_enabled())
            logrec_fence(d->id, why, seq, 0, events, t1, t0);
        return 0;
    }
    a->n.fences++;
    a->open = (gm_open_set_t){.seen = seq};
    if (evlog_enabled())
        log_fence(a, why, seq, events, t1, t0);
    return 0;
}

int fencepol_issue(gm_arena_t *a, unsigned why)
{
    pthread_mutex_lock(&a->dev->fence_lock);
    return issue_locked(a->dev, a, why);
}

int fencepol_issue_device(gm_device_t *d, unsigned why)
{
    if (pthread_mutex_trylock(&d->fence_lock) != 0)
        return -1;
    gm_ctx_t c;
    devctx_enter(d, &c);
    /* The completed fences first: under GPU order the plan's slots never ask for a poll (a
     * recorded fence answers), so without this every fence made its events anew and the ring
     * grew for the whole run (on the H100, 1.2 ms a fence against the pool's 66 us, run 117). */
    cudaError_t err = poll_held(d, 0);
    int rc = issue_locked(d, NULL, why);
    devctx_leave(&c);
    if (err != cudaSuccess)
        devctx_note_cuda_failure(d, "cudaEventQuery", err);
    return rc;
}

void fencepol_poll_device(gm_device_t *d, int every)
{
    if (pthread_mutex_trylock(&d->fence_lock) != 0)
        return;
    gm_ctx_t c;
    devctx_enter(d, &c);
    poll_locked(d, every);
    devctx_leave(&c);
}

cudaError_t fencepol_wait_until_done(gm_device_t *d, uint64_t seq)
{
    cudaError_t err = cudaSuccess;
    while (device_done(d) < seq && err == cudaSuccess) {
        pthread_mutex_lock(&d->fence_lock);
        cudaEvent_t ev = fence_oldest_pending_event(&d->fences);
        pthread_mutex_unlock(&d->fence_lock);
        if (ev)
            err = REAL_CALL(cudaEventSynchronize, ev);
        if (err == cudaSuccess) {
            pthread_mutex_lock(&d->fence_lock);
            uint64_t t0 = gm_now_ns();
            err = fence_outstanding(&d->fences) ? fence_poll(&d->fences) : cudaSuccess;
            note_reusable(d, GMLOG_REUSABLE_WAITED, t0);
            int left = fence_outstanding(&d->fences);
            pthread_mutex_unlock(&d->fence_lock);
            if (!ev && !left)
                break;
        }
    }
    return err;
}

size_t fencepol_wait_oldest(gm_arena_t *a)
{
    gm_device_t *d = a->dev;
    if (device_gpu_order(d)) {
        /* Recording a fence orders the open frees on the GPU: no waiting, unless that failed. */
        uint64_t before = device_reusable(d);
        if (fencepol_open_set_waiting(a))
            fencepol_issue(a, GMLOG_FENCE_BY_NEED);
        if (device_reusable(d) > before)
            return fencepol_take_in(a) + 1;
    }
    pthread_mutex_lock(&d->fence_lock);
    int any = fence_outstanding(&d->fences);
    pthread_mutex_unlock(&d->fence_lock);
    if (!any && (!fencepol_open_set_waiting(a) || fencepol_issue(a, GMLOG_FENCE_BY_NEED)))
        return 0;
    uint64_t t0 = gm_now_ns();
    uint64_t seq = device_done(d) + 1;
    cudaError_t err = fencepol_wait_until_done(d, seq);
    if (err != cudaSuccess) {
        devctx_note_cuda_failure(d, "cudaEventSynchronize", err);
        return 0;
    }
    a->n.fence_waits++;
    uint64_t now = gm_now_ns();
    a->n.fence_wait_ns += now - t0;
    logrec_fence_wait(d->id, seq, now, t0);
    return fencepol_take_in(a) + 1;
}

void fencepol_wait_for(gm_arena_t *a, uint64_t seq)
{
    if (seq > device_issued(a->dev) && fencepol_issue(a, GMLOG_FENCE_BY_NEED))
        return;
    while (device_reusable(a->dev) < seq && fencepol_wait_oldest(a))
        ;
    fencepol_take_in(a);
}

/* When another thread already saw the oldest pending block's fence complete there is nothing to
 * ask the runtime; when another thread is polling, its answer will do. */
GM_NOINLINE void fencepol_poll_now(gm_arena_t *a)
{
    gm_device_t *d = a->dev;
    a->since_poll = 0;
    /* The try-lock comes before any runtime call: a thread that would only find the lock
     * taken makes none. */
    int ask = device_reusable(d) < pool_oldest_pending_seq(&a->general) &&
              pthread_mutex_trylock(&d->fence_lock) == 0;
    if (!ask && !d->cache_limit) {
        fencepol_take_in(a);
        return;
    }
    gm_ctx_t c;
    devctx_enter(d, &c); /* the runtime is asked, or the cache cap may free segments */
    if (ask)
        poll_locked(d, 0);
    fencepol_take_in(a);
    devctx_leave(&c);
}

GM_NOINLINE void fencepol_fence_now(gm_arena_t *a, gm_open_set_t *open)
{
    gm_device_t *d = a->dev;
    /* Too soon after the last fence for GMSHIM_FENCE_SHARE: the frees stay open until a later
     * free, a miss or a pass of the trimmer records one. The clock is asked again only after
     * GM_FENCE_RECHECK more frees (or one that alone fills the open set): read after the arena
     * lock's stores, it cost a fifth of a small pair while a quiet time lasted. */
    if (d->fence_gap && gm_now_ns() < __atomic_load_n(&d->fence_quiet_ns, __ATOMIC_RELAXED)) {
        open->recheck = open->count + GM_FENCE_RECHECK;
        return;
    }
    if (pthread_mutex_trylock(&d->fence_lock) != 0)
        return; /* before any runtime call, as in fencepol_poll_now */
    gm_ctx_t c;
    devctx_enter(d, &c);
    if (issue_locked(d, a, GMLOG_FENCE_BY_FREES) == 0)
        fencepol_harvest(a, 0);
    devctx_leave(&c);
}

/* ---- GMSHIM_GPU_ORDER and the devices in use ------------------------------------------------ */

static int gpu_order_warned;
static int gpu_order_setting(void);

/* GMSHIM_GPU_ORDER makes only the streams of the pool's device wait for its fences; work of
 * another device (a peer copy, a kernel reading through peer access) would not. So it holds while
 * the process uses one device: the first one made current or allocated on. */
static int first_used = -1;
static int many_used;     /* a second device came into use */
static int order_settled; /* and the first device's ordered fences have all completed */

/* A second device is in use: d (the first) leaves GPU order; blocks it handed out under it may
 * only be touched by other devices' work once their fences complete, so wait for them here. */
static void gpu_order_stop(gm_device_t *d, int say)
{
    pthread_mutex_lock(&d->fence_lock);
    int was = device_gpu_order(d);
    if (was) {
        __atomic_store_n(&d->gpu_order, 0, __ATOMIC_RELAXED);
        d->order_stop_seq = d->fences.ordered;
    }
    uint64_t seq = d->order_stop_seq;
    pthread_mutex_unlock(&d->fence_lock);
    if (was && say)
        diag_warn_once(&gpu_order_warned, "%s stops applying: the process uses a second device "
                                          "besides device %d (its work could touch this device's memory "
                                          "without waiting); freed memory waits on the CPU from now on",
                       gpu_order_setting() < 0 ? "GPU order (GMSHIM_TORCH=own)" : "GMSHIM_GPU_ORDER=1", d->id);
    if (device_done(d) >= seq)
        return;
    gm_ctx_t c;
    devctx_enter(d, &c);
    cudaError_t err = fencepol_wait_until_done(d, seq);
    devctx_leave(&c);
    if (err != cudaSuccess)
        devctx_note_cuda_failure(d, "cudaEventSynchronize", err);
}

void fencepol_note_used(int id)
{
    if (unlikely(id < 0 || id >= GM_MAX_DEVICES))
        return; /* no pool can exist there */
    int first = __atomic_load_n(&first_used, __ATOMIC_ACQUIRE);
    if (likely(first == id) || __atomic_load_n(&order_settled, __ATOMIC_ACQUIRE))
        return;
    if (first < 0) {
        if (__atomic_compare_exchange_n(&first_used, &first, id, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST) ||
            first == id)
            return;
    }
    __atomic_store_n(&many_used, 1, __ATOMIC_SEQ_CST);
    /* A pool being created decides on GPU order under the table's lock: once through it, the
     * first device's pool either exists here or will see many_used. */
    devctx_lock();
    gm_device_t *d = devctx_find_locked(first);
    devctx_unlock();
    if (d && d->gpu_order_ever)
        gpu_order_stop(d, 1);
    __atomic_store_n(&order_settled, 1, __ATOMIC_RELEASE);
}

/* GMSHIM_GPU_ORDER: 1 on, 0 off, -1 auto (on in own mode while every stream is watched). */
static int gpu_order_setting(void)
{
    const char *v = options_get_str(GM_OPT_GPU_ORDER);
    long long b;
    if (!strcmp(v, "auto"))
        return strcmp(options_get_str(GM_OPT_TORCH), "own") ? 0 : -1;
    return options_parse_bool(v, &b) == 0 && b;
}

static const char *unwatched; /* why not every stream can be made to wait (static text), or NULL */
static int unwatched_warned;

int fencepol_gpu_order_for(int id)
{
    int setting = gpu_order_setting();
    if (!setting)
        return 0;
    const char *why = __atomic_load_n(&unwatched, __ATOMIC_SEQ_CST);
    if (setting < 0 && why) {
        diag_warn_once(&unwatched_warned, "GMSHIM_TORCH=own orders freed memory on the GPU only while every "
                                          "stream is known, and %s: freed memory waits on the CPU "
                                          "(GMSHIM_GPU_ORDER=1 orders it anyway)", why);
        return 0;
    }
    /* Another device's streams could read this one's memory (peer copies) without waiting. */
    if (!__atomic_load_n(&many_used, __ATOMIC_SEQ_CST))
        return 1;
    diag_warn_once(&gpu_order_warned, "%s does not apply to device %d: the process uses "
                                      "more than one device (another device's work could touch its memory "
                                      "without waiting); freed memory waits on the CPU",
                   setting < 0 ? "GPU order (GMSHIM_TORCH=own)" : "GMSHIM_GPU_ORDER=1", id);
    return 0;
}

void fencepol_streams_unwatched(const char *why)
{
    const char *none = NULL;
    if (!__atomic_compare_exchange_n(&unwatched, &none, why, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        return; /* said once */
    int first = __atomic_load_n(&first_used, __ATOMIC_SEQ_CST);
    if (first < 0)
        return; /* no pool yet: fencepol_gpu_order_for decides when one is made */
    devctx_lock();
    gm_device_t *d = devctx_find_locked(first);
    devctx_unlock();
    if (!d || !device_gpu_order(d))
        return;
    if (gpu_order_setting() > 0) {
        diag_warn_once(&unwatched_warned, "GMSHIM_GPU_ORDER=1: %s; work on it is not made to wait for freed "
                                          "memory's fences", why);
        return;
    }
    diag_warn_once(&unwatched_warned, "GMSHIM_TORCH=own orders freed memory on the GPU only while every stream "
                                      "is known, and %s: freed memory waits on the CPU from now on", why);
    gpu_order_stop(d, 0);
}

void fencepol_stream_created(gm_device_t *d, cudaStream_t s, unsigned flags)
{
    if (!(flags & cudaStreamNonBlocking))
        return; /* the legacy stream's event covers blocking streams; they follow its waits */
    gm_ctx_t c;
    /* GPU order (now, or until a second device came into use and its fences are still running):
     * blocks already handed out may still be in use by work before their fences. */
    int order = d->gpu_order_ever;
    if (order)
        devctx_enter(d, &c);
    pthread_mutex_lock(&d->fence_lock);
    fence_add_stream(&d->fences, s);
    cudaError_t err = order ? fence_order_stream(&d->fences, s) : cudaSuccess;
    pthread_mutex_unlock(&d->fence_lock);
    if (order)
        devctx_leave(&c);
    if (err != cudaSuccess)
        devctx_note_cuda_failure(d, "cudaStreamWaitEvent", err);
}

void fencepol_stream_destroyed(gm_device_t *d, cudaStream_t s)
{
    gm_ctx_t c;
    devctx_enter(d, &c);
    pthread_mutex_lock(&d->fence_lock);
    fence_remove_stream(&d->fences, s);
    /* Work queued on the stream still runs after cudaStreamDestroy returns: blocks freed from
     * now on must wait for it too. The last event on it joins the next fence. */
    fence_retire_stream(&d->fences, s);
    pthread_mutex_unlock(&d->fence_lock);
    devctx_leave(&c);
}
