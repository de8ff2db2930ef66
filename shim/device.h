/* One device's pool: its lock, heaps (general and per-graph), live-block map, fences, stats,
 * and the policy around them — when to fence, wait, grow, release and retry. Threads on
 * different devices never share a lock here. */
#ifndef GM_DEVICE_H
#define GM_DEVICE_H

#include "fence.h"
#include "pool.h"

#include <cuda_runtime_api.h>
#include <pthread.h>

typedef struct gm_counters {
    uint64_t allocs, frees, hits, misses, driver_mallocs, driver_frees, oom_retries, ooms;
    uint64_t fences, fence_waits, fence_wait_ns, unpooled_allocs, foreign_frees, bad_frees;
} gm_counters_t;

typedef struct gm_device {
    int id;
    pthread_mutex_t lock;
    gm_heap_t general;
    gm_heap_t *graph_heaps;     /* private heaps of live graphs and captures, via ->next_heap */
    gm_block_t *live;           /* uthash: ptr -> block, every heap (and pass-through blocks) */
    gm_block_t sentinel;        /* ptr 0, never removed: an empty uthash frees its table */
    gm_pool_stats_t bytes;
    gm_counters_t n;
    gm_fences_t fences;
    size_t open_bytes;          /* freed since the newest fence */
    unsigned open_count;        /* blocks freed since the newest fence */
    unsigned since_poll;        /* allocations since fences were last polled */
    int captures;               /* captures under way on this device */
    gm_heap_t *capture_heap;    /* where allocations go while one is */
    uint32_t capture_id;
    size_t limit;               /* cap on reserved bytes, 0 = none */
    /* Settings read once at creation (the hot path does not consult the options table). */
    size_t fence_bytes, cache_limit;
    int trust_stream_order, pending_wait;
    size_t total;               /* device memory, from cudaMemGetInfo at creation */
} gm_device_t;

/* The device's pool, created on first use (the device must be current then). NULL on failure. */
gm_device_t *device_get(int id);
/* The device's pool if it exists. */
gm_device_t *device_peek(int id);

/* Flags device_alloc reports (GMLOG_A_*). */
cudaError_t device_alloc(gm_device_t *d, size_t size, uint32_t site, void **out);
/* Pass-through: forwards to the real cudaMalloc and keeps the counting. */
cudaError_t device_alloc_pass(gm_device_t *d, size_t size, uint32_t site, uint64_t t0, void **out);

typedef enum gm_free_result {
    GM_FREE_DONE,               /* the block was ours and is freed; *err holds the result */
    GM_FREE_NOT_FOUND,          /* no live block of this device starts at ptr */
} gm_free_result_t;
gm_free_result_t device_free(gm_device_t *d, void *ptr, uint32_t site, cudaError_t *err);
/* For a pointer no device knows as live: whether it lies in one of this device's segments
 * (a double or interior free) — then 1 and *kind = GMLOG_WARN_*. */
int device_owns_address(gm_device_t *d, uintptr_t ptr, int *kind);

/* Free bytes the program may count on in addition to the driver's: cached + pending. */
size_t device_cached_bytes(gm_device_t *d);
/* Returns whole free segments to the driver after waiting for pending frees (not during a
 * capture). Returns bytes released. */
size_t device_empty_cache(gm_device_t *d, int reason);
/* The trimmer's pass: returns whole free segments idle for at least idle_ns (0: all of them);
 * nothing while a capture is under way on the device. */
size_t device_trim(gm_device_t *d, uint64_t idle_ns);
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

/* Capture support (capture.c drives these under the device lock it takes itself). */
void device_lock(gm_device_t *d);
void device_unlock(gm_device_t *d);
/* Gives a private heap's segments back to the general heap; free memory in them waits for the
 * next fence (the graph's last replay may still run). Frees the heap struct. */
void device_adopt_heap_locked(gm_device_t *d, gm_heap_t *heap);

/* Calls the device pool makes, wrapped: relaxed capture mode (so that they never invalidate
 * someone's capture) and the device current. */
typedef struct gm_ctx {
    int saved_device;
    int switched;
    enum cudaStreamCaptureMode saved_mode;
} gm_ctx_t;
void device_ctx_enter(gm_device_t *d, gm_ctx_t *c);
void device_ctx_leave(gm_ctx_t *c);

/* Every created device, for the API, the trimmer and fork handlers. */
int device_created_count(void);
gm_device_t *device_at(int index);
/* Fork: prepare takes every device lock, parent and child release them. */
void device_fork_prepare(void);
void device_fork_release(void);

#endif
