/* The timeline's data (timeline.h): a log replayed (export_replay.c) into each device's figures
 * over time, its top live sites, its flame graphs and the card's ledger at its samples; and what
 * the SVG (timeline_svg.c) and the page (timeline_html.c) both use to write it. Every string
 * from the log is escaped. */
#include "timeline.h"
#include "outfile.h"
#include "output.h"
#include "sites.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the data ----------------------------------------------------------------------------- */

size_t tl_slot(const model_t *m, uint32_t site)
{
    const model_sitedef_t *s = site ? model_site(m, site) : NULL;
    return s ? (size_t)(s - m->sites) + 1 : 0;
}

typedef struct tl_run {
    tl_log_t *t;
    int failed;
} tl_run_t;

static size_t bucket_of(const tl_log_t *t, uint64_t ns)
{
    size_t b = (size_t)((double)ns / (double)(t->tmax + 1) * TL_BUCKETS);
    return b < TL_BUCKETS ? b : TL_BUCKETS - 1;
}

static tl_dev_t *dev_of(tl_run_t *r, unsigned id)
{
    tl_log_t *t = r->t;
    if (id >= GMLOG_NO_DEVICE)
        return NULL;
    if (!t->dev[id]) {
        tl_dev_t *d = calloc(1, sizeof *d);
        uint64_t *live = calloc(t->nslots, sizeof *live);
        if (!d || !live) {
            free(d);
            free(live);
            r->failed = 1;
            return NULL;
        }
        d->id = (int)id;
        d->bucket = -1;
        d->live = live;
        t->dev[id] = d;
    }
    return t->dev[id];
}

/* The top sites of the live set, into bucket b. */
static void take_top(const tl_log_t *t, tl_dev_t *d, int b)
{
    unsigned n = 0;
    for (size_t s = 0; s < t->nslots; s++) {
        uint64_t v = d->live[s];
        if (!v || (n == TL_TOP && v <= d->top_bytes[b][n - 1]))
            continue;
        unsigned i = n < TL_TOP ? n++ : n - 1;
        for (; i > 0 && d->top_bytes[b][i - 1] < v; i--) {
            d->top_bytes[b][i] = d->top_bytes[b][i - 1];
            d->top_slot[b][i] = d->top_slot[b][i - 1];
        }
        d->top_bytes[b][i] = v;
        d->top_slot[b][i] = (uint32_t)s;
    }
    d->ntop[b] = (uint8_t)n;
    d->top_set[b] = 1;
}

static void snapshot_live(tl_log_t *t, tl_dev_t *d, const char *label, uint64_t at)
{
    if (d->nsnap >= TL_FLAMES)
        return;
    tl_snap_t *s = &d->snap[d->nsnap];
    size_t n = 0;
    for (size_t i = 0; i < t->nslots; i++)
        n += d->live[i] != 0;
    s->slot = malloc((n + 1) * sizeof *s->slot);
    s->bytes = malloc((n + 1) * sizeof *s->bytes);
    if (!s->slot || !s->bytes) {
        free(s->slot);
        free(s->bytes);
        return;
    }
    for (size_t i = 0; i < t->nslots; i++)
        if (d->live[i]) {
            s->slot[s->n] = (uint32_t)i;
            s->bytes[s->n++] = d->live[i];
        }
    snprintf(s->label, sizeof s->label, "%s", label);
    s->t = at;
    d->nsnap++;
}

/* Before an event at time ns: a bucket that closes gets its top sites (the live set at its end). */
static void enter_bucket(tl_log_t *t, tl_dev_t *d, uint64_t ns)
{
    int b = (int)bucket_of(t, ns);
    if (b != d->bucket && d->bucket >= 0)
        take_top(t, d, d->bucket);
    d->bucket = b;
}

static uint64_t outside_bytes(const xr_dev_t *x)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < x->nlibs; i++)
        v += x->lib_bytes[i];
    return v;
}

static void on_changed(tl_run_t *r, const xr_t *x, tl_dev_t *d, uint64_t ns)
{
    tl_log_t *t = r->t;
    const xr_dev_t *xd = &x->dev[d->id];
    size_t b = bucket_of(t, ns);
    uint64_t o = outside_bytes(xd);
    if (!d->used[b] || xd->allocated > d->amax[b])
        d->amax[b] = xd->allocated;
    if (!d->used[b] || xd->reserved > d->rmax[b])
        d->rmax[b] = xd->reserved;
    if (!d->used[b] || o > d->omax[b])
        d->omax[b] = o;
    d->used[b] = 1;
    d->alast[b] = xd->allocated, d->rlast[b] = xd->reserved, d->olast[b] = o;
    if (xd->reserved > d->peak_reserved)
        d->peak_reserved = xd->reserved;
    if (o > d->peak_outside)
        d->peak_outside = o;
    if (xd->allocated > d->peak_allocated)
        d->peak_allocated = xd->allocated;
    const model_dev_t *md = t->m->dev[d->id];
    if (!d->peak_taken && md && md->peak_allocated && xd->allocated >= md->peak_allocated) {
        char a[32], tt[32], label[160];
        snprintf(label, sizeof label, "peak: %s allocated at %s", rep_bytes(xd->allocated, a), rep_time(ns, tt));
        snapshot_live(t, d, label, ns);
        d->peak_taken = 1;
    }
}

uint64_t tl_card_band(const ledger_t *l)
{
    uint64_t v = 0;
    for (unsigned i = 0; l && i < l->nterms; i++)
        if (l->term[i].kind == LK_CONTEXT || l->term[i].kind == LK_PROCESS)
            v += l->term[i].bytes;
    return v;
}

/* A LEDGER sample: the bucket's ledger is the last one in it. */
static void on_card(tl_run_t *r, const xr_t *x, tl_dev_t *d, const xr_event_t *e)
{
    size_t b = bucket_of(r->t, e->rec->t);
    if (!d->card[b] && !(d->card[b] = malloc(sizeof *d->card[b]))) {
        r->failed = 1;
        return;
    }
    if (ledger_now(x, r->t->m, e->dev, e->rec, d->card[b])) {
        free(d->card[b]);
        d->card[b] = NULL;
        return;
    }
    d->kmax[b] = tl_card_band(d->card[b]);
}

static void collect_event(xr_t *x, const xr_event_t *e, void *arg)
{
    tl_run_t *r = arg;
    tl_log_t *t = r->t;
    if (e->type == XR_MARK || e->dev >= GMLOG_NO_DEVICE)
        return;
    tl_dev_t *d = dev_of(r, e->dev);
    if (!d || !e->rec)
        return;
    uint64_t ns = e->rec->t;
    switch (e->type) {
    case XR_ALLOC:
    case XR_FREE: {
        const xr_block_t *b = e->blk;
        if (!xr_kind_on_device(b->kind))
            break;
        enter_bucket(t, d, ns);
        size_t s = tl_slot(t->m, b->site);
        d->live[s] = e->type == XR_ALLOC ? d->live[s] + b->size : (d->live[s] > b->size ? d->live[s] - b->size : 0);
        break;
    }
    case XR_CHANGED: on_changed(r, x, d, ns); break;
    case XR_OOM: {
        const gmlog_oom_t *o = (const gmlog_oom_t *)e->rec->p;
        char a[32], tt[32], label[160];
        d->ooms++;
        snprintf(label, sizeof label, "OOM %u: %s asked for at %s", d->ooms, rep_bytes(o->request, a),
                 rep_time(ns, tt));
        enter_bucket(t, d, ns);
        snapshot_live(t, d, label, ns);
        break;
    }
    case XR_LEDGER: on_card(r, x, d, e); break;
    default: break;
    }
}

int tl_collect(tl_log_t *t, rd_log_t *lf, const model_t *m, xr_t *x)
{
    memset(t, 0, sizeof *t);
    t->lf = lf;
    t->m = m;
    t->x = x;
    t->nslots = m->nsites + 1;
    t->tmax = m->last_t ? m->last_t : 1;
    tl_run_t r = {t, 0};
    for (int i = 0; i < m->ndev; i++)
        if (m->dev[i])
            dev_of(&r, (unsigned)i);
    if (xr_run(x, lf, m, collect_event, &r) || r.failed)
        return -1;
    for (int i = 0; i < 256; i++) {
        tl_dev_t *d = t->dev[i];
        if (!d)
            continue;
        if (d->bucket >= 0)
            take_top(t, d, d->bucket);
        /* buckets without an event hold the figures of the one before */
        for (size_t b = 1; b < TL_BUCKETS; b++)
            if (!d->used[b]) {
                d->amax[b] = d->alast[b] = d->alast[b - 1];
                d->rmax[b] = d->rlast[b] = d->rlast[b - 1];
                d->omax[b] = d->olast[b] = d->olast[b - 1];
            }
        /* the card's band holds from one sample to the next */
        for (size_t b = 0; b < TL_BUCKETS; b++) {
            if (d->card[b])
                d->ncard++;
            else if (b)
                d->kmax[b] = d->kmax[b - 1];
            if (d->ncard && d->rmax[b] + d->omax[b] + d->kmax[b] > d->peak_card)
                d->peak_card = d->rmax[b] + d->omax[b] + d->kmax[b];
        }
    }
    return 0;
}

void tl_log_free(tl_log_t *t)
{
    for (int i = 0; i < 256; i++) {
        tl_dev_t *d = t->dev[i];
        if (!d)
            continue;
        for (unsigned k = 0; k < d->nsnap; k++) {
            free(d->snap[k].slot);
            free(d->snap[k].bytes);
        }
        for (size_t b = 0; b < TL_BUCKETS; b++)
            free(d->card[b]);
        free(d->live);
        free(d);
        t->dev[i] = NULL;
    }
}

/* ---- what the SVG and the page share --------------------------------------------------- */

void tl_xml(FILE *f, const char *s)
{
    size_t left = s ? strlen(s) : 0;
    for (; s && *s; s++, left--) {
        int n;
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default:
            if ((unsigned char)*s < 0x20)
                break;
            if (!(n = xr_utf8_len((const unsigned char *)s, left))) { /* the page is UTF-8, whatever the log holds */
                fputs("\xef\xbf\xbd", f);
                break;
            }
            fwrite(s, 1, (size_t)n, f);
            s += n - 1, left -= (size_t)n - 1;
            break;
        }
    }
}

uint64_t tl_nice_max(uint64_t v)
{
    if (v < 1024)
        return 1024;
    uint64_t p = 1;
    while (p <= v / 2)
        p *= 2;
    /* p <= v < 2p: the first of p, 1.25p, 1.5p, 1.75p, 2p at or above v */
    for (int q = 5; q <= 8; q++)
        if (p / 4 * (uint64_t)q >= v)
            return p / 4 * (uint64_t)q;
    return 2 * p;
}

/* The chart's top: the largest figure drawn, or the device's cap when it is not far above. */
uint64_t tl_vtop(const tl_dev_t *d, const model_dev_t *md, uint64_t *cap)
{
    uint64_t v = d->peak_reserved > d->peak_allocated ? d->peak_reserved : d->peak_allocated;
    if (d->peak_outside > v)
        v = d->peak_outside;
    if (d->peak_card > v)
        v = d->peak_card;
    *cap = md && md->limit_max ? md->limit_max : md ? md->total : 0;
    if (*cap && *cap <= v * 2 && *cap > v)
        v = *cap;
    return tl_nice_max(v);
}
