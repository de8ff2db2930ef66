/* `gmshim whatif LOG`: replays a log's allocations as recorded and under other settings, prints
 * a table (peak reserved, fragmentation, OOM and where), the smallest device on which the run
 * gets past every recorded OOM, and a recommendation tested by replay. Exit 0: the recording
 * fits under the recommendation; 3: nothing tried fits; 1 and 2 as every command. */
#include "advice.h"
#include "cli.h"
#include "output.h"
#include "sites.h"
#include "planrep.h"
#include "split.h"
#include "whatif.h"
#include "whatif_torch.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WHATIF_NOTHING_FITS 3

static const char usage[] =
    "usage: gmshim whatif [--device-limit SIZE] [--max-split SIZE] [--cache-limit SIZE]\n"
    "                     [--pending-wait 0|1] [--grid] [--device N] [--threads N] [--json] LOG\n"
    "\n"
    "Replays the log's allocations through gmshim's pool as recorded and under other settings, and\n"
    "answers: would the run have got past its OOM with another setting, or on how large a device?\n"
    "Prints one row per replay (peak reserved, fragmentation at the peak, OOM and where), the\n"
    "smallest device on which the recording gets past every recorded OOM (bisection to 1 MiB, what\n"
    "was held outside the pool kept), the floor and offline plan at the peak, the split of the\n"
    "first failure, and a recommendation that a replay showed to work with headroom (never for\n"
    "memory that grows per step: then the device that lasts the run and 100 steps more). For a log\n"
    "of PyTorch's tensors (GMSHIM_TORCH=keep) the settings tried are PyTorch's, each run by a model\n"
    "of its allocator, whose table follows the recommendation as its evidence.\n"
    "For a log of gmshim's own pool it also replays the pool made the ways the recording was not:\n"
    "GMSHIM_SEGMENTS=classic, GMSHIM_SEGMENTS=vmm and GMSHIM_PLAN=1 (the shim's planned step).\n"
    "\n"
    "      --device-limit SIZE  also replay under this GMSHIM_DEVICE_LIMIT (0: none)\n"
    "      --max-split SIZE     ...this GMSHIM_MAX_SPLIT (0: none)\n"
    "      --cache-limit SIZE   ...this GMSHIM_CACHE_LIMIT (0: none)\n"
    "      --pending-wait 0|1   ...this GMSHIM_PENDING_WAIT\n"
    "      --grid               also every GMSHIM_MAX_SPLIT x GMSHIM_CACHE_LIMIT pair of a grid; for a\n"
    "                           log of PyTorch's tensors, every combination of PYTORCH_CUDA_ALLOC_CONF's\n"
    "                           expandable_segments, max_split_size_mb, roundup_power2_divisions (and\n"
    "                           garbage_collection_threshold under a memory fraction)\n"
    "      --device N           the device to replay (default: the first that failed, else the busiest)\n"
    "      --threads N          replays run at once (default: one per CPU, at most 16)\n"
    "  -j, --json               one JSON object: min_device_bytes, recommendation {env, why}, runs\n"
    "  -h, --help               this text\n"
    "\n"
    "Exit status: 0 the recording fits under the recommendation (or as it ran), 3 nothing tried\n"
    "fits, 1 an error, 2 a damaged (partial) log.\n";

enum { O_DEVLIMIT = 256, O_MAXSPLIT, O_CACHE, O_PENDING, O_GRID, O_DEVICE, O_THREADS };

typedef struct wi_cmd {
    wi_opts_t o;
    int device;
} wi_cmd_t;

static int size_opt(const char *name, const char *val, uint64_t *out)
{
    if (cli_parse_size(val, out)) {
        fprintf(stderr, "gmshim whatif: %s takes a size (512M, 8G, bytes), not '%s'\n", name, val);
        return CLI_FAIL;
    }
    return 0;
}

static int whatif_opt(cli_ctx_t *c, void *st, int key, const char *val)
{
    (void)c;
    wi_cmd_t *w = st;
    unsigned n;
    switch (key) {
    case O_DEVLIMIT:
        return size_opt("--device-limit", val, &w->o.device_limit);
    case O_MAXSPLIT:
        if (size_opt("--max-split", val, &w->o.max_split))
            return CLI_FAIL;
        if (w->o.max_split && w->o.max_split <= 20ull << 20) {
            fprintf(stderr, "gmshim whatif: --max-split must be 0 or more than 20 MiB (as GMSHIM_MAX_SPLIT), not '%s'\n", val);
            return CLI_FAIL;
        }
        return 0;
    case O_CACHE:
        return size_opt("--cache-limit", val, &w->o.cache_limit);
    case O_PENDING:
        if (strcmp(val, "0") && strcmp(val, "1")) {
            fprintf(stderr, "gmshim whatif: --pending-wait takes 0 or 1, not '%s'\n", val);
            return CLI_FAIL;
        }
        w->o.pending_wait = val[0] == '1';
        return 0;
    case O_GRID:
        w->o.grid = 1;
        return 0;
    case O_DEVICE:
        if (cli_parse_count("whatif", "--device", val, &n))
            return CLI_FAIL;
        if (n > 254) {
            fprintf(stderr, "gmshim whatif: --device takes 0..254, not '%s'\n", val);
            return CLI_FAIL;
        }
        w->device = (int)n;
        return 0;
    case O_THREADS:
        if (cli_parse_count("whatif", "--threads", val, &n))
            return CLI_FAIL;
        w->o.threads = n > 16 ? 16 : n;
        return 0;
    }
    return 0;
}

/* The device to replay: the one asked for, the first whose allocation failed, else the busiest. */
static int pick_device(const model_t *m, int asked)
{
    if (asked >= 0)
        return asked;
    for (size_t i = 0; i < m->nooms; i++)
        return m->ooms[i].dev;
    int best = -1;
    for (int d = 0; d < m->ndev; d++)
        if (m->dev[d] && (best < 0 || m->dev[d]->allocs > m->dev[best]->allocs))
            best = d;
    return best < 0 ? 0 : best;
}

static int whatif_has_device(const model_t *m, int d)
{
    return d >= 0 && d < m->ndev && m->dev[d];
}

static void whatif_list_devices(const model_t *m, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (int d = 0; d < m->ndev && n < len; d++)
        if (m->dev[d])
            n += (size_t)snprintf(buf + n, len - n, "%s%d", n ? ", " : "", d);
    if (!n)
        snprintf(buf, len, "none");
}

static void failure_text(FILE *f, const model_t *m, const rp_result_t *r, char *buf, size_t len)
{
    char a[32], t[32], lbl[256];
    (void)f;
    if (!r->failures) {
        snprintf(buf, len, "none");
        return;
    }
    char extra[64] = "";
    if (r->new_failures)
        snprintf(extra, sizeof extra, " (%" PRIu64 " not in the recording)", r->new_failures);
    snprintf(buf, len, "%" PRIu64 "%s, first at %s: %s from %s", r->failures, extra, rep_time(r->first.t, t),
             rep_bytes(r->first.request, a), site_label(m, r->first.site, lbl, sizeof lbl));
}

/* A keep-mode log's PyTorch allocator, modelled: its input, loaded when the log has its tensors
 * (its runs are the plan's: wi_plan_t.torch). */
typedef struct wi_torch {
    rt_log_t log;
    int made;
} wi_torch_t;

/* The model's run the recommendation names, -1: none (or the pool's). */
static int model_rec(const wi_plan_t *p)
{
    return p->rec >= 0 && p->runs[p->rec].model ? p->runs[p->rec].model - 1 : -1;
}

/* The floor and plan at the device's peak and at the first recorded failure, and that failure's
 * split (split.h), as `oom` gives it: one computation, split_make. */
typedef struct oracle {
    plan_point_t peak, at;
    split_t split;
    int has_split;
} oracle_t;

static void oracle_make(const rp_log_t *log, const wi_plan_t *p, oracle_t *o)
{
    memset(o, 0, sizeof *o);
    plan_at_peak(log, &o->peak);
    const rp_result_t *r = &p->runs[0].res;
    if (!p->failing || !r->failures || r->first.oom < 0)
        return;
    int planned = plan_at_oom(log, (size_t)r->first.oom, &o->at) == 0;
    const wi_run_t *w = p->rec >= 0 ? &p->runs[p->rec] : NULL;
    uint64_t floor = planned ? o->at.floor : r->first.live + pool_round((size_t)r->first.request);
    split_make(&o->split, floor, o->at.planned, planned, r->first.reserved + r->first.segment,
               w ? w->res.peak_reserved : 0, r->first.cap, w ? w->env_name : NULL, w ? w->env_value : NULL);
    o->has_split = 1;
}

static void oracle_text(FILE *f, const rp_log_t *log, const oracle_t *o)
{
    if (o->peak.valid)
        planrep_peak_text(f, log, &o->peak, "at the peak: ");
    if (o->has_split) {
        fprintf(f, "at the first failure:\n");
        split_text(f, &o->split, "  ");
    }
}

static void oracle_json(json_t *j, const rp_log_t *log, const oracle_t *o)
{
    json_obj(j, "peak");
    planrep_peak_json(j, log, &o->peak);
    json_obj_end(j);
    if (o->has_split)
        split_json(j, &o->split);
}

static void plan_text(cli_ctx_t *c, const model_t *m, const rp_log_t *log, const wi_plan_t *p, const wi_torch_t *tp)
{
    FILE *f = c->out;
    char a[32], b[32], d[32], e[32], line[600];
    size_t pool_runs = 0; /* the model's runs are in its table */
    for (size_t i = 0; i < p->nruns; i++)
        pool_runs += !p->runs[i].model;
    fprintf(f, "%sdevice %d%s: %" PRIu64 " events replayed per run, %zu runs%s\n", rep_bold(), log->dev, rep_reset(),
            (uint64_t)log->nev, pool_runs + p->bisect_replays, log->torch_cache_kept ? " (PyTorch's segments, not tensors)"
            : log->torch_tensors ? " (PyTorch's tensors)" : "");
    if (log->wrapped)
        fprintf(f, "  (a bounded log: the replay starts empty at its checkpoint; peaks before it are not replayed)\n");
    if (log->torch_expandable && !tp->made)
        fprintf(f, "  (expandable segments: the runs place tensors in PyTorch's classic segments, not in ranges "
                "mapped into one, so their peaks are those of expandable_segments:False)\n");
    else if (log->torch_expandable)
        fprintf(f, "  (expandable segments: the pool's runs below place tensors in classic segments; the model of "
                "PyTorch's allocator after them maps pages as the run did)\n");
    if (!m->records && !m->lf->partial) { /* killed at its start: say so, as every command does */
        char state[160];
        fprintf(f, "  %s\n  %s\n", cli_close_state(m->lf, m, state, sizeof state), RD_NO_RECORDS);
    }
    int w = 28; /* wider for PyTorch's longer settings */
    for (size_t i = 0; i < p->nruns; i++)
        if (!p->runs[i].model && (int)strlen(p->runs[i].label) > w)
            w = (int)strlen(p->runs[i].label);
    fprintf(f, "  %-*s %13s %7s  %s\n", w, "run", "peak reserved", "frag", "failed allocations");
    for (size_t i = 0; i < p->nruns; i++) {
        const wi_run_t *r = &p->runs[i];
        if (r->model) /* the model's: its table below */
            continue;
        failure_text(f, m, &r->res, line, sizeof line);
        fprintf(f, "  %-*s %13s %7s  %s%s\n", w, r->label, rep_bytes(r->res.peak_reserved, a),
                rep_pct(r->res.frag_at_peak, r->res.peak_reserved, b), line,
                (int)i == p->rec                                       ? "  <- recommended"
                : p->climbing && r->raises_cap && !r->res.failures ? "  (this allocation only: a climb)"
                                                                   : "");
    }
    for (size_t i = 0; i < p->nruns; i++) {
        const wi_run_t *r = &p->runs[i];
        if (!r->model && (r->res.plan_period || r->res.planned))
            fprintf(f, "  %s: a step of %" PRIu64 " allocations planned, %" PRIu64 " served from the plan, its "
                    "range mapping %s\n", r->label, r->res.plan_period, r->res.planned, rep_bytes(r->res.plan_bytes, a));
    }
    if (p->min_found)
        fprintf(f, "smallest device: %s (the pool reserving at most %s, %s outside it), bisected to 1 MiB in %u "
                "replays, %u rounds\n", rep_bytes(p->min_device_bytes, a), rep_bytes(p->min_pool_bytes, b),
                rep_bytes(p->outside, d), p->bisect_replays, p->bisect_rounds);
    else
        fprintf(f, "smallest device: none found up to %s\n", rep_bytes(1ull << 50, e));
    oracle_t orc;
    oracle_make(log, p, &orc);
    oracle_text(f, log, &orc);
    if (p->rec >= 0)
        fprintf(f, "%srecommendation%s: %s=%s: %s\n", rep_green(), rep_reset(), p->runs[p->rec].env_name,
                p->runs[p->rec].env_value, p->why);
    else
        fprintf(f, "%srecommendation%s: %s\n", p->fits ? rep_green() : rep_yellow(), rep_reset(), p->why);
    if (p->growing && p->growth_site) {
        char lbl[512];
        fprintf(f, "the growing line: %s\n", site_label(m, p->growth_site, lbl, sizeof lbl));
    }
    if (tp->made)
        wt_plan_text(f, &tp->log, &p->torch, model_rec(p));
    if (isatty(2)) /* a measurement, not part of the report: beside the progress, on a terminal */
        fprintf(stderr, "replay speed: %.1f M events/s per configuration\n", p->events_per_s / 1e6);
}

static void run_json(json_t *j, const model_t *m, const wi_run_t *r)
{
    json_obj(j, NULL);
    json_str(j, "label", r->label);
    json_obj(j, "env");
    char b[32];
    if (r->cfg.limit != RP_RECORDED)
        json_str(j, "GMSHIM_DEVICE_LIMIT", wi_size(r->cfg.limit, b));
    if (r->cfg.max_split != RP_RECORDED)
        json_str(j, "GMSHIM_MAX_SPLIT", wi_size(r->cfg.max_split, b));
    if (r->cfg.cache_limit != RP_RECORDED)
        json_str(j, "GMSHIM_CACHE_LIMIT", wi_size(r->cfg.cache_limit, b));
    if (r->cfg.pending_wait >= 0)
        json_str(j, "GMSHIM_PENDING_WAIT", r->cfg.pending_wait ? "1" : "0");
    if (r->cfg.vmm != RP_AS_LOG)
        json_str(j, "GMSHIM_SEGMENTS", r->cfg.vmm == RP_ON ? "vmm" : "classic");
    if (r->cfg.plan != RP_AS_LOG)
        json_str(j, "GMSHIM_PLAN", r->cfg.plan == RP_ON ? "1" : "0");
    json_obj_end(j);
    json_bool(j, "frees_at_once", r->cfg.frees_at_once);
    if (r->cfg.device_bytes != RP_RECORDED)
        json_u64(j, "device_bytes", r->cfg.device_bytes);
    json_u64(j, "peak_reserved", r->res.peak_reserved);
    json_u64(j, "peak_allocated", r->res.peak_allocated);
    json_u64(j, "frag_at_peak", r->res.frag_at_peak);
    json_bool(j, "oom", r->res.failures > 0);
    json_u64(j, "failures", r->res.failures);
    json_u64(j, "recorded_failed", r->res.recorded_failed);
    json_u64(j, "recorded_passed", r->res.recorded_passed);
    json_u64(j, "new_failures", r->res.new_failures);
    json_u64(j, "divergences", r->res.divergences);
    if (r->res.plan_period || r->res.planned) {
        json_obj(j, "plan");
        json_u64(j, "period", r->res.plan_period);
        json_u64(j, "planned_allocs", r->res.planned);
        json_u64(j, "range_mapped", r->res.plan_bytes);
        json_obj_end(j);
    }
    if (r->res.failures) {
        json_obj(j, "first_failure");
        json_u64(j, "record", r->res.first.record);
        json_u64(j, "t", r->res.first.t);
        json_u64(j, "requested", r->res.first.request);
        json_u64(j, "reserved", r->res.first.reserved);
        json_u64(j, "live", r->res.first.live);
        json_u64(j, "free", r->res.first.reserved - r->res.first.live);
        json_u64(j, "largest_free", r->res.first.largest_free);
        json_u64(j, "cap", r->res.first.cap);
        json_bool(j, "by_limit", r->res.first.by_limit);
        json_bool(j, "recorded", r->res.first.oom >= 0);
        json_obj(j, "site");
        site_json(j, m, r->res.first.site);
        json_obj_end(j);
        json_obj_end(j);
    }
    json_obj_end(j);
}

static void plan_json(cli_ctx_t *c, const model_t *m, const rp_log_t *log, const wi_plan_t *p, const char *path,
                      const wi_torch_t *tp)
{
    json_t *j = &c->j;
    json_init(j, c->out);
    json_obj(j, NULL);
    json_str(j, "command", "whatif");
    json_str(j, "version", GMSHIM_VERSION_STRING);
    json_str(j, "log", path);
    json_u64(j, "device", (uint64_t)log->dev);
    if (!m->records && !m->lf->partial) { /* killed at its start: say so, as every command does */
        char state[160];
        json_str(j, "close_state", cli_close_state(m->lf, m, state, sizeof state));
        json_str(j, "note", RD_NO_RECORDS);
    }
    json_u64(j, "events", log->nev);
    json_bool(j, "torch_cache_kept", log->torch_cache_kept);
    if (log->torch_tensors) /* only then: the JSON of other logs stays as it was */
        json_bool(j, "torch_tensors", 1);
    json_bool(j, "wrapped", log->wrapped);
    json_u64(j, "recorded_peak_reserved", log->peak_reserved_recorded);
    json_u64(j, "recorded_ooms", log->nooms);
    json_obj(j, "followed");
    json_u64(j, "peak_reserved", log->followed.peak_reserved);
    json_u64(j, "failures", log->followed.failures);
    json_u64(j, "divergences", log->followed.divergences);
    json_u64(j, "fences_learnt", log->nproofs);
    json_obj_end(j);
    if (p->min_found)
        json_u64(j, "min_device_bytes", p->min_device_bytes);
    else
        json_null(j, "min_device_bytes");
    json_u64(j, "min_pool_bytes", p->min_pool_bytes);
    json_u64(j, "outside_bytes", p->outside);
    json_u64(j, "bisect_replays", p->bisect_replays);
    json_u64(j, "bisect_rounds", p->bisect_rounds);
    json_bool(j, "bisect_beside_runs", p->bisect_beside_runs);
    json_obj(j, "recommendation");
    json_obj(j, "env");
    if (p->rec >= 0)
        json_str(j, p->runs[p->rec].env_name, p->runs[p->rec].env_value);
    json_obj_end(j);
    json_str(j, "why", p->why);
    json_bool(j, "fits", p->fits);
    json_u64(j, "headroom", p->headroom);
    json_bool(j, "growing", p->growing);
    if (p->growing) {
        json_u64(j, "growth_per_step", p->growth_per_step);
        json_u64(j, "lasting_device_bytes", p->lasting_device_bytes);
        json_u64(j, "lasting_steps_past", ADVICE_STEPS_PAST);
        if (p->growth_site) {
            json_obj(j, "growth_site");
            site_json(j, m, p->growth_site);
            json_obj_end(j);
        }
    }
    if (p->failing && p->reproduced && !p->growing) { /* only where the rule looked */
        json_bool(j, "climbing", p->climbing);
        json_u64(j, "climb_need", p->climb_need);
        json_u64(j, "climb_held", p->climb_held);
    }
    json_obj_end(j);
    oracle_t orc;
    oracle_make(log, p, &orc);
    oracle_json(j, log, &orc);
    json_arr(j, "runs");
    for (size_t i = 0; i < p->nruns; i++)
        if (!p->runs[i].model) /* the model's: torch_replays */
            run_json(j, m, &p->runs[i]);
    json_arr_end(j);
    json_dbl(j, "events_per_second_per_run", p->events_per_s);
    if (tp->made)
        wt_plan_json(j, &tp->log, &p->torch, model_rec(p));
    json_obj_end(j);
    json_line_end(j);
}

static int whatif_log(cli_ctx_t *c, const wi_cmd_t *w, const char *path)
{
    rd_log_t lf;
    if (rd_open_path(&lf, path)) {
        fprintf(c->err, "gmshim: %s: byte %" PRIu64 ": %s\n", path, lf.ndiags ? lf.diags[0].offset : 0,
                lf.ndiags ? lf.diags[0].msg : "cannot be read");
        rd_close(&lf);
        return CLI_FAIL;
    }
    model_t m;
    model_build(&m, &lf, MODEL_SITES | MODEL_EPOCHS); /* epochs: the growth the advice rule reads */
    if (w->device >= 0 && !whatif_has_device(&m, w->device)) {
        /* replaying a device the program never used would "fit" trivially: a mistake, said */
        char present[512];
        whatif_list_devices(&m, present, sizeof present);
        fprintf(c->err, "gmshim whatif: %s: device %d has no events in this log (devices with events: %s)\n",
                path, w->device, present);
        model_free(&m);
        rd_close(&lf);
        return CLI_FAIL;
    }
    int dev = pick_device(&m, w->device);
    rp_log_t log;
    int rc = CLI_FAIL;
    if (rp_load(&log, &lf, dev) == 0) {
        if (log.pool_off)
            fprintf(c->err, "gmshim whatif: %s: the pool was off (GMSHIM_POOL=0): there is nothing to replay\n", path);
        wi_plan_t p;
        wi_torch_t tp;
        memset(&tp, 0, sizeof tp);
        tp.made = log.torch_tensors && replay_torch_load(&tp.log, &lf, dev) == 0;
        wi_opts_t o = w->o;
        advice_growth_t g;
        advice_growth_of_device(&m, dev, log.torch_cache_kept, &g);
        advice_growth_of_log(&log, &g);
        for (size_t k = 0; g.peaks && k < log.nooms && !g.site; k++) /* a growing transient: the line that asked */
            g.site = log.ooms[k].recovered ? 0 : log.ooms[k].rec.site;
        advice_opts(&o, &g);
        if (wi_plan_make(&log, tp.made ? &tp.log : NULL, &o, &p) == 0) {
            if (c->json)
                plan_json(c, &m, &log, &p, path, &tp);
            else
                plan_text(c, &m, &log, &p, &tp);
            /* A damaged log first, as every command: what was lost may hold the failure or the fit. */
            rc = lf.partial ? CLI_PARTIAL : !p.fits ? WHATIF_NOTHING_FITS : CLI_OK;
            wi_plan_free(&p);
        } else {
            fprintf(c->err, "gmshim whatif: out of memory\n");
        }
        replay_torch_free(&tp.log);
        rp_log_free(&log);
    } else {
        fprintf(c->err, "gmshim whatif: %s: out of memory decoding the log\n", path);
    }
    for (size_t i = 0; i < lf.ndiags && i < RD_MAX_DIAGS; i++)
        fprintf(c->err, "gmshim: %s: byte %" PRIu64 ": %s\n", path, lf.diags[i].offset, lf.diags[i].msg);
    model_free(&m);
    rd_close(&lf);
    return rc;
}

int cmd_whatif(int argc, char **argv)
{
    static const cli_opt_t opts[] = {
        {"device-limit", O_DEVLIMIT, 1}, {"max-split", O_MAXSPLIT, 1}, {"cache-limit", O_CACHE, 1},
        {"pending-wait", O_PENDING, 1},  {"grid", O_GRID, 0},          {"device", O_DEVICE, 1},
        {"threads", O_THREADS, 1},       {NULL, 0, 0}};
    cli_ctx_t c;
    cli_init(&c, stdout, stderr, "whatif");
    c.json = cli_global.json;
    wi_cmd_t w;
    wi_opts_default(&w.o);
    w.device = -1;
    int rc = cli_parse_args(&c, argc, argv, opts, whatif_opt, &w, usage, CLI_ARGS_LOGS | CLI_ARGS_WRAP);
    if (rc >= 0)
        return rc;
    if (c.nargs != 1) {
        fprintf(stderr, "gmshim whatif: one log at a time (%d given)\n%s", c.nargs, usage);
        return cli_finish(&c, CLI_FAIL);
    }
    w.o.progress = isatty(2);
    rc = whatif_log(&c, &w, c.args[0]);
    int fin = cli_finish(&c, rc);
    return fin == CLI_FAIL ? CLI_FAIL : rc;
}
