/* Series and epochs: each device's epochs (marks; else the steps of its repeating allocations,
 * model_steps.c, or troughs of allocated bytes), their low-water series, the closed-epoch series
 * of a site, and the one rate of growth the reports state. The per-event part (dev_track,
 * sstat_sync_at, steps_note) is inline in model_int.h. */
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
    } else {
        d->epoch_first[sys] = start;
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


uint64_t model_series_rate(const model_series_t *s)
{
    uint64_t per;
    return model_series_grows(s, &per) ? per : 0;
}

uint64_t model_site_rate(const model_t *m, const model_sstat_t *s, int sys)
{
    if (sys < 0)
        return 0;
    model_series_t ser = model_site_series(m, s, sys);
    return model_series_rate(&ser);
}

/* The growing sites' rates added: what leaks states per site, so that the two reports agree. */
uint64_t model_oom_leak_rate(const model_oom_t *o)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < o->ngrow && i < MODEL_TOP; i++)
        sum += model_series_rate(&o->grow[i].ser);
    if (sum)
        return sum;
    uint64_t per = 0;
    model_series_grows(&o->lowwater, &per);
    return per;
}

uint64_t model_kept_by_site(const model_t *m, int dev, int sys, uint64_t *out)
{
    const model_dev_t *d = dev >= 0 && dev < MODEL_MAX_DEVICES ? m->dev[dev] : NULL;
    memset(out, 0, m->nsst * sizeof *out);
    if (!d || sys < 0 || sys > 1 || d->epoch[sys] < 2)
        return 0;
    uint64_t from = d->epoch_first[sys] & ~255ull, to = d->epoch_start[sys] & ~255ull, sum = 0;
    if (sys == EPOCH_MARKS) {
        const model_mark_t *first = model_step_mark(m, 0);
        from = first ? first->t & ~255ull : 0;
    }
    for (size_t i = 0; i < m->live.cap; i++) {
        const model_live_t *e = &m->live.slots[i];
        if (!e->ptr || model_live_dev(e) != (unsigned)dev || !e->sidx || e->sidx >= m->nsst)
            continue;
        uint64_t t = model_live_time(e);
        if (t < from || t >= to || model_live_before_cut(e))
            continue;
        out[e->sidx] += model_live_req(e);
        sum += model_live_req(e);
    }
    return sum;
}

const char *model_epoch_noun(const model_t *m, int dev, int sys, int plural)
{
    const model_dev_t *d = dev >= 0 && dev < MODEL_MAX_DEVICES ? m->dev[dev] : NULL;
    if (sys == EPOCH_MARKS)
        return plural ? "marks" : "mark";
    if (d && d->step.period)
        return plural ? "steps" : "step";
    return plural ? "troughs" : "trough";
}
