/* What the model's files share and nothing else may use: the maps over the one table, the
 * inline hot path of an allocation and a free (the reducer's loop, model_step.c, its floor,
 * model_reduce.c, and the parallel replay, model_split.c, all apply them, so that each inlines
 * them), and the functions each file gives the files above it. The report files use model.h. */
#ifndef GM_MODEL_INT_H
#define GM_MODEL_INT_H

#include "model.h"
#include "table.h"

#include <stdlib.h>
#include <string.h>

#define RANGE_BIAS (1ull << 62)    /* a window of a parallel summary counts its figures from here */
#define MAX_WORKERS 16

/* ---- model_life.c: a model made, freed; model_build.c: finished; model_windows.c: a log cut into windows ---- */
_Noreturn void model_die_oom(void);
void model_init(model_t *m, rd_log_t *lf, unsigned flags, uint64_t stop_seq, int mark_id, const char *mark_label);
void model_finish(model_t *m);
/* Threads wanted for a parallel replay of lf (GMSHIM_ANALYZER_THREADS, else by size and CPUs). */
unsigned model_workers_wanted(const rd_log_t *lf);
/* Up to `target` windows of time cut at quantiles of the chunks' start times (about as many
 * records each): their starts in begin[0..n), begin[n] = UINT64_MAX (begin has target + 1
 * places). Returns n, 0 when out of memory. */
size_t model_window_starts(const rd_log_t *lf, size_t target, uint64_t *begin);

/* ---- the maps (table.h) ---- */
static inline void live_init(model_livemap_t *lm, size_t cap)
{
    void *s;
    if (table_init(&s, &lm->cap, &lm->shift, sizeof *lm->slots, cap))
        model_die_oom();
    lm->slots = s;
    lm->count = 0;
}

static inline size_t live_slot(const model_livemap_t *lm, uint64_t ptr)
{
    return table_home(lm->shift, ptr);
}

/* NULL for ptr 0 too: 0 marks an empty slot, so no block is ever found there. */
static inline model_live_t *live_find(const model_livemap_t *lm, uint64_t ptr)
{
    if (__builtin_expect(!ptr, 0))
        return NULL;
    return table_find(lm->slots, lm->cap, lm->shift, sizeof *lm->slots, ptr);
}

/* The slot of ptr, made when absent (*found says which); one probe sequence either way. */
static inline model_live_t *live_upsert(model_livemap_t *lm, uint64_t ptr, int *found)
{
    if (__builtin_expect((lm->count + 1) * 8 > lm->cap * 5, 0)) {
        void *s = lm->slots;
        if (table_grow(&s, &lm->cap, &lm->shift, sizeof *lm->slots))
            model_die_oom();
        lm->slots = s;
    }
    model_live_t *e = table_probe(lm->slots, lm->cap, lm->shift, sizeof *lm->slots, ptr, found);
    if (!*found) {
        lm->count++;
        e->ptr = ptr;
    }
    return e;
}

static inline __attribute__((always_inline)) void live_remove(model_livemap_t *lm, model_live_t *e)
{
    table_remove_at(lm->slots, lm->cap, lm->shift, sizeof *lm->slots, (size_t)(e - lm->slots));
    lm->count--;
}

static inline void map_init(model_map_t *mp, size_t cap)
{
    void *s;
    if (table_init(&s, &mp->cap, &mp->shift, sizeof *mp->slots, cap))
        model_die_oom();
    mp->slots = s;
    mp->count = 0;
}

static inline void map_free(model_map_t *mp)
{
    table_map_free(mp);
}

static inline uint64_t *map_find(const model_map_t *mp, uint64_t key)
{
    return table_map_find(mp, key);
}

static inline void map_put(model_map_t *mp, uint64_t key, uint64_t val)
{
    if (table_map_put(mp, key, val))
        model_die_oom();
}

static inline int map_del(model_map_t *mp, uint64_t key, uint64_t *val)
{
    return table_map_del(mp, key, val);
}

/* model_life.c: a device's state made, at its first use (model_get_dev). */
model_dev_t *model_dev_make(model_t *m, unsigned id);

/* The device's state, made at first use (NULL past MODEL_MAX_DEVICES). */
static inline model_dev_t *model_get_dev(model_t *m, unsigned id)
{
    if (id >= MODEL_MAX_DEVICES)
        return NULL;
    model_dev_t *d = m->dev[id];
    return __builtin_expect(d != NULL, 1) ? d : model_dev_make(m, id);
}

/* ---- model_epochs.c: series and epochs ---- */
void model_dev_close_epoch(model_dev_t *d, int sys, uint64_t start);

static inline void series_add(model_series_t *s, uint64_t y, uint32_t times)
{
    if (!times)
        return;
    if (s->n == 0) {
        s->first = y;
    } else if (y > s->last) {
        s->ups++;
    } else if (y < s->last) {
        s->downs++;
    }
    s->last = y;
    s->n += times;
}

/* Brings a site's series up to the current epoch, before its live bytes change. Epoch e runs
 * from boundary e to boundary e + 1; epoch 0 (before the first boundary) never counts. */
static inline void sstat_sync_at(model_sstat_t *s, const uint32_t *epoch)
{
    for (int sys = 0; sys < 2; sys++) {
        uint32_t cur = epoch[sys], acc = s->acc_epoch[sys];
        if (acc >= cur)
            continue;
        if (acc > 0)
            series_add(&s->ser[sys], s->ep_min[sys], 1);
        series_add(&s->ser[sys], s->live_req, cur - acc - 1); /* whole epochs it was not touched */
        s->acc_epoch[sys] = cur;
        s->ep_min[sys] = s->live_req;
    }
}

/* After every change of allocated bytes: low-water minimums and trough detection. */
static inline void dev_track(model_dev_t *d, uint64_t t)
{
    uint64_t a = d->allocated;
    if (a < d->ep_min[0])
        d->ep_min[0] = a;
    if (a < d->ep_min[1])
        d->ep_min[1] = a;
    if (d->step.period) /* steps found from the repeating allocations: no troughs */
        return;
    if (leakwarn_trough_feed(&d->tr, a, d->peak_allocated, t))
        model_dev_close_epoch(d, EPOCH_TROUGHS, d->tr.lo_t);
}

/* ---- model_steps.c: the steps of an unmarked run, from its repeating allocations ---- */
/* Finds each device's period in a prefix of lf (m->stepkeys). */
void model_steps_scan(model_t *m, rd_log_t *lf);
/* A new device takes its period (inline: the floor that makes devices calls nothing above it). */
static inline void model_steps_attach(const model_t *m, model_dev_t *d)
{
    if (m->stepkeys && d->id >= 0 && d->id < MODEL_MAX_DEVICES && m->stepkeys[d->id].period) {
        d->step = m->stepkeys[d->id];
        d->step_armed = 1;
    }
}

/* Before an allocation's effect: the step it opens, if any. */
static inline __attribute__((always_inline)) void steps_note(model_dev_t *d, uint32_t site, uint64_t req, uint64_t t)
{
    if (__builtin_expect(!d->step.period, 1))
        return;
    int any = d->step.any_size;
    if (d->step_armed && site == d->step.first_site && (any || req == d->step.first_size)) {
        d->step_armed = 0;
        model_dev_close_epoch(d, EPOCH_TROUGHS, t);
    }
    if (site == d->step.arm_site && (any || req == d->step.arm_size))
        d->step_armed = 1;
}

/* ---- model_defs.c: sites, strings, modules; the statistics of (device, site) ---- */
void model_on_site(model_t *m, const rd_rec_t *r);
void model_on_string(model_t *m, const rd_rec_t *r);
void model_on_module(model_t *m, const rd_rec_t *r);
/* A copy of n bytes of text, NUL-terminated, control bytes made '?'. */
char *model_dup_text(const char *p, size_t n);
/* The statistics of (dev, site), made when new with its epochs starting at `epoch`; 0 when
 * there is no room for more. */
uint32_t model_sstat_index_at(model_t *m, unsigned dev, uint32_t site, const uint32_t *epoch);
/* A live block of the site's ends. */
void model_release_site(model_t *m, uint32_t sidx, uint64_t block, uint64_t req, const uint32_t *epoch);

static inline uint32_t sstat_index(model_t *m, unsigned dev, uint32_t site)
{
    return model_sstat_index_at(m, dev, site, m->dev[dev]->epoch);
}

/* A new live block of a site. */
static inline __attribute__((always_inline)) void site_add_at(model_t *m, uint32_t idx, uint64_t block, uint64_t req,
                                                              const uint32_t *epoch)
{
    model_sstat_t *s = &m->sst[idx];
    sstat_sync_at(s, epoch);
    s->live_req += req;
    s->live_blk += block;
    s->live_count++;
    s->allocs++;
    s->bytes_total += req;
    if (s->live_req > s->peak_req)
        s->peak_req = s->live_req;
}

/* ---- model_life.c: the model's floor ---- */
/* The timeline's buckets made coarser until time t fits. */
void model_tl_widen(model_t *m, uint64_t t);

/* ---- model_step.c: the reducer's loop (one record's effect on the model) ---- */
/* One record (the reducer's switch, not inlined: for the parallel replay's copied records). */
void model_step(model_t *m, const rd_rec_t *r);
/* Records rec[0..n) in order, until the stop record or mark. */
void model_apply(model_t *m, const rd_rec_t *rec, int n);

/* The timeline's bucket of time t after a change of the device's figures. */
static inline void tl_note(model_t *m, model_dev_t *d, uint64_t t)
{
    uint64_t idx = t >> m->tl_shift;
    if (__builtin_expect(idx >= MODEL_TL_BUCKETS, 0)) {
        model_tl_widen(m, t);
        idx = t >> m->tl_shift;
    }
    model_bucket_t *b = &d->tl[idx];
    uint64_t a = d->allocated;
    if (__builtin_expect(!b->used, 0)) {
        b->used = 1;
        b->amax = b->amin = a;
        b->rmax = d->reserved;
    } else {
        b->amax = a > b->amax ? a : b->amax;
        b->amin = a < b->amin ? a : b->amin;
        b->rmax = d->reserved > b->rmax ? d->reserved : b->rmax;
    }
    b->alast = a;
    b->rlast = d->reserved;
    b->qlast = d->requested;
    b->segs_last = (uint32_t)(d->segments > UINT32_MAX ? UINT32_MAX : d->segments);
}

static inline __attribute__((always_inline)) void note_peaks(model_dev_t *d, uint64_t t, uint64_t seq)
{
    if (d->requested > d->peak_requested) {
        d->peak_requested = d->requested;
        d->peak_requested_t = t;
    }
    if (d->allocated > d->peak_allocated) {
        d->peak_allocated = d->allocated;
        d->peak_allocated_t = t;
    }
    if (d->segments > d->peak_segments)
        d->peak_segments = d->segments;
    if (d->reserved > d->peak_reserved) {
        d->peak_reserved = d->reserved;
        d->peak_reserved_t = t;
        d->peak_seq = seq;
        d->peak_seq_alloc = d->allocated;
        d->peak_at_cut = 0;
    } else if (d->reserved == d->peak_reserved && d->allocated > d->peak_seq_alloc) {
        d->peak_seq = seq;
        d->peak_seq_alloc = d->allocated;
        d->peak_at_cut = 0;
    }
}

static inline int counts_as_allocated(unsigned kind)
{
    return kind == GMLOG_KIND_POOL || kind == GMLOG_KIND_PASS || kind == GMLOG_KIND_OBSERVED;
}

/* The driver's own allocations (pass-through, or observed by CUPTI in injection mode) are each
 * reserved memory as well: there is no pool between them and the device. */
static inline int counts_as_reserved(unsigned kind)
{
    return kind == GMLOG_KIND_PASS || kind == GMLOG_KIND_OBSERVED;
}

static inline __attribute__((always_inline)) void release_figures(model_dev_t *d, const model_live_t *e)
{
    unsigned kind = model_live_kind(e);
    uint64_t block = model_live_block(e), req = model_live_req(e);
    if (counts_as_allocated(kind)) {
        d->allocated -= block <= d->allocated ? block : d->allocated;
        d->requested -= req <= d->requested ? req : d->requested;
        if (counts_as_reserved(kind))
            d->reserved -= block <= d->reserved ? block : d->reserved;
    }
}

static inline __attribute__((always_inline)) void release_entry(model_t *m, model_dev_t *d, const model_live_t *e)
{
    release_figures(d, e);
    if (__builtin_expect(m->flags & MODEL_DEFER, 0))
        m->release_hook(m->release_arg, m, e); /* e->sidx is the site id: the site threads release it */
    else if (__builtin_expect(e->sidx != 0, 0) && e->sidx < m->nsst)
        model_release_site(m, e->sidx, model_live_block(e), model_live_req(e), m->dev[m->sst[e->sidx].dev]->epoch);
}

/* The device figures, site and epochs of a new live block (the allocation's effect once its
 * record is decoded and its pointer placed); returns the block's site index. */
static inline __attribute__((always_inline)) uint32_t alloc_apply(model_t *m, model_dev_t *d, unsigned dev,
                                                                  unsigned kind, uint64_t block, uint64_t req,
                                                                  uint32_t site, uint64_t t, uint64_t seq)
{
    if (counts_as_allocated(kind)) {
        d->allocated += block;
        d->requested += req;
        if (counts_as_reserved(kind))
            d->reserved += block;
    }
    uint32_t idx = 0;
    if ((m->flags & (MODEL_SITES | MODEL_DEFER)) == MODEL_SITES) {
        idx = sstat_index(m, dev, site);
        if (idx)
            site_add_at(m, idx, block, req, d->epoch);
    }
    if (m->flags & MODEL_EPOCHS)
        dev_track(d, t);
    note_peaks(d, t, seq);
    if (m->flags & MODEL_TIMELINE)
        tl_note(m, d, t);
    return idx;
}

/* A block's end: the figures and its site, then epochs and the timeline. */
static inline __attribute__((always_inline)) void free_apply(model_t *m, model_dev_t *d, const model_live_t *e, uint64_t t)
{
    release_entry(m, d, e);
    if (m->flags & MODEL_EPOCHS)
        dev_track(d, t);
    if (m->flags & MODEL_TIMELINE)
        tl_note(m, d, t);
}

/* The device's counters of an allocation (the decoder's event of it, events.h). */
static inline __attribute__((always_inline)) void alloc_count(model_t *m, model_dev_t *d, const ev_t *ev)
{
    if (ev->kind == GMLOG_KIND_POOL) {
        if (__builtin_expect(ev->malformed, 0))
            m->malformed++;
        if (ev->flags & GMLOG_A_MISS)
            d->misses++;
        else
            d->hits++;
        if (ev->flags & GMLOG_A_GRAPH)
            d->graph_allocs++;
        if (ev->flags & GMLOG_A_PLANNED)
            d->planned_allocs++, d->planned_bytes += ev->req;
        d->pool_alloc_ns += ev->dur_ns;
    } else if (ev->kind == GMLOG_KIND_PASS) {
        d->pass_alloc_ns += ev->dur_ns;
        d->exact_allocs += (ev->flags & GMLOG_A_EXACT) != 0;
    }
    d->allocs_kind[ev->kind]++;
}

/* The live-map entry of a new block (its site index or id set by the caller). */
static inline __attribute__((always_inline)) void live_fill(model_live_t *e, const rd_rec_t *r, const ev_t *ev)
{
    uint64_t tt = r->t >> 8;
    if (tt > MODEL_48)
        tt = MODEL_48;
    e->blk = ev->size | (uint64_t)ev->dev << 48 | (uint64_t)ev->kind << 56 |
             (uint64_t)((ev->flags & GMLOG_A_GRAPH) != 0) << 59;
    e->req = ev->req | (tt >> 32) << 48;
    e->t_lo = (uint32_t)tt;
}

/* A free's counters, by the kind of the block it frees. */
static inline __attribute__((always_inline)) void free_count(model_dev_t *d, unsigned kind, uint32_t dur_ns)
{
    d->frees_kind[kind]++;
    if (kind == GMLOG_KIND_POOL)
        d->pool_free_ns += dur_ns;
    else if (kind == GMLOG_KIND_PASS)
        d->pass_free_ns += dur_ns;
}

/* ---- model_reduce.c: the decoder's events applied (events.h) ---- */
/* A block live at a checkpoint's cut into the live map (the cut's figures count it). */
void model_cut_block(model_t *m, const rd_rec_t *r, const ev_t *ev);
/* One event of the decoder's (an allocation, a free, a segment's, an OOM) through the reducer. */
void model_reduce_event(model_t *m, const rd_rec_t *r, const ev_t *ev);
/* A window met a free of a block from before it (MODEL_RANGE). */
void model_range_unfree(model_t *m, model_dev_t *d, uint64_t ptr, uint64_t t);

/* An allocation's event: its block in the live map, the device's figures, its site. */
static inline __attribute__((always_inline)) void reduce_alloc(model_t *m, const rd_rec_t *r, const ev_t *ev)
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
    steps_note(d, ev->site, ev->req, r->t);
    e->sidx = alloc_apply(m, d, r->device, ev->kind, ev->size, ev->req, ev->site, r->t, r->seq);
}


/* A free's event: the block out of the live map, the figures and its site. */
static inline __attribute__((always_inline)) void reduce_free(model_t *m, const rd_rec_t *r, const ev_t *ev)
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
            model_range_unfree(m, d, ev->ptr, r->t);
        return;
    }
    free_apply(m, d, e, r->t);
    live_remove(&m->live, e);
}


/* ---- model_torch.c: PyTorch's tensors as the allocations ---- */
/* Finds the devices with tensor events and PyTorch's segment bases (a log kept PyTorch's cache). */
void model_torch_scan(model_t *m, rd_log_t *lf);
/* A T_* record on a tensor device. */
void model_torch_step(model_t *m, const rd_rec_t *r);
/* A wrapped log's checkpoint on a tensor device: PyTorch's segments, live tensors and pending
 * frees (T_* state records after a CUT flagged GMLOG_CUT_TORCH); a hook state record that they
 * stand for is dropped. 1 when handled here. */
int model_torch_state(model_t *m, const rd_rec_t *r);

/* ---- model_snap.c: snapshots and OOMs ---- */
/* Live bytes and counts per device and kind, from the live map (they are not kept per event). */
void model_refresh_kinds(model_t *m);
/* The fragmentation samples due by time t. */
void model_take_samples(model_t *m, uint64_t t);
void model_on_oom(model_t *m, const rd_rec_t *r);

/* ---- model_ordered.c: the ordered replay ---- */
#define BATCH 256
#define ARENA (16u << 10)

/* One batch of records (with room to copy a byte-swapped log's). */
typedef struct batch {
    int n;
    rd_rec_t rec[BATCH];
    uint8_t arena[ARENA] __attribute__((aligned(8)));
} batch_t;

/* The next batch of records; 0 at the end. */
int model_fill_batch(rd_log_t *lf, batch_t *b);
/* Replays the records from time `from` on (0: all of them), numbering them from m->records. */
void model_replay_from(model_t *m, uint64_t from);

/* ---- the parallel replays ---- */
/* model_windows.c: the summary's; 1 when it made the model, 0 when it did not apply. */
int model_build_parallel(model_t *m, rd_log_t *lf);
/* A window's counters of allocations and frees, added to the device's. */
void model_add_alloc_counters(model_dev_t *d, const model_dev_t *wd);
/* model_split.c: with call sites and epochs; 0 (did not apply), 1 (made the model) or 2 (the
 * model is made up to time *from: replay in order from there). */
int model_build_parallel_sites(model_t *m, rd_log_t *lf, uint64_t *from, uint64_t *unknown_out);

#endif
