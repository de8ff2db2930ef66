/* The pool's data structure: segments from the driver cut into blocks, best-fit free bins, split
 * and merge within a segment, and the pending list of freed blocks waiting for a fence. Pure
 * bookkeeping on addresses: no CUDA call, no lock (the caller holds its device's lock). */
#ifndef GM_POOL_H
#define GM_POOL_H

#include "gmbase.h"
#include "leakwarn.h"

/* uthash for pointer keys: 512-aligned addresses, mixed by a multiplicative hash; an out of
 * host memory in a table insert must never exit the host program. */
#define HASH_FUNCTION(keyptr, keylen, hashv)                                                      \
    do {                                                                                          \
        uint64_t k_;                                                                              \
        memcpy(&k_, (keyptr), sizeof k_);                                                         \
        (hashv) = (unsigned)((k_ >> 9) * 0x9E3779B97F4A7C15ull >> 32);                            \
    } while (0)
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(elt) ((void)(elt))
#include <string.h>
#include <uthash.h>

#define GM_ROUND 512                    /* every request is rounded to this; every block aligned */
#define GM_SMALL_REQUEST (1u << 20)     /* requests up to this go to small segments */
#define GM_SMALL_SEGMENT (2u << 20)
#define GM_MID_REQUEST (10u << 20)      /* large requests below this share 20 MiB segments */
#define GM_MID_SEGMENT (20u << 20)
#define GM_LARGE_ROUND (2u << 20)       /* larger segments are rounded to this */
#define GM_LARGE_SPLIT_MIN (1u << 20)   /* a large block is split only if more than this is left */
#define GM_OVERSIZE_SLACK (20u << 20)   /* with max split: how much larger an unsplit block may be */

#define GM_EXACT_BINS 2048              /* one bin per 512-B size up to 1 MiB */
#define GM_SUB_BINS 16                  /* then 16 bins per power of two */
#define GM_NBINS (GM_EXACT_BINS + 42 * GM_SUB_BINS)
#define GM_NBIN_WORDS ((GM_NBINS + 63) / 64)

typedef enum gm_block_state {
    GM_BLOCK_FREE = 0,   /* in a bin, reusable */
    GM_BLOCK_LIVE,       /* handed out */
    GM_BLOCK_PENDING,    /* freed, waiting for fence `fence_seq` to complete */
    GM_BLOCK_HELD,       /* freed, never reused (IPC-exported); the segment goes back whole */
} gm_block_state_t;

/* Where a block the pool counts as live stands with a thread's cache (gm_block_t.tc). */
enum gm_tc_state {
    GM_TC_NONE = 0,      /* not in a cache */
    GM_TC_USER,          /* handed out by its thread's cache or adopted by it: the program holds it */
    GM_TC_CACHED,        /* freed by the program into its thread's cache: held out of the pool */
};

typedef struct gm_heap gm_heap_t;
typedef struct gm_segment gm_segment_t;
typedef struct gm_block gm_block_t;

/* A block's place in a bin list (or, for free-list links, the pending FIFO). */
typedef struct gm_link {
    gm_block_t *prev, *next;
    uint32_t bin;
} gm_link_t;

struct gm_block {
    uintptr_t ptr;
    size_t size;
    size_t requested;       /* when live: the size asked for */
    gm_segment_t *seg;
    gm_block_t *prev, *next;   /* address neighbours in the segment */
    gm_link_t fl;              /* FREE: its bin; PENDING: the FIFO of the pending list */
    gm_link_t pl;              /* PENDING: its bin among pending blocks (best fit by size) */
    union {
        uint64_t fence_seq;    /* PENDING: the fence it waits for */
        uint64_t free_ns;      /* FREE: when it became free (a growable range's idle pages) */
    };
    uint8_t state;
    uint8_t ipc;            /* a cudaIpcGetMemHandle was taken on it */
    uint8_t kind;           /* GMLOG_KIND_* of a block outside any segment (seg == NULL) */
    uint8_t exact;          /* such a block: a caching allocator's exact segment (GMLOG_A_EXACT) */
    uint32_t site;          /* when live: the call site it was allocated from (for checkpoints) */
    uint32_t born;          /* when live, in the shim: the GMSHIM_WARN step it was handed out in */
    /* A live block of a thread's cache (shim/tcache.h; the replay models the caches): the pool
     * code leaves these alone. */
    uint8_t tc;             /* gm_tc_state */
    uint32_t tc_requested;  /* `requested` as the block's arena counted it */
    void *tc_owner;         /* the cache it goes back to when its thread frees it */
    UT_hash_handle hh;      /* the device's map of live blocks, keyed by ptr */
};

struct gm_segment {
    uintptr_t base;
    size_t size;
    gm_heap_t *heap;
    gm_segment_t *prev, *next;
    gm_block_t *first;
    uint64_t free_since_ns; /* when it last became wholly free; 0 while any part is used */
    uint8_t small;
    uint8_t ipc;            /* a block of it was exported: give it back whole, never reuse */
    uint8_t vmm;            /* a growable range (vmm.h): pages mapped as blocks need them */
    uint64_t *page;         /* vmm: per GM_VMM_PAGE, the caller's token (the driver's handle) of
                               the memory mapped there; 0 = none */
    size_t nmapped;         /* vmm: pages mapped */
};

typedef struct gm_bins {
    gm_block_t *head[GM_NBINS];
    uint64_t map[GM_NBIN_WORDS];
    uint64_t summary;           /* bit w: map[w] != 0 */
} gm_bins_t;

/* Byte and event figures shared by every heap of a device. */
typedef struct gm_pool_stats {
    gm_stat_t requested, allocated, reserved, cached, pending;
    /* GMSHIM_WARN's troughs of `allocated` (NULL: not followed), fed where the figure is written. */
    leakwarn_tap_t *tap;
} gm_pool_stats_t;

/* After `allocated` changed: its troughs follow, when someone reads them. */
static inline void pool_stats_note(gm_pool_stats_t *s)
{
    if (s->tap)
        leakwarn_tap_feed(s->tap, s->allocated.current);
}

struct gm_heap {
    gm_bins_t bins[2];        /* [0] large segments, [1] small segments */
    gm_bins_t pbins[2];       /* pending blocks by size, same classes */
    gm_segment_t *segments;
    size_t nsegments;
    gm_block_t *pending_head, *pending_tail;  /* FIFO, fence_seq never decreasing */
    size_t pending_bytes[2];                  /* by class, as bins */
    size_t free_bytes[2];
    size_t unmapped[2];                       /* of free_bytes: a range's pages not mapped */
    size_t max_split;                         /* 0: no limit */
    gm_pool_stats_t *stats;
    gm_block_t *spare;                        /* recycled block structs */
    void *slabs;                              /* where block structs come from, freed at destroy */
    void *owner;                              /* the graph owning a private heap; NULL: general */
    gm_heap_t *next_heap;                     /* the device's list of private heaps */
    uint32_t graph_id;                        /* capture id of a private heap, for the log */
};

#define GM_VMM_PAGE ((size_t)2 << 20) /* a growable range maps physical memory in these */

/* What a request of n bytes becomes. */
static inline size_t pool_round(size_t n)
{
    return n == 0 ? GM_ROUND : gm_round_up(n, GM_ROUND);
}

static inline int pool_is_small(size_t rounded)
{
    return rounded <= GM_SMALL_REQUEST;
}

/* The segment size the driver is asked for, for a rounded request. */
size_t pool_segment_size(size_t rounded);

void pool_init(gm_heap_t *heap, gm_pool_stats_t *stats, void *owner);
/* Frees the bookkeeping of every segment (the memory itself is the caller's business). */
void pool_destroy(gm_heap_t *heap);
/* Forgets every segment and block, as pool_destroy then pool_init, but keeps the block structs'
 * storage for the next use (a replay run again: fresh pages cost the kernel's page clearing). */
void pool_reset(gm_heap_t *heap);
/* Block structs of `from` may live on in `to` after pool_move_segment: `to` takes over their
 * storage, so that destroying `from` frees none of them. */
void pool_adopt_storage(gm_heap_t *to, gm_heap_t *from);

/* Best-fit a free block for a rounded size, splitting it; the block comes back LIVE with
 * `requested` set. NULL when nothing fits, or when the best fit lies in a growable range where
 * pages it needs are not mapped (vmm.h: vmm_alloc maps them). */
gm_block_t *pool_alloc(gm_heap_t *heap, size_t rounded, size_t requested);
/* The best-fit free block for a rounded size, taken by nothing (vmm.c maps its pages first). */
gm_block_t *pool_best_fit(const gm_heap_t *heap, size_t rounded);
/* Takes free block b for a rounded request as pool_alloc does. */
gm_block_t *pool_take(gm_heap_t *heap, gm_block_t *b, size_t rounded, size_t requested);
/* Whether every page of [ptr, ptr + n) in growable range seg is mapped. */
static inline int pool_pages_mapped(const gm_segment_t *seg, uintptr_t ptr, size_t n)
{
    size_t first = (ptr - seg->base) / GM_VMM_PAGE, last = (ptr + n - 1 - seg->base) / GM_VMM_PAGE;
    for (size_t i = first; i <= last; i++)
        if (!seg->page[i])
            return 0;
    return 1;
}
/* The same from a segment just added for this request, whatever the max-split rules say about
 * its size (a request just under max_split may get a segment at or above it). */
gm_block_t *pool_alloc_fresh(gm_heap_t *heap, gm_segment_t *seg, size_t rounded, size_t requested);
/* The fence a better block than any free one waits for: the smallest pending large block that
 * fits, when the best free block is missing or would have to be split by more than
 * GM_LARGE_SPLIT_MIN. 0 when waiting would not buy a better fit (or for small requests). */
uint64_t pool_better_pending(const gm_heap_t *heap, size_t rounded);
/* Registers a segment fresh from the driver as one free block. NULL if out of host memory. */
gm_segment_t *pool_add_segment(gm_heap_t *heap, uintptr_t base, size_t size, int small, uint64_t now_ns);
/* Registers a growable range (base and size multiples of GM_VMM_PAGE) of reserved addresses,
 * none mapped yet, as one free block: vmm.h maps its pages. NULL if out of host memory. */
gm_segment_t *pool_add_range(gm_heap_t *heap, uintptr_t base, size_t size, int small, uint64_t now_ns);
/* LIVE → FREE: merge with free neighbours, into a bin. */
void pool_free_block(gm_heap_t *heap, gm_block_t *b, uint64_t now_ns);
/* LIVE → PENDING until fence `seq` completes. */
void pool_defer_block(gm_heap_t *heap, gm_block_t *b, uint64_t seq);
/* LIVE → HELD: never reused; the segment is given back whole once nothing in it is live. */
void pool_hold_block(gm_heap_t *heap, gm_block_t *b);
/* PENDING blocks with fence_seq <= done become FREE; returns the bytes released. */
size_t pool_release_pending(gm_heap_t *heap, uint64_t done, uint64_t now_ns);
/* The fence sequence the oldest (newest) pending block waits for; 0 when none is pending. */
static inline uint64_t pool_oldest_pending_seq(const gm_heap_t *heap)
{
    return heap->pending_head ? heap->pending_head->fence_seq : 0;
}
static inline uint64_t pool_newest_pending_seq(const gm_heap_t *heap)
{
    return heap->pending_tail ? heap->pending_tail->fence_seq : 0;
}
/* Bytes pending, and bytes free or pending (what the heap caches: a range's free addresses only
 * where mapped), over both classes. */
static inline size_t pool_pending_bytes(const gm_heap_t *heap)
{
    return heap->pending_bytes[0] + heap->pending_bytes[1];
}
static inline size_t pool_cached_bytes(const gm_heap_t *heap)
{
    return heap->free_bytes[0] - heap->unmapped[0] + heap->free_bytes[1] - heap->unmapped[1] +
           pool_pending_bytes(heap);
}
/* Whether blocks of the request's class are pending and, once free, pending and free bytes of
 * that class could hold the request: waiting for fences might serve it. */
static inline int pool_pending_could_serve(const gm_heap_t *heap, size_t rounded)
{
    int cls = pool_is_small(rounded);
    return heap->pending_bytes[cls] && heap->pending_bytes[cls] + heap->free_bytes[cls] - heap->unmapped[cls] >= rounded;
}
/* The heap's segments, newest first, linked by seg->next. */
static inline gm_segment_t *pool_segments(const gm_heap_t *heap)
{
    return heap->segments;
}
static inline void pool_set_max_split(gm_heap_t *heap, size_t max_split)
{
    heap->max_split = max_split;
}
static inline size_t pool_max_split(const gm_heap_t *heap)
{
    return heap->max_split;
}
/* Bytes in wholly free segments (what could go back to the driver now). */
size_t pool_whole_free_bytes(const gm_heap_t *heap);
/* The wholly free segment free the longest, or NULL. */
gm_segment_t *pool_oldest_free_segment(const gm_heap_t *heap);
/* The smallest wholly free, never exported segment of the request's class that holds it, or
 * NULL (a capture's heap takes such a segment over). */
gm_segment_t *pool_best_free_segment(const gm_heap_t *heap, size_t rounded);
/* Whether `seg` holds no live or pending block (it can go back to the driver). Never true of a
 * growable range: its pages go back one by one (vmm.h), the range itself only at the end. */
int pool_segment_is_free(const gm_segment_t *seg);
/* Whether `seg` holds a block waiting for a fence. */
int pool_segment_has_pending(const gm_segment_t *seg);
/* Unlinks a segment that pool_segment_is_free() and frees its bookkeeping. */
void pool_remove_segment(gm_heap_t *heap, gm_segment_t *seg);
/* Moves a segment (and its free and pending blocks) to another heap. With defer_seq != 0 its
 * free blocks arrive PENDING on that fence (memory a destroyed graph may still be using). */
void pool_move_segment(gm_heap_t *from, gm_heap_t *to, gm_segment_t *seg, uint64_t defer_seq);
/* The segment containing addr, or NULL. Linear; for error paths. */
gm_segment_t *pool_find_segment(const gm_heap_t *heap, uintptr_t addr);
/* The block containing addr inside seg. */
gm_block_t *pool_segment_find_block(const gm_segment_t *seg, uintptr_t addr);
/* Largest free block and the number of free blocks, over both classes; of a growable range's
 * free blocks only what lies in mapped pages counts (its unmapped addresses are no cache). */
void pool_free_summary(const gm_heap_t *heap, size_t *largest, size_t *count);

/* Checks every invariant (bins hold exactly the free blocks, neighbours never both free,
 * blocks tile their segment, counters match). Returns NULL or what is wrong. For the tests. */
const char *pool_check(const gm_heap_t *heap);

#endif
