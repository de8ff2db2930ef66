/* Series and epochs: each device's epochs (marks, or troughs of allocated bytes when there are
 * no marks), their low-water series, and the closed-epoch series of a site. The per-event part
 * (dev_track, sstat_sync_at) is inline in model_int.h. */
#include "model_int.h"

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

void model_dev_close_epoch(model_dev_t *d, int sys, uint64_t start)
{
    if (d->epoch[sys] > 0) {
        series_add(&d->lowwater[sys], d->ep_min[sys], 1);
        leakwarn_step(&d->warn[sys], d->ep_min[sys], start);
    }
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

