/* Snapshots of the model: fragmentation from the segments and live blocks, the top live sites,
 * the samples taken at fixed times, and each OOM's analysis at the moment it happened. */
#include "model_int.h"
#include "vec.h"

#define MAX_RETRIES_KEPT 1000

/* Live bytes and counts per device and kind, from the live map (they are not kept per event). */
void model_refresh_kinds(model_t *m)
{
    for (int i = 0; i < m->ndev; i++)
        if (m->dev[i]) {
            memset(m->dev[i]->live_kind_bytes, 0, sizeof m->dev[i]->live_kind_bytes);
            memset(m->dev[i]->live_kind_count, 0, sizeof m->dev[i]->live_kind_count);
        }
    for (size_t i = 0; i < m->live.cap; i++) {
        const model_live_t *e = &m->live.slots[i];
        model_dev_t *d = e->ptr ? m->dev[model_live_dev(e)] : NULL;
        if (!d)
            continue;
        d->live_kind_bytes[model_live_kind(e)] += model_live_block(e);
        d->live_kind_count[model_live_kind(e)]++;
    }
}

typedef struct span {
    uint64_t start, size;
} span_t;

static int by_start(const void *a, const void *b)
{
    const span_t *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The device's segments and occupied blocks, each sorted by address: live pool blocks, and
 * PyTorch's blocks whose free is still pending (not reusable yet). */
static void collect(const model_t *m, const model_dev_t *d, span_t **segsp, size_t *nsp, span_t **blksp,
                    size_t *nbp, uint64_t *internal, uint64_t *pending)
{
    size_t nseg = d->segmap.count, nblk = m->live.count + m->ev.npending;
    span_t *segs = malloc((nseg ? nseg : 1) * sizeof *segs);
    span_t *blks = malloc((nblk ? nblk : 1) * sizeof *blks);
    if (!segs || !blks)
        model_die_oom();
    size_t ns = 0, nb = 0;
    for (size_t i = 0; i < d->segmap.cap && ns < nseg; i++)
        if (d->segmap.slots[i].key)
            segs[ns++] = (span_t){d->segmap.slots[i].key, d->segmap.slots[i].val};
    *internal = *pending = 0;
    for (size_t i = 0; i < m->live.cap && nb < nblk; i++) {
        const model_live_t *e = &m->live.slots[i];
        if (e->ptr && model_live_dev(e) == (unsigned)d->id && model_live_kind(e) == GMLOG_KIND_POOL) {
            uint64_t block = model_live_block(e), req = model_live_req(e);
            blks[nb++] = (span_t){e->ptr, block};
            *internal += block > req ? block - req : 0;
        }
    }
    for (size_t i = 0; i < m->ev.tcap && nb < nblk; i++) {
        const ev_tensor_t *t = ev_tensor_at(&m->ev, i);
        if (t && (t->info & EV_PENDING) && ((t->info >> 48) & 0xff) == (unsigned)d->id) {
            blks[nb++] = (span_t){t->ptr, t->info & MODEL_48};
            *pending += t->info & MODEL_48;
        }
    }
    qsort(segs, ns, sizeof *segs, by_start);
    qsort(blks, nb, sizeof *blks, by_start);
    *segsp = segs, *nsp = ns, *blksp = blks, *nbp = nb;
}

/* One segment's free pieces between the blocks from *bi on; *bi moves past its blocks but one
 * that goes on past the segment's end (a block across the 2 MiB pages of GMSHIM_SEGMENTS=vmm,
 * each page a segment): the next segment starts with it. */
static void segment_gaps(const span_t *seg, const span_t *blks, size_t nb, size_t *bi, model_segfrag_t *g)
{
    uint64_t at = seg->start, end = seg->start + seg->size;
    if (end < at) /* wraps: garbage */
        end = UINT64_MAX;
    memset(g, 0, sizeof *g);
    g->base = seg->start;
    g->size = end - at;
    while (*bi < nb && blks[*bi].start < end) {
        if (blks[*bi].start > at) {
            uint64_t gap = blks[*bi].start - at;
            g->free += gap;
            g->free_blocks++;
            if (gap > g->largest_free)
                g->largest_free = gap;
        }
        uint64_t bend = blks[*bi].start + blks[*bi].size;
        if (bend > at)
            at = bend < end ? bend : end;
        g->blocks++;
        if (bend > end)
            break; /* it covers the next segment too */
        (*bi)++;
    }
    if (end > at) {
        uint64_t gap = end - at;
        g->free += gap;
        g->free_blocks++;
        if (gap > g->largest_free)
            g->largest_free = gap;
    }
}

/* Moves *bi past the blocks that end before the segment at `start` (counted in *stray when they
 * lie in no segment: not the one a previous segment ended inside). */
static void skip_before(const span_t *blks, size_t nb, size_t *bi, uint64_t start, uint64_t prev_end,
                        uint64_t *stray)
{
    while (*bi < nb && blks[*bi].start < start && blks[*bi].start + blks[*bi].size <= start) {
        if (stray && blks[*bi].start >= prev_end)
            (*stray)++;
        (*bi)++;
    }
}

void model_frag_now(const model_t *m, int dev, model_frag_t *out)
{
    memset(out, 0, sizeof *out);
    out->dev = dev;
    const model_dev_t *d = dev >= 0 && dev < MODEL_MAX_DEVICES ? m->dev[dev] : NULL;
    if (!d)
        return;
    out->t = m->last_t;
    out->reserved = d->reserved;
    out->allocated = d->allocated;
    out->requested = d->requested;
    out->segments = d->segments;
    span_t *segs, *blks;
    size_t ns, nb, bi = 0;
    collect(m, d, &segs, &ns, &blks, &nb, &out->internal, &out->pending);
    for (size_t si = 0; si < ns; si++) {
        skip_before(blks, nb, &bi, segs[si].start, si ? segs[si - 1].start + segs[si - 1].size : 0,
                    &out->stray_blocks);
        model_segfrag_t g;
        segment_gaps(&segs[si], blks, nb, &bi, &g);
        if (!g.blocks) { /* wholly free: cached, not fragmented */
            out->cached_whole += g.size;
            out->cached_segments++;
        } else {
            out->external += g.free;
            out->free_gaps += g.free_blocks;
        }
        if (g.largest_free > out->largest_free)
            out->largest_free = g.largest_free;
    }
    if (ns && bi < nb && blks[bi].start < segs[ns - 1].start + segs[ns - 1].size)
        bi++; /* it went on past the last segment: counted in it */
    out->stray_blocks += nb - bi;
    free(segs);
    free(blks);
}

static int by_free_desc(const void *a, const void *b)
{
    const model_segfrag_t *x = a, *y = b;
    return x->free > y->free ? -1 : x->free < y->free ? 1 : (x->base > y->base) - (x->base < y->base);
}

unsigned model_frag_segments(const model_t *m, int dev, model_segfrag_t *out, unsigned max, uint64_t *nsegs)
{
    const model_dev_t *d = dev >= 0 && dev < MODEL_MAX_DEVICES ? m->dev[dev] : NULL;
    *nsegs = 0;
    if (!d || !max)
        return 0;
    span_t *segs, *blks;
    size_t ns, nb, bi = 0;
    uint64_t internal, pending;
    collect(m, d, &segs, &ns, &blks, &nb, &internal, &pending);
    model_segfrag_t *all = malloc((ns ? ns : 1) * sizeof *all);
    if (!all)
        model_die_oom();
    for (size_t si = 0; si < ns; si++) {
        skip_before(blks, nb, &bi, segs[si].start, 0, NULL);
        segment_gaps(&segs[si], blks, nb, &bi, &all[si]);
    }
    qsort(all, ns, sizeof *all, by_free_desc);
    unsigned n = ns < max ? (unsigned)ns : max;
    memcpy(out, all, n * sizeof *out);
    *nsegs = ns;
    free(all);
    free(segs);
    free(blks);
    return n;
}

static int by_bytes_desc(const void *a, const void *b)
{
    const model_top_t *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return x->sidx < y->sidx ? -1 : x->sidx > y->sidx;
}

unsigned model_top_sites(const model_t *m, int dev, model_top_t *out, unsigned max)
{
    unsigned n = 0;
    for (size_t i = 1; i < m->nsst; i++) {
        const model_sstat_t *s = &m->sst[i];
        if (s->dev != dev || !s->live_blk)
            continue;
        model_top_t cand = {(uint32_t)i, s->live_blk, s->live_count};
        if (n < max) {
            out[n++] = cand;
            qsort(out, n, sizeof *out, by_bytes_desc);
        } else if (by_bytes_desc(&cand, &out[n - 1]) < 0) {
            out[n - 1] = cand;
            qsort(out, n, sizeof *out, by_bytes_desc);
        }
    }
    return n;
}

static void analyse_oom(model_t *m, model_dev_t *d, model_oom_t *o)
{
    o->analysed = 1;
    o->limit = d->limit;
    o->limit_torch = d->limit_torch;
    o->device_total = d->total;
    o->allocated = d->allocated;
    o->requested = d->requested;
    o->reserved = d->reserved;
    model_refresh_kinds(m);
    for (unsigned k = 0; k < 8; k++)
        if (!counts_as_allocated(k) && k != GMLOG_KIND_HOST)
            o->unpooled_live += d->live_kind_bytes[k];
    o->epoch_system = model_epoch_system(m, d->id, 1);
    if (o->epoch_system >= 0) {
        o->epoch_index = d->epoch[o->epoch_system];
        o->epoch_start = d->epoch_start[o->epoch_system];
        o->epoch_first = d->epoch_first[o->epoch_system];
        const model_mark_t *last = model_step_mark(m, -1);
        if (o->epoch_system == EPOCH_MARKS && last && last->label)
            o->epoch_label = strdup(last->label);
        int lsys = model_epoch_system(m, d->id, 3);
        o->lowwater = model_dev_series(m, d, lsys >= 0 ? lsys : o->epoch_system);
    }
    for (size_t i = 0; i < m->live.cap; i++) {
        const model_live_t *e = &m->live.slots[i];
        if (!e->ptr || model_live_dev(e) != (unsigned)d->id || !counts_as_allocated(model_live_kind(e)))
            continue;
        if (o->epoch_system >= 0 && model_live_time(e) >= (o->epoch_start & ~255ull))
            o->transient += model_live_block(e);
        else
            o->persistent += model_live_block(e);
    }
    model_frag_now(m, d->id, &o->frag);
    if (d->torch)
        o->nseg = model_frag_segments(m, d->id, o->seg, MODEL_SEG_TOP, &o->seg_total);
    o->ntop = model_top_sites(m, d->id, o->top, MODEL_TOP);
    int gsys = model_epoch_system(m, d->id, 3);
    if (gsys < 0)
        return;
    for (size_t i = 1; i < m->nsst; i++) {
        const model_sstat_t *s = &m->sst[i];
        if (s->dev != d->id)
            continue;
        model_series_t ser = model_site_series(m, s, gsys);
        if (!model_series_grows(&ser, NULL))
            continue;
        /* Keep the MODEL_TOP that grew most, largest first (insertion). */
        uint64_t growth = ser.last - ser.first;
        unsigned at = o->ngrow;
        while (at > 0 && o->grow[at - 1].ser.last - o->grow[at - 1].ser.first < growth)
            at--;
        if (at >= MODEL_TOP)
            continue;
        unsigned last = o->ngrow < MODEL_TOP ? o->ngrow++ : MODEL_TOP - 1;
        for (unsigned j = last; j > at; j--)
            o->grow[j] = o->grow[j - 1];
        o->grow[at] = (model_grow_t){(uint32_t)i, ser};
    }
    uint64_t *kept = o->ngrow ? calloc(m->nsst, sizeof *kept) : NULL;
    if (kept) { /* the recording's own leak, for a replay that does not fail here */
        model_kept_by_site(m, d->id, o->epoch_system, kept);
        for (unsigned i = 0; i < o->ngrow; i++)
            o->kept += kept[o->grow[i].sidx];
        free(kept);
    }
}

void model_on_oom(model_t *m, const rd_rec_t *r)
{
    model_dev_t *d = model_get_dev(m, r->device);
    if (!d) {
        m->malformed++;
        return;
    }
    const gmlog_oom_t *rec = (const gmlog_oom_t *)r->p;
    uint64_t released = d->pending_release;
    d->pending_release = 0;
    if (r->flags & GMLOG_OOM_RECOVERED) {
        d->retries++;
        m->retries_total++;
        if (m->nretries < MAX_RETRIES_KEPT) {
            model_retry_t *n = vec_grow(m->retries, &m->capretries, m->nretries + 1, sizeof *n, 16);
            if (!n)
                model_die_oom();
            m->retries = n;
            m->retries[m->nretries++] = (model_retry_t){r->t, rec->request, r->device, r->flags};
        }
        return;
    }
    d->ooms++;
    m->ooms_total++;
    if (m->nooms >= MODEL_MAX_OOMS || (m->flags & MODEL_RANGE))
        return;
    model_oom_t *n = vec_grow(m->ooms, &m->capooms, m->nooms + 1, sizeof *n, 16);
    if (!n)
        model_die_oom();
    m->ooms = n;
    model_oom_t *o = &m->ooms[m->nooms++];
    memset(o, 0, sizeof *o);
    memcpy(&o->rec, rec, sizeof o->rec);
    o->t = r->t;
    o->seq = r->seq;
    o->off = r->off;
    o->dev = r->device;
    o->released_before = released;
    if (r->ckpt) { /* before a wrapped log's checkpoint: only the record is there */
        o->history = 1;
        o->epoch_system = -1;
        o->persistent = rec->allocated; /* all of it, as in a log without epochs */
        o->limit = d->limit;
        o->limit_torch = d->limit_torch;
        o->device_total = d->total;
    } else {
        analyse_oom(m, d, o);
    }
}

void model_take_samples(model_t *m, uint64_t t)
{
    while (m->next_sample < MODEL_FRAG_SAMPLES && t >= m->sample_t[m->next_sample]) {
        for (int i = 0; i < m->ndev; i++) {
            if (!m->dev[i])
                continue;
            model_frag_t *n = vec_grow(m->fsnap, &m->capfsnap, m->nfsnap + 1, sizeof *n, 16);
            if (!n)
                model_die_oom();
            m->fsnap = n;
            model_frag_now(m, i, &m->fsnap[m->nfsnap]);
            m->fsnap[m->nfsnap].t = m->sample_t[m->next_sample];
            m->nfsnap++;
        }
        m->next_sample++;
    }
}
