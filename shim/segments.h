/* Driver segments: asking the driver for a segment and giving whole free ones back, the cache
 * cap of one arena, and whether a segment fits under the device cap. The caller holds the arena
 * lock and is inside devctx_enter; nothing here runs while a capture is under way. */
#ifndef GM_SEGMENTS_H
#define GM_SEGMENTS_H

#include "devtypes.h"

/* Asks the driver for a segment of `size` into `heap` (of arena a) and serves the request from
 * it: *bp is the LIVE block on success. */
cudaError_t segments_grow(gm_arena_t *a, gm_heap_t *heap, size_t size, size_t rounded, size_t requested,
                          gm_block_t **bp);
/* Gives one wholly free segment of the arena's general heap back to the driver: 0, or -1. */
int segments_release(gm_arena_t *a, gm_segment_t *seg);
/* Frees every whole free segment of the arena's general heap idle for at least idle_ns (0: all);
 * returns the bytes, *nseg counts the segments. */
size_t segments_release_free(gm_arena_t *a, uint64_t idle_ns, uint64_t now, unsigned *nseg);
/* GMSHIM_CACHE_LIMIT: gives back the oldest wholly free segments while the arena caches more
 * than the cap (nothing during a capture). */
void segments_enforce_cache_limit(gm_arena_t *a);
/* Whether a segment for `rounded` fits under the device cap now; may shrink *seg to the
 * request rounded to GM_LARGE_ROUND. */
int segments_fit_limit(gm_device_t *d, size_t *seg, size_t rounded);

#endif
