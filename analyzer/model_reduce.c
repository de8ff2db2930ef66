/* The reducer: one record's effect on the model — devices and their figures, peaks, the
 * timeline, live blocks, segments, marks, resets, a wrapped log's checkpoint — and the loop that
 * applies a batch of records. Blocks and segments come as the decoder's events (events.h), never
 * read from a record here. It calls no replay: the parallel replay that defers site figures
 * installs m->release_hook. Every size, id and count is checked before it is trusted. */
#include "model_int.h"
#include "vec.h"

#include <stdio.h>

#define MAX_MARKS_KEPT 100000
#define MAX_WARNINGS_KEPT 100

/* ---- devices ------------------------------------------------------------------------------------ */

model_dev_t *model_get_dev(model_t *m, unsigned id)
{
    if (id >= MODEL_MAX_DEVICES)
        return NULL;
    model_dev_t *d = m->dev[id];
    if (d)
        return d;
    d = calloc(1, sizeof *d);
    if (!d)
        model_die_oom();
    d->tl = calloc(MODEL_TL_BUCKETS, sizeof *d->tl);
    if (!d->tl)
        model_die_oom();
    d->id = (int)id;
    d->present = 1;
    d->tr_up = 1; /* the first trough needs a fall first: a run that only grows has none */
    map_init(&d->segmap, 64);
    m->dev[id] = d;
    if ((int)id + 1 > m->ndev)
        m->ndev = (int)id + 1;
    if (m->flags & MODEL_RANGE) {
        /* A window starts from unknown figures: count from a bias, so that frees of earlier
         * blocks may take the figures below where they started. */
        d->requested = d->allocated = d->reserved = d->segments = RANGE_BIAS;
        d->peak_requested = d->peak_allocated = d->peak_reserved = d->peak_segments = RANGE_BIAS;
    }
    /* Epochs of marks are global: a device seen late starts at the current count. */
    d->epoch[EPOCH_MARKS] = (uint32_t)(m->marks_bounds > UINT32_MAX ? UINT32_MAX : m->marks_bounds);
    const model_mark_t *last = model_step_mark(m, -1);
    if (last)
        d->epoch_start[EPOCH_MARKS] = last->t;
    return d;
}

/* ---- timeline ---------------------------------------------------------------------------------- */

static void tl_coarsen(model_t *m)
{
    for (int i = 0; i < m->ndev; i++) {
        model_dev_t *d = m->dev[i];
        if (!d)
            continue;
        for (size_t b = 0; b < MODEL_TL_BUCKETS / 2; b++) {
            model_bucket_t *x = &d->tl[2 * b], *y = &d->tl[2 * b + 1], r = *x;
            if (y->used) {
                if (!r.used) {
                    r = *y;
                } else {
                    r.amax = r.amax > y->amax ? r.amax : y->amax;
                    r.amin = r.amin < y->amin ? r.amin : y->amin;
                    r.rmax = r.rmax > y->rmax ? r.rmax : y->rmax;
                    r.alast = y->alast, r.rlast = y->rlast, r.qlast = y->qlast, r.segs_last = y->segs_last;
                }
            }
            d->tl[b] = r;
        }
        memset(&d->tl[MODEL_TL_BUCKETS / 2], 0, MODEL_TL_BUCKETS / 2 * sizeof *d->tl);
    }
    m->tl_shift++;
}

__attribute__((noinline)) void model_tl_widen(model_t *m, uint64_t t)
{
    while ((t >> m->tl_shift) >= MODEL_TL_BUCKETS)
        tl_coarsen(m);
}


static inline __attribute__((always_inline)) void on_alloc(model_t *m, const rd_rec_t *r, const ev_t *ev)
{
    model_dev_t *d = m->dev[r->device];
    if (__builtin_expect(!d, 0))
        d = model_get_dev(m, r->device);
    if (__builtin_expect(!d || !ev->ptr, 0)) {
        m->malformed++;
        return;
    }
    alloc_count(m, d, ev);
    int found;
    model_live_t *e = live_upsert(&m->live, ev->ptr, &found);
    if (__builtin_expect(found, 0)) {
        /* The pointer is live already: its free was lost. Forget the old block. */
        d->replaced++;
        model_dev_t *od = m->dev[model_live_dev(e)] ? m->dev[model_live_dev(e)] : d;
        release_entry(m, od, e);
    }
    live_fill(e, r, ev);
    e->sidx = alloc_apply(m, d, r->device, ev->kind, ev->size, ev->req, ev->site, r->t, r->seq);
}

/* A window met a free of a block from before it: its size is known only to the stitch. Close
 * the device's run of maxima here and start the next one from the current figures. */
static __attribute__((noinline)) void range_unfree(model_t *m, model_dev_t *d, uint64_t ptr, uint64_t t)
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


static inline __attribute__((always_inline)) void on_free(model_t *m, const rd_rec_t *r, const ev_t *ev)
{
    model_live_t *e = ev->ptr ? live_find(&m->live, ev->ptr) : NULL;
    unsigned dev = e ? model_live_dev(e) : r->device;
    model_dev_t *d = dev < MODEL_MAX_DEVICES ? m->dev[dev] : NULL;
    if (__builtin_expect(!d, 0))
        d = model_get_dev(m, dev);
    if (__builtin_expect(!d, 0)) {
        m->malformed++;
        return;
    }
    free_count(d, e ? model_live_kind(e) : ev->kind, ev->dur_ns);
    if (__builtin_expect(!e, 0)) {
        d->unmatched_frees++;
        if (m->flags & MODEL_RANGE)
            range_unfree(m, d, ev->ptr, r->t);
        return;
    }
    free_apply(m, d, e, r->t);
    live_remove(&m->live, e);
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

static void on_reset(model_t *m, const rd_rec_t *r)
{
    m->saw_reset = 1;
    model_dev_t *d = model_get_dev(m, r->device);
    if (!d)
        return;
    d->resets++;
    for (size_t i = 0; i < m->live.cap;) {
        model_live_t *e = &m->live.slots[i];
        if (e->ptr && model_live_dev(e) == (unsigned)d->id) {
            release_entry(m, d, e);
            live_remove(&m->live, e); /* a later entry may have moved into slot i */
            continue;
        }
        i++;
    }
    map_free(&d->segmap);
    map_init(&d->segmap, 64);
    d->allocated = d->requested = d->reserved = d->segments = 0;
    if (m->flags & MODEL_TIMELINE)
        tl_note(m, d, r->t);
}

static void on_mark(model_t *m, const rd_rec_t *r)
{
    const gmlog_mark_t *mk = (const gmlog_mark_t *)r->p;
    const char *label;
    size_t len = mk->len;
    if (rd_tail_bytes(r, sizeof *mk, len, &label)) {
        m->malformed++;
        rd_diag(m->lf, r->off, 1, "a mark's label of %u bytes does not fit in its %u bytes", mk->len, r->len);
        label = "";
        len = 0;
    }
    int end = (r->flags & GMLOG_MARK_END) != 0;
    m->marks_total++;
    m->marks_bounds += !end;
    if (m->nmarks < MAX_MARKS_KEPT) {
        model_mark_t *n = vec_grow(m->marks, &m->capmarks, m->nmarks + 1, sizeof *n, 16);
        if (!n)
            model_die_oom();
        m->marks = n;
        m->marks[m->nmarks++] = (model_mark_t){mk->id, r->t, model_dup_text(label, len), end};
    }
    if (r->ckpt)
        return; /* before a wrapped log's checkpoint: no figures of then to close an epoch with */
    for (int i = 0; i < m->ndev && !end; i++) /* a phase's end: the step goes on to the next start */
        if (m->dev[i])
            model_dev_close_epoch(m->dev[i], EPOCH_MARKS, r->t);
    if ((m->stop_mark_id && (int64_t)mk->id == m->stop_mark_id) ||
        (m->stop_mark_label && len == strlen(m->stop_mark_label) && !memcmp(label, m->stop_mark_label, len)))
        m->stopped = 1;
}

static void on_device(model_t *m, const rd_rec_t *r)
{
    const gmlog_device_t *dv = (const gmlog_device_t *)r->p;
    model_dev_t *d = model_get_dev(m, r->device);
    if (!d)
        return;
    d->total = dv->total;
    d->free_at_start = dv->free_at_start;
    const char *name;
    size_t len = dv->name_len < sizeof d->name ? dv->name_len : sizeof d->name - 1;
    if (rd_tail_bytes(r, sizeof *dv, len, &name) == 0) {
        char *s = model_dup_text(name, len);
        snprintf(d->name, sizeof d->name, "%s", s);
        free(s);
    }
}

static void on_warning(model_t *m, const rd_rec_t *r)
{
    const gmlog_warning_t *w = (const gmlog_warning_t *)r->p;
    m->warns_total++;
    model_dev_t *d = r->device != GMLOG_NO_DEVICE ? model_get_dev(m, r->device) : NULL;
    if (d)
        d->warnings[r->flags & 7]++;
    if (m->nwarns < MAX_WARNINGS_KEPT) {
        if (!m->warns) {
            m->warns = calloc(MAX_WARNINGS_KEPT, sizeof *m->warns);
            if (!m->warns)
                model_die_oom();
        }
        m->warns[m->nwarns++] = (model_warning_t){r->t, w->ptr, w->site, w->aux, r->device, r->flags};
    }
}

static void on_limit(model_t *m, const rd_rec_t *r)
{
    model_dev_t *d = model_get_dev(m, r->device);
    if (d) {
        d->limit = ((const gmlog_limit_t *)r->p)->bytes;
        d->limit_torch = (r->flags & GMLOG_LIMIT_TORCH) != 0;
        if (d->limit > d->limit_max)
            d->limit_max = d->limit;
    }
}

/* ---- a wrapped log's checkpoint ------------------------------------------------------------------
 * The reader hands out its definitions, its history (marks and OOMs at their own times) and,
 * per device, a CUT then the segments and blocks live at it, before the events after it. A CUT
 * sets the device's figures, peaks and counts (what the dropped events added up to); its blocks
 * keep their sites, their time being the cut's (allocated before it). None of it counts as a
 * record read. */

/* A CUT: the device's figures, peaks and counts as the checkpoint had them. On a tensor device
 * PyTorch's CUT (GMLOG_CUT_TORCH, written first) gives them; gmshim's own CUT then only its
 * cache's hits and misses, and the cut's time for the hooks' records. */
static void on_cut(model_t *m, const rd_rec_t *r)
{
    const gmlog_cut_t *c = (const gmlog_cut_t *)r->p;
    model_dev_t *d = model_get_dev(m, r->device);
    if (!d) {
        m->malformed++;
        return;
    }
    int torch = (r->flags & GMLOG_CUT_TORCH) != 0;
    if (!torch && d->torch_cut_seen) {
        d->cut_ns = c->cut_ns;
        d->hits = c->hits;
        d->misses = c->misses;
        return;
    }
    if (torch) {
        d->torch = d->torch_cut_seen = 1;
        d->torch_allocs = c->allocs;
        d->torch_ooms = c->ooms;
    }
    d->cut_seen = 1;
    d->cut_ns = c->cut_ns;
    d->requested = c->requested;
    d->allocated = c->allocated;
    d->reserved = c->reserved;
    d->segments = c->segments;
    d->peak_requested = c->peak_requested > d->requested ? c->peak_requested : d->requested;
    d->peak_allocated = c->peak_allocated > d->allocated ? c->peak_allocated : d->allocated;
    d->peak_reserved = c->peak_reserved > d->reserved ? c->peak_reserved : d->reserved;
    d->peak_segments = d->segments;
    d->peak_requested_t = d->peak_allocated_t = d->peak_reserved_t = c->cut_ns;
    d->peak_seq = r->seq;
    d->peak_seq_alloc = d->allocated;
    d->peak_at_cut = 1;
    d->cut_allocs = c->allocs;
    d->cut_frees = c->frees;
    if (!torch) {
        d->hits = c->hits;
        d->misses = c->misses;
    }
    uint64_t had = d->ooms; /* the history's, which the cut's count includes */
    if (c->ooms > had) {
        m->ooms_total += c->ooms - had;
        d->ooms = c->ooms;
    }
    d->ep_min[0] = d->ep_min[1] = d->allocated;
    d->tr_hi = d->allocated;
    if (m->flags & MODEL_TIMELINE)
        tl_note(m, d, r->t);
}

/* A block live at the cut: in the live map with its site; the cut's figures hold its bytes. */
void model_cut_block(model_t *m, const rd_rec_t *r, const ev_t *ev)
{
    model_dev_t *d = model_get_dev(m, r->device);
    if (!d || !ev->ptr) {
        m->malformed++;
        return;
    }
    /* The cut's counts stand for its allocation: decode it without counting it again. */
    uint64_t hits = d->hits, misses = d->misses, graph = d->graph_allocs, pns = d->pool_alloc_ns;
    uint64_t qns = d->pass_alloc_ns, kinds[8];
    memcpy(kinds, d->allocs_kind, sizeof kinds);
    alloc_count(m, d, ev);
    d->hits = hits, d->misses = misses, d->graph_allocs = graph, d->pool_alloc_ns = pns, d->pass_alloc_ns = qns;
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

static void on_cut_segment(model_t *m, const rd_rec_t *r)
{
    const gmlog_segment_t *s = (const gmlog_segment_t *)r->p;
    model_dev_t *d = model_get_dev(m, r->device);
    if (!d || !s->base) {
        m->malformed++;
        return;
    }
    map_put(&d->segmap, s->base, s->size); /* the cut's figures count it */
    if (d->peak_at_cut)
        d->peak_seq = r->seq;
}

static __attribute__((noinline)) void step_checkpoint(model_t *m, const rd_rec_t *r)
{
    if (m->next_sample < MODEL_FRAG_SAMPLES && (m->flags & MODEL_FRAG))
        model_take_samples(m, r->t);
    if (r->ckpt == RD_CKPT_STATE) {
        m->last_t = r->t;
        if (r->type == GMLOG_CUT)
            on_cut(m, r);
        else if (__builtin_expect(m->torch, 0) && ev_tensor_dev(&m->ev, r->device) && model_torch_state(m, r))
            ;
        else if (r->type == GMLOG_ALLOC) {
            ev_t ev;
            ev_alloc_of(r, &ev);
            model_cut_block(m, r, &ev);
        } else if (r->type == GMLOG_SEGMENT_ALLOC)
            on_cut_segment(m, r);
        return;
    }
    switch (r->type) {
    case GMLOG_SITE: model_on_site(m, r); break;
    case GMLOG_STRING: model_on_string(m, r); break;
    case GMLOG_MODULE: model_on_module(m, r); break;
    case GMLOG_DEVICE: on_device(m, r); break;
    case GMLOG_LIMIT: on_limit(m, r); break;
    case GMLOG_MARK: on_mark(m, r); break;
    case GMLOG_OOM: model_on_oom(m, r); break;
    default: break;
    }
}

void model_reduce_event(model_t *m, const rd_rec_t *r, const ev_t *ev)
{
    switch (ev->type) {
    case EV_ALLOC: on_alloc(m, r, ev); break;
    case EV_FREE: on_free(m, r, ev); break;
    case EV_SEGMENT_ALLOC:
    case EV_SEGMENT_FREE: on_segment(m, r, ev); break;
    case EV_OOM: model_on_oom(m, r); break;
    default: break;
    }
}

/* One record. */
static inline __attribute__((always_inline)) void step(model_t *m, const rd_rec_t *r)
{
    if (__builtin_expect(r->ckpt != RD_EVENT, 0)) {
        step_checkpoint(m, r);
        return;
    }
    m->records++;
    m->last_t = r->t;
    if (m->next_sample < MODEL_FRAG_SAMPLES && (m->flags & MODEL_FRAG))
        model_take_samples(m, r->t);
    if (__builtin_expect(m->torch, 0) && torch_is_tensor_type(r->type) && ev_tensor_dev(&m->ev, r->device)) {
        model_torch_step(m, r);
        m->by_type[r->type]++;
        return;
    }
    ev_t ev[EV_MAX];
    int n = ev_decode(&m->ev, r, ev); /* a hook record of a tensor device: never more than one */
    if (n > 0) {
        if (__builtin_expect(ev[0].type == EV_ALLOC, 1))
            on_alloc(m, r, &ev[0]);
        else if (ev[0].type == EV_FREE)
            on_free(m, r, &ev[0]);
        else
            model_reduce_event(m, r, &ev[0]);
        m->by_type[r->type]++;
        return;
    }
    switch (r->type) {
    case GMLOG_FENCE: {
        model_dev_t *d = model_get_dev(m, r->device);
        if (d) {
            d->fences++;
            d->fence_ns += ((const gmlog_fence_t *)r->p)->dur_ns;
            d->fence_events += ((const gmlog_fence_t *)r->p)->events;
            d->fences_by[r->flags <= GMLOG_FENCE_BY_MAX ? r->flags : GMLOG_FENCE_BY_UNKNOWN]++;
        }
        break;
    }
    case GMLOG_FENCE_WAIT: {
        model_dev_t *d = model_get_dev(m, r->device);
        if (d) {
            d->fence_waits++;
            d->fence_wait_ns += ((const gmlog_fence_wait_t *)r->p)->dur_ns;
        }
        break;
    }
    case GMLOG_EMPTY_CACHE: {
        model_dev_t *d = model_get_dev(m, r->device);
        const gmlog_empty_cache_t *ec = (const gmlog_empty_cache_t *)r->p;
        if (d) {
            d->empty_caches++;
            d->empty_bytes += ec->bytes;
            d->empty_segments += ec->segments;
            d->empty_by_reason[r->flags & 7]++;
            if (r->flags == GMLOG_EMPTY_OOM)
                d->pending_release = ec->bytes;
        }
        break;
    }
    case GMLOG_MARK: on_mark(m, r); break;
    case GMLOG_MODULE: model_on_module(m, r); break;
    case GMLOG_SITE: model_on_site(m, r); break;
    case GMLOG_STRING: model_on_string(m, r); break;
    case GMLOG_WARNING: on_warning(m, r); break;
    case GMLOG_DEVICE: on_device(m, r); break;
    case GMLOG_END:
        m->end_seen = 1;
        m->end_reason = ((const gmlog_end_t *)r->p)->reason;
        m->end_t = r->t;
        break;
    case GMLOG_CAPTURE: {
        model_dev_t *d = model_get_dev(m, r->device);
        if (d && r->flags == GMLOG_CAPTURE_BEGIN)
            d->captures++;
        break;
    }
    case GMLOG_RESET: on_reset(m, r); break;
    case GMLOG_LIMIT: on_limit(m, r); break;
    default: break;
    }
    if (r->type <= GMLOG_TYPE_MAX)
        m->by_type[r->type]++;
}

static inline void prefetch_slot(const model_t *m, const rd_rec_t *r)
{
    if (r->type == GMLOG_ALLOC || r->type == GMLOG_FREE) {
        uint64_t ptr;
        memcpy(&ptr, r->p + 8, 8);
        __builtin_prefetch(&m->live.slots[live_slot(&m->live, ptr)]);
    }
}

#define AHEAD 12

/* Applies records in order, prefetching the live-map slot of the record AHEAD places on. */
void model_apply(model_t *m, const rd_rec_t *rec, int n)
{
    for (int i = 0; i < AHEAD && i < n; i++)
        prefetch_slot(m, &rec[i]);
    for (int i = 0; i < n && !m->stopped; i++) {
        if (i + AHEAD < n)
            prefetch_slot(m, &rec[i + AHEAD]);
        if (rec[i].seq >= m->stop_seq) {
            m->stopped = 1;
            break;
        }
        step(m, &rec[i]);
    }
}

void model_step(model_t *m, const rd_rec_t *r)
{
    step(m, r);
}

