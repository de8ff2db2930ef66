/* Capture's private heaps (capheap.h). Guarded by arena 0's lock; no fence and no driver free
 * while a capture runs (its memory stays with it until its graph and instances are gone). */
#include "capheap.h"
#include "devctx.h"
#include "logrec.h"
#include "real.h"
#include "segments.h"
#include "tcache.h"
#include "slowpath.h"

#include <stdlib.h>

gm_block_t *capheap_alloc(gm_arena_t *a, size_t rounded, size_t size, uint32_t site,
                          unsigned *flags, cudaError_t *err)
{
    gm_device_t *d = a->dev;
    gm_heap_t *heap = d->capture_heap;
    *flags |= GMLOG_A_GRAPH;
    gm_block_t *b = pool_alloc(heap, rounded, size);
    if (b)
        return b;
    gm_segment_t *best = pool_best_free_segment(&a->general, rounded);
    if (!best && tcache_drain(a, NULL, GM_TCACHE_ALL)) /* the threads' cached blocks may leave one wholly free */
        best = pool_best_free_segment(&a->general, rounded);
    if (best) {
        pool_move_segment(&a->general, heap, best, 0);
        if ((b = pool_alloc(heap, rounded, size)))
            return b;
    }
    gm_ctx_t c;
    devctx_enter(d, &c);
    size_t seg = pool_segment_size(rounded);
    cudaError_t e = device_limit(d) && !segments_fit_limit(d, &seg, rounded)
                        ? cudaErrorMemoryAllocation
                        : segments_grow(a, heap, seg, rounded, size, &b);
    if (e == cudaSuccess) {
        *flags |= GMLOG_A_MISS;
    } else {
        size_t drv_free = 0, drv_total = 0;
        REAL_CALL(cudaMemGetInfo, &drv_free, &drv_total);
        a->n.ooms++;
        *err = e;
        gmlog_oom_t rec;
        slowpath_oom_figures(a, &rec, size, seg, drv_free, drv_total, site);
        logrec_oom(d->id, GMLOG_OOM_CAPTURE, &rec);
    }
    devctx_leave(&c);
    return b;
}

gm_heap_t *capheap_graph_heap(gm_device_t *d, void *owner, uint32_t id)
{
    gm_heap_t *heap = calloc(1, sizeof *heap);
    if (!heap)
        return NULL;
    gm_arena_t *a = d->arenas[0];
    pthread_mutex_lock(&a->lock);
    pool_init(heap, &a->bytes, owner);
    heap->graph_id = id;
    pool_set_max_split(heap, pool_max_split(&a->general));
    heap->next_heap = d->graph_heaps;
    d->graph_heaps = heap;
    pthread_mutex_unlock(&a->lock);
    return heap;
}

void capheap_set_captures(gm_device_t *d, int delta, gm_heap_t *current)
{
    gm_arena_t *a = d->arenas[0];
    pthread_mutex_lock(&a->lock);
    int n = d->captures + delta;
    d->capture_heap = current;
    __atomic_store_n(&d->captures, n < 0 ? 0 : n, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&a->lock);
}

void capheap_release_graph_heap(gm_device_t *d, gm_heap_t *heap)
{
    gm_arena_t *a = d->arenas[0];
    pthread_mutex_lock(&a->lock);
    uint64_t seq = device_issued(d) + 1;
    while (pool_segments(heap))
        pool_move_segment(heap, &a->general, pool_segments(heap), seq);
    gm_heap_t **link = &d->graph_heaps;
    while (*link && *link != heap)
        link = &(*link)->next_heap;
    if (*link)
        *link = heap->next_heap;
    if (d->capture_heap == heap)
        d->capture_heap = NULL;
    pool_adopt_storage(&a->general, heap);
    pool_destroy(heap);
    free(heap);
    pthread_mutex_unlock(&a->lock);
}
