/* The slow path of a device's pool: what an allocation does when no free block fits (take in
 * fenced frees, fence, wait, grow, release the cache and retry once), and the other ways memory
 * goes back to the driver (empty_cache, the trimmer's passes, the device cap). */
#ifndef GM_SLOWPATH_H
#define GM_SLOWPATH_H

#include "devtypes.h"
#include "gmlog.h"

/* The miss of hit_alloc (arena a locked): a block for the rounded request, or NULL with
 * *err set; *flags gains GMLOG_A_MISS when the driver was asked. `tc`: the calling thread's
 * cache (or NULL), whose blocks of this size stay its own when the threads' caches give theirs
 * back before the pool grows. */
GM_NOINLINE gm_block_t *slowpath_alloc(gm_arena_t *a, struct gm_tcache *tc, size_t rounded, size_t size,
                                             uint32_t site, unsigned *flags, cudaError_t *err);
/* A caching allocator's own segment (arena a locked): the real cudaMalloc of exactly `size`, in
 * the caller's context, under GMSHIM_DEVICE_LIMIT (gmshim's cache released first when it would
 * not fit); when the driver is out of memory, gmshim's cache released and the call made once
 * more. Every failure is an OOM record; the runtime's last error is the real call's. */
cudaError_t slowpath_exact(gm_arena_t *a, size_t size, uint32_t site, void **out);
/* The pool and the driver as they are at a failure, for an OOM record. */
void slowpath_oom_figures(gm_arena_t *a, gmlog_oom_t *rec, size_t request, size_t segment,
                          size_t drv_free, size_t drv_total, uint32_t site);

/* Returns whole free segments to the driver after waiting for pending frees (not during a
 * capture). Returns bytes released. */
size_t slowpath_empty_cache(gm_device_t *d, int reason);
/* The trimmer's pass: returns whole free segments idle for at least idle_ns (0: all of them);
 * nothing while a capture is under way on the device. */
size_t slowpath_trim(gm_device_t *d, uint64_t idle_ns);
/* The trimmer's pass for GMSHIM_CACHE_LIMIT: fences the device's uncovered frees, takes in what
 * completed fences released (non-blocking queries), and returns the oldest whole free segments of
 * all its arenas beyond the cap. Nothing while a capture is under way there. Sets *waiting when
 * freed memory over the cap still waits for the GPU (or a capture), so that the trimmer polls
 * again. Returns the bytes released. */
unsigned long long slowpath_cache_trim(gm_device_t *d, int *waiting);

#endif
