/* PyTorch's tensors as the model's allocations. With PyTorch's cache kept and its bridge
 * attached (docs/pytorch.md), a device's log holds two views of the same memory: the cudaMalloc
 * calls the hooks saw (ALLOC records, one per PyTorch segment, inside gmshim's SEGMENT_ALLOCs)
 * and PyTorch's own events (GMLOG_T_*). The decoder (events.c) takes PyTorch's view: T_ALLOC is
 * an allocation, T_FREE_REQUESTED the program's free (the block then pending until
 * T_FREE_COMPLETED), T_SEGMENT_* the segments, and the hooks' records of the same memory are
 * left out. Here its events go through the reducer's paths (sites, epochs, peaks, fragmentation
 * and OOM snapshots come out tensor-level without code of their own), and the figures only
 * PyTorch has (pending bytes, frees that waited, frees on another stream) are counted. Logs
 * without tensor events never reach this file (model_torch_scan finds none). */
#include "model_int.h"

void model_torch_scan(model_t *m, rd_log_t *lf)
{
    m->torch = ev_dec_scan(&m->ev, lf, -1);
}

static void pending_add(model_dev_t *d, uint64_t block)
{
    d->torch_pending += block;
    d->torch_pending_count++;
}

static void pending_sub(model_dev_t *d, uint64_t block)
{
    d->torch_pending -= block <= d->torch_pending ? block : d->torch_pending;
}

/* The OOM's pool figures as PyTorch's allocator had them: its segments, live tensors, pending
 * frees, and the free space between them (the hooks' figures were of its segments as blocks). */
static void pool_figures(const model_t *m, const model_dev_t *d, gmlog_oom_t *o)
{
    model_frag_t fr;
    model_frag_now(m, d->id, &fr);
    o->reserved = d->reserved;
    o->allocated = d->allocated;
    o->requested = d->requested;
    o->pending = d->torch_pending;
    uint64_t used = d->allocated + d->torch_pending;
    o->cached = d->reserved > used ? d->reserved - used : 0;
    o->largest_free = fr.largest_free;
    uint64_t pieces = fr.free_gaps + fr.cached_segments;
    o->free_blocks = pieces > UINT32_MAX ? UINT32_MAX : (uint32_t)pieces;
}

/* A tensor's allocation, free requested, free completed, PyTorch's segments: one event each
 * (an expandable segment's map or unmap up to four). */
static void tensor_event(model_t *m, model_dev_t *d, const rd_rec_t *r, const ev_t *ev)
{
    switch (ev->type) {
    case EV_ALLOC:
        if (ev->pending) /* its FREE_COMPLETED was lost: the block is reused */
            pending_sub(d, ev->old);
        model_reduce_event(m, r, ev);
        d->hits--; /* a tensor is no hit of gmshim's cache: PyTorch's cache served it */
        d->torch_allocs++;
        break;
    case EV_FREE:
        if (ev->cross_stream)
            d->torch_cross_stream++;
        model_reduce_event(m, r, ev);
        if (ev->pending) { /* the tensor is gone, its block not yet reusable */
            pending_add(d, ev->size);
            m->torch_just_requested = ev->ptr; /* pending for real if something comes before its completion */
        }
        break;
    case EV_FREE_COMPLETED:
        if (!ev->pending)
            break;
        pending_sub(d, ev->size);
        if (d->torch_pending_count)
            d->torch_pending_count--;
        break;
    case EV_SEGMENT_ALLOC:
    case EV_SEGMENT_FREE:
        model_reduce_event(m, r, ev);
        if (ev->grown && d->seg_allocs)
            d->seg_allocs--; /* one segment, resized */
        break;
    case EV_OOM: {
        d->torch_ooms++;
        gmlog_oom_t o = *ev->oom;
        pool_figures(m, d, &o);
        if (d->limit_torch && d->limit) /* PyTorch's own cap refused it (its LIMIT came just before) */
            o.h.flags |= GMLOG_OOM_LIMIT;
        rd_rec_t n = *r;
        n.p = (const uint8_t *)&o;
        n.type = GMLOG_OOM;
        n.flags = o.h.flags;
        n.len = sizeof o;
        model_on_oom(m, &n);
        break;
    }
    default: break;
    }
}

void model_torch_step(model_t *m, const rd_rec_t *r)
{
    model_dev_t *d = r->device < MODEL_MAX_DEVICES ? model_get_dev(m, r->device) : NULL;
    if (!d || r->len < sizeof(gmlog_tensor_t)) {
        m->malformed++;
        return;
    }
    const gmlog_tensor_t *t = (const gmlog_tensor_t *)r->p;
    d->torch = 1;
    if (m->torch_just_requested && !(r->type == GMLOG_T_FREE_COMPLETED && t->addr == m->torch_just_requested)) {
        /* The last free requested was not completed at once: it waited (record_stream's events) */
        if (model_torch_pending_at(m, m->torch_just_requested, NULL))
            d->torch_waited++;
        if (d->torch_pending > d->torch_pending_peak)
            d->torch_pending_peak = d->torch_pending;
    }
    m->torch_just_requested = 0;
    ev_t ev[EV_MAX];
    int n = ev_decode(&m->ev, r, ev);
    if (n < 0) {
        if (r->type != GMLOG_T_SEGMENT_MAP && r->type != GMLOG_T_SEGMENT_UNMAP)
            model_die_oom();
        m->malformed++;
        return;
    }
    for (int i = 0; i < n; i++)
        tensor_event(m, d, r, &ev[i]);
    if (r->type == GMLOG_T_SEGMENT_MAP)
        d->torch_maps++;
    else if (r->type == GMLOG_T_SEGMENT_UNMAP)
        d->torch_unmaps++;
}

int model_torch_pending_at(const model_t *m, uint64_t ptr, uint64_t *block)
{
    return ev_pending_at(&m->ev, ptr, block);
}

int model_torch_segment_base(const model_t *m, uint64_t ptr)
{
    return ev_segment_base(&m->ev, ptr);
}

/* ---- a wrapped log's checkpoint ---------------------------------------------------------- */

/* Another library's cudaMalloc kept at the cut (not one of PyTorch's segments): a block of its
 * own, which PyTorch's figures do not hold, so its bytes are added to them. */
static void cut_other_block(model_t *m, model_dev_t *d, const rd_rec_t *r, const ev_t *ev)
{
    model_cut_block(m, r, ev);
    const model_live_t *e = live_find(&m->live, ev->ptr);
    if (!e || !counts_as_allocated(model_live_kind(e)))
        return;
    d->allocated += model_live_block(e);
    d->requested += model_live_req(e);
    if (d->allocated > d->peak_allocated)
        d->peak_allocated = d->allocated;
    if (d->requested > d->peak_requested)
        d->peak_requested = d->requested;
}

int model_torch_state(model_t *m, const rd_rec_t *r)
{
    model_dev_t *d = model_get_dev(m, r->device);
    if (!d || !d->torch_cut_seen || r->len < 16)
        return 0; /* a checkpoint without PyTorch's state: the hooks' blocks, as before */
    if (r->type == GMLOG_SEGMENT_ALLOC)
        return 1; /* gmshim's segments: PyTorch's stand for them */
    ev_t ev[EV_MAX];
    int n;
    if (r->type == GMLOG_ALLOC) {
        if (ev_decode(&m->ev, r, ev) == 1 && ev[0].type == EV_ALLOC)
            cut_other_block(m, d, r, &ev[0]); /* not one of PyTorch's segments */
        return 1;
    }
    if (!torch_is_tensor_type(r->type) || r->len < sizeof(gmlog_tensor_t))
        return 0;
    /* What a checkpoint holds: PyTorch's segments, live tensors and pending blocks; the cut's
     * figures count them. */
    if (r->type != GMLOG_T_SEGMENT_ALLOC && r->type != GMLOG_T_SEGMENT_MAP && r->type != GMLOG_T_ALLOC &&
        r->type != GMLOG_T_FREE_REQUESTED)
        return 1;
    if ((n = ev_decode(&m->ev, r, ev)) < 0)
        model_die_oom();
    for (int i = 0; i < n; i++) {
        switch (ev[i].type) {
        case EV_SEGMENT_ALLOC: map_put(&d->segmap, ev[i].ptr, ev[i].size); break;
        case EV_SEGMENT_FREE: map_del(&d->segmap, ev[i].ptr, NULL); break;
        case EV_ALLOC: model_cut_block(m, r, &ev[i]); break;
        case EV_FREE: /* pending at the cut: its block still taken, its tensor gone */
            if (!ev[i].pending)
                break;
            pending_add(d, ev[i].size);
            if (d->torch_pending > d->torch_pending_peak)
                d->torch_pending_peak = d->torch_pending;
            break;
        default: break;
        }
    }
    if (r->type == GMLOG_T_SEGMENT_MAP)
        d->segments = d->segmap.count;
    return 1;
}
