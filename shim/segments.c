/* Driver segments: the only place the pool calls the driver's cudaMalloc and cudaFree for its
 * own memory, and logs SEGMENT_ALLOC / SEGMENT_FREE. Never a driver free during a capture (the
 * callers check). */
#include "segments.h"
#include "devctx.h"
#include "evlog.h"
#include "fallback.h"
#include "logrec.h"
#include "real.h"

static void log_segment(gm_device_t *d, int type, gm_segment_t *seg, uint64_t t0)
{
    if (evlog_enabled())
        evlog_segment(type, d->id, seg->base, seg->size, seg->heap->graph_id, gm_now_ns(), t0);
}

cudaError_t segments_grow(gm_arena_t *a, gm_heap_t *heap, size_t size, size_t rounded, size_t requested,
                          gm_block_t **bp)
{
    void *p = NULL;
    uint64_t t0 = gm_now_ns();
    cudaError_t err = REAL_CALL(cudaMalloc, &p, size);
    if (err != cudaSuccess)
        return err;
    gm_segment_t *seg = pool_add_segment(heap, (uintptr_t)p, size, pool_is_small(rounded), gm_now_ns());
    if (!seg) {
        REAL_CALL(cudaFree, p);
        gm_fall_back("out of host memory for the pool's bookkeeping");
        return cudaErrorMemoryAllocation;
    }
    device_reserved_add(a->dev, size);
    a->n.driver_mallocs++;
    log_segment(a->dev, GMLOG_SEGMENT_ALLOC, seg, t0);
    *bp = pool_alloc_fresh(heap, seg, rounded, requested);
    return cudaSuccess;
}

int segments_release(gm_arena_t *a, gm_segment_t *seg)
{
    log_segment(a->dev, GMLOG_SEGMENT_FREE, seg, gm_now_ns());
    cudaError_t err = REAL_CALL(cudaFree, (void *)seg->base);
    if (err != cudaSuccess) {
        device_note_cuda_failure(a->dev, "cudaFree", err);
        return -1;
    }
    device_reserved_sub(a->dev, seg->size);
    a->n.driver_frees++;
    pool_remove_segment(&a->general, seg);
    return 0;
}

size_t segments_release_free(gm_arena_t *a, uint64_t idle_ns, uint64_t now, unsigned *nseg)
{
    size_t bytes = 0;
    gm_segment_t *seg = pool_segments(&a->general);
    while (seg) {
        gm_segment_t *next = seg->next;
        size_t size = seg->size;
        if (pool_segment_is_free(seg) && (!idle_ns || now - seg->free_since_ns >= idle_ns) &&
            segments_release(a, seg) == 0) {
            bytes += size;
            (*nseg)++;
        }
        seg = next;
    }
    return bytes;
}

size_t segments_release_marked(gm_arena_t *a, unsigned *nseg, int *left)
{
    size_t bytes = 0;
    for (gm_segment_t *seg = pool_segments(&a->general), *next; seg; seg = next) {
        next = seg->next;
        if (!pool_segment_marked(seg))
            continue;
        size_t size = seg->size;
        if (pool_segment_is_free(seg)) {
            if (segments_release(a, seg) == 0) {
                bytes += size;
                (*nseg)++;
            } else {
                pool_segment_mark(seg, 0); /* the failure is logged; it stays cache */
            }
        } else if (pool_segment_has_pending(seg)) {
            *left = 1; /* the GPU is not done with it yet */
        } else {
            pool_segment_mark(seg, 0); /* someone else's memory lives there: it stays cache */
        }
    }
    return bytes;
}

void segments_enforce_cache_limit(gm_arena_t *a)
{
    size_t cap = a->dev->cache_limit;
    if (!cap || device_captures(a->dev))
        return;
    size_t whole = pool_whole_free_bytes(&a->general);
    uint64_t t0 = gm_now_ns();
    size_t bytes = 0;
    unsigned nseg = 0;
    while (whole > cap) {
        gm_segment_t *oldest = pool_oldest_free_segment(&a->general);
        size_t size = oldest ? oldest->size : 0;
        if (!oldest || segments_release(a, oldest))
            break;
        whole -= size;
        bytes += size;
        nseg++;
    }
    if (nseg)
        logrec_empty_cache(a->dev->id, GMLOG_EMPTY_CACHE_LIMIT, bytes, nseg, t0);
}

int segments_fit_limit(gm_device_t *d, size_t *seg, size_t rounded)
{
    size_t limit = device_limit(d);
    size_t tight = pool_is_small(rounded) ? *seg : gm_round_up(rounded, GM_LARGE_ROUND);
    size_t reserved = device_reserved(d);
    if (reserved + *seg <= limit)
        return 1;
    if (reserved + tight <= limit) {
        *seg = tight;
        return 1;
    }
    return 0;
}
