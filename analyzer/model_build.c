/* The model's entry points: a log replayed through a model of gmshim's pool — in order
 * (model_ordered.c) or by one of the parallel replays (model_windows.c for the summary,
 * model_split.c with call sites and epochs), each record applied by the reducer
 * (model_step.c) — and the model finished. It chooses the replay; it never trusts a size, id or
 * count from the log without checking it. */
#include "model_int.h"

#include <stdlib.h>
#include <string.h>

/* A model made for lf, with PyTorch's tensors found (model_torch.c) when the log has them. */
static void start(model_t *m, rd_log_t *lf, unsigned flags, uint64_t stop_seq, int mark_id, const char *mark_label)
{
    model_init(m, lf, flags, stop_seq, mark_id, mark_label);
    model_torch_scan(m, lf);
    if ((flags & MODEL_EPOCHS) && !(flags & (MODEL_RANGE | MODEL_SPLIT)))
        model_steps_scan(m, lf); /* after the tensors: on their devices they are the allocations */
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

int model_build_until(model_t *m, rd_log_t *lf, unsigned flags, uint64_t stop_seq, int mark_id,
                      const char *mark_label)
{
    start(m, lf, flags, stop_seq, mark_id, mark_label);
    int done = 0;
    if (!m->torch && stop_seq == UINT64_MAX && !mark_id && !mark_label && (!flags || flags == (MODEL_SITES | MODEL_EPOCHS))) {
        uint64_t from = 0, unknown = 0;
        done = flags ? model_build_parallel_sites(m, lf, &from, &unknown) : model_build_parallel(m, lf);
        if (done == 2) { /* an OOM or a reset: in order from the window where it lies */
            model_replay_from(m, from);
            lf->unknown_records += unknown;
        } else if (!done) { /* a damaged log, or a reset in the summary's windows: in order, with its diagnostics */
            model_free(m);
            start(m, lf, flags, stop_seq, mark_id, mark_label);
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
