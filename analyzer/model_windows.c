/* The parallel summary: windows of time replayed by threads of their own, stitched in order;
 * and how a log is cut into windows, which the parallel replay with sites (model_split.c) uses too. */
#include "model_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* ---- a log cut into windows (model_split.c too) ---- */

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

unsigned model_workers_wanted(const rd_log_t *lf)
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

size_t model_window_starts(const rd_log_t *lf, size_t target, uint64_t *begin)
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

/* ---- the parallel summary ----------------------------------------------------------------------
 * The summary needs no sites, marks or snapshots: its figures are sums, and peaks of sums over
 * time. So the log is cut into windows of time, each replayed by its own thread with its own
 * reader (RANGE mode: figures counted from a bias), and the windows are then stitched in order:
 * frees of blocks from earlier windows get their sizes from the live blocks carried over, and
 * each run of maxima between such frees is shifted by what the window started from. The result
 * is the sequential replay's, figure for figure (the tests compare them). */

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
    model_replay_from(&w->m, 0);
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

static inline void candidate(uint64_t *peak, uint64_t *peak_t, uint64_t base, uint64_t max, uint64_t removed, uint64_t t)
{
    int64_t v = (int64_t)base + (int64_t)(max - RANGE_BIAS) - (int64_t)removed;
    if (v > (int64_t)*peak) {
        *peak = (uint64_t)v;
        if (peak_t)
            *peak_t = t;
    }
}

void model_add_alloc_counters(model_dev_t *d, const model_dev_t *wd)
{
    for (int k = 0; k < 8; k++)
        d->allocs_kind[k] += wd->allocs_kind[k], d->frees_kind[k] += wd->frees_kind[k];
    d->hits += wd->hits, d->misses += wd->misses, d->graph_allocs += wd->graph_allocs;
    d->exact_allocs += wd->exact_allocs;
    d->planned_allocs += wd->planned_allocs, d->planned_bytes += wd->planned_bytes;
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
        model_dev_t *d = model_get_dev(m, (unsigned)i);
        base[i][0] = d->requested, base[i][1] = d->allocated, base[i][2] = d->reserved, base[i][3] = d->segments;
        if (wd->total || wd->name[0]) {
            d->total = wd->total, d->free_at_start = wd->free_at_start;
            memcpy(d->name, wd->name, sizeof d->name);
        }
        if (wd->limit_seen)
            d->limit = wd->limit;
        if (wd->limit_max > d->limit_max)
            d->limit_max = wd->limit_max;
        model_add_alloc_counters(d, wd);
        for (int k = 0; k < 8; k++) {
            d->empty_by_reason[k] += wd->empty_by_reason[k];
            d->warnings[k] += wd->warnings[k];
        }
        d->seg_allocs += wd->seg_allocs, d->seg_frees += wd->seg_frees;
        d->seg_alloc_ns += wd->seg_alloc_ns, d->seg_free_ns += wd->seg_free_ns;
        d->graph_segments += wd->graph_segments;
        d->fences += wd->fences, d->fence_waits += wd->fence_waits, d->fence_wait_ns += wd->fence_wait_ns;
        d->fence_ns += wd->fence_ns, d->fence_events += wd->fence_events;
        for (int k = 0; k <= GMLOG_FENCE_BY_MAX; k++)
            d->fences_by[k] += wd->fences_by[k];
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
    m->marks_bounds += w->marks_bounds;
    m->ooms_total += w->ooms_total;
    m->retries_total += w->retries_total;
    m->warns_total += w->warns_total;
}

/* 1 when the parallel replay made the summary; 0 when it did not apply (then replay in order). */
int model_build_parallel(model_t *m, rd_log_t *lf)
{
    unsigned want = model_workers_wanted(lf);
    if (want < 2 || lf->nchunks < 2 || lf->wrapped) /* a checkpoint's state: in order */
        return 0;
    uint64_t begin[MAX_WORKERS + 1];
    worker_t *w = calloc(want, sizeof *w);
    pthread_t *thr = calloc(want, sizeof *thr);
    if (!w || !thr) {
        free(w), free(thr);
        return 0;
    }
    unsigned n = (unsigned)model_window_starts(lf, want, begin);
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
