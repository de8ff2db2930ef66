/* `gmshim export perfetto`: the logs as one Chrome trace-event JSON file (ui.perfetto.dev,
 * chrome://tracing). One process per log, named after its rank, host and pid, on the wall
 * clock (microseconds since the Unix epoch) so that ranks line up; per device counters, the
 * OOMs, cache releases and marks as instants, the epochs between marks as slices. Counters are
 * downsampled to maxima over a stated bucket, never cut short. The card's ledger (ledger.h) is
 * one counter per term, written at each of the shim's samples, never bucketed (they are rare). */
#include "export_perfetto.h"
#include "ledger.h"
#include "oom_classify.h"
#include "outfile.h"
#include "vec.h"
#include "output.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { S_REQUESTED, S_ALLOCATED, S_RESERVED, S_CACHED, S_PENDING, S_LIB0 };
#define NSERIES (S_LIB0 + XR_MAX_LIBS)

static const char *const series_names[] = {"requested", "allocated", "reserved", "cached", "pending"};

typedef struct pf_series {
    uint64_t cur, bmax, emitted;
    int seen;                     /* a sample was written */
} pf_series_t;

typedef struct pf_dev {
    int64_t bucket;               /* the open bucket, -1: none */
    pf_series_t s[NSERIES];
} pf_dev_t;

typedef struct pf {
    json_t *j;
    const rd_log_t *lf;
    const model_t *m;
    uint32_t pid;
    uint64_t res;                 /* bucket width, ns; 0: every change */
    uint64_t t0_ns;               /* the log's start, Unix ns */
    uint64_t samples, changes;
    pf_dev_t dev[256];
    int have_mark;
    uint64_t mark_t;
    uint32_t mark_id;
    char mark_label[256];
    struct pf_card { int dev, written; uint64_t now, emitted; char name[200]; } *card; /* the ledger's tracks */
    size_t ncard, capcard;
} pf_t;

#define TID_MARKS 1
#define TID_DEVICE(d) (10 + (d))

static uint64_t ts_us(const pf_t *p, uint64_t t)
{
    return (p->t0_ns + t) / 1000;
}

static void event_head(pf_t *p, const char *name, const char *ph, uint64_t t, int tid)
{
    json_obj(p->j, NULL);
    json_str(p->j, "name", name);
    json_str(p->j, "ph", ph);
    json_u64(p->j, "ts", ts_us(p, t));
    json_u64(p->j, "pid", p->pid);
    json_i64(p->j, "tid", tid);
}

static void metadata(pf_t *p, const char *what, int tid, const char *key, const char *sval, int64_t ival)
{
    json_obj(p->j, NULL);
    json_str(p->j, "name", what);
    json_str(p->j, "ph", "M");
    json_u64(p->j, "pid", p->pid);
    json_i64(p->j, "tid", tid);
    json_obj(p->j, "args");
    if (sval)
        json_str(p->j, key, sval);
    else
        json_i64(p->j, key, ival);
    json_obj_end(p->j);
    json_obj_end(p->j);
}

/* One sample of one counter track: its own name, so that chrome://tracing does not stack the
 * series of a device on each other. */
static void counter(pf_t *p, const xr_t *x, int dev, unsigned s, uint64_t t, uint64_t v)
{
    char name[128];
    if (s < S_LIB0)
        snprintf(name, sizeof name, "device %d %s", dev, series_names[s]);
    else
        snprintf(name, sizeof name, "device %d outside the pool: %s", dev, x->dev[dev].lib[s - S_LIB0]);
    event_head(p, name, "C", t, 0);
    json_obj(p->j, "args");
    json_u64(p->j, "bytes", v);
    json_obj_end(p->j);
    json_obj_end(p->j);
    p->samples++;
}

static void read_figures(const xr_dev_t *d, uint64_t *v)
{
    v[S_REQUESTED] = d->requested;
    v[S_ALLOCATED] = d->allocated;
    v[S_RESERVED] = d->reserved;
    v[S_PENDING] = d->pending < d->reserved ? d->pending : d->reserved;
    uint64_t used = d->allocated + v[S_PENDING];
    v[S_CACHED] = d->reserved > used ? d->reserved - used : 0;
    for (unsigned i = 0; i < XR_MAX_LIBS; i++)
        v[S_LIB0 + i] = d->lib_bytes[i];
}

static unsigned series_count(const xr_t *x, int dev)
{
    return S_LIB0 + x->dev[dev].nlibs;
}

/* Closes the open bucket: its maxima at its start; then, when the next change is not in the
 * bucket that follows (or there is none), the values it ended with at that bucket's start. */
static void flush(pf_t *p, const xr_t *x, int dev, int64_t next_bucket)
{
    pf_dev_t *q = &p->dev[dev];
    if (q->bucket < 0)
        return;
    unsigned n = series_count(x, dev);
    for (unsigned s = 0; s < n; s++) {
        pf_series_t *z = &q->s[s];
        if (!z->seen || z->bmax != z->emitted) {
            counter(p, x, dev, s, (uint64_t)q->bucket * p->res, z->bmax);
            z->emitted = z->bmax, z->seen = 1;
        }
    }
    if (next_bucket == q->bucket + 1)
        return;
    for (unsigned s = 0; s < n; s++) {
        pf_series_t *z = &q->s[s];
        if (z->cur != z->emitted) {
            counter(p, x, dev, s, (uint64_t)(q->bucket + 1) * p->res, z->cur);
            z->emitted = z->cur;
        }
    }
}

static void on_change(pf_t *p, const xr_t *x, int dev, uint64_t t)
{
    pf_dev_t *q = &p->dev[dev];
    uint64_t v[NSERIES];
    read_figures(&x->dev[dev], v);
    unsigned n = series_count(x, dev);
    p->changes++;
    if (!p->res) {
        for (unsigned s = 0; s < n; s++)
            if (!q->s[s].seen || v[s] != q->s[s].emitted) {
                counter(p, x, dev, s, t, v[s]);
                q->s[s].emitted = q->s[s].cur = v[s];
                q->s[s].seen = 1;
            }
        return;
    }
    int64_t b = (int64_t)(t / p->res);
    if (b != q->bucket) {
        flush(p, x, dev, b);
        q->bucket = b;
        for (unsigned s = 0; s < NSERIES; s++)
            q->s[s].bmax = q->s[s].cur;
    }
    for (unsigned s = 0; s < n; s++) {
        q->s[s].cur = v[s];
        if (v[s] > q->s[s].bmax)
            q->s[s].bmax = v[s];
    }
}

static void on_oom(pf_t *p, const xr_event_t *e)
{
    const gmlog_oom_t *r = (const gmlog_oom_t *)e->rec->p;
    const model_oom_t *o = NULL;
    for (size_t i = 0; i < p->m->nooms && !o; i++)
        if (p->m->ooms[i].t == e->rec->t && p->m->ooms[i].rec.request == r->request && p->m->ooms[i].dev == e->dev)
            o = &p->m->ooms[i];
    oom_verdict_t v;
    if (o)
        oom_classify(p->m, o, &v);
    char name[96], a[32];
    snprintf(name, sizeof name, "OOM: %s%s", rep_bytes(r->request, a),
             (r->h.flags & GMLOG_OOM_RECOVERED) ? " (recovered)" : "");
    event_head(p, name, "i", e->rec->t, TID_DEVICE(e->dev));
    json_str(p->j, "s", "t");
    json_obj(p->j, "args");
    json_u64(p->j, "device", e->dev);
    json_u64(p->j, "request", r->request);
    json_str(p->j, "cause", o ? oom_cause_name(v.cause) : "not analysed");
    if (o)
        json_str(p->j, "evidence", v.why);
    json_bool(p->j, "recovered", (r->h.flags & GMLOG_OOM_RECOVERED) != 0);
    json_u64(p->j, "driver_free", r->driver_free);
    json_u64(p->j, "driver_total", r->driver_total);
    json_u64(p->j, "pool_reserved", r->reserved);
    json_u64(p->j, "pool_allocated", r->allocated);
    json_u64(p->j, "largest_free_block", r->largest_free);
    json_obj_end(p->j);
    json_obj_end(p->j);
}

static void on_empty_cache(pf_t *p, const xr_event_t *e)
{
    static const char *const reasons[] = {"?", "OOM", "gmshim_empty_cache()", "periodic", "idle",
                                          "GMSHIM_CACHE_LIMIT", "GMSHIM_DEVICE_LIMIT", "exit"};
    const gmlog_empty_cache_t *c = (const gmlog_empty_cache_t *)e->rec->p;
    unsigned why = e->rec->flags < 8 ? e->rec->flags : 0;
    char name[96], a[32];
    snprintf(name, sizeof name, "cache release: %s (%s)", rep_bytes(c->bytes, a), reasons[why]);
    event_head(p, name, "i", e->rec->t, TID_DEVICE(e->dev));
    json_str(p->j, "s", "t");
    json_obj(p->j, "args");
    json_u64(p->j, "bytes", c->bytes);
    json_u64(p->j, "segments", c->segments);
    json_str(p->j, "reason", reasons[why]);
    json_u64(p->j, "dur_ns", c->dur_ns);
    json_obj_end(p->j);
    json_obj_end(p->j);
}

/* The epoch that the previous mark opened, up to t. */
static void close_epoch(pf_t *p, uint64_t t)
{
    if (!p->have_mark)
        return;
    event_head(p, p->mark_label[0] ? p->mark_label : "(unlabelled mark)", "X", p->mark_t, TID_MARKS);
    json_u64(p->j, "dur", ts_us(p, t) - ts_us(p, p->mark_t));
    json_obj(p->j, "args");
    json_u64(p->j, "mark", p->mark_id);
    json_obj_end(p->j);
    json_obj_end(p->j);
    p->have_mark = 0;
}

static void on_mark(pf_t *p, const xr_event_t *e)
{
    close_epoch(p, e->rec->t);
    event_head(p, e->label[0] ? e->label : "(unlabelled mark)", "i", e->rec->t, TID_MARKS);
    json_str(p->j, "s", "t");
    json_obj(p->j, "args");
    json_u64(p->j, "mark", e->mark_id);
    json_obj_end(p->j);
    json_obj_end(p->j);
    p->have_mark = 1;
    p->mark_t = e->rec->t;
    p->mark_id = e->mark_id;
    snprintf(p->mark_label, sizeof p->mark_label, "%s", e->label);
}

static void on_device(pf_t *p, const xr_t *x, const xr_event_t *e)
{
    char name[200];
    const model_dev_t *md = e->dev < 256 ? p->m->dev[e->dev] : NULL;
    snprintf(name, sizeof name, "device %u%s%s%s", e->dev, md && md->name[0] ? " (" : "", md ? md->name : "",
             md && md->name[0] ? ")" : "");
    metadata(p, "thread_name", TID_DEVICE(e->dev), "name", name, 0);
    snprintf(name, sizeof name, "device %u total", e->dev);
    event_head(p, name, "C", e->rec->t, 0);
    json_obj(p->j, "args");
    json_u64(p->j, "bytes", x->dev[e->dev].total);
    json_obj_end(p->j);
    json_obj_end(p->j);
}

/* The track of one term of device dev (made when first met), or -1 when out of memory. */
static long card_track(pf_t *p, int dev, const char *label)
{
    char name[200];
    snprintf(name, sizeof name, "device %d card: %s", dev, label);
    for (size_t i = 0; i < p->ncard; i++)
        if (p->card[i].dev == dev && !strcmp(p->card[i].name, name))
            return (long)i;
    struct pf_card *c = vec_grow(p->card, &p->capcard, p->ncard + 1, sizeof *c, 16);
    if (!c)
        return -1;
    p->card = c;
    c = &p->card[p->ncard];
    memset(c, 0, sizeof *c);
    c->dev = dev;
    snprintf(c->name, sizeof c->name, "%s", name);
    return (long)p->ncard++;
}

/* The card's ledger at a sample: a counter per term (two processes of one command line share
 * one, summed); a term gone since (a process ended) goes to 0. */
static void on_ledger(pf_t *p, const xr_t *x, const xr_event_t *e)
{
    ledger_t *l = malloc(sizeof *l);
    if (!l || ledger_now(x, p->m, e->dev, e->rec, l)) {
        free(l);
        return;
    }
    char label[160];
    for (size_t k = 0; k < p->ncard; k++)
        if (p->card[k].dev == (int)e->dev)
            p->card[k].now = 0;
    for (unsigned i = 0; i < l->nterms; i++) {
        long k = card_track(p, (int)e->dev, ledger_term_label(&l->term[i], l->torch, label, sizeof label));
        if (k >= 0)
            p->card[k].now += l->term[i].bytes;
    }
    free(l);
    for (size_t k = 0; k < p->ncard; k++) {
        struct pf_card *c = &p->card[k];
        if (c->dev != (int)e->dev || (c->written && c->now == c->emitted))
            continue;
        c->written = 1;
        c->emitted = c->now;
        event_head(p, c->name, "C", e->rec->t, 0);
        json_obj(p->j, "args");
        json_u64(p->j, "bytes", c->now);
        json_obj_end(p->j);
        json_obj_end(p->j);
        p->samples++;
    }
}

static void each_event(xr_t *x, const xr_event_t *e, void *arg)
{
    pf_t *p = arg;
    switch (e->type) {
    case XR_CHANGED: on_change(p, x, (int)e->dev, e->rec->t); break;
    case XR_OOM: on_oom(p, e); break;
    case XR_EMPTY_CACHE: on_empty_cache(p, e); break;
    case XR_MARK: on_mark(p, e); break;
    case XR_DEVICE: on_device(p, x, e); break;
    case XR_LEDGER: on_ledger(p, x, e); break;
    default: break;
    }
}

/* 1, 2 or 5 times a power of ten, at least v (ns), at least 1 us. */
static uint64_t nice_ns(uint64_t v)
{
    for (uint64_t p = 1000;; p *= 10)
        for (int k = 0; k < 3; k++) {
            uint64_t c = p * (uint64_t[]){1, 2, 5}[k];
            if (c >= v || p > UINT64_MAX / 100)
                return c;
        }
}

typedef struct pf_run {
    json_t j;
    const export_opts_t *o;
    uint32_t pids[64];
    int npids;
    uint64_t samples;
} pf_run_t;

static uint32_t unique_pid(pf_run_t *r, uint32_t pid, int index)
{
    for (int i = 0; i < r->npids; i++)
        if (r->pids[i] == pid)
            pid = 0x40000000u + (uint32_t)index; /* two logs of one pid (two hosts): keep them apart */
    if (r->npids < 64)
        r->pids[r->npids++] = pid;
    return pid;
}

static void process_metadata(pf_t *p, const rd_log_t *lf, const model_t *m, int index)
{
    char title[256], label[600];
    metadata(p, "process_name", 0, "name", xr_log_title(lf, m, title, sizeof title), 0);
    int rank = model_rank(m);
    metadata(p, "process_sort_index", 0, "sort_index", NULL, rank >= 0 ? rank : index);
    if (p->res) {
        char d[32];
        snprintf(label, sizeof label, "%s; gmshim " GMSHIM_VERSION_STRING "; wall clock; counters: maxima over %s buckets",
                 lf->name, rep_dur(p->res, d));
    } else {
        snprintf(label, sizeof label, "%s; gmshim " GMSHIM_VERSION_STRING "; wall clock; counters: every change", lf->name);
    }
    metadata(p, "process_labels", 0, "labels", label, 0);
    metadata(p, "thread_name", TID_MARKS, "name", "marks and epochs", 0);
}

static void perfetto_one(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg)
{
    pf_run_t *r = arg;
    pf_t *p = calloc(1, sizeof *p);
    if (!p) {
        fputs("gmshim export: out of memory\n", stderr);
        return;
    }
    p->j = &r->j;
    p->lf = lf;
    p->m = m;
    p->pid = unique_pid(r, lf->hdr.pid, c->index);
    p->t0_ns = lf->hdr.start_realtime_ns;
    for (int i = 0; i < 256; i++)
        p->dev[i].bucket = -1;
    p->res = r->o->resolution_ns;
    if (p->res == UINT64_MAX) { /* auto: every change while few, else about 20 000 buckets a run */
        uint64_t changes = 0;
        for (int i = 0; i < m->ndev; i++)
            if (m->dev[i])
                changes += m->dev[i]->allocs + m->dev[i]->frees + m->dev[i]->seg_allocs + m->dev[i]->seg_frees;
        p->res = changes > 100000 ? nice_ns(m->last_t / 20000 + 1) : 0;
    }
    process_metadata(p, lf, m, c->index);
    xr_t *x = calloc(1, sizeof *x);
    if (!x || xr_run(x, lf, m, each_event, p))
        fputs("gmshim export: out of memory\n", stderr);
    if (x) {
        for (int d = 0; d < x->ndev; d++)
            flush(p, x, d, -2);
        close_epoch(p, x->last_t);
        xr_free(x);
        free(x);
    }
    char dur[32], n[32];
    fprintf(stderr, "gmshim export: %s: %s counter samples from %s changes, %s\n", lf->name,
            rep_count(p->samples, n), rep_count(p->changes, dur),
            p->res ? "each the maximum over its bucket" : "every change");
    if (p->res)
        fprintf(stderr, "gmshim export: %s: counter resolution %s (--resolution)\n", lf->name, rep_dur(p->res, dur));
    r->samples += p->samples;
    free(p->card);
    free(p);
}

int export_perfetto(int nlogs, char **logs, const export_opts_t *o)
{
    outfile_t out;
    FILE *f = outfile_open(&out, o->out, "w", "gmshim export");
    if (!f)
        return CLI_FAIL;
    FILE *devnull = fopen("/dev/null", "w");
    pf_run_t *r = calloc(1, sizeof *r);
    if (!devnull || !r) {
        outfile_discard(&out);
        if (devnull)
            fclose(devnull);
        free(r);
        return CLI_FAIL;
    }
    r->o = o;
    json_init(&r->j, f);
    json_obj(&r->j, NULL);
    json_arr(&r->j, "traceEvents");
    cli_ctx_t c;
    cli_init(&c, devnull, stderr, "export");
    c.progress = isatty(2);
    int rc = cli_run_logs(&c, nlogs, logs, MODEL_EPOCHS | MODEL_SITES, perfetto_one, r);
    json_arr_end(&r->j);
    json_str(&r->j, "displayTimeUnit", "ms"); /* what the writer is and the clock: in each process's labels */
    json_obj_end(&r->j);
    json_line_end(&r->j);
    fclose(devnull);
    free(r);
    if (!c.c_logs) { /* no log could be read: no file */
        outfile_discard(&out);
        return rc;
    }
    return outfile_commit(&out, "gmshim export") ? CLI_FAIL : rc;
}
