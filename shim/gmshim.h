/* gmshim's application-side API: call it from C, or from Python through ctypes.CDLL(None)
 * when libgmshim.so is preloaded. Every function is also safe to look up with dlsym(RTLD_DEFAULT,
 * "gmshim_mark") first, which returns NULL when the program runs without gmshim:
 *
 *     int (*mark)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "gmshim_mark");
 *     if (mark) mark("epoch 3");
 *
 * or declare them weak (`#pragma weak gmshim_mark`) and test the address before calling.
 */
#ifndef GMSHIM_H
#define GMSHIM_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stddef.h>

#define GMSHIM_API_VERSION 3

/* current: what is there now; peak: the most there ever was; total: the sum of all ever added.
 * The peaks of `requested` and `allocated` are exact while one thread allocates and the device
 * has one sub-pool (arena); with more, an upper bound (another thread's freed blocks still in its
 * cache, GMSHIM_THREAD_CACHE, or another arena's own peak, count in). */
typedef struct gmshim_stat {
    unsigned long long current, peak, total;
} gmshim_stat_t;

/* Per-device figures, in bytes unless named as counts. */
typedef struct gmshim_stats {
    unsigned int size;               /* set to sizeof(struct gmshim_stats) before the call */
    int device;
    gmshim_stat_t requested;         /* live bytes as the program asked for them */
    gmshim_stat_t allocated;         /* live bytes as handed out (rounded to 512 B, unsplit tails) */
    gmshim_stat_t reserved;          /* bytes held from the driver (segments) */
    gmshim_stat_t cached;            /* free bytes in segments, ready for reuse */
    gmshim_stat_t pending;           /* freed bytes waiting for the GPU work issued before the free, or in
                                        their thread's cache for its next request of their size */
    unsigned long long allocs, frees;          /* pooled cudaMalloc/cudaFree calls */
    unsigned long long cache_hits, cache_misses; /* allocations served without / with a driver call */
    unsigned long long driver_mallocs, driver_frees;
    unsigned long long oom_retries;  /* driver failures after which the cache was released and the call retried */
    unsigned long long ooms;         /* allocations that failed with cudaErrorMemoryAllocation */
    unsigned long long fences;       /* fences recorded (each: events on the streams in use) */
    unsigned long long fence_waits;  /* times an allocation waited for a fence instead of growing the pool */
    unsigned long long fence_wait_ns;    /* total time spent in those waits */
    unsigned long long unpooled_allocs;  /* managed, pitched, 3D, host and stream-ordered allocations forwarded */
    unsigned long long foreign_frees;    /* cudaFree of pointers gmshim did not hand out, forwarded */
    unsigned long long bad_frees;        /* double, interior or invalid frees refused */
    unsigned long long limit;        /* the device cap in bytes, 0 = none */
    unsigned long long arenas;       /* sub-pools in use (threads that contend spread over more) */
    /* Since version 2 (a caller's smaller struct, up to `arenas`, is filled that far): */
    unsigned long long fence_ns;     /* time of the fences' runtime calls: stream queries, events, and
                                        under GPU order the streams' waits */
    unsigned long long fence_polls;  /* queries of outstanding fences (are they complete?) */
    unsigned long long fence_poll_ns;    /* their time */
    /* Since version 3 (GMSHIM_PLAN; all 0 while it is off): */
    unsigned long long plan_allocs;  /* allocations served from the planned step (counted in allocs) */
    unsigned long long plan_online;  /* allocations made while the plan served that went to the pool */
    unsigned long long plan_busy;    /* ...of them: their slot's addresses were still in use */
    unsigned long long plan_period;  /* allocations of the planned step; 0 while it learns */
    unsigned long long plan_bytes;   /* addresses of the plan's range (its pages count in reserved) */
} gmshim_stats_t;

/* The size of version 1's struct, which ends at `arenas`. */
#define GMSHIM_STATS_V1_SIZE (offsetof(gmshim_stats_t, arenas) + sizeof(unsigned long long))
/* The size of version 2's struct, which ends at `fence_poll_ns`. */
#define GMSHIM_STATS_V2_SIZE (offsetof(gmshim_stats_t, fence_poll_ns) + sizeof(unsigned long long))

/* Writes a mark (a phase or iteration boundary) into the event log. Returns 0, or -1 when no
 * log is being written. */
int gmshim_mark(const char *label);

/* Writes the mark that ends a phase begun with gmshim_mark (Python's `gmshim.phase()` writes
 * "NAME end" with it): shown as a mark, but no iteration boundary, so that growth "per mark"
 * stays growth per step. Returns as gmshim_mark. */
int gmshim_phase_end(const char *label);

/* Returns every whole free segment of every device to the driver, after waiting for pending
 * frees to complete (nothing is released while a graph capture is under way). Returns the number
 * of bytes released. */
unsigned long long gmshim_empty_cache(void);

/* Fills *out for `device`, whose `size` says which version the caller knows: sizeof(gmshim_stats_t),
 * GMSHIM_STATS_V2_SIZE or GMSHIM_STATS_V1_SIZE (built against an older version). Returns 0, or -1 for a bad device or size. */
int gmshim_get_stats(int device, gmshim_stats_t *out);

/* Caps what gmshim reserves on `device` (0 removes the cap). Returns 0, or -1 for a bad device
 * or in a fork child (whose pools are the parent's). */
int gmshim_set_limit(int device, unsigned long long bytes);

/* The library's version (GMSHIM_API_VERSION it was built with). */
int gmshim_version(void);

/* ---- PyTorch's caching allocator, followed from inside (docs/pytorch.md) -------------------
 * The bridge (shim/torch/bridge.cpp, built against the installed torch) attaches a trace tracker
 * to PyTorch's caching allocator and hands each of its events to gmshim_torch_event, in the
 * allocating thread, under PyTorch's allocator lock: the entry point takes no lock PyTorch could
 * wait for, never the GIL, and never calls CUDA. */
enum gmshim_torch_action {
    GMSHIM_TORCH_ALLOC = 1,          /* a tensor's block handed out (addr, bytes requested) */
    GMSHIM_TORCH_FREE_REQUESTED = 2, /* the tensor was freed; the block may wait for its streams */
    GMSHIM_TORCH_FREE_COMPLETED = 3, /* the block is reusable (after record_stream's events) */
    GMSHIM_TORCH_SEGMENT_ALLOC = 4,  /* PyTorch took a segment from cudaMalloc */
    GMSHIM_TORCH_SEGMENT_FREE = 5,   /* PyTorch gave a segment back (cudaFree) */
    GMSHIM_TORCH_SEGMENT_MAP = 6,    /* expandable segments: pages mapped */
    GMSHIM_TORCH_SEGMENT_UNMAP = 7,  /* expandable segments: pages unmapped */
    GMSHIM_TORCH_OOM = 8,            /* PyTorch raised OutOfMemoryError (addr: the driver's free bytes) */
};

/* One allocator event. Grows only at its end: `size` says how much of it the caller filled. */
typedef struct gmshim_torch_event {
    unsigned int size;               /* sizeof(struct gmshim_torch_event) of the caller */
    int action;                      /* enum gmshim_torch_action; others are ignored */
    int device;                      /* -1: not known */
    unsigned int pool;               /* 0: the default pool; else a private pool (CUDA graph) id */
    unsigned long long addr;         /* block or segment address; OOM: free bytes on the device */
    unsigned long long bytes;        /* as PyTorch's trace gives it (ALLOC/FREE_*: the request) */
    unsigned long long stream;       /* the cudaStream_t of the block */
    double memory_fraction;          /* OOM: PyTorch's per-process memory fraction (1: none; 0: not known) */
} gmshim_torch_event_t;

/* Records one event in the log. Returns 0, or -1 (no log, a bad event). */
int gmshim_torch_event(const gmshim_torch_event_t *ev);

/* What a bridge exports under this name: attaches the tracker, forwarding every event to
 * `event`. Returns 0 once attached, else a negative number (nothing attached). */
#define GMSHIM_TORCH_BRIDGE_ATTACH "gmshim_torch_bridge_attach"
typedef int (*gmshim_torch_attach_fn)(int (*event)(const gmshim_torch_event_t *));

/* What a bridge exports under this name: empties PyTorch's cache (its emptyCache, which takes
 * PyTorch's own allocator lock and cudaFree's its free segments). 0, or negative (no allocator,
 * or it threw). gmshim calls it from its trimmer thread (GMSHIM_EMPTY_CACHE_INTERVAL,
 * GMSHIM_IDLE_RELEASE), holding no lock of its own, never during a capture. */
#define GMSHIM_TORCH_BRIDGE_EMPTY "gmshim_torch_bridge_empty_cache"
typedef int (*gmshim_torch_empty_fn)(void);

/* What a bridge exports under this name: makes PyTorch's emptyCache call `after` once it has
 * returned (PyTorch's cache off: torch.cuda.empty_cache() then empties gmshim's pool). 0 once
 * in place, else negative (nothing changed). */
#define GMSHIM_TORCH_BRIDGE_HOOK_EMPTY "gmshim_torch_bridge_hook_empty_cache"
typedef int (*gmshim_torch_hook_empty_fn)(void (*after)(void));

/* Builds (or finds built) the bridge for the torch package at `torch_dir` (.../torch) into
 * `out_dir` (NULL: the per-user cache) and writes its path. 0, or -1 with a line on stderr. */
int gmshim_torch_bridge_build(const char *torch_dir, const char *out_dir, char *path, unsigned long len);
/* `gmshim run`'s look before a job: 0, the bridge for that torch is there (its path in msg); 1,
 * it can be built ("torch V into DIR"; with `build` it is: 0 and the path, or -1); -1, it cannot
 * (the reason in msg). Prints nothing. */
int gmshim_torch_bridge_prepare(const char *torch_dir, int build, char *msg, unsigned long len);

#ifdef __cplusplus
}
#endif

#endif
