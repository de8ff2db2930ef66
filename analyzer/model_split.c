/* The parallel replay with call sites and epochs (leaks, report, oom): windows read and matched
 * by threads, applied in order by the calling thread, site figures made by two more. */
#include "model_int.h"
#include "vec.h"

#include <pthread.h>
#include <stdio.h>

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
    size_t applying;               /* the operation being applied (split_apply) */
    int bail;                      /* an OOM or a reset: the ordered replay takes over here */
    int partial;                   /* the reader skipped something: replay all in order */
    uint64_t unknown;
} model_split_t;

enum { SPLIT_ALLOC, SPLIT_FREE, SPLIT_REPLACED, SPLIT_RECORD };

static void split_op(model_t *w, int op, unsigned dev, const model_live_t *e, uint64_t t)
{
    model_split_t *s = w->split;
    if (s->nops == s->capops) {
        split_op_t *n = vec_grow(s->ops, &s->capops, s->nops + 1, sizeof *n, 16);
        if (!n)
            model_die_oom();
        s->ops = n;
    }
    s->ops[s->nops++] = (split_op_t){t, e->ptr, e->blk, model_live_req(e), e->sidx, (uint8_t)op, (uint8_t)dev, {0, 0}};
}

/* A record the ordered replay handles itself: copied. */
static void split_record(model_t *w, const rd_rec_t *r)
{
    model_split_t *s = w->split;
    rd_rec_t *n = vec_grow(s->recs, &s->caprecs, s->nrecs + 1, sizeof *n, 16);
    uint8_t *b = vec_grow(s->bytes, &s->capbytes, s->nbytes + r->len, 1, 16);
    if (!n || !b)
        model_die_oom();
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
    ev_t ev;
    ev_alloc_of(r, &ev);
    model_dev_t *d = model_get_dev(w, r->device);
    if (!d || !ev.ptr) {
        split_record(w, r); /* the ordered replay counts it (and makes its device) */
        return;
    }
    alloc_count(w, d, &ev);
    int found;
    model_live_t *e = live_upsert(&w->live, ev.ptr, &found);
    if (found)
        split_op(w, SPLIT_REPLACED, r->device, e, r->t);
    live_fill(e, r, &ev);
    e->sidx = ev.site;
    split_op(w, SPLIT_ALLOC, r->device, e, r->t);
}

/* A free in a window: matched in the window, or left to the ordered replay (an older block). */
static void split_free(model_t *w, const rd_rec_t *r)
{
    ev_t ev;
    ev_free_of(r, &ev);
    model_live_t *e = ev.ptr ? live_find(&w->live, ev.ptr) : NULL;
    if (!e) {
        split_record(w, r);
        return;
    }
    unsigned dev = model_live_dev(e);
    free_count(model_get_dev(w, dev), model_live_kind(e), ev.dur_ns);
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
        model_die_oom();
    while (!s->bail && model_fill_batch(&sl->lf, b)) {
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

/* The reducer's release hook under MODEL_DEFER: a block released while the window's operation
 * `applying` applied, for the site threads; e->sidx holds its site id. */
static void split_defer_release(void *arg, const model_t *m, const model_live_t *e)
{
    model_split_t *s = arg;
    split_release_t *n = vec_grow(s->rel, &s->caprel, s->nrel + 1, sizeof *n, 16);
    if (!n)
        model_die_oom();
    s->rel = n;
    const model_dev_t *sd = m->dev[model_live_dev(e)];
    s->rel[s->nrel++] = (split_release_t){s->applying, e->blk, model_live_req(e), e->sidx,
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
    m->release_hook = split_defer_release;
    m->release_arg = s;
    for (size_t i = 0; i < s->nops; i++) {
        split_op_t *o = &s->ops[i];
        s->applying = i;
        if (o->op == SPLIT_RECORD) {
            rd_rec_t r = s->recs[o->ptr];
            r.p = s->bytes + (uintptr_t)r.p;
            r.seq = m->records;
            model_step(m, &r);
            continue;
        }
        model_live_t e = {.ptr = o->ptr, .blk = o->blk, .req = o->req};
        unsigned dev = model_live_dev(&e);
        model_dev_t *d = m->dev[o->dev] ? m->dev[o->dev] : model_get_dev(m, o->dev);
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
        steps_note(d, o->site, model_live_req(&e), o->t);
        stamp(o->ep, d);
        alloc_apply(m, d, dev, model_live_kind(&e), model_live_block(&e), model_live_req(&e), o->site, o->t,
                    m->records - 1);
    }
    s->applying = s->nops;
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
    m->release_hook = NULL;
    m->release_arg = NULL;
    for (int i = 0; i < w->ndev; i++) {
        const model_dev_t *wd = w->dev[i];
        model_dev_t *d = m->dev[i];
        if (wd && d)
            model_add_alloc_counters(d, wd);
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
    uint32_t idx = model_sstat_index_at(m, dev, site, ep);
    if (__builtin_expect(m->nsst > before, 0)) {
        uint64_t *n = vec_grow(job->first, &job->capfirst, m->nsst, sizeof *n, 16);
        if (!n)
            model_die_oom();
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
        model_release_site(job->m, idx, model_live_block(&e), req, ep);
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
        model_die_oom();
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

/* The site threads' jobs: thread 0 fills the model's own table, the others a scratch model's. */
static void split_jobs_init(split_sites_t *jobs, model_t *m)
{
    memset(jobs, 0, SPLIT_SITE_THREADS * sizeof *jobs);
    for (unsigned k = 0; k < SPLIT_SITE_THREADS; k++) {
        jobs[k].part = k;
        if (k == 0) {
            jobs[k].m = m;
            continue;
        }
        model_t *t = calloc(1, sizeof *t);
        if (!t)
            model_die_oom();
        t->nsst = 1;
        t->capsst = 1024;
        t->sst = calloc(t->capsst, sizeof *t->sst);
        if (!t->sst)
            model_die_oom();
        map_init(&t->sstmap, 1024);
        jobs[k].m = t;
    }
}

static void split_jobs_free(split_sites_t *jobs)
{
    for (unsigned k = 0; k < SPLIT_SITE_THREADS; k++) {
        free(jobs[k].first);
        if (k) {
            free(jobs[k].m->sst);
            map_free(&jobs[k].m->sstmap);
            free(jobs[k].m);
        }
    }
}

/* The carried blocks kept their site ids: make them indices, as the ordered replay has. */
static void split_index_carried(model_t *m)
{
    for (size_t i = 0; i < m->live.cap; i++) {
        model_live_t *e = &m->live.slots[i];
        if (e->ptr && m->dev[model_live_dev(e)])
            e->sidx = (m->flags & MODEL_SITES) ? sstat_index(m, model_live_dev(e), e->sidx) : 0;
    }
}

/* 1 when the parallel replay made the model; 0 when it did not apply (then replay in order); 2
 * when a window met an OOM or a reset: the model is then the ordered replay's up to that window,
 * which starts at time *from, and the ordered replay goes on from there. Three stages overlap, each
 * on its own set of slots: the windows of round r + 1 are read while the calling thread applies
 * round r and the site threads make the site figures of round r - 1. */
#define SPLIT_SETS 3
int model_build_parallel_sites(model_t *m, rd_log_t *lf, uint64_t *from, uint64_t *unknown_out)
{
    unsigned want = model_workers_wanted(lf);
    if (want < 2 || lf->nchunks < 2 || lf->wrapped) /* a checkpoint's state: in order */
        return 0;
    /* The ordered apply and the site figures set the pace: more readers than SPLIT_READERS only
     * cost memory (docs/performance.md, "The analyzer's replays"). */
    if (want > SPLIT_READERS)
        want = SPLIT_READERS;
    size_t target = lf->nchunks / SPLIT_CHUNKS > want ? lf->nchunks / SPLIT_CHUNKS : want;
    uint64_t *begin = malloc((target + 1) * sizeof *begin);
    split_slot_t *sl = calloc(SPLIT_SETS * (size_t)want, sizeof *sl);
    if (!begin || !sl) {
        free(begin), free(sl);
        return 0;
    }
    size_t n = model_window_starts(lf, target, begin);
    int ok = n >= 2;
    for (unsigned j = 0; j < SPLIT_SETS * want && ok; j++)
        ok = sl[j].opened = rd_clone(lf, &sl[j].lf) == 0;
    uint64_t unknown = 0;
    int shown = 0, cont = 0;
    size_t applied = 0;
    unsigned cnt[SPLIT_SETS] = {0}, started[SPLIT_SETS] = {0};
    split_sites_t jobs[SPLIT_SITE_THREADS];
    split_jobs_init(jobs, m);
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
    split_jobs_free(jobs);
    for (unsigned k = 0; k < SPLIT_SETS; k++) /* a round still being read when another bailed out */
        for (unsigned j = 0; j < started[k]; j++) {
            pthread_join(sl[k * want + j].th, NULL);
            model_free(&sl[k * want + j].w);
        }
    m->flags &= ~MODEL_DEFER;
    if (ok)
        split_index_carried(m);
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
