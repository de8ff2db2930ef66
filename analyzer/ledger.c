/* The card's ledger: the exports' replay (export_replay.h) gives every live block and segment of
 * a device at any record, the shim's LEDGER samples what the events cannot (the driver's free
 * bytes, the context, other processes through NVML). One pass keeps the samples, takes each OOM's
 * pool side at its record, and follows the peak of the process's use: the pool side is taken at
 * a moment at the peak only when the use is about to fall from it (the replay hands on an event
 * before every fall), or at the end. Where that would cost more than the replay itself (a use
 * that keeps rising to new peaks and falling back), the device's peak is found by a second
 * replay stopped there. The terms are then put together so that they add up to the device's
 * total exactly: what no measurement explains is named as inferred, never dropped. */
#include "ledger.h"
#include "output.h"
#include "vec.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define OOM_SAMPLE_NS 2000000000ull /* an OOM's own sample comes right after it */

/* A device's LEDGER sample, copied. */
typedef struct sample {
    int have;
    uint64_t t;
    unsigned why;
    gmlog_ledger_t rec;
    gmlog_ledger_proc_t procs[GMLOG_LEDGER_MAX_PROCS];
    unsigned nprocs;
} sample_t;

/* The pool's side of one moment (the events'), before the samples' terms join it. */
typedef struct side {
    ledger_t l;                  /* the event terms, dev, t, seq */
    uint64_t free_bytes, total;  /* an OOM record's driver figures (total 0: none) */
    sample_t before;             /* the device's last sample then */
    sample_t after;              /* an OOM's own sample (why OOM, within OOM_SAMPLE_NS) */
} side_t;

/* A device's peak as the pass follows it. */
typedef struct peak {
    int dirty;                   /* the state now is the latest moment at the peak, not yet kept */
    int sampled;                 /* a sample came since that moment: `sample` is the one before */
    int kept;                    /* `side` holds the pool side at the peak */
    int again;                   /* keeping it cost too much: a replay stopped at peak_event */
    uint64_t t;                  /* the moment's record time */
    sample_t sample;
    side_t side;
} peak_t;

#define KEEP_BUDGET(events) (2 * (events) + ((uint64_t)1 << 20)) /* slots a pass may scan */

typedef struct pass {
    const model_t *m;
    sample_t last[256];
    uint64_t dbl[256];           /* pass-through and observed blocks: in reserved and a label */
    uint64_t peak_used[256], peak_event[256];
    peak_t *peak[256];           /* followed peaks (NULL: none yet, or no peak wanted) */
    uint64_t kept_work;          /* slots scanned keeping peaks */
    int no_peaks;                /* none followed: every peak by a replay stopped there */
    side_t *ooms;
    size_t nooms, capooms;
    int any;
} pass_t;

/* ---- the pool's side, from the replay's blocks and segments ------------------------------- */

static void add_term(ledger_t *l, int kind, int measured, uint64_t bytes, const char *name, uint32_t pid)
{
    if (l->nterms >= LEDGER_MAX_TERMS)
        return;
    ledger_term_t *t = &l->term[l->nterms++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->measured = measured;
    t->bytes = bytes;
    t->pid = pid;
    if (name)
        snprintf(t->name, sizeof t->name, "%s", name);
}

static int unpooled_label(const char *s)
{
    return !strncmp(s, "cudaMalloc", 10);
}

/* The event terms of device dev now. */
static void pool_side(const xr_t *x, const model_t *m, unsigned dev, ledger_t *l)
{
    uint64_t *used = x->nbases ? calloc(x->nbases, sizeof *used) : NULL;
    uint64_t tensors = 0, pending = 0, graphs = 0, reusable = 0, fragmented = 0;
    for (size_t i = 0; i < x->capblk; i++) {
        const xr_block_t *b = xr_block_at(x, i);
        if (!b || b->dev != dev || b->kind != GMLOG_KIND_POOL)
            continue;
        size_t k = xr_bases_upper(x, b->ptr);
        const xr_segment_t *g = k ? xr_segment_of(x, dev, b->ptr) : NULL;
        if (g && g->graph)
            continue; /* counted with its graph's pool */
        /* A block of a growable range spans as many of its page runs as it covers (each logged
         * as a segment of its own): each holds the part of the block inside it. */
        uint64_t end = b->ptr + b->size;
        for (size_t j = k - 1; g && used && j < x->nbases && x->bases[j] < end; j++) {
            const xr_segment_t *s = xr_segment_of(x, dev, x->bases[j]);
            if (!s || s->base != x->bases[j])
                continue;
            uint64_t lo = b->ptr > s->base ? b->ptr : s->base, hi = end < s->base + s->size ? end : s->base + s->size;
            if (hi > lo)
                used[j] += hi - lo;
        }
        if (b->pending)
            pending += b->size;
        else
            tensors += b->size;
    }
    for (size_t i = 0; i < x->nbases; i++) {
        const xr_segment_t *g = xr_segment_of(x, dev, x->bases[i]);
        if (!g || g->base != x->bases[i])
            continue;
        if (g->graph)
            graphs += g->size;
        else if (used && used[i])
            fragmented += g->size > used[i] ? g->size - used[i] : 0;
        else
            reusable += g->size;
    }
    free(used);
    l->torch = m && m->torch && ev_tensor_dev(&m->ev, dev);
    add_term(l, LK_TENSORS, 1, tensors, NULL, 0);
    if (pending)
        add_term(l, LK_PENDING, 1, pending, NULL, 0);
    add_term(l, LK_REUSABLE, 1, reusable, NULL, 0);
    add_term(l, LK_FRAGMENTED, 1, fragmented, NULL, 0);
    if (graphs)
        add_term(l, LK_GRAPHS, 1, graphs, NULL, 0);
    const xr_dev_t *d = &x->dev[dev];
    for (unsigned i = 0; i < d->nlibs && i < XR_MAX_LIBS; i++)
        if (d->lib_bytes[i])
            add_term(l, unpooled_label(d->lib[i]) ? LK_UNPOOLED : LK_LIBRARY, 1, d->lib_bytes[i], d->lib[i], 0);
}

/* ---- the first pass ------------------------------------------------------------------------- */

static void keep_sample(sample_t *s, const rd_rec_t *r)
{
    const gmlog_ledger_proc_t *p;
    s->have = 1;
    s->t = r->t;
    s->why = r->flags;
    memcpy(&s->rec, r->p, sizeof s->rec);
    s->nprocs = rd_ledger_procs(r, &p);
    if (s->nprocs > GMLOG_LEDGER_MAX_PROCS)
        s->nprocs = GMLOG_LEDGER_MAX_PROCS;
    memcpy(s->procs, p, s->nprocs * sizeof *p);
}

/* The pool side at the device's peak, now that its use is about to fall from it (or at the end). */
static void keep_peak(xr_t *x, pass_t *p, unsigned dev)
{
    peak_t *k = p->peak[dev];
    if (!k || !k->dirty)
        return;
    k->dirty = 0;
    if (k->again)
        return;
    p->kept_work += x->capblk + x->nbases;
    if (p->kept_work > KEEP_BUDGET(x->events)) {
        k->again = 1;
        return;
    }
    side_t *s = &k->side;
    memset(&s->l, 0, sizeof s->l);
    s->l.dev = (int)dev;
    s->l.t = k->t;
    pool_side(x, p->m, dev, &s->l);
    s->total = x->dev[dev].total;
    s->before = k->sampled ? k->sample : p->last[dev];
    k->kept = 1;
}

/* Whether event e is about to lower its device's use (the replay's figures change after it). */
static int falls(const xr_event_t *e)
{
    switch (e->type) {
    case XR_FREE:
    case XR_FREE_COMPLETED: return e->blk && e->blk->kind != GMLOG_KIND_POOL;
    case XR_SEGMENT_FREE:
    case XR_RESIZING: return 1;
    default: return 0;
    }
}

static void on_event(xr_t *x, const xr_event_t *e, void *arg)
{
    pass_t *p = arg;
    unsigned dev = e->dev;
    if (dev >= GMLOG_NO_DEVICE)
        return;
    if (p->peak[dev] && p->peak[dev]->dirty && falls(e))
        keep_peak(x, p, dev);
    switch (e->type) {
    case XR_ALLOC:
    case XR_FREE:
        if (e->blk && (e->blk->kind == GMLOG_KIND_PASS || e->blk->kind == GMLOG_KIND_OBSERVED) && !e->blk->pending) {
            uint64_t s = e->blk->size;
            p->dbl[dev] = e->type == XR_ALLOC ? p->dbl[dev] + s : (p->dbl[dev] > s ? p->dbl[dev] - s : 0);
        }
        break;
    case XR_LEDGER:
        if (e->rec->len >= sizeof(gmlog_ledger_t)) {
            p->any = 1;
            peak_t *k = p->peak[dev];
            if (k && k->dirty && !k->sampled) { /* the peak's sample is the one before this */
                k->sample = p->last[dev];
                k->sampled = 1;
            }
            keep_sample(&p->last[dev], e->rec);
            for (size_t i = p->nooms; i-- > 0;) { /* an OOM's own sample, just after it */
                side_t *o = &p->ooms[i];
                if (o->l.dev != (int)dev || o->after.have || e->rec->t - o->l.t > OOM_SAMPLE_NS)
                    break;
                if (e->rec->flags == GMLOG_LEDGER_OOM)
                    o->after = p->last[dev];
            }
        }
        break;
    case XR_OOM: {
        side_t *o = vec_grow(p->ooms, &p->capooms, p->nooms + 1, sizeof *o, 8);
        if (!o)
            return;
        p->ooms = o;
        o = &p->ooms[p->nooms++];
        memset(o, 0, sizeof *o);
        o->l.dev = (int)dev;
        o->l.t = e->rec->t;
        o->l.seq = e->rec->seq;
        pool_side(x, p->m, dev, &o->l);
        const gmlog_oom_t *r = (const gmlog_oom_t *)e->rec->p;
        if (e->rec->len >= sizeof *r && r->driver_total)
            o->free_bytes = r->driver_free, o->total = r->driver_total;
        o->before = p->last[dev];
        break;
    }
    case XR_CHANGED: {
        const xr_dev_t *d = &x->dev[dev];
        uint64_t used = d->reserved;
        for (unsigned i = 0; i < d->nlibs && i < XR_MAX_LIBS; i++)
            used += d->lib_bytes[i];
        used = used > p->dbl[dev] ? used - p->dbl[dev] : 0;
        if (used >= p->peak_used[dev] && used) { /* the last moment at the peak: its blocks in it */
            p->peak_used[dev] = used;
            p->peak_event[dev] = x->events;
            if (!p->peak[dev] && !p->no_peaks && !(p->peak[dev] = calloc(1, sizeof *p->peak[dev])))
                p->no_peaks = 1; /* out of memory: the peaks by the replay again */
            if (p->peak[dev]) {
                peak_t *k = p->peak[dev];
                k->dirty = 1;
                k->sampled = 0;
                k->kept = 0;
                k->t = e->rec->t;
            }
        }
        break;
    }
    default:
        break;
    }
}

/* ---- the terms put together ------------------------------------------------------------------ */

static uint64_t sum_terms(const ledger_t *l)
{
    uint64_t s = 0;
    for (unsigned i = 0; i < l->nterms; i++)
        s += l->term[i].bytes;
    return s;
}

/* The samples' terms added to the event terms in l: context, processes, free, the rest. */
static void compose(ledger_t *l, const model_t *m, const sample_t *s, uint64_t total, int have_free, uint64_t free_bytes)
{
    if (!total && s && s->have)
        total = s->rec.total;
    if (!have_free && s && s->have && s->rec.driver_free != GMLOG_UNKNOWN)
        have_free = 1, free_bytes = s->rec.driver_free;
    if (!total)
        return;
    l->total = total;
    uint64_t events = sum_terms(l);
    int nvml = s && s->have && (s->rec.status & GMLOG_LEDGER_NVML);
    int ctx_known = s && s->have && s->rec.context && (s->rec.status & (GMLOG_LEDGER_CTX_CREATED | GMLOG_LEDGER_CTX_FIRST));
    if (ctx_known)
        add_term(l, LK_CONTEXT, 1, s->rec.context, NULL, 0);
    else if (nvml && s->rec.self_used != GMLOG_UNKNOWN && s->rec.self_used > events)
        add_term(l, LK_CONTEXT, 0, s->rec.self_used - events, NULL, 0), ctx_known = 1;
    if (nvml)
        for (unsigned i = 0; i < s->nprocs; i++) {
            const gmlog_ledger_proc_t *p = &s->procs[i];
            if (p->used == GMLOG_UNKNOWN)
                continue;
            const char *cmd = p->command ? model_string(m, p->command) : NULL;
            add_term(l, LK_PROCESS, 1, p->used, cmd ? cmd : "", p->pid);
        }
    if (have_free)
        add_term(l, LK_FREE, 1, free_bytes, NULL, 0);
    uint64_t sum = sum_terms(l);
    if (sum <= total) {
        uint64_t rest = total - sum;
        if (!ctx_known)
            add_term(l, LK_CONTEXT, 0, rest, NULL, 0);
        else if (rest)
            add_term(l, LK_UNNAMED, 0, rest, NULL, 0);
        return;
    }
    /* More than the card: the samples were taken at other moments than the events. What was free
     * gives way first, then the context, then the largest process: each then inferred. */
    uint64_t over = sum - total;
    static const int order[] = {LK_FREE, LK_CONTEXT, LK_PROCESS};
    for (size_t k = 0; k < sizeof order / sizeof *order && over; k++) {
        for (unsigned i = 0; i < l->nterms && over; i++) {
            ledger_term_t *t = &l->term[i];
            if (t->kind != order[k] || !t->bytes)
                continue;
            uint64_t cut = t->bytes < over ? t->bytes : over;
            t->bytes -= cut;
            t->measured = 0;
            over -= cut;
        }
    }
    for (unsigned i = 0; i < l->nterms && over; i++) { /* the events alone exceed the card */
        ledger_term_t *t = &l->term[i];
        uint64_t cut = t->bytes < over ? t->bytes : over;
        t->bytes -= cut;
        t->measured = 0;
        over -= cut;
    }
}

/* ---- one moment, for the pictures ---------------------------------------------------------- */

int ledger_now(const xr_t *x, const model_t *m, unsigned dev, const rd_rec_t *rec, ledger_t *l)
{
    memset(l, 0, sizeof *l);
    if (dev >= GMLOG_NO_DEVICE || !rec || rec->len < sizeof(gmlog_ledger_t))
        return -1;
    sample_t *s = malloc(sizeof *s);
    if (!s)
        return -1;
    keep_sample(s, rec);
    l->dev = (int)dev;
    l->t = rec->t;
    pool_side(x, m, dev, l);
    compose(l, m, s, x->dev[dev].total, 0, 0);
    free(s);
    l->valid = l->total != 0;
    return l->valid ? 0 : -1;
}

/* ---- building and keeping ------------------------------------------------------------------- */

static void pass_free(pass_t *p)
{
    if (!p)
        return;
    for (int i = 0; i < 256; i++)
        free(p->peak[i]);
    free(p->ooms);
    free(p);
}

static ledger_set_t *build(const model_t *m)
{
    ledger_set_t *set = calloc(1, sizeof *set);
    pass_t *p = calloc(1, sizeof *p);
    xr_t *x = calloc(1, sizeof *x);
    if (!set || !p || !x)
        goto fail;
    p->m = m;
    x->want_resizing = 1;
    if (xr_run(x, m->lf, m, on_event, p))
        goto fail;
    for (int dev = 0; dev < x->ndev && dev < 255; dev++)
        keep_peak(x, p, (unsigned)dev); /* the use ended at its peak */
    set->any = p->any;
    if (p->nooms && (set->ooms = calloc(p->nooms, sizeof *set->ooms))) {
        for (size_t i = 0; i < p->nooms; i++) {
            side_t *o = &p->ooms[i];
            set->ooms[i] = o->l;
            const sample_t *s = o->after.have ? &o->after : o->before.have ? &o->before : &p->last[o->l.dev];
            compose(&set->ooms[i], m, s, o->total ? o->total : x->dev[o->l.dev].total, o->total != 0, o->free_bytes);
            set->ooms[i].valid = set->ooms[i].total != 0;
        }
        set->nooms = p->nooms;
    }
    /* The peak of each sampled device: kept by the pass, else the replay again, stopped there. */
    for (int dev = 0; dev < x->ndev && dev < 255; dev++) {
        if (!p->last[dev].have || !p->peak_event[dev])
            continue;
        const peak_t *k = p->peak[dev];
        if (k && k->kept && !p->no_peaks) {
            ledger_t *l = &set->peak[dev];
            *l = k->side.l;
            compose(l, m, k->side.before.have ? &k->side.before : &p->last[dev], k->side.total, 0, 0);
            l->valid = l->total != 0;
            continue;
        }
        xr_t *y = calloc(1, sizeof *y);
        pass_t *q = calloc(1, sizeof *q);
        if (!y || !q) {
            free(y), free(q);
            goto fail;
        }
        q->m = m;
        q->no_peaks = 1;
        y->stop_events = p->peak_event[dev];
        if (xr_run(y, m->lf, m, on_event, q) == 0) {
            ledger_t *l = &set->peak[dev];
            memset(l, 0, sizeof *l);
            l->dev = dev;
            l->t = y->last_t;
            pool_side(y, m, (unsigned)dev, l);
            const sample_t *s = q->last[dev].have ? &q->last[dev] : &p->last[dev];
            compose(l, m, s, y->dev[dev].total ? y->dev[dev].total : 0, 0, 0);
            l->valid = l->total != 0;
        }
        xr_free(y);
        free(y);
        pass_free(q);
    }
    pass_free(p);
    xr_free(x);
    free(x);
    return set;
fail:
    pass_free(p);
    if (x)
        xr_free(x);
    free(x);
    if (set)
        free(set->ooms);
    free(set);
    return NULL;
}

/* A kept set goes when its model is freed (model_on_free). A model's address is reused once it is
 * freed: a kept set is the model's only if the log it read is the same too. */
typedef struct kept_key {
    const model_t *m;
    uint64_t records, last_t, start_ns;
    uint32_t pid;
    char name[256];
} kept_key_t;

static void key_of(const model_t *m, kept_key_t *k)
{
    memset(k, 0, sizeof *k);
    k->m = m;
    k->records = m->records;
    k->last_t = m->last_t;
    k->start_ns = m->lf->hdr.start_realtime_ns;
    k->pid = m->lf->hdr.pid;
    snprintf(k->name, sizeof k->name, "%s", m->lf->name ? m->lf->name : "");
}

static struct {
    pthread_mutex_t lock;
    struct kept { kept_key_t key; ledger_set_t *set; } *kept;
    size_t n, cap;
} K = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void set_free(ledger_set_t *s)
{
    if (s)
        free(s->ooms);
    free(s);
}

/* Model m is being freed: its sets go (a set is used only while its model lives). */
static void forget(const model_t *m)
{
    pthread_mutex_lock(&K.lock);
    for (size_t i = 0; i < K.n;) {
        if (K.kept[i].key.m != m) {
            i++;
            continue;
        }
        set_free(K.kept[i].set);
        K.kept[i] = K.kept[--K.n];
    }
    pthread_mutex_unlock(&K.lock);
}

const ledger_set_t *ledger_of(const model_t *m)
{
    if (!m || !m->lf || !m->by_type[GMLOG_LEDGER])
        return NULL;
    model_on_free(forget);
    kept_key_t key;
    key_of(m, &key);
    pthread_mutex_lock(&K.lock);
    for (size_t i = 0; i < K.n; i++)
        if (!memcmp(&K.kept[i].key, &key, sizeof key)) {
            ledger_set_t *s = K.kept[i].set;
            pthread_mutex_unlock(&K.lock);
            return s;
        }
    pthread_mutex_unlock(&K.lock);
    ledger_set_t *set = build(m); /* a log's sections run in one thread: built once */
    pthread_mutex_lock(&K.lock);
    struct kept *k = vec_grow(K.kept, &K.cap, K.n + 1, sizeof *k, 8);
    if (k) {
        K.kept = k;
        K.kept[K.n++] = (struct kept){key, set};
    }
    pthread_mutex_unlock(&K.lock);
    return set;
}

const ledger_t *ledger_at_oom(const ledger_set_t *s, uint64_t seq)
{
    for (size_t i = 0; s && i < s->nooms; i++)
        if (s->ooms[i].seq == seq)
            return s->ooms[i].valid ? &s->ooms[i] : NULL;
    return NULL;
}

/* ---- words ------------------------------------------------------------------------------------ */

const char *ledger_term_label(const ledger_term_t *t, int torch, char *buf, size_t len)
{
    switch (t->kind) {
    case LK_TENSORS: snprintf(buf, len, "%s", torch ? "tensors" : "live blocks"); break;
    case LK_PENDING: snprintf(buf, len, "freed, waiting for the GPU"); break;
    case LK_REUSABLE: snprintf(buf, len, "%s cache, reusable", torch ? "PyTorch's" : "gmshim's"); break;
    case LK_FRAGMENTED: snprintf(buf, len, "%s cache, fragmented", torch ? "PyTorch's" : "gmshim's"); break;
    case LK_GRAPHS: snprintf(buf, len, "CUDA graphs' private pools"); break;
    case LK_UNPOOLED: snprintf(buf, len, "%s around the pool", t->name); break;
    case LK_LIBRARY: snprintf(buf, len, "library %s", t->name); break;
    case LK_CONTEXT: snprintf(buf, len, "CUDA context and module code%s", t->measured ? "" : " (and unseen memory)"); break;
    case LK_PROCESS:
        if (t->name[0])
            snprintf(buf, len, "another process, pid %u `%s`", t->pid, t->name);
        else
            snprintf(buf, len, "another process, pid %u", t->pid);
        break;
    case LK_FREE: snprintf(buf, len, "free"); break;
    default: snprintf(buf, len, "not named by any measurement"); break;
    }
    return buf;
}

static const char *how(const ledger_term_t *t)
{
    if (!t->measured)
        return "inferred";
    switch (t->kind) {
    case LK_CONTEXT: return "measured at its creation";
    case LK_PROCESS: return "measured by NVML";
    case LK_FREE: return "measured by the driver";
    default: return "measured";
    }
}

static const char *kind_key(int kind)
{
    static const char *const keys[] = {"tensors", "pending", "cache_reusable", "cache_fragmented", "graph_pools",
                                       "unpooled", "library", "context", "process", "free", "unnamed"};
    return kind >= 0 && kind <= LK_UNNAMED ? keys[kind] : "unnamed";
}

const char *ledger_term_key(const ledger_term_t *t)
{
    return kind_key(t->kind);
}

const ledger_term_t *ledger_deciding(const ledger_t *l, uint64_t request)
{
    uint64_t free_bytes = 0;
    for (unsigned i = 0; i < l->nterms; i++)
        if (l->term[i].kind == LK_FREE)
            free_bytes = l->term[i].bytes;
    const ledger_term_t *best = NULL;
    for (unsigned i = 0; i < l->nterms; i++) {
        const ledger_term_t *t = &l->term[i];
        int outside = t->kind == LK_PROCESS || t->kind == LK_LIBRARY || t->kind == LK_UNPOOLED ||
                      (t->kind == LK_CONTEXT && t->measured);
        if (outside && t->bytes + free_bytes >= request && (!best || t->bytes > best->bytes))
            best = t;
    }
    return best;
}

static int named(const char *s, const char *what)
{
    return strstr(s, what) != NULL;
}

const char *ledger_remedy(const ledger_term_t *t, char *buf, size_t len)
{
    switch (t->kind) {
    case LK_PROCESS:
        snprintf(buf, len, "stop or move the other process (pid %u), or run this job on a GPU of its own "
                 "(CUDA_VISIBLE_DEVICES)", t->pid);
        break;
    case LK_CONTEXT:
        snprintf(buf, len, "CUDA_MODULE_LOADING=LAZY loads only the kernels used (the default since CUDA 11.7: "
                 "check that it is not set to EAGER); fewer libraries loaded take less module code");
        break;
    case LK_LIBRARY:
        if (named(t->name, "nccl"))
            snprintf(buf, len, "NCCL's buffers: NCCL_BUFFSIZE (bytes per channel buffer, default 4 MiB) and "
                     "NCCL_NCHANNELS_PER_NET_PEER / NCCL_MAX_NCHANNELS make them smaller");
        else if (named(t->name, "cublas"))
            snprintf(buf, len, "cuBLAS's workspace: CUBLAS_WORKSPACE_CONFIG=:4096:8 (or :16:8) bounds it");
        else if (named(t->name, "cudnn"))
            snprintf(buf, len, "cuDNN's workspace: torch.backends.cudnn.benchmark=False picks algorithms that "
                     "need less of it");
        else
            snprintf(buf, len, "the library's own settings for its memory (%s)", t->name);
        break;
    default:
        snprintf(buf, len, "allocate it through the pool (cudaMalloc) so that it is shared");
        break;
    }
    return buf;
}

void ledger_text(FILE *f, const ledger_t *l, const char *indent)
{
    char a[32], b[16], label[160];
    for (unsigned i = 0; i < l->nterms; i++) {
        const ledger_term_t *t = &l->term[i];
        if (!t->bytes && t->kind != LK_TENSORS && t->kind != LK_FREE)
            continue;
        fprintf(f, "%s%-44s %9s %6s  %s\n", indent, ledger_term_label(t, l->torch, label, sizeof label),
                rep_bytes(t->bytes, a), rep_pct(t->bytes, l->total, b), how(t));
    }
}

void ledger_json(json_t *j, const char *key, const ledger_t *l)
{
    json_obj(j, key);
    json_u64(j, "device", (uint64_t)l->dev);
    json_u64(j, "t_ns", l->t);
    json_u64(j, "total", l->total);
    json_arr(j, "terms");
    for (unsigned i = 0; i < l->nterms; i++) {
        const ledger_term_t *t = &l->term[i];
        json_obj(j, NULL);
        json_str(j, "term", kind_key(t->kind));
        if (t->kind == LK_UNPOOLED || t->kind == LK_LIBRARY)
            json_str(j, "name", t->name);
        if (t->kind == LK_PROCESS) {
            json_u64(j, "pid", t->pid);
            json_str(j, "command", t->name[0] ? t->name : NULL);
        }
        json_u64(j, "bytes", t->bytes);
        json_bool(j, "measured", t->measured);
        json_obj_end(j);
    }
    json_arr_end(j);
    json_obj_end(j);
}
