/* The reducer's floor: the decoder's events (events.h) applied to the model — a block made or
 * ended (inline in model_int.h, for the loop's hot path), a segment made or ended, a block live
 * at a checkpoint's cut, an OOM. The loop over records (model_step.c) and PyTorch's view
 * (model_torch.c) call it; it calls no replay (the parallel replay that defers site figures
 * installs m->release_hook). Every size, id and count is checked before it is trusted. */
#include "model_int.h"
#include "vec.h"

/* A window met a free of a block from before it: its size is known only to the stitch. Close
 * the device's run of maxima here and start the next one from the current figures. */
__attribute__((noinline)) void model_range_unfree(model_t *m, model_dev_t *d, uint64_t ptr, uint64_t t)
{
    model_unfree_t *n = vec_grow(m->unfree, &m->capunfree, m->nunfree + 1, sizeof *n, 16);
    if (!n)
        model_die_oom();
    m->unfree = n;
    m->unfree[m->nunfree++] = (model_unfree_t){ptr, (uint8_t)d->id, d->peak_requested, d->peak_allocated,
                                               d->peak_reserved, d->peak_segments, d->peak_requested_t,
                                               d->peak_allocated_t, d->peak_reserved_t};
    d->peak_requested = d->requested, d->peak_requested_t = t;
    d->peak_allocated = d->allocated, d->peak_allocated_t = t;
    d->peak_reserved = d->reserved, d->peak_reserved_t = t;
    d->peak_segments = d->segments;
}


static void on_segment(model_t *m, const rd_rec_t *r, const ev_t *ev)
{
    model_dev_t *d = model_get_dev(m, r->device);
    if (!d || !ev->ptr) {
        m->malformed++;
        return;
    }
    if (ev->type == EV_SEGMENT_ALLOC) {
        d->seg_allocs++;
        d->seg_alloc_ns += ev->dur_ns;
        if (ev->graph)
            d->graph_segments++;
        uint64_t *old = map_find(&d->segmap, ev->ptr);
        if (old) { /* its free was lost */
            d->reserved -= *old <= d->reserved ? *old : d->reserved;
            d->segments--;
        }
        map_put(&d->segmap, ev->ptr, ev->size);
        d->reserved += ev->size;
        d->segments++;
        note_peaks(d, r->t, r->seq);
    } else {
        d->seg_frees++;
        d->seg_free_ns += ev->dur_ns;
        uint64_t size;
        if (map_del(&d->segmap, ev->ptr, &size)) {
            d->reserved -= size <= d->reserved ? size : d->reserved;
            d->segments--;
        } else if (m->flags & MODEL_RANGE) {
            d->reserved -= ev->size; /* a segment of an earlier window: the record has its size */
            d->segments--;
        } else {
            d->bad_segment_frees++;
        }
    }
    if (m->flags & MODEL_TIMELINE)
        tl_note(m, d, r->t);
}

void model_cut_block(model_t *m, const rd_rec_t *r, const ev_t *ev)
{
    model_dev_t *d = model_get_dev(m, r->device);
    if (!d || !ev->ptr) {
        m->malformed++;
        return;
    }
    /* The cut's counts stand for its allocation: decode it without counting it again. */
    uint64_t hits = d->hits, misses = d->misses, graph = d->graph_allocs, pns = d->pool_alloc_ns;
    uint64_t qns = d->pass_alloc_ns, kinds[8], pa = d->planned_allocs, pb = d->planned_bytes;
    memcpy(kinds, d->allocs_kind, sizeof kinds);
    alloc_count(m, d, ev);
    d->hits = hits, d->misses = misses, d->graph_allocs = graph, d->pool_alloc_ns = pns, d->pass_alloc_ns = qns;
    d->planned_allocs = pa, d->planned_bytes = pb;
    memcpy(d->allocs_kind, kinds, sizeof kinds);
    int found;
    model_live_t *e = live_upsert(&m->live, ev->ptr, &found);
    if (found) {
        d->replaced++;
        model_dev_t *od = m->dev[model_live_dev(e)] ? m->dev[model_live_dev(e)] : d;
        release_entry(m, od, e);
    }
    live_fill(e, r, ev);
    e->blk |= MODEL_LIVE_CUT;
    e->sidx = 0;
    if ((m->flags & (MODEL_SITES | MODEL_DEFER)) == MODEL_SITES) {
        e->sidx = sstat_index(m, r->device, ev->site);
        if (e->sidx)
            site_add_at(m, e->sidx, ev->size, ev->req, d->epoch);
    }
    if (d->peak_at_cut)
        d->peak_seq = r->seq; /* the state at the peak: the cut's, once its blocks are in */
}

void model_reduce_event(model_t *m, const rd_rec_t *r, const ev_t *ev)
{
    switch (ev->type) {
    case EV_ALLOC: reduce_alloc(m, r, ev); break;
    case EV_FREE: reduce_free(m, r, ev); break;
    case EV_SEGMENT_ALLOC:
    case EV_SEGMENT_FREE: on_segment(m, r, ev); break;
    case EV_OOM: model_on_oom(m, r); break;
    default: break;
    }
}
