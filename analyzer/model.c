/* Replays a log through a model of gmshim's pool: live blocks in an open-addressing map keyed by
 * pointer, segments per device, counters and peaks, per-site live bytes, epochs (marks, or the
 * troughs of allocated bytes when there are no marks) and a snapshot of each OOM. Every figure
 * comes from the records; nothing here may trust a size, id or count without checking it. */
#include "model.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GOLDEN 0x9E3779B97F4A7C15ull
#define RANGE_BIAS (1ull << 62)
#define MAX_MARKS_KEPT 100000
#define MAX_RETRIES_KEPT 1000
#define MAX_WARNINGS_KEPT 100

/* ---- small helpers -------------------------------------------------------------------------- */

static void *grow_array(void *arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return arr;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need)
        ncap *= 2;
    void *n = realloc(arr, ncap * elem);
    if (!n)
        return NULL;
    memset((char *)n + *cap * elem, 0, (ncap - *cap) * elem);
    *cap = ncap;
    return n;
}


static void die_oom(void)
{
    fputs("gmshim: out of memory\n", stderr);
    exit(1);
}

/* ---- generic map ------------------------------------------------------------------------------ */

static void map_init(model_map_t *mp, size_t cap_pow2)
{
    unsigned bits = 0;
    while (((size_t)1 << bits) < cap_pow2)
        bits++;
    mp->cap = (size_t)1 << bits;
    mp->shift = 64 - bits;
    mp->count = 0;
    mp->keys = calloc(mp->cap, sizeof *mp->keys);
    mp->vals = calloc(mp->cap, sizeof *mp->vals);
    if (!mp->keys || !mp->vals)
        die_oom();
}

static void map_free(model_map_t *mp)
{
    free(mp->keys);
    free(mp->vals);
    memset(mp, 0, sizeof *mp);
}

static inline size_t map_slot(const model_map_t *mp, uint64_t key)
{
    return (size_t)((key * GOLDEN) >> mp->shift);
}

static uint64_t *map_find(const model_map_t *mp, uint64_t key)
{
    if (!mp->cap || !key)
        return NULL;
    for (size_t i = map_slot(mp, key);; i = (i + 1) & (mp->cap - 1)) {
        if (mp->keys[i] == key)
            return &mp->vals[i];
        if (!mp->keys[i])
            return NULL;
    }
}

static void map_put(model_map_t *mp, uint64_t key, uint64_t val);

static void map_grow(model_map_t *mp)
{
    model_map_t n;
    map_init(&n, mp->cap ? mp->cap * 2 : 64);
    for (size_t i = 0; i < mp->cap; i++)
        if (mp->keys[i])
            map_put(&n, mp->keys[i], mp->vals[i]);
    map_free(mp);
    *mp = n;
}

static void map_put(model_map_t *mp, uint64_t key, uint64_t val)
{
    if (!key)
        return;
    if ((mp->count + 1) * 4 > mp->cap * 3)
        map_grow(mp);
    size_t i = map_slot(mp, key);
    while (mp->keys[i] && mp->keys[i] != key)
        i = (i + 1) & (mp->cap - 1);
    if (!mp->keys[i])
        mp->count++;
    mp->keys[i] = key;
    mp->vals[i] = val;
}

/* Deletion with backward shift: no tombstones, so churn never slows lookups. */
static int map_del(model_map_t *mp, uint64_t key, uint64_t *val)
{
    if (!mp->cap || !key)
        return 0;
    size_t mask = mp->cap - 1, i = map_slot(mp, key);
    while (mp->keys[i] != key) {
        if (!mp->keys[i])
            return 0;
        i = (i + 1) & mask;
    }
    if (val)
        *val = mp->vals[i];
    for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        if (!mp->keys[j])
            break;
        size_t home = map_slot(mp, mp->keys[j]);
        /* Move j back to i when its home is not in (i, j]. */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            mp->keys[i] = mp->keys[j];
            mp->vals[i] = mp->vals[j];
            i = j;
        }
    }
    mp->keys[i] = 0;
    mp->count--;
    return 1;
}

/* ---- the live map ------------------------------------------------------------------------------ */

static void live_init(model_livemap_t *lm, size_t cap)
{
    unsigned bits = 0;
    while (((size_t)1 << bits) < cap)
        bits++;
    lm->cap = (size_t)1 << bits;
    lm->shift = 64 - bits;
    lm->count = 0;
    lm->slots = calloc(lm->cap, sizeof *lm->slots);
    if (!lm->slots)
        die_oom();
}

static inline size_t live_slot(const model_livemap_t *lm, uint64_t ptr)
{
    return (size_t)((ptr * GOLDEN) >> lm->shift);
}

static model_live_t *live_find(const model_livemap_t *lm, uint64_t ptr)
{
    for (size_t i = live_slot(lm, ptr);; i = (i + 1) & (lm->cap - 1)) {
        if (lm->slots[i].ptr == ptr)
            return &lm->slots[i];
        if (!lm->slots[i].ptr)
            return NULL;
    }
}

static void live_grow(model_livemap_t *lm)
{
    model_livemap_t n;
    live_init(&n, lm->cap * 2);
    for (size_t i = 0; i < lm->cap; i++) {
        if (!lm->slots[i].ptr)
            continue;
        size_t j = live_slot(&n, lm->slots[i].ptr);
        while (n.slots[j].ptr)
            j = (j + 1) & (n.cap - 1);
        n.slots[j] = lm->slots[i];
        n.count++;
    }
    free(lm->slots);
    *lm = n;
}

/* The slot of ptr, made when absent (*found says which); one probe sequence either way. */
static inline model_live_t *live_upsert(model_livemap_t *lm, uint64_t ptr, int *found)
{
    if (__builtin_expect((lm->count + 1) * 8 > lm->cap * 5, 0))
        live_grow(lm);
    size_t i = live_slot(lm, ptr);
    for (;; i = (i + 1) & (lm->cap - 1)) {
        if (lm->slots[i].ptr == ptr) {
            *found = 1;
            return &lm->slots[i];
        }
        if (!lm->slots[i].ptr)
            break;
    }
    *found = 0;
    lm->count++;
    lm->slots[i].ptr = ptr;
    return &lm->slots[i];
}

/* Deletion with backward shift: no tombstones, so churn never slows lookups. */
static inline __attribute__((always_inline)) void live_remove(model_livemap_t *lm, model_live_t *e)
{
    size_t mask = lm->cap - 1, i = (size_t)(e - lm->slots);
    for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        if (!lm->slots[j].ptr)
            break;
        size_t home = live_slot(lm, lm->slots[j].ptr);
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            lm->slots[i] = lm->slots[j];
            i = j;
        }
    }
    lm->slots[i].ptr = 0;
    lm->count--;
}

/* Live bytes and counts per device and kind, from the live map (they are not kept per event). */
static void refresh_kinds(model_t *m)
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

/* ---- series and epochs ------------------------------------------------------------------------- */

static void series_add(model_series_t *s, uint64_t y, uint32_t times)
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

int model_series_grows(const model_series_t *s, uint64_t *per_epoch)
{
    if (per_epoch)
        *per_epoch = 0;
    if (s->n < 3 || s->last <= s->first)
        return 0;
    uint32_t steps = s->n - 1;
    if (per_epoch)
        *per_epoch = (s->last - s->first) / steps;
    return s->ups * 2 >= steps && s->downs * 4 <= steps;
}

static uint32_t dev_epoch(const model_t *m, const model_dev_t *d, int sys)
{
    (void)m;
    return d->epoch[sys];
}

/* Brings a site's series up to the current epoch, before its live bytes change. Epoch e runs
 * from boundary e to boundary e + 1; epoch 0 (before the first boundary) never counts. */
static void sstat_sync_at(model_sstat_t *s, const uint32_t *epoch)
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

/* The same at the device's current epochs. */
static inline void sstat_sync(model_t *m, model_sstat_t *s)
{
    sstat_sync_at(s, m->dev[s->dev]->epoch);
}

/* Only closed epochs count: the current one is unfinished (and at the end of a run it is where
 * the program frees everything, which says nothing about growth). */
model_series_t model_site_series(const model_t *m, const model_sstat_t *s, int sys)
{
    model_series_t r = s->ser[sys];
    const model_dev_t *d = m->dev[s->dev];
    uint32_t cur = dev_epoch(m, d, sys), acc = s->acc_epoch[sys];
    if (acc >= cur)
        return r;
    if (acc > 0)
        series_add(&r, s->ep_min[sys], 1);
    series_add(&r, s->live_req, cur - acc - 1); /* whole epochs it was not touched in */
    return r;
}

model_series_t model_dev_series(const model_t *m, const model_dev_t *d, int sys)
{
    (void)m;
    return d->lowwater[sys];
}

static void dev_close_epoch(model_dev_t *d, int sys, uint64_t start)
{
    if (d->epoch[sys] > 0)
        series_add(&d->lowwater[sys], d->ep_min[sys], 1);
    d->epoch[sys]++;
    d->epoch_start[sys] = start;
    d->ep_min[sys] = d->allocated;
}

int model_epoch_system(const model_t *m, int dev, unsigned need)
{
    const model_dev_t *d = dev >= 0 && dev < MODEL_MAX_DEVICES ? m->dev[dev] : NULL;
    if (!d)
        return -1;
    if (d->epoch[EPOCH_MARKS] >= need)
        return EPOCH_MARKS;
    if (d->epoch[EPOCH_TROUGHS] >= need)
        return EPOCH_TROUGHS;
    if (d->epoch[EPOCH_MARKS] > 0)
        return EPOCH_MARKS;
    return d->epoch[EPOCH_TROUGHS] > 0 ? EPOCH_TROUGHS : -1;
}

/* After every change of allocated bytes: low-water minimums and trough detection. */
static inline void dev_track(model_dev_t *d, uint64_t t)
{
    uint64_t a = d->allocated;
    if (a < d->ep_min[0])
        d->ep_min[0] = a;
    if (a < d->ep_min[1])
        d->ep_min[1] = a;
    uint64_t thr = d->peak_allocated / 10;
    if (thr < 4096)
        thr = 4096;
    if (d->tr_up) {
        if (a > d->tr_hi) {
            d->tr_hi = a;
        } else if (a + thr <= d->tr_hi) {
            d->tr_up = 0;
            d->tr_lo = a;
            d->tr_lo_t = t;
        }
    } else if (a < d->tr_lo) {
        d->tr_lo = a;
        d->tr_lo_t = t;
    } else if (a >= d->tr_lo + thr) {
        dev_close_epoch(d, EPOCH_TROUGHS, d->tr_lo_t);
        d->tr_up = 1;
        d->tr_hi = a;
    }
}

/* ---- devices ------------------------------------------------------------------------------------ */

static model_dev_t *get_dev(model_t *m, unsigned id)
{
    if (id >= MODEL_MAX_DEVICES)
        return NULL;
    model_dev_t *d = m->dev[id];
    if (d)
        return d;
    d = calloc(1, sizeof *d);
    if (!d)
        die_oom();
    d->tl = calloc(MODEL_TL_BUCKETS, sizeof *d->tl);
    if (!d->tl)
        die_oom();
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
    d->epoch[EPOCH_MARKS] = (uint32_t)(m->marks_total > UINT32_MAX ? UINT32_MAX : m->marks_total);
    if (m->nmarks)
        d->epoch_start[EPOCH_MARKS] = m->marks[m->nmarks - 1].t;
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

static __attribute__((noinline)) void tl_widen(model_t *m, uint64_t t)
{
    while ((t >> m->tl_shift) >= MODEL_TL_BUCKETS)
        tl_coarsen(m);
}

static inline void tl_note(model_t *m, model_dev_t *d, uint64_t t)
{
    uint64_t idx = t >> m->tl_shift;
    if (__builtin_expect(idx >= MODEL_TL_BUCKETS, 0)) {
        tl_widen(m, t);
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

/* ---- sites and strings ------------------------------------------------------------------------- */

/* The statistics of (dev, site), made when new with its epochs starting at `epoch`. */
static uint32_t sstat_index_at(model_t *m, unsigned dev, uint32_t site, const uint32_t *epoch)
{
    uint64_t key = (uint64_t)dev << 32 | site | (1ull << 40);
    uint64_t *c = m->sst_cache[(site ^ site >> 8 ^ dev) & 255];
    if (c[0] == key)
        return (uint32_t)c[1];
    uint64_t *v = map_find(&m->sstmap, key);
    if (v) {
        c[0] = key, c[1] = *v;
        return (uint32_t)*v;
    }
    if (m->nsst >= UINT32_MAX - 1)
        return 0;
    model_sstat_t *n = grow_array(m->sst, &m->capsst, m->nsst + 1, sizeof *n);
    if (!n)
        die_oom();
    m->sst = n;
    uint32_t idx = (uint32_t)m->nsst++;
    model_sstat_t *s = &m->sst[idx];
    memset(s, 0, sizeof *s);
    s->site = site;
    s->dev = (uint8_t)dev;
    for (int sys = 0; sys < 2; sys++)
        s->acc_epoch[sys] = epoch[sys];
    map_put(&m->sstmap, key, idx);
    return idx;
}

static inline uint32_t sstat_index(model_t *m, unsigned dev, uint32_t site)
{
    return sstat_index_at(m, dev, site, m->dev[dev]->epoch);
}

const model_sitedef_t *model_site(const model_t *m, uint32_t id)
{
    uint64_t *v = map_find(&m->sitemap, (uint64_t)id | (1ull << 40));
    return v ? &m->sites[*v] : NULL;
}

const char *model_string(const model_t *m, uint32_t id)
{
    uint64_t *v = map_find(&m->strmap, (uint64_t)id | (1ull << 40));
    return v ? m->strings[*v] : NULL;
}

const model_module_t *model_module(const model_t *m, uint32_t id)
{
    for (size_t i = 0; i < m->nmodules; i++)
        if (m->modules[i].id == id)
            return &m->modules[i];
    return NULL;
}

static void on_site(model_t *m, const rd_rec_t *r)
{
    const uint64_t *native;
    const gmlog_pyframe_t *py;
    unsigned nn, np;
    if (rd_site_frames(r, &native, &nn, &py, &np)) {
        m->malformed++;
        rd_diag(m->lf, r->off, 1, "a site record's %u native and %u Python frames do not fit in its %u bytes",
                ((const gmlog_site_t *)r->p)->native, ((const gmlog_site_t *)r->p)->python, r->len);
        return;
    }
    uint32_t id = ((const gmlog_site_t *)r->p)->id;
    if (model_site(m, id))
        return;
    model_sitedef_t *n = grow_array(m->sites, &m->capsites, m->nsites + 1, sizeof *n);
    if (!n)
        die_oom();
    m->sites = n;
    model_sitedef_t *s = &m->sites[m->nsites];
    s->id = id;
    s->nnative = (uint16_t)nn;
    s->npy = (uint16_t)np;
    s->native = nn ? malloc(nn * sizeof *s->native) : NULL;
    s->py = np ? malloc(np * sizeof *s->py) : NULL;
    if ((nn && !s->native) || (np && !s->py))
        die_oom();
    if (nn)
        memcpy(s->native, native, nn * sizeof *s->native);
    if (np)
        memcpy(s->py, py, np * sizeof *s->py);
    map_put(&m->sitemap, (uint64_t)id | (1ull << 40), m->nsites);
    m->nsites++;
}

static char *dup_bytes(const char *p, size_t n)
{
    char *s = malloc(n + 1);
    if (!s)
        die_oom();
    memcpy(s, p, n);
    s[n] = 0;
    for (size_t i = 0; i < n; i++) /* a label or name is text: control bytes become '?' */
        if ((unsigned char)s[i] < 0x20 && s[i] != '\t')
            s[i] = '?';
    return s;
}

static void on_string(model_t *m, const rd_rec_t *r)
{
    const gmlog_string_t *s = (const gmlog_string_t *)r->p;
    const char *bytes;
    if (rd_tail_bytes(r, sizeof *s, s->len, &bytes)) {
        m->malformed++;
        rd_diag(m->lf, r->off, 1, "a string record of %u bytes does not fit in its %u bytes", s->len, r->len);
        return;
    }
    if (model_string(m, s->id))
        return;
    char **n = grow_array(m->strings, &m->capstrings, m->nstrings + 1, sizeof *n);
    if (!n)
        die_oom();
    m->strings = n;
    m->strings[m->nstrings] = dup_bytes(bytes, s->len);
    map_put(&m->strmap, (uint64_t)s->id | (1ull << 40), m->nstrings);
    m->nstrings++;
}

static void on_module(model_t *m, const rd_rec_t *r)
{
    const gmlog_module_t *mo = (const gmlog_module_t *)r->p;
    const char *bytes;
    if (rd_tail_bytes(r, sizeof *mo, (size_t)mo->build_id_len + mo->path_len, &bytes)) {
        m->malformed++;
        rd_diag(m->lf, r->off, 1, "a module record's build id and path do not fit in its %u bytes", r->len);
        return;
    }
    if (model_module(m, mo->id))
        return;
    model_module_t *n = grow_array(m->modules, &m->capmodules, m->nmodules + 1, sizeof *n);
    if (!n)
        die_oom();
    m->modules = n;
    model_module_t *x = &m->modules[m->nmodules++];
    x->id = mo->id;
    x->base = mo->base;
    x->start = mo->start;
    x->end = mo->end;
    x->build_id_len = mo->build_id_len > sizeof x->build_id ? sizeof x->build_id : mo->build_id_len;
    memcpy(x->build_id, bytes, x->build_id_len);
    x->path = dup_bytes(bytes + mo->build_id_len, mo->path_len);
}

/* ---- allocations ------------------------------------------------------------------------------- */

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

static __attribute__((noinline)) void release_site_at(model_t *m, uint32_t sidx, uint64_t block, uint64_t req,
                                                     const uint32_t *epoch)
{
    model_sstat_t *s = &m->sst[sidx];
    sstat_sync_at(s, epoch);
    s->live_req -= req <= s->live_req ? req : s->live_req;
    s->live_blk -= block <= s->live_blk ? block : s->live_blk;
    if (s->live_count)
        s->live_count--;
    for (int sys = 0; sys < 2; sys++)
        if (s->live_req < s->ep_min[sys])
            s->ep_min[sys] = s->live_req;
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

static void split_defer_release(model_t *m, const model_live_t *e);

static inline __attribute__((always_inline)) void release_entry(model_t *m, model_dev_t *d, const model_live_t *e)
{
    release_figures(d, e);
    if (__builtin_expect(m->flags & MODEL_DEFER, 0))
        split_defer_release(m, e); /* e->sidx is the site id: the site threads release it */
    else if (__builtin_expect(e->sidx != 0, 0) && e->sidx < m->nsst)
        release_site_at(m, e->sidx, model_live_block(e), model_live_req(e), m->dev[m->sst[e->sidx].dev]->epoch);
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

/* The device figures, site and epochs of a new live block (the allocation's effect once its
 * record is decoded and its pointer placed); returns the block's site index. */
static inline __attribute__((always_inline)) uint32_t alloc_apply(model_t *m, model_dev_t *d, unsigned dev, unsigned kind, uint64_t block,
                                   uint64_t req, uint32_t site, uint64_t t, uint64_t seq)
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

/* An allocation record's kind, bytes requested and block, and the device's counters of it. */
static inline __attribute__((always_inline)) void alloc_decode(model_t *m, const rd_rec_t *r, model_dev_t *d,
                                                               unsigned *kindp, uint64_t *reqp, uint64_t *blockp)
{
    const gmlog_alloc_t *a = (const gmlog_alloc_t *)r->p;
    unsigned kind = (r->flags & GMLOG_KIND_MASK) >> GMLOG_KIND_SHIFT;
    uint64_t req = a->size & GMLOG_SIZE_MASK, extra = a->size >> GMLOG_SIZE_BITS;
    uint64_t block = req;
    if (kind == GMLOG_KIND_POOL) {
        uint64_t rounded = ((req ? req : 1) + 511) & ~511ull;
        if (__builtin_expect(extra == 0xffff, 0)) {
            if (r->len >= 40) {
                block = a->block;
            } else {
                m->malformed++;
                block = rounded;
            }
        } else {
            block = rounded + extra * 512;
        }
        if (__builtin_expect(block & ~GMLOG_SIZE_MASK, 0)) /* more than 256 TiB: not a real block */
            block = rounded;
        if (r->flags & GMLOG_A_MISS)
            d->misses++;
        else
            d->hits++;
        if (r->flags & GMLOG_A_GRAPH)
            d->graph_allocs++;
        d->pool_alloc_ns += a->dur_ns;
    } else if (kind == GMLOG_KIND_PASS) {
        d->pass_alloc_ns += a->dur_ns;
    }
    d->allocs_kind[kind]++;
    *kindp = kind, *reqp = req, *blockp = block;
}

/* The live-map entry of a new block (its site index or id set by the caller). */
static inline __attribute__((always_inline)) void live_fill(model_live_t *e, const rd_rec_t *r, unsigned kind,
                                                            uint64_t block, uint64_t req)
{
    uint64_t tt = r->t >> 8;
    if (tt > MODEL_48)
        tt = MODEL_48;
    e->blk = block | (uint64_t)r->device << 48 | (uint64_t)kind << 56 | (uint64_t)((r->flags & GMLOG_A_GRAPH) != 0) << 59;
    e->req = req | (tt >> 32) << 48;
    e->t_lo = (uint32_t)tt;
}

static inline __attribute__((always_inline)) void on_alloc(model_t *m, const rd_rec_t *r)
{
    const gmlog_alloc_t *a = (const gmlog_alloc_t *)r->p;
    model_dev_t *d = m->dev[r->device];
    if (__builtin_expect(!d, 0))
        d = get_dev(m, r->device);
    if (__builtin_expect(!d || !a->ptr, 0)) {
        m->malformed++;
        return;
    }
    unsigned kind;
    uint64_t req, block;
    alloc_decode(m, r, d, &kind, &req, &block);
    int found;
    model_live_t *e = live_upsert(&m->live, a->ptr, &found);
    if (__builtin_expect(found, 0)) {
        /* The pointer is live already: its free was lost. Forget the old block. */
        d->replaced++;
        model_dev_t *od = m->dev[model_live_dev(e)] ? m->dev[model_live_dev(e)] : d;
        release_entry(m, od, e);
    }
    live_fill(e, r, kind, block, req);
    e->sidx = alloc_apply(m, d, r->device, kind, block, req, a->site, r->t, r->seq);
}

/* A window met a free of a block from before it: its size is known only to the stitch. Close
 * the device's run of maxima here and start the next one from the current figures. */
static __attribute__((noinline)) void range_unfree(model_t *m, model_dev_t *d, uint64_t ptr, uint64_t t)
{
    model_unfree_t *n = grow_array(m->unfree, &m->capunfree, m->nunfree + 1, sizeof *n);
    if (!n)
        die_oom();
    m->unfree = n;
    m->unfree[m->nunfree++] = (model_unfree_t){ptr, (uint8_t)d->id, d->peak_requested, d->peak_allocated,
                                               d->peak_reserved, d->peak_segments, d->peak_requested_t,
                                               d->peak_allocated_t, d->peak_reserved_t};
    d->peak_requested = d->requested, d->peak_requested_t = t;
    d->peak_allocated = d->allocated, d->peak_allocated_t = t;
    d->peak_reserved = d->reserved, d->peak_reserved_t = t;
    d->peak_segments = d->segments;
}

/* A free's counters, by the kind of the block it frees. */
static inline __attribute__((always_inline)) void free_count(model_dev_t *d, unsigned kind, const gmlog_free_t *f)
{
    d->frees_kind[kind]++;
    if (kind == GMLOG_KIND_POOL)
        d->pool_free_ns += f->dur_ns;
    else if (kind == GMLOG_KIND_PASS)
        d->pass_free_ns += f->dur_ns;
}

static inline __attribute__((always_inline)) void on_free(model_t *m, const rd_rec_t *r)
{
    const gmlog_free_t *f = (const gmlog_free_t *)r->p;
    model_live_t *e = f->ptr ? live_find(&m->live, f->ptr) : NULL;
    unsigned dev = e ? model_live_dev(e) : r->device;
    model_dev_t *d = dev < MODEL_MAX_DEVICES ? m->dev[dev] : NULL;
    if (__builtin_expect(!d, 0))
        d = get_dev(m, dev);
    if (__builtin_expect(!d, 0)) {
        m->malformed++;
        return;
    }
    free_count(d, e ? model_live_kind(e) : (r->flags & GMLOG_KIND_MASK) >> GMLOG_KIND_SHIFT, f);
    if (__builtin_expect(!e, 0)) {
        d->unmatched_frees++;
        if (m->flags & MODEL_RANGE)
            range_unfree(m, d, f->ptr, r->t);
        return;
    }
    free_apply(m, d, e, r->t);
    live_remove(&m->live, e);
}

static void on_segment(model_t *m, const rd_rec_t *r)
{
    const gmlog_segment_t *s = (const gmlog_segment_t *)r->p;
    model_dev_t *d = get_dev(m, r->device);
    if (!d || !s->base) {
        m->malformed++;
        return;
    }
    if (r->type == GMLOG_SEGMENT_ALLOC) {
        d->seg_allocs++;
        d->seg_alloc_ns += s->dur_ns;
        if (s->graph)
            d->graph_segments++;
        uint64_t *old = map_find(&d->segmap, s->base);
        if (old) { /* its free was lost */
            d->reserved -= *old <= d->reserved ? *old : d->reserved;
            d->segments--;
        }
        map_put(&d->segmap, s->base, s->size);
        d->reserved += s->size;
        d->segments++;
        note_peaks(d, r->t, r->seq);
    } else {
        d->seg_frees++;
        d->seg_free_ns += s->dur_ns;
        uint64_t size;
        if (map_del(&d->segmap, s->base, &size)) {
            d->reserved -= size <= d->reserved ? size : d->reserved;
            d->segments--;
        } else if (m->flags & MODEL_RANGE) {
            d->reserved -= s->size; /* a segment of an earlier window: the record has its size */
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
    model_dev_t *d = get_dev(m, r->device);
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

/* ---- snapshots --------------------------------------------------------------------------------- */

typedef struct span {
    uint64_t start, size;
} span_t;

static int by_start(const void *a, const void *b)
{
    const span_t *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
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
    size_t nseg = d->segmap.count, nblk = m->live.count;
    span_t *segs = malloc((nseg ? nseg : 1) * sizeof *segs);
    span_t *blks = malloc((nblk ? nblk : 1) * sizeof *blks);
    if (!segs || !blks)
        die_oom();
    size_t ns = 0, nb = 0;
    for (size_t i = 0; i < d->segmap.cap && ns < nseg; i++)
        if (d->segmap.keys[i])
            segs[ns++] = (span_t){d->segmap.keys[i], d->segmap.vals[i]};
    uint64_t internal = 0;
    for (size_t i = 0; i < m->live.cap && nb < nblk; i++) {
        const model_live_t *e = &m->live.slots[i];
        if (e->ptr && model_live_dev(e) == (unsigned)dev && model_live_kind(e) == GMLOG_KIND_POOL) {
            uint64_t block = model_live_block(e), req = model_live_req(e);
            blks[nb++] = (span_t){e->ptr, block};
            internal += block > req ? block - req : 0;
        }
    }
    qsort(segs, ns, sizeof *segs, by_start);
    qsort(blks, nb, sizeof *blks, by_start);
    out->internal = internal;
    size_t bi = 0;
    for (size_t si = 0; si < ns; si++) {
        uint64_t at = segs[si].start, end = segs[si].start + segs[si].size;
        if (end < at) /* wraps: garbage */
            end = UINT64_MAX;
        while (bi < nb && blks[bi].start < segs[si].start) {
            out->stray_blocks++;
            bi++;
        }
        if (bi >= nb || blks[bi].start >= end) { /* wholly free: cached, not fragmented */
            out->cached_whole += end - at;
            out->cached_segments++;
            if (end - at > out->largest_free)
                out->largest_free = end - at;
            continue;
        }
        while (bi < nb && blks[bi].start < end) {
            if (blks[bi].start > at) {
                uint64_t gap = blks[bi].start - at;
                out->external += gap;
                out->free_gaps++;
                if (gap > out->largest_free)
                    out->largest_free = gap;
            }
            uint64_t bend = blks[bi].start + blks[bi].size;
            if (bend > at)
                at = bend < end ? bend : end;
            bi++;
        }
        if (end > at) {
            uint64_t gap = end - at;
            out->external += gap;
            out->free_gaps++;
            if (gap > out->largest_free)
                out->largest_free = gap;
        }
    }
    out->stray_blocks += nb - bi;
    free(segs);
    free(blks);
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
    o->device_total = d->total;
    o->allocated = d->allocated;
    o->requested = d->requested;
    o->reserved = d->reserved;
    refresh_kinds(m);
    for (unsigned k = 0; k < 8; k++)
        if (!counts_as_allocated(k) && k != GMLOG_KIND_HOST)
            o->unpooled_live += d->live_kind_bytes[k];
    o->epoch_system = model_epoch_system(m, d->id, 1);
    if (o->epoch_system >= 0) {
        o->epoch_index = d->epoch[o->epoch_system];
        o->epoch_start = d->epoch_start[o->epoch_system];
        if (o->epoch_system == EPOCH_MARKS && m->nmarks && m->marks[m->nmarks - 1].label)
            o->epoch_label = strdup(m->marks[m->nmarks - 1].label);
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
}

static void on_oom(model_t *m, const rd_rec_t *r)
{
    model_dev_t *d = get_dev(m, r->device);
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
            model_retry_t *n = grow_array(m->retries, &m->capretries, m->nretries + 1, sizeof *n);
            if (!n)
                die_oom();
            m->retries = n;
            m->retries[m->nretries++] = (model_retry_t){r->t, rec->request, r->device, r->flags};
        }
        return;
    }
    d->ooms++;
    m->ooms_total++;
    if (m->nooms >= MODEL_MAX_OOMS || (m->flags & MODEL_RANGE))
        return;
    model_oom_t *n = grow_array(m->ooms, &m->capooms, m->nooms + 1, sizeof *n);
    if (!n)
        die_oom();
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
        o->device_total = d->total;
    } else {
        analyse_oom(m, d, o);
    }
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
    m->marks_total++;
    if (m->nmarks < MAX_MARKS_KEPT) {
        model_mark_t *n = grow_array(m->marks, &m->capmarks, m->nmarks + 1, sizeof *n);
        if (!n)
            die_oom();
        m->marks = n;
        m->marks[m->nmarks++] = (model_mark_t){mk->id, r->t, dup_bytes(label, len)};
    }
    if (r->ckpt)
        return; /* before a wrapped log's checkpoint: no figures of then to close an epoch with */
    for (int i = 0; i < m->ndev; i++)
        if (m->dev[i])
            dev_close_epoch(m->dev[i], EPOCH_MARKS, r->t);
    if ((m->stop_mark_id && (int64_t)mk->id == m->stop_mark_id) ||
        (m->stop_mark_label && len == strlen(m->stop_mark_label) && !memcmp(label, m->stop_mark_label, len)))
        m->stopped = 1;
}

static void on_device(model_t *m, const rd_rec_t *r)
{
    const gmlog_device_t *dv = (const gmlog_device_t *)r->p;
    model_dev_t *d = get_dev(m, r->device);
    if (!d)
        return;
    d->total = dv->total;
    d->free_at_start = dv->free_at_start;
    const char *name;
    size_t len = dv->name_len < sizeof d->name ? dv->name_len : sizeof d->name - 1;
    if (rd_tail_bytes(r, sizeof *dv, len, &name) == 0) {
        char *s = dup_bytes(name, len);
        snprintf(d->name, sizeof d->name, "%s", s);
        free(s);
    }
}

static void on_warning(model_t *m, const rd_rec_t *r)
{
    const gmlog_warning_t *w = (const gmlog_warning_t *)r->p;
    m->warns_total++;
    model_dev_t *d = r->device != GMLOG_NO_DEVICE ? get_dev(m, r->device) : NULL;
    if (d)
        d->warnings[r->flags & 7]++;
    if (m->nwarns < MAX_WARNINGS_KEPT) {
        if (!m->warns) {
            m->warns = calloc(MAX_WARNINGS_KEPT, sizeof *m->warns);
            if (!m->warns)
                die_oom();
        }
        m->warns[m->nwarns++] = (model_warning_t){r->t, w->ptr, w->site, w->aux, r->device, r->flags};
    }
}

static void take_samples(model_t *m, uint64_t t)
{
    while (m->next_sample < MODEL_FRAG_SAMPLES && t >= m->sample_t[m->next_sample]) {
        for (int i = 0; i < m->ndev; i++) {
            if (!m->dev[i])
                continue;
            model_frag_t *n = grow_array(m->fsnap, &m->capfsnap, m->nfsnap + 1, sizeof *n);
            if (!n)
                die_oom();
            m->fsnap = n;
            model_frag_now(m, i, &m->fsnap[m->nfsnap]);
            m->fsnap[m->nfsnap].t = m->sample_t[m->next_sample];
            m->nfsnap++;
        }
        m->next_sample++;
    }
}

/* ---- the replay loop -------------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void on_limit(model_t *m, const rd_rec_t *r)
{
    model_dev_t *d = get_dev(m, r->device);
    if (d) {
        d->limit = ((const gmlog_limit_t *)r->p)->bytes;
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

static void on_cut(model_t *m, const rd_rec_t *r)
{
    const gmlog_cut_t *c = (const gmlog_cut_t *)r->p;
    model_dev_t *d = get_dev(m, r->device);
    if (!d) {
        m->malformed++;
        return;
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
    d->hits = c->hits;
    d->misses = c->misses;
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
static void on_cut_block(model_t *m, const rd_rec_t *r)
{
    const gmlog_alloc_t *a = (const gmlog_alloc_t *)r->p;
    model_dev_t *d = get_dev(m, r->device);
    if (!d || !a->ptr) {
        m->malformed++;
        return;
    }
    /* The cut's counts stand for its allocation: decode it without counting it again. */
    uint64_t hits = d->hits, misses = d->misses, graph = d->graph_allocs, pns = d->pool_alloc_ns;
    uint64_t qns = d->pass_alloc_ns, kinds[8];
    memcpy(kinds, d->allocs_kind, sizeof kinds);
    unsigned kind;
    uint64_t req, block;
    alloc_decode(m, r, d, &kind, &req, &block);
    d->hits = hits, d->misses = misses, d->graph_allocs = graph, d->pool_alloc_ns = pns, d->pass_alloc_ns = qns;
    memcpy(d->allocs_kind, kinds, sizeof kinds);
    int found;
    model_live_t *e = live_upsert(&m->live, a->ptr, &found);
    if (found) {
        d->replaced++;
        model_dev_t *od = m->dev[model_live_dev(e)] ? m->dev[model_live_dev(e)] : d;
        release_entry(m, od, e);
    }
    live_fill(e, r, kind, block, req);
    e->blk |= MODEL_LIVE_CUT;
    e->sidx = 0;
    if ((m->flags & (MODEL_SITES | MODEL_DEFER)) == MODEL_SITES) {
        e->sidx = sstat_index(m, r->device, a->site);
        if (e->sidx)
            site_add_at(m, e->sidx, block, req, d->epoch);
    }
    if (d->peak_at_cut)
        d->peak_seq = r->seq; /* the state at the peak: the cut's, once its blocks are in */
}

static void on_cut_segment(model_t *m, const rd_rec_t *r)
{
    const gmlog_segment_t *s = (const gmlog_segment_t *)r->p;
    model_dev_t *d = get_dev(m, r->device);
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
        take_samples(m, r->t);
    if (r->ckpt == RD_CKPT_STATE) {
        m->last_t = r->t;
        if (r->type == GMLOG_CUT)
            on_cut(m, r);
        else if (r->type == GMLOG_ALLOC)
            on_cut_block(m, r);
        else if (r->type == GMLOG_SEGMENT_ALLOC)
            on_cut_segment(m, r);
        return;
    }
    switch (r->type) {
    case GMLOG_SITE: on_site(m, r); break;
    case GMLOG_STRING: on_string(m, r); break;
    case GMLOG_MODULE: on_module(m, r); break;
    case GMLOG_DEVICE: on_device(m, r); break;
    case GMLOG_LIMIT: on_limit(m, r); break;
    case GMLOG_MARK: on_mark(m, r); break;
    case GMLOG_OOM: on_oom(m, r); break;
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
        take_samples(m, r->t);
    switch (r->type) {
    case GMLOG_ALLOC: on_alloc(m, r); break;
    case GMLOG_FREE: on_free(m, r); break;
    case GMLOG_SEGMENT_ALLOC:
    case GMLOG_SEGMENT_FREE: on_segment(m, r); break;
    case GMLOG_FENCE: {
        model_dev_t *d = get_dev(m, r->device);
        if (d)
            d->fences++;
        break;
    }
    case GMLOG_FENCE_WAIT: {
        model_dev_t *d = get_dev(m, r->device);
        if (d) {
            d->fence_waits++;
            d->fence_wait_ns += ((const gmlog_fence_wait_t *)r->p)->dur_ns;
        }
        break;
    }
    case GMLOG_EMPTY_CACHE: {
        model_dev_t *d = get_dev(m, r->device);
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
    case GMLOG_OOM: on_oom(m, r); break;
    case GMLOG_MARK: on_mark(m, r); break;
    case GMLOG_MODULE: on_module(m, r); break;
    case GMLOG_SITE: on_site(m, r); break;
    case GMLOG_STRING: on_string(m, r); break;
    case GMLOG_WARNING: on_warning(m, r); break;
    case GMLOG_DEVICE: on_device(m, r); break;
    case GMLOG_END:
        m->end_seen = 1;
        m->end_reason = ((const gmlog_end_t *)r->p)->reason;
        m->end_t = r->t;
        break;
    case GMLOG_CAPTURE: {
        model_dev_t *d = get_dev(m, r->device);
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

#define BATCH 256
#define ARENA (16u << 10)

/* One batch of records (with room to copy a byte-swapped log's). */
typedef struct batch {
    int n;
    rd_rec_t rec[BATCH];
    uint8_t arena[ARENA] __attribute__((aligned(8)));
} batch_t;

/* A batch of records. A native-order log's records are used in place (the reader keeps each
 * thread's previous chunk, and the batch ends at the first buffer switch); a byte-swapped
 * log's are copied, since each lives in one buffer until the next call. */
static int fill_batch(rd_log_t *lf, batch_t *b)
{
    int n = 0;
    if (!lf->swapped) {
        uint64_t refills = lf->refills;
        while (n < BATCH && rd_next(lf, &b->rec[n])) {
            n++;
            if (lf->refills != refills)
                break;
        }
        return b->n = n;
    }
    size_t used = 0;
    while (n < BATCH && used + 256 * 8 <= ARENA && rd_next(lf, &b->rec[n])) {
        memcpy(b->arena + used, b->rec[n].p, b->rec[n].len);
        b->rec[n].p = b->arena + used;
        used += b->rec[n].len;
        n++;
    }
    return b->n = n;
}

static void show_progress(model_t *m, int n, double *last, int *shown)
{
    if (!m->progress || (m->records & ~(uint64_t)0xfffff) == ((m->records - (uint64_t)n) & ~(uint64_t)0xfffff))
        return;
    double now = now_s();
    if (now - *last > 0.25) {
        fprintf(stderr, "\rgmshim: reading %s: %3.0f%%", m->lf->name, 100.0 * rd_progress(m->lf));
        *last = now;
        *shown = 1;
    }
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

/* Applies a batch, prefetching the live-map slot of the record AHEAD places on. */
static void apply_batch(model_t *m, const batch_t *b)
{
    int n = b->n;
    for (int i = 0; i < AHEAD && i < n; i++)
        prefetch_slot(m, &b->rec[i]);
    for (int i = 0; i < n && !m->stopped; i++) {
        if (i + AHEAD < n)
            prefetch_slot(m, &b->rec[i + AHEAD]);
        if (b->rec[i].seq >= m->stop_seq) {
            m->stopped = 1;
            break;
        }
        step(m, &b->rec[i]);
    }
}

/* Replays the records from time `from` on (0: all of them), numbering them from m->records. */
static void replay_from(model_t *m, uint64_t from)
{
    rd_log_t *lf = m->lf;
    double last_progress = now_s();
    int shown = 0;
    if (from)
        rd_window(lf, from, UINT64_MAX);
    rd_rewind(lf);
    lf->seq = m->records;
    /* One thread: a second one reading ahead measured slower here, the batches' bytes crossing
     * between cores costing more than the reading they save. */
    batch_t *b = malloc(sizeof *b);
    if (!b)
        die_oom();
    while (!m->stopped && fill_batch(lf, b)) {
        apply_batch(m, b);
        show_progress(m, b->n, &last_progress, &shown);
    }
    free(b);
    if (shown)
        fprintf(stderr, "\r\033[K");
    if (from)
        rd_window(lf, 0, UINT64_MAX); /* later passes read the whole log again */
}

static void replay(model_t *m)
{
    replay_from(m, 0);
}

static void model_init(model_t *m, rd_log_t *lf, unsigned flags, uint64_t stop_seq, int mark_id,
                       const char *mark_label)
{
    int progress = m->progress;
    memset(m, 0, sizeof *m);
    m->progress = progress;
    m->lf = lf;
    m->flags = flags;
    m->stop_seq = stop_seq;
    m->stop_mark_id = mark_id;
    m->stop_mark_label = mark_label;
    m->tl_shift = 16;
    m->nsst = 1; /* index 0 means "no site statistics" */
    m->capsst = 1024;
    m->sst = calloc(m->capsst, sizeof *m->sst);
    if (!m->sst)
        die_oom();
    live_init(&m->live, 1024);
    map_init(&m->sstmap, 1024);
    map_init(&m->sitemap, 256);
    map_init(&m->strmap, 256);
    uint64_t span = lf->t_last > lf->t_first ? lf->t_last - lf->t_first : 0;
    for (unsigned i = 0; i < MODEL_FRAG_SAMPLES; i++)
        m->sample_t[i] = lf->t_first + span * (i + 1) / MODEL_FRAG_SAMPLES;
}

static void model_finish(model_t *m)
{
    refresh_kinds(m);
    for (int i = 0; i < m->ndev; i++) {
        model_dev_t *d = m->dev[i];
        if (!d)
            continue;
        d->allocs = d->cut_allocs, d->frees = d->cut_frees; /* a wrapped log's: from its checkpoint */
        for (int k = 0; k < 8; k++)
            d->allocs += d->allocs_kind[k], d->frees += d->frees_kind[k];
    }
}

/* ---- the parallel summary ----------------------------------------------------------------------
 * The summary needs no sites, marks or snapshots: its figures are sums, and peaks of sums over
 * time. So the log is cut into windows of time, each replayed by its own thread with its own
 * reader (RANGE mode: figures counted from a bias), and the windows are then stitched in order:
 * frees of blocks from earlier windows get their sizes from the live blocks carried over, and
 * each run of maxima between such frees is shifted by what the window started from. The result
 * is the sequential replay's, figure for figure (the tests compare them). */

#define MAX_WORKERS 16

typedef struct worker {
    rd_log_t lf;
    model_t m;
    uint64_t begin, end;
    int opened;
    int finished;
} worker_t;

static void *work(void *arg)
{
    worker_t *w = arg;
    rd_window(&w->lf, w->begin, w->end);
    model_init(&w->m, &w->lf, MODEL_RANGE, UINT64_MAX, 0, NULL);
    replay(&w->m);
    __atomic_store_n(&w->finished, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Waits for the workers, showing their progress when asked to. */
static void wait_workers(const model_t *m, worker_t *w, unsigned n)
{
    int shown = 0;
    for (;;) {
        unsigned done = 0;
        uint64_t chunks = 0;
        for (unsigned k = 0; k < n; k++) {
            done += __atomic_load_n(&w[k].finished, __ATOMIC_ACQUIRE);
            chunks += __atomic_load_n(&w[k].lf.chunks_done, __ATOMIC_RELAXED);
        }
        if (done == n)
            break;
        if (m->progress) {
            fprintf(stderr, "\rgmshim: reading %s: %3.0f%%", m->lf->name,
                    m->lf->nchunks ? 100.0 * (double)chunks / (double)m->lf->nchunks : 100.0);
            shown = 1;
        }
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (shown)
        fprintf(stderr, "\r\033[K");
}

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static unsigned workers_wanted(const rd_log_t *lf)
{
    const char *env = getenv("GMSHIM_ANALYZER_THREADS");
    long n = env && *env ? strtol(env, NULL, 10) : -1;
    if (n >= 0)
        return n > MAX_WORKERS ? MAX_WORKERS : (unsigned)n;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (lf->size < (64u << 20) || cpus < 2)
        return 0;
    return cpus > 8 ? 8 : (unsigned)cpus;
}

static inline void candidate(uint64_t *peak, uint64_t *peak_t, uint64_t base, uint64_t max, uint64_t removed, uint64_t t)
{
    int64_t v = (int64_t)base + (int64_t)(max - RANGE_BIAS) - (int64_t)removed;
    if (v > (int64_t)*peak) {
        *peak = (uint64_t)v;
        if (peak_t)
            *peak_t = t;
    }
}

/* A window's counters of allocations and frees, added to the device's. */
static void add_alloc_counters(model_dev_t *d, const model_dev_t *wd)
{
    for (int k = 0; k < 8; k++)
        d->allocs_kind[k] += wd->allocs_kind[k], d->frees_kind[k] += wd->frees_kind[k];
    d->hits += wd->hits, d->misses += wd->misses, d->graph_allocs += wd->graph_allocs;
    d->pool_alloc_ns += wd->pool_alloc_ns, d->pool_free_ns += wd->pool_free_ns;
    d->pass_alloc_ns += wd->pass_alloc_ns, d->pass_free_ns += wd->pass_free_ns;
}

/* Adds window w (the next in time) to the result m. */
static void stitch(model_t *m, model_t *w)
{
    uint64_t base[MODEL_MAX_DEVICES][4], removed[MODEL_MAX_DEVICES][3];
    memset(removed, 0, sizeof removed);
    for (int i = 0; i < w->ndev; i++) {
        model_dev_t *wd = w->dev[i];
        if (!wd)
            continue;
        model_dev_t *d = get_dev(m, (unsigned)i);
        base[i][0] = d->requested, base[i][1] = d->allocated, base[i][2] = d->reserved, base[i][3] = d->segments;
        if (wd->total || wd->name[0]) {
            d->total = wd->total, d->free_at_start = wd->free_at_start;
            memcpy(d->name, wd->name, sizeof d->name);
        }
        if (wd->limit_seen)
            d->limit = wd->limit;
        if (wd->limit_max > d->limit_max)
            d->limit_max = wd->limit_max;
        add_alloc_counters(d, wd);
        for (int k = 0; k < 8; k++) {
            d->empty_by_reason[k] += wd->empty_by_reason[k];
            d->warnings[k] += wd->warnings[k];
        }
        d->seg_allocs += wd->seg_allocs, d->seg_frees += wd->seg_frees;
        d->seg_alloc_ns += wd->seg_alloc_ns, d->seg_free_ns += wd->seg_free_ns;
        d->graph_segments += wd->graph_segments;
        d->fences += wd->fences, d->fence_waits += wd->fence_waits, d->fence_wait_ns += wd->fence_wait_ns;
        d->empty_caches += wd->empty_caches, d->empty_bytes += wd->empty_bytes;
        d->empty_segments += wd->empty_segments;
        d->ooms += wd->ooms, d->retries += wd->retries;
        d->unmatched_frees += wd->unmatched_frees, d->replaced += wd->replaced;
        d->captures += wd->captures, d->bad_segment_frees += wd->bad_segment_frees;
    }
    for (size_t u = 0; u < w->nunfree; u++) {
        const model_unfree_t *x = &w->unfree[u];
        unsigned dv = x->dev;
        model_dev_t *d = m->dev[dv];
        candidate(&d->peak_requested, &d->peak_requested_t, base[dv][0], x->max_req, removed[dv][0], x->t_req);
        candidate(&d->peak_allocated, &d->peak_allocated_t, base[dv][1], x->max_alloc, removed[dv][1], x->t_alloc);
        candidate(&d->peak_reserved, &d->peak_reserved_t, base[dv][2], x->max_res, removed[dv][2], x->t_res);
        candidate(&d->peak_segments, NULL, base[dv][3], x->max_segs, 0, 0);
        model_live_t *e = live_find(&m->live, x->ptr);
        if (!e)
            continue; /* freed without ever being allocated in the log: stays unmatched */
        unsigned kind = model_live_kind(e);
        if (counts_as_allocated(kind)) {
            removed[dv][0] += model_live_req(e);
            removed[dv][1] += model_live_block(e);
            if (counts_as_reserved(kind))
                removed[dv][2] += model_live_block(e);
        }
        d->unmatched_frees--;
        live_remove(&m->live, e);
    }
    for (int i = 0; i < w->ndev; i++) {
        model_dev_t *wd = w->dev[i], *d = m->dev[i];
        if (!wd)
            continue;
        candidate(&d->peak_requested, &d->peak_requested_t, base[i][0], wd->peak_requested, removed[i][0], wd->peak_requested_t);
        candidate(&d->peak_allocated, &d->peak_allocated_t, base[i][1], wd->peak_allocated, removed[i][1], wd->peak_allocated_t);
        candidate(&d->peak_reserved, &d->peak_reserved_t, base[i][2], wd->peak_reserved, removed[i][2], wd->peak_reserved_t);
        candidate(&d->peak_segments, NULL, base[i][3], wd->peak_segments, 0, 0);
        d->requested = (uint64_t)((int64_t)base[i][0] + (int64_t)(wd->requested - RANGE_BIAS) - (int64_t)removed[i][0]);
        d->allocated = (uint64_t)((int64_t)base[i][1] + (int64_t)(wd->allocated - RANGE_BIAS) - (int64_t)removed[i][1]);
        d->reserved = (uint64_t)((int64_t)base[i][2] + (int64_t)(wd->reserved - RANGE_BIAS) - (int64_t)removed[i][2]);
        d->segments = (uint64_t)((int64_t)base[i][3] + (int64_t)(wd->segments - RANGE_BIAS));
    }
    /* The window's live blocks join the carried ones (their bytes are in the figures already). */
    for (size_t i = 0; i < w->live.cap; i++) {
        const model_live_t *e = &w->live.slots[i];
        if (!e->ptr)
            continue;
        int found;
        model_live_t *x = live_upsert(&m->live, e->ptr, &found);
        if (found) { /* a free lost between windows: the older block goes */
            model_dev_t *d = m->dev[model_live_dev(x)];
            if (d) {
                d->replaced++;
                release_entry(m, d, x);
            }
        }
        *x = *e;
        x->sidx = 0;
    }
    m->records += w->records;
    m->malformed += w->malformed;
    for (int k = 0; k <= GMLOG_TYPE_MAX; k++)
        m->by_type[k] += w->by_type[k];
    if (w->last_t > m->last_t)
        m->last_t = w->last_t;
    if (w->end_seen) {
        m->end_seen = 1;
        m->end_reason = w->end_reason;
        m->end_t = w->end_t;
    }
    m->marks_total += w->marks_total;
    m->ooms_total += w->ooms_total;
    m->retries_total += w->retries_total;
    m->warns_total += w->warns_total;
}

/* Up to `target` windows of time cut at quantiles of the chunks' start times (about as many
 * records each): their starts in begin[0..n), begin[n] = UINT64_MAX (begin has target + 1
 * places). Returns n, 0 when out of memory. */
static size_t window_starts(const rd_log_t *lf, size_t target, uint64_t *begin)
{
    uint64_t *bases = malloc(lf->nchunks * sizeof *bases);
    if (!bases)
        return 0;
    for (size_t i = 0; i < lf->nchunks; i++)
        bases[i] = lf->chunks[i].base_ns;
    qsort(bases, lf->nchunks, sizeof *bases, by_u64);
    size_t n = 0;
    for (size_t k = 0; k < target; k++) {
        uint64_t b = k ? bases[lf->nchunks * k / target] : 0;
        if (!n || b > begin[n - 1])
            begin[n++] = b;
    }
    begin[n] = UINT64_MAX;
    free(bases);
    return n;
}

/* 1 when the parallel replay made the summary; 0 when it did not apply (then replay in order). */
static int build_parallel(model_t *m, rd_log_t *lf)
{
    unsigned want = workers_wanted(lf);
    if (want < 2 || lf->nchunks < 2 || lf->wrapped) /* a checkpoint's state: in order */
        return 0;
    uint64_t begin[MAX_WORKERS + 1];
    worker_t *w = calloc(want, sizeof *w);
    pthread_t *thr = calloc(want, sizeof *thr);
    if (!w || !thr) {
        free(w), free(thr);
        return 0;
    }
    unsigned n = (unsigned)window_starts(lf, want, begin);
    for (unsigned k = 0; k < n; k++)
        w[k].begin = begin[k], w[k].end = begin[k + 1];
    int ok = n >= 2;
    unsigned started = 0;
    for (unsigned k = 0; k < n && ok; k++) {
        w[k].opened = rd_clone(lf, &w[k].lf) == 0;
        ok = w[k].opened && pthread_create(&thr[k], NULL, work, &w[k]) == 0;
        started += ok;
    }
    if (started == n)
        wait_workers(m, w, n);
    for (unsigned k = 0; k < started; k++)
        pthread_join(thr[k], NULL);
    for (unsigned k = 0; k < started && ok; k++)
        ok = !w[k].lf.partial && !w[k].m.saw_reset;
    if (ok) {
        uint64_t unknown = 0;
        for (unsigned k = 0; k < n; k++) {
            stitch(m, &w[k].m);
            unknown += w[k].lf.unknown_records;
        }
        lf->unknown_records = unknown;
        m->windows = n;
    }
    for (unsigned k = 0; k < n; k++) {
        if (k < started)
            model_free(&w[k].m);
        if (w[k].opened)
            rd_close(&w[k].lf);
    }
    free(w);
    free(thr);
    return ok;
}

/* ---- the parallel replay with call sites and epochs ---------------------------------------------
 * leaks, report and oom need per-site figures and epochs, which depend on the order of every
 * change, so windows cannot be stitched from sums as the summary's are. The windows do instead
 * what does not depend on order and costs most: reading the records and matching each free to
 * its allocation in a live map of the window (MODEL_SPLIT). Each hands over, in record order, one
 * operation per allocation or matched free (pointer, block, bytes, site) and a copy of every
 * other record, frees of older blocks included; the calling thread then applies them in order to
 * the one model, against the blocks carried over from earlier windows, with the same functions
 * the ordered replay uses. A round of windows is read at a time (memory stays bounded). From the
 * window holding an OOM or a device reset on, the log is replayed in order: an OOM's analysis
 * needs the whole live map at that moment. The result is the ordered replay's (the tests compare
 * them). */

#define SPLIT_CHUNKS 32u           /* chunks (64 KiB each) per window */
#define SPLIT_READERS 4u           /* windows read at once (per set of slots) */

typedef struct split_op_rec {
    uint64_t t, ptr, blk, req;     /* as in model_live_t; RECORD: ptr indexes recs */
    uint32_t site;                 /* the site id (not an index) */
    uint8_t op, dev;               /* dev: the allocating device (REPLACED: the new block's) */
    uint32_t ep[2];                /* the site's device epochs when it applied (for the site threads) */
} split_op_t;

/* A block released while another operation applied (a free of an older block, a lost free). */
typedef struct split_release {
    size_t at;                     /* before the site effect of operation `at` */
    uint64_t blk, req;
    uint32_t site;
    uint32_t ep[2];
} split_release_t;

typedef struct model_split {
    uint64_t begin, end;
    split_op_t *ops;
    size_t nops, capops;
    rd_rec_t *recs;                /* copies of other records; p is an offset into bytes */
    size_t nrecs, caprecs;
    uint8_t *bytes;
    size_t nbytes, capbytes;
    split_release_t *rel;          /* releases for the site threads, by operation */
    size_t nrel, caprel;
    int bail;                      /* an OOM or a reset: the ordered replay takes over here */
    int partial;                   /* the reader skipped something: replay all in order */
    uint64_t unknown;
} model_split_t;

enum { SPLIT_ALLOC, SPLIT_FREE, SPLIT_REPLACED, SPLIT_RECORD };

static void split_op(model_t *w, int op, unsigned dev, const model_live_t *e, uint64_t t)
{
    model_split_t *s = w->split;
    if (s->nops == s->capops) {
        split_op_t *n = grow_array(s->ops, &s->capops, s->nops + 1, sizeof *n);
        if (!n)
            die_oom();
        s->ops = n;
    }
    s->ops[s->nops++] = (split_op_t){t, e->ptr, e->blk, model_live_req(e), e->sidx, (uint8_t)op, (uint8_t)dev, {0, 0}};
}

/* A record the ordered replay handles itself: copied. */
static void split_record(model_t *w, const rd_rec_t *r)
{
    model_split_t *s = w->split;
    rd_rec_t *n = grow_array(s->recs, &s->caprecs, s->nrecs + 1, sizeof *n);
    uint8_t *b = grow_array(s->bytes, &s->capbytes, s->nbytes + r->len, 1);
    if (!n || !b)
        die_oom();
    s->recs = n, s->bytes = b;
    memcpy(s->bytes + s->nbytes, r->p, r->len);
    s->recs[s->nrecs] = *r;
    s->recs[s->nrecs].p = (const uint8_t *)(uintptr_t)s->nbytes;
    s->nbytes += (r->len + 7) & ~7u; /* records stay 8-byte aligned */
    model_live_t e = {.ptr = s->nrecs++};
    split_op(w, SPLIT_RECORD, 0, &e, r->t);
}

/* An allocation in a window: placed in the window's live map; its site id rides along. */
static void split_alloc(model_t *w, const rd_rec_t *r)
{
    const gmlog_alloc_t *a = (const gmlog_alloc_t *)r->p;
    model_dev_t *d = get_dev(w, r->device);
    if (!d || !a->ptr) {
        split_record(w, r); /* the ordered replay counts it (and makes its device) */
        return;
    }
    unsigned kind;
    uint64_t req, block;
    alloc_decode(w, r, d, &kind, &req, &block);
    int found;
    model_live_t *e = live_upsert(&w->live, a->ptr, &found);
    if (found)
        split_op(w, SPLIT_REPLACED, r->device, e, r->t);
    live_fill(e, r, kind, block, req);
    e->sidx = a->site;
    split_op(w, SPLIT_ALLOC, r->device, e, r->t);
}

/* A free in a window: matched in the window, or left to the ordered replay (an older block). */
static void split_free(model_t *w, const rd_rec_t *r)
{
    const gmlog_free_t *f = (const gmlog_free_t *)r->p;
    model_live_t *e = f->ptr ? live_find(&w->live, f->ptr) : NULL;
    if (!e) {
        split_record(w, r);
        return;
    }
    unsigned dev = model_live_dev(e);
    free_count(get_dev(w, dev), model_live_kind(e), f);
    split_op(w, SPLIT_FREE, dev, e, r->t);
    live_remove(&w->live, e);
}

typedef struct split_slot {
    rd_log_t lf;
    int opened;
    model_t w;
    model_split_t win;
    pthread_t th;
} split_slot_t;

static void *split_work(void *arg)
{
    split_slot_t *sl = arg;
    model_split_t *s = &sl->win;
    s->nops = s->nrecs = s->nbytes = s->nrel = 0;
    s->bail = 0;
    model_init(&sl->w, &sl->lf, MODEL_SPLIT, UINT64_MAX, 0, NULL);
    sl->w.split = s;
    rd_window(&sl->lf, s->begin, s->end);
    rd_rewind(&sl->lf);
    batch_t *b = malloc(sizeof *b);
    if (!b)
        die_oom();
    while (!s->bail && fill_batch(&sl->lf, b)) {
        for (int i = 0; i < b->n && !s->bail; i++) {
            const rd_rec_t *r = &b->rec[i];
            if (r->type == GMLOG_ALLOC)
                split_alloc(&sl->w, r);
            else if (r->type == GMLOG_FREE)
                split_free(&sl->w, r);
            else if (r->type == GMLOG_OOM || r->type == GMLOG_RESET)
                s->bail = 1;
            else
                split_record(&sl->w, r);
        }
    }
    free(b);
    s->unknown = sl->lf.unknown_records;
    s->partial = sl->lf.partial;
    return NULL;
}

/* MODEL_DEFER: a block released while the window's operation `defer_at` applied; e->sidx holds
 * its site id. */
static void split_defer_release(model_t *m, const model_live_t *e)
{
    model_split_t *s = m->defer;
    split_release_t *n = grow_array(s->rel, &s->caprel, s->nrel + 1, sizeof *n);
    if (!n)
        die_oom();
    s->rel = n;
    const model_dev_t *sd = m->dev[model_live_dev(e)];
    s->rel[s->nrel++] = (split_release_t){m->defer_at, e->blk, model_live_req(e), e->sidx,
                                          {sd ? sd->epoch[0] : 0, sd ? sd->epoch[1] : 0}};
}

static inline void stamp(uint32_t *ep, const model_dev_t *d)
{
    ep[0] = d ? d->epoch[0] : 0;
    ep[1] = d ? d->epoch[1] : 0;
}

/* Applies a window's operations in order — device figures, peaks and epochs; the site figures
 * are left to the site threads (split_sites), each operation stamped with the epochs it saw —
 * then carries its live blocks (with their site ids) and adds its counters. */
static void split_apply(model_t *m, split_slot_t *sl)
{
    model_split_t *s = &sl->win;
    m->defer = s;
    for (size_t i = 0; i < s->nops; i++) {
        split_op_t *o = &s->ops[i];
        m->defer_at = i;
        if (o->op == SPLIT_RECORD) {
            rd_rec_t r = s->recs[o->ptr];
            r.p = s->bytes + (uintptr_t)r.p;
            r.seq = m->records;
            step(m, &r);
            continue;
        }
        model_live_t e = {.ptr = o->ptr, .blk = o->blk, .req = o->req};
        unsigned dev = model_live_dev(&e);
        model_dev_t *d = m->dev[o->dev] ? m->dev[o->dev] : get_dev(m, o->dev);
        if (o->op == SPLIT_REPLACED) {
            model_dev_t *od = m->dev[dev] ? m->dev[dev] : d;
            d->replaced++;
            stamp(o->ep, m->dev[dev]);
            release_figures(od, &e);
            continue;
        }
        m->records++;
        m->last_t = o->t;
        if (o->op == SPLIT_FREE) {
            m->by_type[GMLOG_FREE]++;
            stamp(o->ep, d);
            release_figures(d, &e);
            if (m->flags & MODEL_EPOCHS)
                dev_track(d, o->t);
            continue;
        }
        m->by_type[GMLOG_ALLOC]++;
        model_live_t *x = m->live.count ? live_find(&m->live, o->ptr) : NULL;
        if (__builtin_expect(x != NULL, 0)) { /* live from an earlier window: its free was lost */
            d->replaced++;
            release_entry(m, m->dev[model_live_dev(x)] ? m->dev[model_live_dev(x)] : d, x);
            live_remove(&m->live, x);
        }
        stamp(o->ep, d);
        alloc_apply(m, d, dev, model_live_kind(&e), model_live_block(&e), model_live_req(&e), o->site, o->t,
                    m->records - 1);
    }
    m->defer_at = s->nops;
    const model_t *w = &sl->w;
    for (size_t i = 0; i < w->live.cap; i++) {
        const model_live_t *e = &w->live.slots[i];
        if (!e->ptr)
            continue;
        int found;
        model_live_t *x = live_upsert(&m->live, e->ptr, &found);
        if (found) {
            model_dev_t *d = m->dev[model_live_dev(x)];
            if (d) {
                d->replaced++;
                release_entry(m, d, x);
            }
        }
        *x = *e; /* its site id stays until the end of the replay */
    }
    m->defer = NULL;
    for (int i = 0; i < w->ndev; i++) {
        const model_dev_t *wd = w->dev[i];
        model_dev_t *d = m->dev[i];
        if (wd && d)
            add_alloc_counters(d, wd);
    }
    m->malformed += w->malformed;
}

/* The site threads: a round's site figures, in the order the ordered replay makes them. Sites
 * are split between SPLIT_SITE_THREADS threads by (device, site); each fills a site table of its
 * own (the model's, or a scratch model's) and stamps each statistic it creates with the position
 * of the operation that created it, so that the tables can be merged in the ordered replay's
 * order of first appearance (split_merge_sites). */
#define SPLIT_SITE_THREADS 2

static inline unsigned site_part(unsigned dev, uint32_t site)
{
    return (((uint32_t)site ^ (uint32_t)dev << 24) * 0x9E3779B1u) >> 31; /* 0 or 1 */
}

typedef struct split_sites_job {
    _Alignas(64) model_t *m;       /* whose site table this thread fills (a line per thread) */
    split_slot_t *set;
    unsigned cnt, part;
    pthread_t th;
    int running;
    uint64_t pos;                  /* operations and releases seen so far, of every part */
    uint64_t *first;               /* by statistic index: pos of the operation that created it */
    size_t capfirst;
} split_sites_t;

/* The statistic of (dev, site) in this thread's table, its creation stamped. */
static inline uint32_t split_site_index(split_sites_t *job, uint64_t pos, unsigned dev, uint32_t site,
                                        const uint32_t *ep)
{
    model_t *m = job->m;
    size_t before = m->nsst;
    uint32_t idx = sstat_index_at(m, dev, site, ep);
    if (__builtin_expect(m->nsst > before, 0)) {
        uint64_t *n = grow_array(job->first, &job->capfirst, m->nsst, sizeof *n);
        if (!n)
            die_oom();
        job->first = n;
        job->first[idx] = pos;
    }
    return idx;
}

static inline void split_release_site(split_sites_t *job, uint64_t pos, uint64_t blk, uint64_t req,
                                      uint32_t site, const uint32_t *ep)
{
    model_live_t e = {.blk = blk};
    unsigned dev = model_live_dev(&e);
    if (site_part(dev, site) != job->part)
        return;
    uint32_t idx = split_site_index(job, pos, dev, site, ep);
    if (idx)
        release_site_at(job->m, idx, model_live_block(&e), req, ep);
}

static void *split_sites(void *arg)
{
    split_sites_t *job = arg;
    model_t *m = job->m;
    uint64_t pos = job->pos; /* counted here, stored once: the jobs sit side by side */
    for (unsigned j = 0; j < job->cnt; j++) {
        const model_split_t *s = &job->set[j].win;
        size_t r = 0;
        for (size_t i = 0; i <= s->nops; i++) {
            for (; r < s->nrel && s->rel[r].at == i; r++, pos++)
                split_release_site(job, pos, s->rel[r].blk, s->rel[r].req, s->rel[r].site, s->rel[r].ep);
            if (i == s->nops)
                break;
            const split_op_t *o = &s->ops[i];
            if (o->op == SPLIT_ALLOC) {
                if (site_part(o->dev, o->site) == job->part) {
                    model_live_t e = {.blk = o->blk};
                    uint32_t idx = split_site_index(job, pos, o->dev, o->site, o->ep);
                    if (idx)
                        site_add_at(m, idx, model_live_block(&e), o->req, o->ep);
                }
            } else if (o->op == SPLIT_FREE || o->op == SPLIT_REPLACED) {
                split_release_site(job, pos, o->blk, o->req, o->site, o->ep);
            }
            pos++;
        }
    }
    job->pos = pos;
    return NULL;
}

static void split_sites_join(split_sites_t *jobs)
{
    for (unsigned k = 0; k < SPLIT_SITE_THREADS; k++) {
        if (jobs[k].running)
            pthread_join(jobs[k].th, NULL);
        jobs[k].running = 0;
    }
}

static void split_sites_start(split_sites_t *jobs, split_slot_t *set, unsigned cnt)
{
    for (unsigned k = 0; k < SPLIT_SITE_THREADS; k++) {
        jobs[k].set = set, jobs[k].cnt = cnt;
        jobs[k].running = pthread_create(&jobs[k].th, NULL, split_sites, &jobs[k]) == 0;
        if (!jobs[k].running)
            split_sites(&jobs[k]);
    }
}

typedef struct split_stamped {
    uint64_t first;
    const model_sstat_t *s;
} split_stamped_t;

static int by_first(const void *a, const void *b)
{
    uint64_t x = ((const split_stamped_t *)a)->first, y = ((const split_stamped_t *)b)->first;
    return x < y ? -1 : x > y;
}

/* The site threads' tables made one, in the order the ordered replay creates statistics; the
 * model's table (jobs[0]'s) is rebuilt. */
static void split_merge_sites(model_t *m, split_sites_t *jobs)
{
    size_t n = 0;
    for (unsigned k = 0; k < SPLIT_SITE_THREADS; k++)
        n += jobs[k].m->nsst - 1;
    split_stamped_t *all = malloc((n ? n : 1) * sizeof *all);
    model_sstat_t *sst = calloc(n + 1, sizeof *sst);
    if (!all || !sst)
        die_oom();
    size_t at = 0;
    for (unsigned k = 0; k < SPLIT_SITE_THREADS; k++)
        for (size_t i = 1; i < jobs[k].m->nsst; i++)
            all[at++] = (split_stamped_t){jobs[k].first[i], &jobs[k].m->sst[i]};
    qsort(all, n, sizeof *all, by_first); /* stamps are distinct: one statistic per operation at most */
    map_free(&m->sstmap);
    map_init(&m->sstmap, 1024);
    for (size_t i = 0; i < n; i++) {
        sst[i + 1] = *all[i].s;
        map_put(&m->sstmap, (uint64_t)sst[i + 1].dev << 32 | sst[i + 1].site | (1ull << 40), i + 1);
    }
    free(all);
    free(m->sst);
    m->sst = sst;
    m->nsst = n + 1;
    m->capsst = n + 1;
    memset(m->sst_cache, 0, sizeof m->sst_cache);
}

/* A round: windows [start, start + *cnt) read by the slots of one set, each in its thread.
 * Returns how many threads started. */
static unsigned split_launch(split_slot_t *set, unsigned want, const uint64_t *begin, size_t n, size_t start,
                             unsigned *cnt)
{
    *cnt = n - start < want ? (unsigned)(n - start) : want;
    unsigned started = 0;
    for (unsigned j = 0; j < *cnt; j++) {
        set[j].win.begin = begin[start + j];
        set[j].win.end = begin[start + j + 1];
        if (pthread_create(&set[j].th, NULL, split_work, &set[j]) != 0)
            break;
        started++;
    }
    return started;
}

/* 1 when the parallel replay made the model; 0 when it did not apply (then replay in order); 2
 * when a window met an OOM or a reset: the model is then the ordered replay's up to that window,
 * which starts at time *from, and the ordered replay goes on from there. Three stages overlap, each
 * on its own set of slots: the windows of round r + 1 are read while the calling thread applies
 * round r and the site threads make the site figures of round r - 1. */
#define SPLIT_SETS 3
static int build_parallel_sites(model_t *m, rd_log_t *lf, uint64_t *from, uint64_t *unknown_out)
{
    unsigned want = workers_wanted(lf);
    if (want < 2 || lf->nchunks < 2 || lf->wrapped) /* a checkpoint's state: in order */
        return 0;
    /* The ordered apply and the site figures set the pace: on the H200 machine (16 CPUs), with one
     * site thread then, 2, 3, 4 and 8 readers took 1.91, 1.97, 1.85-2.08 and 2.28 s for 100 M
     * events, memory growing with each (54 to 205 MiB). */
    if (want > SPLIT_READERS)
        want = SPLIT_READERS;
    size_t target = lf->nchunks / SPLIT_CHUNKS > want ? lf->nchunks / SPLIT_CHUNKS : want;
    uint64_t *begin = malloc((target + 1) * sizeof *begin);
    split_slot_t *sl = calloc(SPLIT_SETS * (size_t)want, sizeof *sl);
    if (!begin || !sl) {
        free(begin), free(sl);
        return 0;
    }
    size_t n = window_starts(lf, target, begin);
    int ok = n >= 2;
    for (unsigned j = 0; j < SPLIT_SETS * want && ok; j++)
        ok = sl[j].opened = rd_clone(lf, &sl[j].lf) == 0;
    uint64_t unknown = 0;
    int shown = 0, cont = 0;
    size_t applied = 0;
    unsigned cnt[SPLIT_SETS] = {0}, started[SPLIT_SETS] = {0};
    /* Site thread 0 fills the model's own table, the others a scratch model's each. */
    split_sites_t jobs[SPLIT_SITE_THREADS];
    memset(jobs, 0, sizeof jobs);
    for (unsigned k = 0; k < SPLIT_SITE_THREADS; k++) {
        jobs[k].part = k;
        if (k == 0) {
            jobs[k].m = m;
            continue;
        }
        model_t *t = calloc(1, sizeof *t);
        if (!t)
            die_oom();
        t->nsst = 1;
        t->capsst = 1024;
        t->sst = calloc(t->capsst, sizeof *t->sst);
        if (!t->sst)
            die_oom();
        map_init(&t->sstmap, 1024);
        jobs[k].m = t;
    }
    m->flags |= MODEL_DEFER;
    if (ok)
        started[0] = split_launch(sl, want, begin, n, 0, &cnt[0]);
    for (size_t start = 0, r = 0; start < n; start += want, r++) {
        unsigned k = (unsigned)(r % SPLIT_SETS), next = (k + 1) % SPLIT_SETS;
        split_slot_t *set = sl + k * want;
        for (unsigned j = 0; j < started[k]; j++)
            pthread_join(set[j].th, NULL);
        ok = ok && started[k] == cnt[k];
        unsigned use = started[k]; /* windows of the round applied: those before an OOM or reset */
        for (unsigned j = 0; j < started[k] && ok; j++)
            if (set[j].win.partial)
                ok = 0;
            else if (set[j].win.bail && use == started[k])
                use = j;
        if (ok && use < started[k]) {
            cont = 1;
            *from = begin[start + use];
        }
        /* The next set was last read by the site threads two rounds ago, joined since. */
        if (ok && !cont && start + want < n)
            started[next] = split_launch(sl + next * want, want, begin, n, start + want, &cnt[next]);
        for (unsigned j = 0; j < started[k]; j++) {
            if (ok && j < use) {
                split_apply(m, &set[j]);
                unknown += set[j].win.unknown;
                applied++;
            }
            model_free(&set[j].w);
        }
        split_sites_join(jobs); /* the previous round's site figures come first */
        if (ok && use)
            split_sites_start(jobs, set, use);
        started[k] = 0;
        if (m->progress) {
            fprintf(stderr, "\rgmshim: reading %s: %3.0f%%", lf->name, 100.0 * (double)(start + cnt[k]) / (double)n);
            shown = 1;
        }
        if (!ok || cont)
            break;
    }
    split_sites_join(jobs);
    if (ok)
        split_merge_sites(m, jobs);
    for (unsigned k = 0; k < SPLIT_SITE_THREADS; k++) {
        free(jobs[k].first);
        if (k) {
            free(jobs[k].m->sst);
            map_free(&jobs[k].m->sstmap);
            free(jobs[k].m);
        }
    }
    for (unsigned k = 0; k < SPLIT_SETS; k++) /* a round still being read when another bailed out */
        for (unsigned j = 0; j < started[k]; j++) {
            pthread_join(sl[k * want + j].th, NULL);
            model_free(&sl[k * want + j].w);
        }
    m->flags &= ~MODEL_DEFER;
    /* The carried blocks kept their site ids: make them indices, as the ordered replay has. */
    for (size_t i = 0; ok && i < m->live.cap; i++) {
        model_live_t *e = &m->live.slots[i];
        if (e->ptr && m->dev[model_live_dev(e)])
            e->sidx = (m->flags & MODEL_SITES) ? sstat_index(m, model_live_dev(e), e->sidx) : 0;
    }
    if (shown)
        fprintf(stderr, "\r\033[K");
    for (unsigned j = 0; j < SPLIT_SETS * want; j++) {
        if (sl[j].opened)
            rd_close(&sl[j].lf);
        free(sl[j].win.ops), free(sl[j].win.recs), free(sl[j].win.bytes), free(sl[j].win.rel);
    }
    free(sl);
    free(begin);
    if (ok) {
        lf->unknown_records = *unknown_out = unknown;
        m->windows = (unsigned)applied;
    }
    return ok ? 1 + cont : 0;
}

int model_build_until(model_t *m, rd_log_t *lf, unsigned flags, uint64_t stop_seq, int mark_id,
                      const char *mark_label)
{
    model_init(m, lf, flags, stop_seq, mark_id, mark_label);
    int done = 0;
    if (stop_seq == UINT64_MAX && !mark_id && !mark_label && (!flags || flags == (MODEL_SITES | MODEL_EPOCHS))) {
        uint64_t from = 0, unknown = 0;
        done = flags ? build_parallel_sites(m, lf, &from, &unknown) : build_parallel(m, lf);
        if (done == 2) { /* an OOM or a reset: in order from the window where it lies */
            replay_from(m, from);
            lf->unknown_records += unknown;
        } else if (!done) { /* a damaged log, or a reset in the summary's windows: in order, with its diagnostics */
            model_free(m);
            model_init(m, lf, flags, stop_seq, mark_id, mark_label);
        }
    }
    if (!done)
        replay(m);
    if (flags & MODEL_FRAG)
        take_samples(m, UINT64_MAX); /* the end of the log */
    model_finish(m);
    return 0;
}

int model_build(model_t *m, rd_log_t *lf, unsigned flags)
{
    return model_build_until(m, lf, flags, UINT64_MAX, 0, NULL);
}

int model_frag_at_peak(const model_t *m, int dev, model_frag_t *out)
{
    memset(out, 0, sizeof *out);
    const model_dev_t *d = dev >= 0 && dev < MODEL_MAX_DEVICES ? m->dev[dev] : NULL;
    if (!d || !d->peak_reserved)
        return -1;
    model_t *p = calloc(1, sizeof *p);
    if (!p)
        die_oom();
    model_build_until(p, m->lf, 0, d->peak_seq + 1, 0, NULL);
    model_frag_now(p, dev, out);
    out->t = d->peak_reserved_t;
    model_free(p);
    free(p);
    return 0;
}

int model_rank(const model_t *m)
{
    const char *v = rd_meta_keyed(m->lf, GMLOG_META_RANK, "RANK");
    if (!v)
        v = rd_meta_keyed(m->lf, GMLOG_META_RANK, "SLURM_PROCID");
    if (!v || !*v)
        return -1;
    char *end;
    long r = strtol(v, &end, 10);
    return *end || r < 0 || r > 1 << 30 ? -1 : (int)r;
}

void model_free(model_t *m)
{
    for (int i = 0; i < MODEL_MAX_DEVICES; i++) {
        if (!m->dev[i])
            continue;
        map_free(&m->dev[i]->segmap);
        free(m->dev[i]->tl);
        free(m->dev[i]);
        m->dev[i] = NULL;
    }
    free(m->live.slots);
    free(m->sst);
    map_free(&m->sstmap);
    for (size_t i = 0; i < m->nsites; i++) {
        free(m->sites[i].native);
        free(m->sites[i].py);
    }
    free(m->sites);
    map_free(&m->sitemap);
    for (size_t i = 0; i < m->nstrings; i++)
        free(m->strings[i]);
    free(m->strings);
    map_free(&m->strmap);
    for (size_t i = 0; i < m->nmodules; i++)
        free(m->modules[i].path);
    free(m->modules);
    for (size_t i = 0; i < m->nmarks; i++)
        free(m->marks[i].label);
    free(m->marks);
    for (size_t i = 0; i < m->nooms; i++)
        free(m->ooms[i].epoch_label);
    free(m->ooms);
    free(m->retries);
    free(m->warns);
    free(m->fsnap);
    free(m->unfree);
    memset(m, 0, sizeof *m);
}
