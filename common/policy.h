/* The device-level pool policy, shared by the shim (shim/slowpath.c, shim/segments.c) and the
 * analyzer's replay (analyzer/replay.c), so that the replay cannot drift from what the shim does:
 * the segment a request falls back to, whether a grow fits GMSHIM_DEVICE_LIMIT, which segments
 * GMSHIM_CACHE_LIMIT and an empty cache give back, what GMSHIM_PENDING_WAIT waits for. Pure
 * decisions over a heap (pool.h): no CUDA, no lock, no clock; what a decision leads to (a driver
 * free, waiting for a fence) is the caller's, through the functions it passes. */
#ifndef GM_POLICY_H
#define GM_POLICY_H

#include "pool.h"

/* The smallest segment a request can make do with: a small request's segment, a large one
 * rounded to GM_LARGE_ROUND (under a cap, or the last retry after the driver ran out). */
size_t policy_tight_segment(size_t rounded);

/* GMSHIM_DEVICE_LIMIT: whether a segment of *seg for `rounded` fits beside `reserved` under
 * `limit`; when only the tight one does, *seg becomes that. */
int policy_fits_limit(size_t limit, size_t reserved, size_t *seg, size_t rounded);

/* Gives one wholly free segment back: 0, or -1 when it could not (it stays). */
typedef int (*policy_release_fn)(void *arg, gm_segment_t *seg);

/* Every wholly free segment of h, or with idle_ns only those free for idle_ns at `now`, given
 * back through release (an empty cache, the idle trimmer); the bytes, *nseg counts them. */
size_t policy_release_free(gm_heap_t *h, uint64_t idle_ns, uint64_t now, policy_release_fn release, void *arg,
                           unsigned *nseg);

/* GMSHIM_CACHE_LIMIT on one heap: while its wholly free segments hold more than cap, the one free
 * the longest goes back through release; the bytes, *nseg counts them. */
size_t policy_enforce_cache_limit(gm_heap_t *h, size_t cap, policy_release_fn release, void *arg, unsigned *nseg);

/* How an allocation waits for pending frees (GMSHIM_PENDING_WAIT). */
typedef struct policy_waits {
    void (*wait_for)(void *arg, uint64_t seq);  /* until fence seq completed, its frees taken in */
    int (*wait_oldest)(void *arg);              /* the oldest outstanding fence, its frees taken in;
                                                   0 when there was nothing to wait for */
    void *arg;
} policy_waits_t;

#define POLICY_WAIT_ROUNDS (1 << 16) /* a bound on waits for one request: never an endless loop */

/* A block for `rounded` from h before any grow: with pending_wait, first the fence of a pending
 * block that fits better than any free one (pool_better_pending), then, while no free block fits
 * and pending and free bytes of its class could hold it, the oldest fence. NULL: grow. Inline:
 * the replay runs it for every allocation. */
static inline gm_block_t *policy_alloc_waiting(gm_heap_t *h, size_t rounded, size_t size, int pending_wait,
                                               const policy_waits_t *w)
{
    gm_block_t *b = NULL;
    for (int rounds = 0; !b && rounds < POLICY_WAIT_ROUNDS; rounds++) {
        uint64_t want = pending_wait ? pool_better_pending(h, rounded) : 0;
        if (want) {
            /* A pending block fits better than any free one: wait for the GPU to finish with it
             * rather than cut a larger block or grow (what makes a pool creep up when the
             * program runs ahead of the GPU). */
            w->wait_for(w->arg, want);
            continue;
        }
        b = pool_alloc(h, rounded, size);
        if (b || !pending_wait || !pool_pending_could_serve(h, rounded) || !w->wait_oldest(w->arg))
            break;
    }
    return b;
}

#endif
