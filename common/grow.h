/* The grow sequence, shared by the shim (shim/slowpath.c) and the replay (analyzer/replay.c) so
 * that the replay cannot drift from the pool it models: what a request no free block serves does
 * (a new segment; under GMSHIM_DEVICE_LIMIT the tight one, the cache released first; on the
 * driver's OOM the cache released, its room reused, the segment asked again, then the tight one),
 * and a caching allocator's exact segment. The order of the steps and the OOM record's flags are
 * decided here; the steps themselves (the driver, the release, the record) are the caller's,
 * through grow_ops_t. No CUDA, no lock, no clock. */
#ifndef GM_GROW_H
#define GM_GROW_H

#include "pool.h"

/* What a driver call made through grow_ops_t.segment did. */
enum { GROW_OK, GROW_OOM, GROW_FAILED };

/* The caller's side of the sequence; every function gets the caller's arg. */
typedef struct grow_ops {
    size_t (*limit)(void *arg);    /* GMSHIM_DEVICE_LIMIT now; 0: none */
    size_t (*reserved)(void *arg); /* the device's segment bytes now */
    int (*capturing)(void *arg);   /* a capture runs, nothing may go back; NULL: never */
    /* A segment of seg bytes from the driver, serving the request: GROW_OK (*bp its block, or
     * NULL where the caller keeps the memory itself), GROW_OOM, or GROW_FAILED (the caller keeps
     * the error). */
    int (*segment)(void *arg, size_t seg, size_t rounded, size_t size, gm_block_t **bp);
    /* The pool's whole free segments, all arenas', back to the driver once their fences
     * completed (reason: GMLOG_EMPTY_*); the bytes; *waited when a fence was waited for. */
    size_t (*release)(void *arg, int reason, int *waited);
    /* The driver refused seg: the figures of that moment, before anything goes back; NULL:
     * none kept. */
    void (*oom_seen)(void *arg, size_t seg);
    /* The OOM's end, recovered (GMLOG_OOM_RECOVERED) or a failure: its GMLOG_OOM_* flags and
     * the last segment size asked. */
    void (*oom_end)(void *arg, unsigned flags, size_t seg);
} grow_ops_t;

/* A block for `rounded` (`size` asked) from heap h once no free block serves it: under the cap,
 * a segment of seg or the tight one, else the cache released and h's room reused, else a failure
 * by the cap; from the driver, a segment of seg; on its OOM the cache released, h's room reused,
 * seg asked again, then (not for a small request) the tight segment. NULL: failed (oom_end told,
 * unless the first driver call failed otherwise). *fresh: the block is a new segment's. */
gm_block_t *grow_alloc(const grow_ops_t *ops, void *arg, gm_heap_t *h, size_t seg, size_t rounded, size_t size,
                       int *fresh);

/* A caching allocator's segment of exactly `size`: under the cap (the cache released once when
 * it does not fit), from the driver; on its OOM, unless a capture runs, the cache released and,
 * if any went back, the driver asked once more. GROW_OK (*bp as segment left it), GROW_OOM or
 * GROW_FAILED. */
int grow_exact(const grow_ops_t *ops, void *arg, size_t size, gm_block_t **bp);

#endif
