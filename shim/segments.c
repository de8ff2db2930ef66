/* Driver segments: the only place the pool calls the driver's cudaMalloc and cudaFree for its
 * own memory, and logs SEGMENT_ALLOC / SEGMENT_FREE. Never a driver free during a capture (the
 * callers check). */
#include "segments.h"
#include "devctx.h"
#include "evlog.h"
#include "fallback.h"
#include "logrec.h"
#include "policy.h"
#include "ranges.h"
#include "real.h"

/* Under the arena's lock. */
static void log_segment(gm_arena_t *a, int type, gm_segment_t *seg, uint64_t t0)
{
    if (!evlog_enabled())
        return;
    uint64_t now = gm_now_ns();
    arena_note_stamp(a, now); /* an allocation from it is logged after it, on any thread */
    evlog_segment(type, a->dev->id, seg->base, seg->size, seg->heap->graph_id, 0, now, t0);
}

cudaError_t segments_grow(gm_arena_t *a, gm_heap_t *heap, size_t size, size_t rounded, size_t requested,
                          gm_block_t **bp)
{
    if (heap == &a->general && ranges_usable(a->dev)) {
        cudaError_t e = ranges_grow(a, rounded, requested, bp);
        if (e != cudaErrorNotSupported)
            return e;
    }
    /* A size computed for a range (the pages it lacked) before a capture began or the driver
     * refused to map, or a range that could not be had: the classic segment holds the whole
     * request. */
    if (size < rounded)
        size = policy_tight_segment(rounded);
    void *p = NULL;
    uint64_t t0 = gm_now_ns();
    cudaError_t err = REAL_CALL(cudaMalloc, &p, size);
    if (err != cudaSuccess)
        return err;
    gm_segment_t *seg = pool_add_segment(heap, (uintptr_t)p, size, pool_is_small(rounded), gm_now_ns());
    if (!seg) {
        REAL_CALL(cudaFree, p);
        fallback_engage("out of host memory for the pool's bookkeeping");
        return cudaErrorMemoryAllocation;
    }
    device_reserved_add(a->dev, size);
    a->n.driver_mallocs++;
    log_segment(a, GMLOG_SEGMENT_ALLOC, seg, t0);
    *bp = pool_alloc_fresh(heap, seg, rounded, requested);
    return cudaSuccess;
}

int segments_release(gm_arena_t *a, gm_segment_t *seg)
{
    log_segment(a, GMLOG_SEGMENT_FREE, seg, gm_now_ns());
    cudaError_t err = REAL_CALL(cudaFree, (void *)seg->base);
    if (err != cudaSuccess) {
        devctx_note_cuda_failure(a->dev, "cudaFree", err);
        return -1;
    }
    device_reserved_sub(a->dev, seg->size);
    a->n.driver_frees++;
    pool_remove_segment(&a->general, seg);
    return 0;
}

static int release_cb(void *a, gm_segment_t *seg)
{
    return segments_release(a, seg);
}

size_t segments_release_free(gm_arena_t *a, uint64_t idle_ns, uint64_t now, unsigned *nseg)
{
    size_t bytes = policy_release_free(&a->general, idle_ns, now, release_cb, a, nseg);
    return bytes + ranges_release_idle(a, 0, idle_ns, now, nseg);
}

void segments_enforce_cache_limit(gm_arena_t *a)
{
    size_t cap = a->dev->cache_limit;
    if (!cap || device_captures(a->dev))
        return;
    uint64_t t0 = gm_now_ns();
    unsigned nseg = 0;
    size_t bytes = policy_enforce_cache_limit(&a->general, cap, release_cb, a, &nseg);
    size_t whole = pool_whole_free_bytes(&a->general);
    bytes += ranges_release_idle(a, whole < cap ? cap - whole : 0, 0, 0, &nseg);
    if (nseg)
        logrec_empty_cache(a->dev->id, GMLOG_EMPTY_CACHE_LIMIT, bytes, nseg, t0);
}

int segments_fit_limit(gm_device_t *d, size_t *seg, size_t rounded)
{
    return policy_fits_limit(device_limit(d), device_reserved(d), seg, rounded);
}
