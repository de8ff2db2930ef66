/* The types every part of a device's pool shares: the device, its arenas, their counters, and
 * the few atomic reads every part makes of them. No functions with bodies beyond those reads;
 * nothing here calls CUDA or takes a lock. Lock order: the device table's lock, then arena
 * locks by index, then the device's fence lock. */
#ifndef GM_DEVTYPES_H
#define GM_DEVTYPES_H

#include "common.h"
#include "fence.h"
#include "pool.h"

#include <cuda_runtime_api.h>
#include <pthread.h>

#define GM_MAX_ARENAS 16

typedef struct gm_counters {
    uint64_t allocs, frees, hits, misses, driver_mallocs, driver_frees, oom_retries, ooms;
    uint64_t fences, fence_waits, fence_wait_ns, unpooled_allocs, foreign_frees, bad_frees;
} gm_counters_t;

typedef struct gm_device gm_device_t;

/* Frees since the device's last fence, as one arena or one thread cache counted them
 * (fencepol_count_free): a fence is worth recording once they are many enough. */
typedef struct gm_open_set {
    size_t bytes;
    unsigned count;
    unsigned recheck;           /* count at which a device still quiet is asked again */
    uint64_t seen;              /* the device's fence count when bytes and count began */
} gm_open_set_t;

/* Arena 0 also holds the captures' private heaps and everything allocated while a capture runs
 * on the device. */
typedef struct gm_arena {
    _Alignas(GM_CACHE_LINE) pthread_mutex_t lock; /* arenas are allocated line-aligned */
    gm_device_t *dev;
    int index;
    gm_heap_t general;
    gm_block_t *live;           /* uthash: ptr -> block (and pass-through/unpooled blocks) */
    gm_block_t sentinel;        /* ptr 0, never removed: an empty uthash frees its table */
    gm_pool_stats_t bytes;
    leakwarn_tap_t tap;         /* GMSHIM_WARN: bytes.allocated's troughs (bytes.tap points here) */
    gm_counters_t n;
    gm_open_set_t open;         /* its frees since the device's last fence */
    unsigned since_poll;        /* allocations since fences were last polled */
    uint64_t last_stamp;        /* the newest log time stamped under the lock (arena_note_stamp) */
    const void *last_user;      /* the thread that allocated here last (a thread-local address) */
} gm_arena_t;

/* The log times of an arena's records keep its lock's order. The hit path reads the unordered
 * counter (gm_now_unordered_ns: no wait for the lock's stores, a tenth of a small pair's time in
 * the profile), which may give a time from before the lock was taken; arena_stamp raises it to
 * the newest time stamped or noted under the lock, so that a free is never logged after the
 * allocation that reused its block on another thread. Both under the arena's lock. */
static inline uint64_t arena_stamp(gm_arena_t *a, uint64_t t)
{
    return stamp_after(&a->last_stamp, t);
}

/* A time stamped under the lock by the ordered clock (a segment, a cut): later stamps not before. */
static inline void arena_note_stamp(gm_arena_t *a, uint64_t t)
{
    if (t > a->last_stamp)
        a->last_stamp = t;
}

/* Fields that every call reads come first and are written rarely; what any thread writes often
 * sits on cache lines of its own, so that threads in different arenas do not share lines. */
struct gm_device {
    int id;
    gm_arena_t *arenas[GM_MAX_ARENAS];
    int narenas;                /* read atomically; grows under the table's lock */
    int max_arenas;
    /* Captures, guarded by arena 0's lock (captures is also read atomically). */
    int captures;
    int captures_beginning;     /* captures begun by the runtime, not yet counted in captures
                                   (atomic; raised under the fence lock: capture_beginning) */
    gm_heap_t *capture_heap;
    gm_heap_t *graph_heaps;     /* private heaps of live graphs and captures, via ->next_heap */
    size_t limit;               /* cap on reserved bytes, 0 = none (atomic) */
    /* Settings read once at creation (the hot path does not consult the options table). */
    size_t fence_bytes, cache_limit;
    unsigned fence_frees;
    unsigned fence_gap;         /* GMSHIM_FENCE_SHARE as a factor in hundredths: a periodic fence
                                   waits fence_gap / 100 times the last fence's cost after it
                                   (fencepol_gap_of_share); 0 = no wait */
    int trust_stream_order, pending_wait;
    int gpu_order;              /* GMSHIM_GPU_ORDER, while the process uses one device (atomic) */
    int gpu_order_ever;         /* it had GPU order: its ordered fences may still be running */
    uint64_t order_stop_seq;    /* fences ordered when GPU order stopped: completed before any
                                   other device's work starts (fence lock) */
    size_t total;               /* device memory, from cudaMemGetInfo at creation */
    struct gm_ranges *ranges;   /* GMSHIM_SEGMENTS=vmm in use (ranges.c); NULL: classic segments */
    struct gm_plan *plan;       /* GMSHIM_PLAN (plan.c); NULL: off */
    int plan_moves;             /* the plan learns: growable ranges move idle pages (atomic) */
    /* The plan's pages no planned block needs, back to the driver (planner_give_back; NULL: no
     * plan): called by the pool's releases (slowpath.c) under an arena lock, before the fence
     * lock, as the lock order has it; a pointer since the pool sits below the plan. */
    size_t (*plan_give_back)(struct gm_device *d, int reason);
    size_t tcache_max;          /* GMSHIM_THREAD_CACHE: bytes a thread's cache holds; 0 = no caches */
    uint32_t warn_epoch;        /* GMSHIM_WARN's steps ended so far (atomic; warn.c): blocks' `born` */
    struct gm_tcache *tcaches;  /* the threads' caches (tcache.h), pushed atomically, never removed */
    uint64_t resets;            /* cudaDeviceResets so far (atomic; written under every arena lock) */
    uint64_t peak_allocated_seen, peak_requested_seen; /* tcache_note_peak (atomic) */
    uint64_t plan_allocated, plan_requested; /* the plan's live blocks, in those peaks (atomic) */
    _Alignas(GM_CACHE_LINE) uint64_t reserved_total; /* bytes held from the driver, all arenas (atomic) */
    uint64_t reserved_peak;
    unsigned next_arena;        /* where contending threads go once max_arenas exist (atomic) */
    uint64_t stats_logged_ns;   /* when the last stats snapshot went to the log (atomic) */
    uint64_t fence_quiet_ns;    /* no periodic fence before this time (atomic; GMSHIM_FENCE_SHARE) */
    _Alignas(GM_CACHE_LINE) pthread_mutex_t fence_lock; /* fences; taken after an arena lock, never before */
    uint64_t fence_ns;          /* time of the fences' runtime calls (fence lock) */
    uint64_t polls, poll_ns;    /* queries of outstanding fences, and their time (fence lock) */
    uint64_t reusable_logged;   /* the seq the last FENCE_REUSABLE record gave (fence lock) */
    gm_fences_t fences;         /* its issued/done counters have a line of their own */
};

/* The atomic reads every part makes. */
static inline uint64_t device_issued(gm_device_t *d) { return __atomic_load_n(&d->fences.issued, __ATOMIC_SEQ_CST); }
static inline uint64_t device_done(gm_device_t *d) { return __atomic_load_n(&d->fences.done, __ATOMIC_ACQUIRE); }
/* Blocks waiting for fences up to here may be handed out: the fences completed, or (GPU order)
 * every stream waits for them on the GPU. */
static inline uint64_t device_reusable(gm_device_t *d)
{
    uint64_t done = device_done(d), ordered = __atomic_load_n(&d->fences.ordered, __ATOMIC_ACQUIRE);
    return ordered > done ? ordered : done;
}
static inline int device_captures(gm_device_t *d) { return __atomic_load_n(&d->captures, __ATOMIC_ACQUIRE); }
static inline size_t device_limit(gm_device_t *d) { return __atomic_load_n(&d->limit, __ATOMIC_RELAXED); }
static inline int device_narenas(gm_device_t *d) { return __atomic_load_n(&d->narenas, __ATOMIC_ACQUIRE); }
static inline int device_gpu_order(gm_device_t *d) { return __atomic_load_n(&d->gpu_order, __ATOMIC_RELAXED); }
static inline uint64_t device_reserved(gm_device_t *d) { return __atomic_load_n(&d->reserved_total, __ATOMIC_RELAXED); }

/* Bytes held from the driver, device-wide. */
static inline void device_reserved_add(gm_device_t *d, size_t n)
{
    uint64_t now = __atomic_add_fetch(&d->reserved_total, n, __ATOMIC_RELAXED);
    uint64_t peak = __atomic_load_n(&d->reserved_peak, __ATOMIC_RELAXED);
    while (now > peak && !__atomic_compare_exchange_n(&d->reserved_peak, &peak, now, 1,
                                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

static inline void device_reserved_sub(gm_device_t *d, size_t n)
{
    __atomic_sub_fetch(&d->reserved_total, n, __ATOMIC_RELAXED);
}

/* Calls the device pool makes, wrapped: relaxed capture mode (so that they never invalidate
 * someone's capture) and the device current (devctx.c). */
typedef struct gm_ctx {
    int saved_device;
    int switched;
    enum cudaStreamCaptureMode saved_mode;
} gm_ctx_t;

#endif
