/* The what-if search: candidate settings replayed in parallel, the smallest device by parallel
 * bisection (each round probes several sizes at once, to 1 MiB), and the recommendation: the
 * candidate that got past every failure with the least reserved. */
#include "whatif_search.h"
#include "advice.h"
#include "whatif_torch.h"
#include "vec.h"
#include "output.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MiB (1ull << 20)
#define MAX_POOL_BYTES (1ull << 50)

void wi_opts_default(wi_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->device_limit = o->max_split = o->cache_limit = RP_RECORDED;
    o->pending_wait = -1;
}

const char *wi_size(uint64_t b, char buf[32])
{
    if (b && b % (1ull << 30) == 0)
        snprintf(buf, 32, "%" PRIu64 "G", b >> 30);
    else if (b && b % MiB == 0)
        snprintf(buf, 32, "%" PRIu64 "M", b >> 20);
    else
        snprintf(buf, 32, "%" PRIu64, b);
    return buf;
}

static wi_run_t *add_run(wi_plan_t *p, const char *label)
{
    wi_run_t *n = vec_grow(p->runs, &p->caprun, p->nruns + 1, sizeof *n, 32);
    if (!n)
        return NULL;
    p->runs = n;
    wi_run_t *r = &p->runs[p->nruns++];
    memset(r, 0, sizeof *r);
    rp_cfg_recorded(&r->cfg);
    snprintf(r->label, sizeof r->label, "%s", label);
    return r;
}

static void set_env(wi_run_t *r, const char *name, uint64_t v, int is_size)
{
    char b[32];
    snprintf(r->env_name, sizeof r->env_name, "%s", name);
    if (is_size)
        wi_size(v, r->env_value);
    else
        snprintf(r->env_value, sizeof r->env_value, "%" PRIu64, v);
    snprintf(r->label, sizeof r->label, "%s=%s", name, is_size ? wi_size(v, b) : r->env_value);
}

/* PyTorch's own cap raised: the fraction of the device that holds v bytes (its per_process_memory_fraction
 * key, torch.cuda.set_per_process_memory_fraction in code). */
static void set_torch_fraction(wi_run_t *r, uint64_t v, uint64_t total)
{
    double f = (double)v / (double)total;
    f = (double)(uint64_t)(f * 1000 + 0.999) / 1000; /* up to the next thousandth: it must hold v */
    snprintf(r->env_name, sizeof r->env_name, "PYTORCH_CUDA_ALLOC_CONF");
    snprintf(r->env_value, sizeof r->env_value, "per_process_memory_fraction:%.3g", f);
    snprintf(r->label, sizeof r->label, "%s=%s", r->env_name, r->env_value);
    r->cfg.limit = (uint64_t)(f * (double)total);
}

/* r as the model's run t (the i-th of the plan's): the figures the rule reads, and the value the
 * job would set — its own other keys kept (replay_torch_conf_merge; a value too long to hold:
 * not a candidate). */
static void model_run(wi_run_t *r, const rt_log_t *tl, const wt_run_t *t, size_t i)
{
    r->model = (int)i + 1;
    r->candidate = replay_torch_conf_merge(tl->conf_raw, t->text, r->env_value, sizeof r->env_value) != NULL;
    snprintf(r->env_name, sizeof r->env_name, "PYTORCH_CUDA_ALLOC_CONF");
    snprintf(r->label, sizeof r->label, "%s=%s", r->env_name, r->env_value);
    r->res.peak_reserved = t->res.peak_reserved;
    r->res.peak_allocated = t->res.peak_allocated;
    r->res.failures = t->res.failures;
    r->res.recorded_failed = t->res.recorded_failed;
    r->res.recorded_passed = t->res.recorded_passed;
    r->res.new_failures = t->res.new_failures;
}

/* PyTorch's max_split_size_mb: blocks larger than it are never split, as GMSHIM_MAX_SPLIT. */
static void set_torch_split(wi_run_t *r, uint64_t v)
{
    snprintf(r->env_name, sizeof r->env_name, "PYTORCH_CUDA_ALLOC_CONF");
    snprintf(r->env_value, sizeof r->env_value, "max_split_size_mb:%" PRIu64, (uint64_t)(v / MiB));
    snprintf(r->label, sizeof r->label, "%s=%s", r->env_name, r->env_value);
}

/* The raised cap (PyTorch's fraction, or gmshim's limit), run by the model under the settings as
 * run: one more of its runs, named in the cap's own words. */
static void model_cap(wi_plan_t *p, wi_run_t *r, int fraction)
{
    wt_plan_t *t = &p->torch;
    if (!t->nruns || t->nruns >= WT_MAX_RUNS) {
        r->candidate = 0;
        return;
    }
    wt_run_t *m = &t->runs[t->nruns];
    *m = t->runs[0];
    m->as_recorded = 0;
    m->flag[0] = 0;
    char text[sizeof m->text], label[sizeof r->label], value[sizeof r->env_value], name[sizeof r->env_name];
    if (fraction) {
        m->conf.limit = r->cfg.limit;
        snprintf(text, sizeof text, "%.100s%s%.50s", t->runs[0].text, t->runs[0].text[0] ? "," : "", r->env_value);
        memcpy(m->text, text, sizeof text);
    } else {
        m->conf.dev_limit = r->cfg.limit;
        snprintf(m->also, sizeof m->also, "%.31s=%.47s", r->env_name, r->env_value);
        snprintf(value, sizeof value, "%s", r->env_value);
    }
    m->res = replay_torch_run(p->tlog, &m->conf);
    snprintf(label, sizeof label, "%s", r->label);
    snprintf(name, sizeof name, "%s", r->env_name);
    model_run(r, p->tlog, m, t->nruns++); /* the fraction's value: the conf's, merged */
    snprintf(r->env_name, sizeof r->env_name, "%s", name);
    if (!fraction)
        snprintf(r->env_value, sizeof r->env_value, "%s", value);
    snprintf(r->label, sizeof r->label, "%s", label);
}

typedef struct prog {
    const wi_opts_t *o;
    size_t base, total;
} prog_t;

static void on_progress(void *arg, size_t done, size_t n)
{
    prog_t *pg = arg;
    (void)n;
    if (pg->o->progress)
        fprintf(stderr, "\rwhatif: %zu replays done", pg->base + done);
}

static void run_all(const rp_log_t *log, const wi_opts_t *o, wi_run_t *runs, size_t n, prog_t *pg)
{
    rp_cfg_t *cfgs = calloc(n ? n : 1, sizeof *cfgs);
    rp_result_t *out = calloc(n, sizeof *out);
    if (cfgs && out) {
        for (size_t i = 0; i < n; i++)
            cfgs[i] = runs[i].cfg;
        replay_many(log, cfgs, out, n, o->threads, on_progress, pg);
        for (size_t i = 0; i < n; i++)
            runs[i].res = out[i];
    }
    pg->base += n;
    free(cfgs);
    free(out);
}

/* The largest request the pool served or failed, for the range of split limits worth trying (a
 * caching allocator's exact segments are never split: none of them counts). */
static uint64_t largest_request(const rp_log_t *log)
{
    uint64_t big = 0;
    rp_cursor_t c = {0};
    for (size_t i = 0; i < log->nev; i++) {
        rp_ev_t e;
        rp_unpack(log->packed, &c, &e);
        if (rp_ev_type(&e) == RP_ALLOC && e.x > big)
            big = e.x;
    }
    for (size_t i = 0; i < log->nooms; i++)
        if (!log->ooms[i].exact && log->ooms[i].rec.request > big)
            big = log->ooms[i].rec.request;
    return big;
}

static void add_candidates(wi_plan_t *p, const rp_log_t *log, const wi_opts_t *o)
{
    uint64_t big = largest_request(log);
    if (!p->failing || p->tlog) /* PyTorch's settings: the model's runs (model_candidates) */
        goto grid;
    /* GMSHIM_MAX_SPLIT takes more than 20 MiB; beyond the largest request it changes nothing. */
    for (uint64_t v = 32 * MiB; v <= 2 * big && v <= MAX_POOL_BYTES; v *= 2) {
        if (v == log->max_split)
            continue;
        wi_run_t *r = add_run(p, "");
        if (!r)
            return;
        r->cfg.max_split = v;
        r->candidate = 1;
        if (log->torch_tensors) /* PyTorch's allocator is the one to set: its own split limit */
            set_torch_split(r, v);
        else
            set_env(r, "GMSHIM_MAX_SPLIT", v, 1);
    }
    if (!log->pending_wait && !log->trust_stream_order && !log->torch_tensors) {
        wi_run_t *r = add_run(p, "");
        if (r) {
            r->cfg.pending_wait = 1;
            r->candidate = 1;
            set_env(r, "GMSHIM_PENDING_WAIT", 1, 0);
        }
    }
grid:
    if (o->grid) {
        static const uint64_t caches[] = {0, 256 * MiB, 1024 * MiB, 4096 * MiB};
        for (size_t c = 0; c < sizeof caches / sizeof caches[0]; c++) {
            if (caches[c] == log->cache_limit)
                continue;
            for (uint64_t v = 0; v <= 2 * big && v <= MAX_POOL_BYTES; v = v ? v * 2 : 32 * MiB) {
                wi_run_t *r = add_run(p, "");
                if (!r)
                    return;
                r->cfg.cache_limit = caches[c];
                r->cfg.max_split = v;
                char a[32], b[32];
                snprintf(r->label, sizeof r->label, "MAX_SPLIT=%s CACHE_LIMIT=%s", wi_size(v, a), wi_size(caches[c], b));
            }
        }
    }
}

/* gmshim's pool made otherwise (a log of its own mode only: PyTorch's cache kept, its segments
 * are the blocks): classic segments, growable ranges (GMSHIM_SEGMENTS=vmm) and the planned step
 * (GMSHIM_PLAN=1, in ranges as in the shim), each the recording did not run; those that turn
 * something on are candidates where the recording failed. */
static void add_modes(wi_plan_t *p, const rp_log_t *log)
{
    if (log->torch_cache_kept || log->torch_tensors || log->foreign || log->pool_off)
        return;
    static const struct {
        const char *name, *value;
        int vmm, plan;
    } modes[] = {
        {"GMSHIM_SEGMENTS", "classic", RP_OFF, RP_OFF},
        {"GMSHIM_SEGMENTS", "vmm", RP_ON, RP_OFF},
        {"GMSHIM_PLAN", "1", RP_AS_LOG, RP_ON},
    };
    int ran = log->plan ? 2 : log->vmm ? 1 : 0;
    for (int k = 0; k < 3; k++) {
        if (k == ran)
            continue;
        wi_run_t *r = add_run(p, "");
        if (!r)
            return;
        r->cfg.vmm = modes[k].vmm;
        r->cfg.plan = modes[k].plan;
        r->candidate = p->failing && k > ran;
        snprintf(r->env_name, sizeof r->env_name, "%s", modes[k].name);
        snprintf(r->env_value, sizeof r->env_value, "%s", modes[k].value);
        snprintf(r->label, sizeof r->label, "%s=%s%s", modes[k].name, modes[k].value,
                 log->plan && k < 2 ? " GMSHIM_PLAN=0" : "");
    }
}

/* The recording's settings with the pool allowed `pool` bytes (outside kept). */
static rp_cfg_t capacity_cfg(const wi_plan_t *p, const rp_log_t *log, uint64_t pool)
{
    rp_cfg_t c;
    rp_cfg_recorded(&c); /* simulated: a foreign log's recorded segments would not change */
    c.limit = 0;
    c.device_bytes = pool + p->outside;
    c.probe = 1; /* whether it fits: no need to go past the first failure */
    (void)log;
    return c;
}

/* One round of the bisection: n sizes replayed at once, counted. */
static void replay_round(wi_plan_t *p, const rp_log_t *log, const wi_opts_t *o, const rp_cfg_t *cfgs,
                         rp_result_t *out, uint64_t n, unsigned k, prog_t *pg)
{
    replay_many(log, cfgs, out, n, k, NULL, NULL);
    p->bisect_replays += (unsigned)n;
    if (!p->bisect_rounds++)
        p->bisect_first = (unsigned)n;
    pg->base += n;
    if (o->progress)
        fprintf(stderr, "\rwhatif: %zu replays done", pg->base);
}

/* The smallest pool the recording fits in, to the MiB: from `start` (a size that may fit) and
 * `least` (the most bytes ever live: any pool smaller fails), each round replays up to one size
 * per CPU (at most BISECT_MAX) at once; while the sizes still span more than a factor of 4 they
 * are spaced geometrically (the answer is as likely near the live bytes as near the start), then
 * evenly. The first round probes `start` itself, so that it costs no round of its own: beside
 * the sizes below it when it is likely to fit (no replay failed at it), else beside twice, four
 * times... it; while every size up fails, the next round goes on up from the largest. */
#define BISECT_MAX 16
static void bisect(wi_plan_t *p, const rp_log_t *log, const wi_opts_t *o, uint64_t start, int start_fails,
                   uint64_t least, prog_t *pg)
{
    unsigned k = o->threads ? o->threads : (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
    if (k < 1)
        k = 1;
    if (k > BISECT_MAX)
        k = BISECT_MAX;
    rp_cfg_t cfgs[BISECT_MAX];
    rp_result_t out[BISECT_MAX];
    uint64_t hi = gm_round_up(start ? start : MiB, MiB);
    uint64_t lo = least > MiB ? (least - 1) / MiB * MiB : 0; /* below the live bytes: fails */
    if (lo >= hi)
        lo = 0;
    int hi_fits = 0;         /* known to fit: `hi` was replayed without a failure */
    int up = start_fails;    /* the round tries sizes up from `hi`... */
    int up_from_hi = up;     /* ...`hi` itself among them (not yet replayed) */
    while (!hi_fits || hi - lo > MiB) {
        uint64_t steps = (hi - lo) / MiB, n = 0, first = 0;
        uint64_t pts[BISECT_MAX];
        if (up) {
            uint64_t v = hi;
            if (!up_from_hi) {
                if (hi >= MAX_POOL_BYTES)
                    return;
                v = hi > MAX_POOL_BYTES / 2 ? MAX_POOL_BYTES : hi * 2;
            }
            for (;;) {
                pts[n] = v;
                cfgs[n++] = capacity_cfg(p, log, v);
                if (n == k || v >= MAX_POOL_BYTES)
                    break;
                v = v > MAX_POOL_BYTES / 2 ? MAX_POOL_BYTES : v * 2;
            }
            replay_round(p, log, o, cfgs, out, n, k, pg);
            uint64_t i = 0;
            while (i < n && out[i].failures)
                lo = pts[i++];
            hi = i < n ? pts[i] : lo; /* none fits: on up from the largest */
            hi_fits = i < n, up = !hi_fits, up_from_hi = 0;
            continue;
        }
        if (!hi_fits) { /* the upper size too, in the same round */
            pts[n] = hi;
            cfgs[n++] = capacity_cfg(p, log, hi);
            first = 1;
        }
        uint64_t room = k - first, want = steps ? steps - 1 : 0;
        if (want > room)
            want = room;
        double ratio = lo ? (double)hi / (double)lo : 0;
        for (uint64_t i = 0; i < want; i++) {
            uint64_t v = ratio > 4 ? (uint64_t)((double)lo * pow(ratio, (double)(i + 1) / (double)(want + 1))) / MiB * MiB
                                   : lo + (hi - lo) / (want + 1) * (i + 1) / MiB * MiB;
            uint64_t floor = n > first ? pts[n - 1] : lo;
            if (v <= floor)
                v = floor + MiB;
            if (v >= hi)
                break;
            pts[n] = v;
            cfgs[n++] = capacity_cfg(p, log, v);
        }
        replay_round(p, log, o, cfgs, out, n, k, pg);
        if (first && out[0].failures) { /* nothing up to `hi` fits */
            lo = hi;
            up = 1;
            continue;
        }
        hi_fits = 1;
        uint64_t nlo = lo, nhi = hi;
        for (uint64_t i = first; i < n; i++) {
            if (out[i].failures) {
                if (pts[i] > nlo && pts[i] < nhi)
                    nlo = pts[i];
            } else if (pts[i] < nhi) {
                nhi = pts[i];
            }
        }
        if (nlo >= nhi) /* not monotonic here: keep the smallest size that fitted */
            nlo = nhi - MiB;
        lo = nlo, hi = nhi;
    }
    p->min_found = 1;
    p->min_pool_bytes = hi;
    p->min_device_bytes = hi + p->outside;
}

/* What the bisection starts from, by one rule for the guess made before the runs and for the
 * runs' own figures: the size it starts at (the cap at the first failure of the run as recorded,
 * else the recorded reserve) and whether that failed, what was outside the pool then, and `least`
 * (the most bytes live: any smaller pool fails). */
typedef struct bisect_in {
    uint64_t start, outside, least;
    int start_fails;
} bisect_in_t;

static bisect_in_t bisect_inputs(const rp_log_t *log, const rp_result_t *ref, uint64_t least)
{
    bisect_in_t in = {0};
    uint64_t cap = ref->failures && !ref->first.by_limit ? ref->first.cap : log->base_cap;
    if (log->ndrv)
        cap = ref->failures && !ref->first.by_limit ? ref->first.cap : log->drv_cap[0];
    in.outside = log->total > cap ? log->total - cap : 0;
    in.start = ref->failures ? ref->first.cap : log->peak_reserved_recorded;
    in.start_fails = ref->failures > 0;
    in.least = least;
    return in;
}

/* The bisection begun beside the runs (on threads of its own) from the loader's replay as
 * recorded, which is the table's first run (a foreign log's first run follows its segments where
 * the loader's was guided, and runs again; their figures agree where neither fails): kept when the
 * runs' figures give the same inputs, so that its rounds overlap the runs' instead of following them. */
typedef struct early {
    wi_plan_t q;              /* its figures only (bisect's fields) */
    const rp_log_t *log;
    wi_opts_t o;              /* progress off: the runs report theirs */
    bisect_in_t in;
    prog_t pg;
    pthread_t thread;
} early_t;

static void *early_main(void *arg)
{
    early_t *e = arg;
    e->q.outside = e->in.outside;
    bisect(&e->q, e->log, &e->o, e->in.start, e->in.start_fails, e->in.least, &e->pg);
    return NULL;
}

/* NULL where no thread starts: the bisection then runs after the runs. */
static early_t *early_start(const rp_log_t *log, const wi_opts_t *o)
{
    early_t *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->log = log;
    e->o = *o;
    e->o.progress = 0;
    e->pg = (prog_t){&e->o, 0, 0};
    e->in = bisect_inputs(log, &log->recorded, log->recorded.peak_allocated);
    if (pthread_create(&e->thread, NULL, early_main, e)) {
        free(e);
        return NULL;
    }
    return e;
}

/* Waits for it and frees it, its figures unused. */
static void early_drop(early_t *e)
{
    if (!e)
        return;
    pthread_join(e->thread, NULL);
    free(e);
}

/* Waits for it; 1 when its inputs were the runs' (its figures then in p), else 0. Frees e. */
static int early_take(early_t *e, wi_plan_t *p, const bisect_in_t *in, prog_t *pg)
{
    if (!e)
        return 0;
    pthread_join(e->thread, NULL);
    int same = e->in.start == in->start && e->in.start_fails == in->start_fails && e->in.outside == in->outside &&
               e->in.least == in->least;
    if (same) {
        p->bisect_replays = e->q.bisect_replays;
        p->bisect_rounds = e->q.bisect_rounds;
        p->bisect_first = e->q.bisect_first;
        p->min_found = e->q.min_found;
        p->min_pool_bytes = e->q.min_pool_bytes;
        p->min_device_bytes = e->q.min_device_bytes;
        p->bisect_beside_runs = 1;
        pg->base += e->q.bisect_replays;
    }
    free(e);
    return same;
}

/* The model's runs, each setting tried a candidate (the settings as run, and combinations
 * known to misbehave, are none). */
static int model_candidates(wi_plan_t *p, const wi_opts_t *o)
{
    if (wt_plan_make(p->tlog, o->grid, o->threads, &p->torch))
        return -1;
    for (size_t i = 0; p->failing && i < p->torch.nruns; i++) {
        const wt_run_t *t = &p->torch.runs[i];
        if (t->as_recorded || (t->conf.expandable && t->conf.max_split))
            continue;
        wi_run_t *r = add_run(p, "");
        if (!r)
            return -1;
        model_run(r, p->tlog, t, i);
    }
    return 0;
}

int wi_plan_make(const rp_log_t *log, const rt_log_t *tlog, const wi_opts_t *o, wi_plan_t *p)
{
    memset(p, 0, sizeof *p);
    p->rec = -1;
    p->tlog = tlog;
    prog_t pg = {o, 0, 0};
    wi_run_t *r0 = add_run(p, "as recorded");
    wi_run_t *r1 = r0 ? add_run(p, "frees reusable at once") : NULL;
    if (!r1)
        return -1;
    rp_cfg_as_recorded(log, &p->runs[0].cfg);
    p->runs[1].cfg.frees_at_once = 1;
    if (o->device_limit != RP_RECORDED || o->max_split != RP_RECORDED || o->cache_limit != RP_RECORDED ||
        o->pending_wait >= 0) {
        wi_run_t *r = add_run(p, "the settings asked for");
        if (!r)
            return -1;
        r->cfg.limit = o->device_limit;
        r->cfg.max_split = o->max_split;
        r->cfg.cache_limit = o->cache_limit;
        r->cfg.pending_wait = o->pending_wait;
    }
    p->failing = log->recorded.failures > 0;
    add_candidates(p, log, o);
    add_modes(p, log);
    early_t *early = early_start(log, o);
    /* The run as recorded is the loader's own replay under the same settings (rp_load): not run
     * again, but where the loader's was the guided one (a log of another writer). */
    size_t skip = log->foreign ? 0 : 1;
    if (skip)
        p->runs[0].res = log->recorded;
    run_all(log, o, p->runs + skip, p->nruns - skip, &pg);
    if (tlog && model_candidates(p, o)) {
        early_drop(early);
        wi_plan_free(p);
        return -1;
    }
    /* Per configuration: the events each replayed over the time it took on its own thread,
     * summed (configurations of unequal cost are not charged for waiting on the slowest). */
    uint64_t evs = 0;
    double busy = 0;
    for (size_t i = 0; i < p->nruns; i++)
        if (p->runs[i].res.seconds > 0) { /* the loader's replay was not timed */
            evs += p->runs[i].res.events;
            busy += p->runs[i].res.seconds;
        }
    p->events_per_s = busy > 0 ? (double)evs / busy : 0;
    p->reproduced = p->runs[0].res.failures > 0;
    /* The model's settings are told to help only where the model fails as run too. */
    if (tlog && p->torch.nruns && !p->torch.runs[0].res.recorded_failed)
        p->reproduced = 0;
    /* Outside the pool at the first failure: what the device held besides the pool's figure. */
    const rp_result_t *ref = &p->runs[0].res;
    uint64_t least = p->runs[0].res.peak_allocated;
    if (p->runs[1].res.peak_allocated < least)
        least = p->runs[1].res.peak_allocated;
    bisect_in_t in = bisect_inputs(log, ref, least);
    p->outside = in.outside;
    if (!early_take(early, p, &in, &pg))
        bisect(p, log, o, in.start, in.start_fails, in.least, &pg);
    /* Under GMSHIM_DEVICE_LIMIT or PyTorch's memory fraction: a cap the device can give, if raising
     * it is what helps. */
    /* The cap with headroom (advice.c), never the bisected size itself: that one lasts only to
     * the recording's end. Memory that grows is never given a cap (advice_choose). */
    uint64_t head = ref->failures ? advice_headroom(ref->first.cap, o->growth_per_step) : 0;
    if (p->failing && p->min_found && ref->failures && ref->first.by_limit && !o->growth_per_step &&
        gm_round_up(p->min_pool_bytes + head, MiB) + p->outside <= log->total) {
        uint64_t v = gm_round_up(p->min_pool_bytes + head, MiB);
        if (v != log->limit_first) {
            wi_run_t *r = add_run(p, "");
            if (r) {
                r->cfg.limit = v;
                r->candidate = 1;
                r->raises_cap = 1;
                if (log->torch_limit && log->total)
                    set_torch_fraction(r, v, log->total);
                else
                    set_env(r, "GMSHIM_DEVICE_LIMIT", v, 1);
                if (tlog)
                    model_cap(p, r, log->torch_limit && log->total);
                else
                    run_all(log, o, r, 1, &pg);
            }
        }
    }
    if (o->progress)
        fprintf(stderr, "\r%40s\r", "");
    advice_choose(p, log, o);
    return 0;
}

void wi_plan_free(wi_plan_t *p)
{
    wt_plan_free(&p->torch);
    free(p->runs);
    memset(p, 0, sizeof *p);
}
