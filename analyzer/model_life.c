/* The model's floor: its life (made, freed, out of memory), a device's state made at first use,
 * the timeline's buckets widened, the marks and the rank it read. It calls nothing above it:
 * the replays and the reducer call it. */
#include "model_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    uint64_t span = lf->t_last > lf->t_first ? lf->t_last - lf->t_first : 0;
    for (unsigned i = 0; i < MODEL_FRAG_SAMPLES; i++)
        m->sample_t[i] = lf->t_first + span * (i + 1) / MODEL_FRAG_SAMPLES;
}

/* ---- devices ------------------------------------------------------------------------------------ */

__attribute__((noinline)) model_dev_t *model_dev_make(model_t *m, unsigned id)
{
    model_dev_t *d = calloc(1, sizeof *d);
    if (!d)
        model_die_oom();
    d->tl = calloc(MODEL_TL_BUCKETS, sizeof *d->tl);
    if (!d->tl)
        model_die_oom();
    d->id = (int)id;
    d->present = 1;
    leakwarn_trough_init(&d->tr);
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
    model_steps_attach(m, d);
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

static void (*freed_hook)(const model_t *);

void model_on_free(void (*fn)(const model_t *m))
{
    __atomic_store_n(&freed_hook, fn, __ATOMIC_RELEASE);
}

void model_free(model_t *m)
{
    void (*hook)(const model_t *) = __atomic_load_n(&freed_hook, __ATOMIC_ACQUIRE);
    if (hook)
        hook(m);
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
    free(m->stepkeys);
    memset(m, 0, sizeof *m);
}
