/* The model's entry points: a log replayed through a model of gmshim's pool — in order
 * (model_ordered.c) or by one of the parallel replays (model_windows.c for the summary,
 * model_split.c with call sites and epochs), each record applied by the reducer
 * (model_reduce.c) — and the model's life (init, finish, free). It chooses the replay; it never
 * trusts a size, id or count from the log without checking it. */
#include "model_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- small helpers -------------------------------------------------------------------------- */

_Noreturn void model_die_oom(void)
{
    fputs("gmshim: out of memory\n", stderr);
    exit(1);
}

void model_init(model_t *m, rd_log_t *lf, unsigned flags, uint64_t stop_seq, int mark_id, const char *mark_label)
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
        model_die_oom();
    live_init(&m->live, 1024);
    map_init(&m->sstmap, 1024);
    map_init(&m->sitemap, 256);
    map_init(&m->strmap, 256);
    if (!(flags & (MODEL_RANGE | MODEL_SPLIT))) /* a parallel replay's windows: a log without tensors */
        model_torch_scan(m, lf);
    uint64_t span = lf->t_last > lf->t_first ? lf->t_last - lf->t_first : 0;
    for (unsigned i = 0; i < MODEL_FRAG_SAMPLES; i++)
        m->sample_t[i] = lf->t_first + span * (i + 1) / MODEL_FRAG_SAMPLES;
}

void model_finish(model_t *m)
{
    model_refresh_kinds(m);
    for (int i = 0; i < m->ndev; i++) {
        model_dev_t *d = m->dev[i];
        if (!d)
            continue;
        d->allocs = d->cut_allocs, d->frees = d->cut_frees; /* a wrapped log's: from its checkpoint */
        for (int k = 0; k < 8; k++)
            d->allocs += d->allocs_kind[k], d->frees += d->frees_kind[k];
    }
}

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

int model_build_until(model_t *m, rd_log_t *lf, unsigned flags, uint64_t stop_seq, int mark_id,
                      const char *mark_label)
{
    model_init(m, lf, flags, stop_seq, mark_id, mark_label);
    int done = 0;
    if (!m->torch && stop_seq == UINT64_MAX && !mark_id && !mark_label && (!flags || flags == (MODEL_SITES | MODEL_EPOCHS))) {
        uint64_t from = 0, unknown = 0;
        done = flags ? model_build_parallel_sites(m, lf, &from, &unknown) : model_build_parallel(m, lf);
        if (done == 2) { /* an OOM or a reset: in order from the window where it lies */
            model_replay_from(m, from);
            lf->unknown_records += unknown;
        } else if (!done) { /* a damaged log, or a reset in the summary's windows: in order, with its diagnostics */
            model_free(m);
            model_init(m, lf, flags, stop_seq, mark_id, mark_label);
        }
    }
    if (!done)
        model_replay_from(m, 0);
    if (flags & MODEL_FRAG)
        model_take_samples(m, UINT64_MAX); /* the end of the log */
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
        model_die_oom();
    model_build_until(p, m->lf, 0, d->peak_seq + 1, 0, NULL);
    model_frag_now(p, dev, out);
    out->t = d->peak_reserved_t;
    model_free(p);
    free(p);
    return 0;
}

const model_mark_t *model_step_mark(const model_t *m, long k)
{
    if (k < 0) {
        for (size_t i = m->nmarks; i-- > 0;)
            if (!m->marks[i].end && ++k == 0)
                return &m->marks[i];
        return NULL;
    }
    for (size_t i = 0; i < m->nmarks; i++)
        if (!m->marks[i].end && k-- == 0)
            return &m->marks[i];
    return NULL;
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
    free(m->site_twins);
    map_free(&m->sitemap);
    for (size_t i = 0; i < m->nstrings; i++)
        free(m->strings[i]);
    free(m->strings);
    map_free(&m->strmap);
    ev_dec_free(&m->ev);
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
