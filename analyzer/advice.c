/* The recommendation rule, in one place: what `oom`, `report` and `whatif` may recommend. A fix
 * that only postpones the OOM is no fix: a setting must get past every recorded failure with
 * headroom left, and memory that grows every step is never "fixed" by a setting or a cap. */
#include "advice.h"
#include "output.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1ull << 20)

/* The iterations' low-water marks rise steadily; for PyTorch's segments (which it keeps while it
 * runs) rising at least twice and never falling much. */
static int lowwater_grows(const model_series_t *s, int cache_kept, uint64_t *per)
{
    if (model_series_grows(s, per))
        return 1;
    if (!cache_kept || s->n < 3 || s->last <= s->first)
        return 0;
    *per = (s->last - s->first) / (s->n - 1);
    return s->ups >= 2 && s->downs * 4 <= s->n - 1;
}

void advice_growth(const model_t *m, const model_oom_t *o, int torch_cache_kept, advice_growth_t *g)
{
    memset(g, 0, sizeof *g);
    int steps = o->epoch_system == EPOCH_TROUGHS && m && o->dev < m->ndev && m->dev[o->dev] &&
                m->dev[o->dev]->step.period;
    g->word = o->epoch_system == EPOCH_MARKS ? "mark" : steps ? "step" : "iteration";
    g->steps = o->epoch_index;
    if (o->epoch_index >= 2 && o->epoch_start > o->epoch_first)
        g->step_ns = (o->epoch_start - o->epoch_first) / (o->epoch_index - 1);
    uint64_t per = 0;
    if (o->epoch_system < 0 || o->epoch_index < 2 || !lowwater_grows(&o->lowwater, torch_cache_kept, &per))
        return;
    uint64_t rate = model_oom_leak_rate(o); /* the growing sites' rates, as `leaks` states them */
    g->per_step = rate ? rate : per;
    if (o->ngrow && m)
        g->site = m->sst[o->grow[0].sidx].site;
}

void advice_growth_of_device(const model_t *m, int dev, int torch_cache_kept, advice_growth_t *g)
{
    memset(g, 0, sizeof *g);
    g->word = "step";
    for (size_t i = 0; m && i < m->nooms; i++)
        if (m->ooms[i].dev == dev && !m->ooms[i].history) {
            advice_growth(m, &m->ooms[i], torch_cache_kept, g);
            return;
        }
}

void advice_growth_of_log(const rp_log_t *log, advice_growth_t *g)
{
    uint64_t per;
    uint32_t steps;
    if (g->per_step || !plan_step_growth(log, &per, &steps))
        return;
    g->per_step = per;
    g->peaks = 1;
    g->word = "mark";
    if (!g->steps)
        g->steps = steps;
}

void advice_opts(wi_opts_t *o, const advice_growth_t *g)
{
    o->growth_per_step = g->per_step;
    o->step_ns = g->step_ns;
    o->growth_word = g->word;
    o->growth_peaks = g->peaks;
    o->growth_site = g->site;
}

uint64_t advice_headroom(uint64_t cap, uint64_t per_step)
{
    uint64_t pct = cap / 100 * ADVICE_HEADROOM_PCT, steps = per_step * ADVICE_HEADROOM_STEPS;
    return gm_round_up(pct > steps ? pct : steps, MiB);
}

int advice_for_allocator(const rp_log_t *log, const char *env)
{
    /* The cap that refused is raised in its own words: gmshim's cap holds PyTorch's segments too. */
    if (!strcmp(env, "GMSHIM_DEVICE_LIMIT"))
        return 1;
    int torch = !strncmp(env, "PYTORCH_", 8);
    return log->torch_cache_kept || log->torch_tensors ? torch : !torch;
}

int advice_plan_off(const rp_log_t *log, const wi_run_t *r)
{
    /* GMSHIM_PLAN=1 is no remedy for an OOM: on the GPU, at a cap it trains only with the pool
     * giving back and mapping memory every step (1.4-6 x the step), where growable ranges train as
     * much or more (docs/performance.md, runs 123-126). Its replay is shown, never recommended, nor
     * any run that keeps it on (a setting tried over a recording that ran it). */
    int plan = r->cfg.plan == RP_ON || (r->cfg.plan == RP_AS_LOG && log->plan);
    return !plan && strcmp(r->env_name, "GMSHIM_PLAN") != 0;
}

/* Whether run r may be recommended: a candidate, for the job's allocator, the plan off. */
static int recommendable(const rp_log_t *log, const wi_run_t *r)
{
    return r->candidate && advice_for_allocator(log, r->env_name) && advice_plan_off(log, r);
}

/* Whether the program saw an OOM (one its retry did not get past). */
static int recorded_died(const rp_log_t *log)
{
    for (size_t i = 0; i < log->nooms; i++)
        if (!log->ooms[i].recovered)
            return 1;
    return 0;
}

/* Run r's settings with `head` bytes less to reserve: a cap it sets, else the cap in force at
 * the failure, else the device (what was outside the pool kept). */
static rp_cfg_t tightened(const wi_plan_t *p, const rp_log_t *log, const wi_run_t *r, uint64_t head)
{
    rp_cfg_t c = r->cfg;
    const rp_fail_t *f = &p->runs[0].res.first;
    if (c.limit != RP_RECORDED && c.limit)
        c.limit = c.limit > head + MiB ? c.limit - head : MiB;
    else if (f->by_limit)
        c.limit = f->cap > head + MiB ? f->cap - head : MiB;
    else {
        uint64_t dev = log->total ? log->total : f->cap + p->outside;
        c.device_bytes = dev > head + MiB ? dev - head : MiB;
    }
    return c;
}

/* A candidate of the model of PyTorch's allocator replayed by it again with the headroom taken
 * from what PyTorch could reserve (the driver's room, its fraction). */
static void model_headroom(wi_plan_t *p, wi_run_t *r)
{
    rt_conf_t c = p->torch.runs[r->model - 1].conf;
    c.less = p->headroom;
    rt_result_t res = replay_torch_run(p->tlog, &c);
    r->headroom_ok = !res.failures;
}

/* Each candidate that got past every failure, for the job's allocator, replayed with less room
 * (by the replay that ran it: the pool's, or the model of PyTorch's allocator). */
static void check_headroom(wi_plan_t *p, const rp_log_t *log, const wi_opts_t *o)
{
    size_t n = 0;
    for (size_t i = 0; i < p->nruns; i++) {
        wi_run_t *r = &p->runs[i];
        if (r->model && r->candidate && !r->res.failures)
            model_headroom(p, r);
        else
            n += recommendable(log, r) && !r->res.failures;
    }
    if (!n)
        return;
    rp_cfg_t *cfgs = calloc(n, sizeof *cfgs);
    rp_result_t *out = calloc(n, sizeof *out);
    size_t *which = calloc(n, sizeof *which);
    if (cfgs && out && which) {
        size_t k = 0;
        for (size_t i = 0; i < p->nruns; i++)
            if (!p->runs[i].model && recommendable(log, &p->runs[i]) && !p->runs[i].res.failures) {
                which[k] = i;
                cfgs[k++] = tightened(p, log, &p->runs[i], p->headroom);
            }
        replay_many(log, cfgs, out, n, o->threads, NULL, NULL);
        for (size_t k2 = 0; k2 < n; k2++)
            p->runs[which[k2]].headroom_ok = !out[k2].failures;
    }
    free(cfgs);
    free(out);
    free(which);
}

/* The failure asked for more than the job had ever held: the recording ends inside a climb
 * (a model still loading, the first step's forward pass), so what the job needs past it is not
 * in the log, and a larger cap or device is no tested remedy — it gets past this allocation only. */
static void climbing_why(wi_plan_t *p, size_t n)
{
    char a[32], b[32], c[32];
    n += (size_t)snprintf(p->why + n, sizeof p->why - n, "the job failed asking for more than it had ever held (%s "
                          "live with the request, the most before it %s): the recording ends inside that climb, so "
                          "what the job needs past it is unknown, and a larger cap or device only moves the failure "
                          "on", rep_bytes(p->climb_need, a), rep_bytes(p->climb_held, b));
    if (p->min_found && n < sizeof p->why)
        n += (size_t)snprintf(p->why + n, sizeof p->why - n, " (a device of %s gets past this allocation, not "
                              "necessarily the next)", rep_bytes(p->min_device_bytes, c));
    if (n < sizeof p->why)
        snprintf(p->why + n, sizeof p->why - n, "; no setting tried gets past it: make the job hold less (a "
                 "smaller batch or model, sharding, offloading) or measure its peak once on a larger device");
}

static void growing_why(wi_plan_t *p, const wi_opts_t *o)
{
    char a[32], b[32];
    const char *w = o->growth_word ? o->growth_word : "step";
    snprintf(p->why, sizeof p->why, "%s grows by %s per %s: no setting is a remedy, and a larger cap or "
             "device only postpones the OOM; a device that lasts the recorded run and %d %ss more at that rate "
             "has %s", o->growth_peaks ? "each step's peak of live memory" : "the memory",
             rep_bytes(o->growth_per_step, a), w, ADVICE_STEPS_PAST, w, rep_bytes(p->lasting_device_bytes, b));
}

void advice_choose(wi_plan_t *p, const rp_log_t *log, const wi_opts_t *o)
{
    char a[32], b[32], c[32], d[32];
    const rp_result_t *sim = &p->runs[0].res;
    p->rec = -1;
    p->fits = 0;
    if (!p->failing && recorded_died(log)) {
        snprintf(p->why, sizeof p->why, "the recording died of an OOM, but its replay under the recorded settings "
                 "fits (peak reserved %s): what refused it is not in the log (a cap of the program's own, "
                 "another process), so no setting can be told to help", rep_bytes(p->runs[0].res.peak_reserved, a));
        return;
    }
    if (!p->failing) {
        p->fits = 1;
        snprintf(p->why, sizeof p->why, "the recording has no failed allocation to get past: it fits as it ran "
                 "(peak reserved %s)", rep_bytes(p->runs[0].res.peak_reserved, a));
        return;
    }
    if (!p->reproduced) {
        snprintf(p->why, sizeof p->why, "the simulation of the recorded settings gets past the recorded OOM, which "
                 "the recording's own order of fences did not: no setting can be told to help");
        return;
    }
    if (o->growth_per_step) {
        p->growing = 1;
        p->growth_peaks = o->growth_peaks;
        p->growth_site = o->growth_site;
        p->growth_per_step = o->growth_per_step;
        uint64_t base = p->min_found ? p->min_device_bytes : sim->first.cap + p->outside;
        p->lasting_device_bytes = gm_round_up(base + ADVICE_STEPS_PAST * o->growth_per_step, MiB);
        growing_why(p, o);
        return;
    }
    /* A larger cap is tried only where the job had held as much before (advice.h). */
    p->climb_need = sim->first.live + sim->first.rounded;
    p->climb_held = sim->first.live_peak;
    p->climbing = p->climb_need > p->climb_held;
    p->headroom = advice_headroom(sim->first.cap, o->growth_per_step);
    check_headroom(p, log, o);
    int passed = -1, planned = -1;
    for (size_t i = 0; i < p->nruns; i++) {
        const wi_run_t *r = &p->runs[i];
        if (r->candidate && !r->res.failures && planned < 0 && !advice_plan_off(log, r))
            planned = (int)i;
        if (r->res.failures || !recommendable(log, r) || (p->climbing && r->raises_cap))
            continue;
        if (passed < 0 || r->res.peak_reserved < p->runs[passed].res.peak_reserved)
            passed = (int)i;
        if (r->headroom_ok && (p->rec < 0 || r->res.peak_reserved < p->runs[p->rec].res.peak_reserved))
            p->rec = (int)i;
    }
    uint64_t failed = sim->recorded_failed + sim->new_failures;
    if (p->rec >= 0 && p->runs[p->rec].model) {
        const wi_run_t *r = &p->runs[p->rec];
        const rt_result_t *own = &p->torch.runs[0].res;
        failed = own->recorded_failed + own->new_failures;
        p->fits = 1;
        snprintf(p->why, sizeof p->why, "PyTorch's allocator, modelled with %s=%s, gets past all %" PRIu64
                 " failed allocation%s with no new one, and still does with %s less to reserve (the headroom, "
                 "%d%% of the cap) (peak reserved %s; as run the model reserved %s, PyTorch %s)", r->env_name,
                 r->env_value, failed, failed == 1 ? "" : "s", rep_bytes(p->headroom, c), ADVICE_HEADROOM_PCT,
                 rep_bytes(r->res.peak_reserved, a), rep_bytes(own->peak_reserved, b),
                 rep_bytes(p->tlog->peak_reserved_recorded, d));
        return;
    }
    if (p->rec >= 0) {
        const wi_run_t *r = &p->runs[p->rec];
        p->fits = 1;
        snprintf(p->why, sizeof p->why, "replayed with %s=%s the recording gets past all %" PRIu64
                 " failed allocation%s with no new one, and still does with %s less to reserve (the headroom, "
                 "%d%% of the cap) (peak reserved %s; as recorded the pool failed with %s reserved)", r->env_name,
                 r->env_value, failed, failed == 1 ? "" : "s", rep_bytes(p->headroom, c), ADVICE_HEADROOM_PCT,
                 rep_bytes(r->res.peak_reserved, a), rep_bytes(sim->first.reserved, b));
        return;
    }
    size_t n = 0;
    if (planned >= 0)
        n = (size_t)snprintf(p->why, sizeof p->why, "%s gets past the failure in the replay, but the planned step "
                             "is no remedy: at a cap it trains only with the pool giving back and mapping memory every "
                             "step (1.4-6 x the step on the GPU), where GMSHIM_SEGMENTS=vmm trains as much or more; ",
                             p->runs[planned].label);
    if (passed >= 0 && n < sizeof p->why)
        n += (size_t)snprintf(p->why + n, sizeof p->why - n, "%s=%s gets past the failure only without headroom (with %s "
                             "less to reserve it fails: the job would fail a little later); ",
                             p->runs[passed].env_name, p->runs[passed].env_value, rep_bytes(p->headroom, c));
    if (n >= sizeof p->why)
        return;
    if (p->climbing)
        climbing_why(p, n);
    else if (p->min_found)
        snprintf(p->why + n, sizeof p->why - n, "no setting tried gets past the failure%s; the recording would "
                 "fit on a device of %s (the pool reserving at most %s, %s outside it)",
                 passed >= 0 ? " with headroom" : "", rep_bytes(p->min_device_bytes, a),
                 rep_bytes(p->min_pool_bytes, b), rep_bytes(p->outside, c));
    else
        snprintf(p->why + n, sizeof p->why - n, "no setting tried gets past the failure, on any device size tried");
}
