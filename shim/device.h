/* One device's pool: arenas (each a lock, a general heap, a live-block map and stats), the
 * fences they share, the captures' private heaps, and the policy around them — when to fence,
 * wait, grow, release and retry. Threads on different devices never share a lock; threads on
 * one device share one arena until they contend, then spread over more. */
#ifndef GM_DEVICE_H
#define GM_DEVICE_H

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
    gm_counters_t n;
    size_t open_bytes;          /* freed since the device's last fence (as this arena saw it) */
    unsigned open_count;
    uint64_t open_seen;         /* the device's fence count when open_bytes/open_count began */
    unsigned since_poll;        /* allocations since fences were last polled */
    const void *last_user;      /* the thread that allocated here last (a thread-local address) */
} gm_arena_t;

/* Fields that every call reads come first and are written rarely; what any thread writes often
 * sits on cache lines of its own, so that threads in different arenas do not share lines. */
struct gm_device {
    int id;
    gm_arena_t *arenas[GM_MAX_ARENAS];
    int narenas;                /* read atomically; grows under create_lock */
    int max_arenas;
    /* Captures, guarded by arena 0's lock (captures is also read atomically). */
    int captures;
    gm_heap_t *capture_heap;
    gm_heap_t *graph_heaps;     /* private heaps of live graphs and captures, via ->next_heap */
    size_t limit;               /* cap on reserved bytes, 0 = none (atomic) */
    /* Settings read once at creation (the hot path does not consult the options table). */
    size_t fence_bytes, cache_limit;
    unsigned fence_frees;
    int trust_stream_order, pending_wait;
    int gpu_order;              /* GMSHIM_GPU_ORDER, while the process uses one device (atomic) */
    int gpu_order_ever;         /* it had GPU order: its ordered fences may still be running */
    uint64_t order_stop_seq;    /* fences ordered when GPU order stopped: completed before any
                                   other device's work starts (fence lock) */
    size_t total;               /* device memory, from cudaMemGetInfo at creation */
    _Alignas(GM_CACHE_LINE) uint64_t reserved_total; /* bytes held from the driver, all arenas (atomic) */
    uint64_t reserved_peak;
    unsigned next_arena;        /* where contending threads go once max_arenas exist (atomic) */
    uint64_t stats_logged_ns;   /* when the last stats snapshot went to the log (atomic) */
    _Alignas(GM_CACHE_LINE) pthread_mutex_t fence_lock; /* fences; taken after an arena lock, never before */
    gm_fences_t fences;         /* its issued/done counters have a line of their own */
};

/* The device's pool, created on first use. NULL on failure. */
gm_device_t *device_get(int id);
/* The device's pool if it exists. */
gm_device_t *device_peek(int id);
/* 1 once a pool exists and the process sees exactly one device (its current device is 0). */
int device_is_only(void);
/* The calling thread's current device, as cudaGetDevice gives it, without its cost: 0 on
 * success, -1 when the runtime cannot tell. */
int device_current(int *dev);
/* Contexts were destroyed (a device reset): forget which device each thread's context was. */
void device_contexts_changed(void);
/* The process makes device `id` current or allocates on it. GMSHIM_GPU_ORDER holds while one
 * device is in use; when a second one comes into use, the first device's blocks handed out under
 * GPU order are waited for (their fences complete) before this returns, and its freed memory
 * waits on the CPU from then on: the other device's work could touch it. */
void device_note_used(int id);

cudaError_t device_alloc(gm_device_t *d, size_t size, uint32_t site, void **out);
/* Pass-through: forwards to the real cudaMalloc and keeps the counting. */
cudaError_t device_alloc_pass(gm_device_t *d, size_t size, uint32_t site, uint64_t t0, void **out);
/* A forwarded allocation (managed, pitched, host, stream-ordered): counted; device memory
 * (managed, pitched) tracked so that its cudaFree is recognised. Logged with `kind`. */
void device_note_unpooled(gm_device_t *d, int kind, void *ptr, size_t size, uint64_t extra,
                          uint32_t site, uint64_t t0);

typedef enum gm_free_result {
    GM_FREE_DONE,               /* the block was ours and is freed; *err holds the result */
    GM_FREE_NOT_FOUND,          /* no live block of this device starts at ptr */
} gm_free_result_t;
gm_free_result_t device_free(gm_device_t *d, void *ptr, uint32_t site, cudaError_t *err);
/* For a pointer no device knows as live: whether it lies in one of this device's segments
 * (a double or interior free) — then 1 and *kind = GMLOG_WARN_*. */
int device_owns_address(gm_device_t *d, uintptr_t ptr, int *kind);
/* A refused (double, interior) or forwarded (foreign) free, counted. */
void device_note_bad_free(gm_device_t *d);
void device_note_foreign_free(gm_device_t *d);

/* Free bytes the program may count on in addition to the driver's: cached + pending. */
size_t device_cached_bytes(gm_device_t *d);
/* Returns whole free segments to the driver after waiting for pending frees (not during a
 * capture). Returns bytes released. */
size_t device_empty_cache(gm_device_t *d, int reason);
/* The trimmer's pass: returns whole free segments idle for at least idle_ns (0: all of them);
 * nothing while a capture is under way on the device. */
size_t device_trim(gm_device_t *d, uint64_t idle_ns);
/* The trimmer's pass for GMSHIM_CACHE_LIMIT: fences the device's uncovered frees, takes in what
 * completed fences released (non-blocking queries), and returns the oldest whole free segments of
 * all its arenas beyond the cap. Nothing while a capture is under way there. Sets *waiting when
 * freed memory over the cap still waits for the GPU (or a capture), so that the trimmer polls
 * again. Returns the bytes released. */
unsigned long long device_cache_trim(gm_device_t *d, int *waiting);
/* cudaDeviceReset: forgets every segment and block of the device without driver calls. */
void device_forget(gm_device_t *d);
/* A stream created or destroyed through the hooks. */
void device_stream_created(gm_device_t *d, cudaStream_t s, unsigned flags);
void device_stream_destroyed(gm_device_t *d, cudaStream_t s);
/* An IPC handle was taken on ptr: returns 1 if ptr is ours and not its segment's start. */
int device_ipc_export(gm_device_t *d, void *ptr, int *found);
void device_get_stats(gm_device_t *d, gmshim_stats_t *out);
/* gmshim_set_limit: the cap on device `id` (0 = none); releases cache above it. */
int device_set_limit(int id, size_t bytes);

/* Captures (capture.c). A private heap for a capture; one more (delta 1) or one fewer (-1)
 * capture under way, `current` the heap allocations go to now; a heap whose graph and
 * instances are gone goes back to the general pool (its free memory after the next fence). */
gm_heap_t *device_graph_heap(gm_device_t *d, void *owner, uint32_t id);
void device_set_captures(gm_device_t *d, int delta, gm_heap_t *current);
void device_release_graph_heap(gm_device_t *d, gm_heap_t *heap);

/* Calls the device pool makes, wrapped: relaxed capture mode (so that they never invalidate
 * someone's capture) and the device current. */
typedef struct gm_ctx {
    int saved_device;
    int switched;
    enum cudaStreamCaptureMode saved_mode;
} gm_ctx_t;
void device_ctx_enter(gm_device_t *d, gm_ctx_t *c);
void device_ctx_leave(gm_ctx_t *c);

/* Arenas: one more (returns its index, or -1 when at the maximum), and which arena this thread
 * allocates from (arena_lock_for_alloc moves a contending thread by itself; tests pin one). */
int device_add_arena(gm_device_t *d);
void device_use_arena(int index);
/* Every arena of the device locked, in the lock order (no arena can be added until unlocked):
 * returns how many. For a consistent view of the device (a log checkpoint). */
int device_lock_arenas(gm_device_t *d);
void device_unlock_arenas(gm_device_t *d, int narenas);
/* Where a thread that keeps contending for arena `current` goes: a new arena while fewer than
 * max_arenas exist, then another existing one (round robin); `current` if there is no other. */
int device_move_arena(gm_device_t *d, int current);
/* This thread found its arena's lock free and the arena last used by itself (0), or taken or
 * last used by another thread (1: the arena's lines move between CPUs either way); returns 1
 * when that happened often enough to move: GM_CONTENDED times, each GM_FORGIVEN quiet
 * acquisitions cancelling one (threads that rarely meet share an arena and its cache). */
int device_note_lock(int contended);

/* Every created device, for the API, the trimmer and fork handlers. */
int device_created_count(void);
gm_device_t *device_at(int index);
/* Fork: prepare takes every lock of every device, parent and child release them. */
void device_fork_prepare(void);
void device_fork_release(void);

#endif
