/* Thread caches: each thread keeps the small blocks it freed, each waiting for its fence, and
 * takes them back for a request of the same rounded size without any arena lock. A block joins
 * its thread's cache when an arena hands it to that thread; it stays in its arena's live map
 * the whole time (GM_TC_USER while the program holds it, GM_TC_CACHED once freed into the cache)
 * and leaves when another thread frees it, when its arena takes it back (before the pool grows,
 * empties its cache or trims, GMSHIM_THREAD_CACHE exceeded, the thread's exit) or on a reset.
 *
 * A cache's lock is taken by its thread on every call, and by other threads only to take its
 * blocks back, to free one of its thread's blocks, or for a checkpoint: lock order arena locks,
 * then cache locks. A thread holding its cache's lock takes no other lock but the log's, which
 * is a leaf. Never during a capture: a capture's allocations go to its own heap. */
#ifndef GM_TCACHE_H
#define GM_TCACHE_H

#include "devtypes.h"

#define GM_TCACHE_MAX_REQUEST GM_SMALL_REQUEST /* rounded sizes a cache keeps: the small class */
#define GM_TCACHE_CLASSES (GM_TCACHE_MAX_REQUEST / GM_ROUND)
#define GM_TCACHE_SLOTS 1024                   /* the thread's live blocks it can free from its cache */

typedef struct gm_tcache gm_tcache_t;

typedef struct gm_tc_queue {
    gm_block_t *head, *tail;                   /* oldest first, linked through fl */
} gm_tc_queue_t;

struct gm_tcache {
    _Alignas(GM_CACHE_LINE) int lock;          /* 1: held (its thread, or one taking blocks back) */
    gm_device_t *dev;
    gm_tcache_t *next;                         /* the device's caches, never unlinked */
    int dead;                                  /* its thread ended: another may take it over */
    size_t bytes;                              /* cached blocks' bytes */
    int64_t requested_adj;                     /* requested bytes as the program sees them minus as
                                                  the arenas count them, over the cache's blocks */
    uint64_t allocs, frees, alloc_bytes, requested_bytes; /* its own hits and frees */
    uint64_t last_stamp;                       /* newest log time its thread stamped under it */
    unsigned since_poll;                       /* misses since fences were last polled */
    gm_open_set_t open;                        /* its frees since the device's last fence */
    gm_block_t *oldest, *newest;               /* every cached block by age, linked through pl */
    struct {
        uintptr_t ptr;
        gm_block_t *b;
    } slot[GM_TCACHE_SLOTS];                   /* its thread's blocks, by address: direct-mapped */
    gm_tc_queue_t cls[GM_TCACHE_CLASSES];      /* cached blocks by rounded size */
};

extern __thread gm_tcache_t *gm_tcache_mine[GM_MAX_DEVICES] __attribute__((tls_model("initial-exec")));

/* The calling thread's cache on device d: NULL until made (tcache_get), or when caches are off
 * (GMSHIM_THREAD_CACHE=0) or out of host memory. */
static inline gm_tcache_t *tcache_mine(const gm_device_t *d)
{
    return gm_tcache_mine[d->id];
}
gm_tcache_t *tcache_make(gm_device_t *d);
static inline gm_tcache_t *tcache_get(gm_device_t *d)
{
    gm_tcache_t *tc = gm_tcache_mine[d->id];
    return likely(tc != NULL) || !d->tcache_max ? tc : tcache_make(d);
}

/* The hit: the oldest cached block of the request's rounded size, if its fence completed (or
 * every stream waits for it, under GPU order) and no capture runs; logged. GM_TC_HIT: *out is
 * set; GM_TC_POLL: a miss whose block's fence is recorded and may have completed (the caller's
 * arena polls); 0: a miss. */
enum { GM_TC_MISS = 0, GM_TC_HIT = 1, GM_TC_POLL = 2 };
int tcache_alloc(gm_tcache_t *tc, size_t rounded, size_t size, uint32_t site, void **out);
/* The thread's free of a block its cache knows: logged, cached until the next fence. 0 when the
 * block is not one the cache can take (the arenas' free then); else GM_TC_FREED, with
 * GM_TC_FENCE when its frees call for a fence (fencepol_fence_now with tc->open, under an arena
 * lock) and GM_TC_OVER when the cache holds more than GMSHIM_THREAD_CACHE (tcache_shrink). */
enum { GM_TC_FREED = 1, GM_TC_FENCE = 2, GM_TC_OVER = 4 };
int tcache_free(gm_tcache_t *tc, uintptr_t ptr, uint32_t site);
/* The oldest cached blocks back to their arenas until a quarter under GMSHIM_THREAD_CACHE. No
 * lock held by the caller. */
void tcache_shrink(gm_tcache_t *tc);

/* The slow path's use of the calling thread's own cache (its arena lock held): the oldest cached
 * block of this rounded size handed out as a hit would hand it (not logged: the caller logs), if
 * a fence the slow path just recorded or polled made it reusable; else NULL. */
gm_block_t *tcache_take(gm_tcache_t *tc, size_t rounded, size_t size, uint32_t site);
/* Under b's arena lock: b, just handed to the calling thread, joins its cache tc. */
void tcache_adopt(gm_tcache_t *tc, gm_block_t *b);
/* Under b's arena lock (a): b, live in a cache (b->tc_owner), is being freed or exported another
 * way: it leaves the cache. 0, or -1 when the cache holds it freed (a double free). Raises the
 * arena's newest stamp to the cache's, so that this free is logged after its allocation. */
int tcache_disown(gm_arena_t *a, gm_block_t *b);
/* Under a's lock: the cached blocks of arena a, from every cache of its device, go back to the
 * arena (free if their fence completed, else pending). keep_size GM_TCACHE_ALL: all of them (an
 * empty cache, a trim, a capture's heap). Else, before the pool grows: but those that `keep`
 * (the calling thread's cache) holds of rounded size keep_size (its next hits: the pool grows
 * for them as it would for a request with nothing pending), and but the caches in use at that
 * moment. Returns the bytes. */
#define GM_TCACHE_ALL SIZE_MAX
size_t tcache_drain(gm_arena_t *a, gm_tcache_t *keep, size_t keep_size);
/* The thread ends: its caches' blocks go back to their arenas; the caches wait for another. */
void tcache_thread_exit(void);

/* Counters and the stats' corrections of every cache of d (each under its lock). */
typedef struct gm_tcache_sums {
    uint64_t allocs, frees, alloc_bytes, requested_bytes, bytes;
    int64_t requested_adj;
} gm_tcache_sums_t;
void tcache_sum(gm_device_t *d, gm_tcache_sums_t *out);
/* Every cache of d locked (after the arena locks), their sums in *sums (unless NULL), for a
 * consistent view (a checkpoint); unlocked with each cache's newest log stamp raised to `stamp`
 * (records after a checkpoint are stamped after it). */
void tcache_lock_all(gm_device_t *d, gm_tcache_sums_t *sums);
void tcache_unlock_all(gm_device_t *d, uint64_t stamp);
/* Peaks with thread caches: an allocation in arena a (its lock held, or a hit of cache tc) notes
 * the arena's allocated and requested bytes less what the calling thread's cache holds freed,
 * tc (NULL: none). While the device has one arena, the stats' peaks are the least of the arena's
 * and these (tcache_peaks): exact while one thread frees into a cache; with several, the other
 * threads' cached blocks count as allocated (an upper bound, as the arenas' own peaks are). */
void tcache_note_peak(gm_device_t *d, const gm_arena_t *a, const gm_tcache_t *tc);
void tcache_peaks(gm_device_t *d, int narenas, unsigned long long *allocated, unsigned long long *requested);
/* cudaDeviceReset, every arena lock held: the caches forget every block. */
void tcache_forget(gm_device_t *d);

#endif
