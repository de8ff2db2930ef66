/* A device's state at one instant, for a bounded log's checkpoint. It holds every arena lock of
 * the device (the device table's lock first, so that no arena is added meanwhile) while it
 * writes, so that each of the device's records is either before the cut and in it, or after and
 * not: allocations, frees and segment changes are all logged under their arena's lock. It makes
 * no CUDA call. */
#include "cut.h"
#include "common.h"
#include "devctx.h"
#include "device.h"
#include "evlog.h"
#include "logrec.h"
#include "planner.h"
#include "ranges.h"
#include "tcache.h"

#include <string.h>
#include <uthash.h>

static void add_stats(gmlog_cut_t *c, const gm_arena_t *a)
{
    c->requested += a->bytes.requested.current;
    c->allocated += a->bytes.allocated.current;
    c->cached += a->bytes.cached.current;
    c->pending += a->bytes.pending.current;
    /* Per-arena peaks: their sum is the device's peak with one arena, an upper bound with more. */
    c->peak_requested += a->bytes.requested.peak;
    c->peak_allocated += a->bytes.allocated.peak;
    c->allocs += a->n.allocs;
    c->frees += a->n.frees;
    c->hits += a->n.hits;
    c->misses += a->n.misses;
    c->ooms += a->n.ooms;
}

static uint32_t heap_segments(const gm_heap_t *h, int dev, int write, uint64_t now)
{
    uint32_t n = 0;
    for (const gm_segment_t *seg = pool_segments(h); seg; seg = seg->next) {
        if (!seg->vmm) {
            if (write)
                evlog_segment(GMLOG_SEGMENT_ALLOC, dev, seg->base, seg->size, h->graph_id, 0, now, now);
            n++;
            continue;
        }
        n += ranges_cut_pages(dev, seg->base, seg->page, seg->size / GM_VMM_PAGE, write, now); /* a range */
    }
    return n;
}

/* The device's segments (write 0: only counted). Arena locks held. */
static uint32_t device_segments(gm_device_t *d, int narenas, int write, uint64_t now)
{
    uint32_t n = 0;
    for (int i = 0; i < narenas; i++)
        n += heap_segments(&d->arenas[i]->general, d->id, write, now);
    for (const gm_heap_t *h = d->graph_heaps; h; h = h->next_heap)
        n += heap_segments(h, d->id, write, now);
    return n;
}

static uint32_t device_blocks(gm_device_t *d, int narenas, int write, uint64_t now)
{
    uint32_t n = 0;
    for (int i = 0; i < narenas; i++) {
        gm_block_t *b, *tmp;
        HASH_ITER(hh, d->arenas[i]->live, b, tmp) {
            if (!b->ptr || b->tc == GM_TC_CACHED)
                continue; /* the sentinel; a block its thread freed into its cache */
            n++;
            if (!write)
                continue;
            unsigned flags = (unsigned)b->kind << GMLOG_KIND_SHIFT;
            if (b->seg && b->seg->heap && b->seg->heap->owner)
                flags |= GMLOG_A_GRAPH;
            if (!b->seg && b->exact)
                flags |= GMLOG_A_EXACT;
            uint64_t block = b->seg ? b->size : b->kind == GMLOG_KIND_PASS ? b->size : 0;
            evlog_alloc(d->id, flags, b->ptr, b->requested, block, b->site, now, now);
        }
    }
    return n;
}

static uint64_t cut_device(gm_device_t *d, uint64_t start_mono)
{
    int narenas = device_lock_arenas(d);
    gm_tcache_sums_t tc;
    tcache_lock_all(d, &tc); /* which blocks its threads hold freed, and their requests */
    /* The plan's records are logged under its lock: held before the cut's time is read, so that a
     * planned free timed after the cut cannot have happened before the cut saw the plan's blocks
     * (its block then missing from the checkpoint and its free after it: a block lost). */
    planner_cut_lock(d);
    uint64_t now = gm_now_ns();
    gmlog_cut_t c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < narenas; i++)
        add_stats(&c, d->arenas[i]);
    /* The threads' caches, as the stats API counts them (device.c, device_get_stats). */
    c.requested += (uint64_t)tc.requested_adj;
    c.allocated -= tc.bytes;
    c.pending += tc.bytes;
    c.allocs += tc.allocs;
    c.frees += tc.frees;
    c.hits += tc.allocs;
    unsigned long long peak_alloc = c.peak_allocated, peak_req = c.peak_requested;
    tcache_peaks(d, narenas, &peak_alloc, &peak_req);
    c.peak_allocated = peak_alloc;
    c.peak_requested = peak_req;
    c.reserved = __atomic_load_n(&d->reserved_total, __ATOMIC_RELAXED);
    c.peak_reserved = __atomic_load_n(&d->reserved_peak, __ATOMIC_RELAXED);
    planner_cut_stats(d, &c);
    c.segments = device_segments(d, narenas, 0, now) + planner_cut_pages(d, 0, now);
    c.blocks = device_blocks(d, narenas, 0, now) + planner_cut_blocks(d, 0, now);
    logrec_cut(d->id, &c, now > start_mono ? now - start_mono : 0, now);
    device_segments(d, narenas, 1, now);
    planner_cut_pages(d, 1, now);
    device_blocks(d, narenas, 1, now);
    planner_cut_blocks(d, 1, now);
    /* Records after the cut must be timed after it: those the ordered clock times once it has
     * moved on, those the hit path times with the unordered one through each arena's newest stamp. */
    while (gm_now_ns() <= now)
        ;
    for (int i = 0; i < narenas; i++)
        arena_note_stamp(d->arenas[i], now + 1);
    planner_cut_unlock(d, now + 1);
    tcache_unlock_all(d, now + 1);
    device_unlock_arenas(d, narenas);
    return 1 + (uint64_t)c.segments + c.blocks;
}

uint64_t cut_all_devices(uint64_t start_mono)
{
    uint64_t n = 0;
    for (int i = 0; i < devctx_created_count(); i++) {
        gm_device_t *d = devctx_at(i);
        if (d)
            n += cut_device(d, start_mono);
    }
    return n;
}
