/* The reducer's loop: one record's effect on the model — devices and their figures, marks,
 * warnings, limits, resets, fences, a wrapped log's checkpoint — with blocks and segments taken
 * as the decoder's events (events.h) and applied by model_reduce.c, PyTorch's records by
 * model_torch.c; and the loop that applies a batch of records. */
#include "model_int.h"
#include "vec.h"

#include <stdio.h>

#define MAX_MARKS_KEPT 100000
#define MAX_WARNINGS_KEPT 100

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
    d->tr.z.hi = d->tr.top = d->allocated;
    if (m->flags & MODEL_TIMELINE)
        tl_note(m, d, r->t);
}

/* A block live at the cut: in the live map with its site; the cut's figures hold its bytes. */
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
    case GMLOG_LEDGER: m->by_type[GMLOG_LEDGER]++; break; /* a device's last sample (ledger.c reads it) */
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
    /* The hot path: without PyTorch's view an allocation or a free is the decoder's event of the
     * hook record, kept in this frame (never passed out), so that only the fields the reducer
     * reads are made. */
    if (__builtin_expect(!m->torch, 1) && (r->type == GMLOG_ALLOC || r->type == GMLOG_FREE)) {
        ev_t e;
        if (r->type == GMLOG_ALLOC) {
            ev_alloc_of(r, &e);
            reduce_alloc(m, r, &e);
        } else {
            ev_free_of(r, &e);
            reduce_free(m, r, &e);
        }
        m->by_type[r->type]++;
        return;
    }
    ev_t ev[EV_MAX];
    if (ev_decode(&m->ev, r, ev) > 0) { /* a hook record: one event, on a tensor device too */
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

