/* `gmshim oom`: each failed allocation with what was asked, what the device and the pool had,
 * ONE cause found by counterfactual replay (causes.c: leak, fragmentation, outside, transient,
 * capacity; docs/cli.md has the rules) with figures that add up, the top live call sites then,
 * a setting a replay showed to get past the failure (never the one in force) and the practices
 * that fit the cause. Where the log cannot be replayed (a failure before a bounded log's
 * checkpoint) the snapshot rules of oom_classify_snapshot decide. Recovered failures are retries. */
#include "causes.h"
#include "advice.h"
#include "oom.h"
#include "ledger.h"
#include "output.h"
#include "sites.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* Practices that fit each cause (PyTorch's and in general); settings are never listed here: a
 * setting is suggested only when a replay showed it to get past the failure. */
static const char *const practices[5][5] = {
    [OOM_CAPACITY] = {
        "the memory that persists (weights, optimizer state, caches) does not fit: shrink it — bf16 "
        "weights or mixed precision (AMP), an 8-bit optimizer, sharding across GPUs (FSDP/ZeRO), CPU "
        "offload, a smaller model",
        "or a device with more memory, enough for all the job holds (the smallest device below fits "
        "the recording, which may end before the job's peak); under GMSHIM_DEVICE_LIMIT, a higher cap",
        NULL},
    [OOM_TRANSIENT] = {
        "the iteration's own memory (activations, temporaries) overflows: a smaller batch with gradient "
        "accumulation to keep the effective batch",
        "activation checkpointing (torch.utils.checkpoint) trades compute for activation memory",
        "mixed precision (torch.autocast to bf16/fp16, AMP) halves activations; shorter sequences help too",
        "free large temporaries early (`del` them, or do not keep them referenced until the end of the step)",
        NULL},
    [OOM_LEAK] = {
        "something allocated every iteration is kept: drop the references that keep it at the growing "
        "site named here",
        "typical in PyTorch: accumulating `loss` instead of `loss.item()` (keeps every graph alive), "
        "appending tensors that require grad to a list, caching outputs without .detach()",
        "`gmshim leaks LOG` lists the sites whose live bytes grow per iteration; gmshim_mark() per "
        "iteration sharpens it",
        NULL},
    [OOM_FRAGMENTATION] = {
        "allocate large, long-lived buffers first and in few sizes, so that small ones do not cut them",
        "between phases, `del` what is done with and call torch.cuda.empty_cache() (gmshim_empty_cache()) "
        "to give whole free segments back",
        NULL},
    [OOM_OUTSIDE] = {
        "GMSHIM_CUPTI=1 names the libraries that allocate outside the pool (cuBLAS, cuDNN, NCCL...)",
        "check other processes on the GPU (nvidia-smi); limit library workspaces (CUBLAS_WORKSPACE_CONFIG, "
        "NCCL_BUFFSIZE); CUDA_MODULE_LOADING=LAZY shrinks the context",
        "if a framework keeps its own cache, turn it off so that gmshim sees everything "
        "(GMSHIM_TORCH=own, or PYTORCH_NO_CUDA_MEMORY_CACHING=1)",
        NULL},
};

/* The generic hint to run with CUPTI, once the card's ledger already names the term outside the
 * pool that decided the OOM, says nothing more: it is left out. */
static int practice_shown(const model_t *m, const model_oom_t *o, int cause, int k)
{
    if (cause != OOM_OUTSIDE || k != 0 || o->history)
        return 1;
    const ledger_t *l = ledger_at_oom(ledger_of(m), o->seq);
    return !l || !ledger_deciding(l, o->rec.request);
}

static const char *epoch_label(const model_t *m, const model_oom_t *o, char *buf, size_t len)
{
    char t[32];
    if (o->epoch_system == EPOCH_MARKS)
        snprintf(buf, len, "mark %u \"%s\" at %s", o->epoch_index, o->epoch_label ? o->epoch_label : "",
                 rep_time(o->epoch_start, t));
    else if (o->epoch_system == EPOCH_TROUGHS && m->dev[o->dev] && m->dev[o->dev]->step.period)
        snprintf(buf, len, "step %u at %s, of %u allocations each", o->epoch_index, rep_time(o->epoch_start, t),
                 m->dev[o->dev]->step.period);
    else if (o->epoch_system == EPOCH_TROUGHS)
        snprintf(buf, len, "low-water trough %u at %s", o->epoch_index, rep_time(o->epoch_start, t));
    else
        snprintf(buf, len, "none");
    return buf;
}

/* A verdict for the text and JSON: the replay's, or the snapshot rules' when there is none. */
static int verdict(const model_t *m, const model_oom_t *o, cause_t *c, oom_verdict_t *v)
{
    int replayed = causes_of(m, o, c) == 0;
    if (replayed) {
        oom_classify(m, o, v);
        return 1;
    }
    oom_classify_snapshot(m, o, v);
    return 0;
}

static const char torch_note[] =
    "PyTorch's caching allocator was on: gmshim saw PyTorch's segments, not tensors (a site is where a "
    "segment was taken from the driver, sizes are segment sizes); to see tensors, run with GMSHIM_TORCH=own "
    "(or PYTORCH_NO_CUDA_MEMORY_CACHING=1)";

static const char torch_tensors_note[] =
    "PyTorch's caching allocator was on and its bridge logged its tensors: gmshim saw PyTorch's tensors "
    "(a site is where a tensor was allocated, sizes are tensor sizes; reserved memory is PyTorch's segments)";

/* Steps the whole device lasts past the failure at the growth rate (what the pool could have
 * of it: the device less what was outside the pool); 0 when not one more. */
static uint64_t steps_left(const cause_t *c)
{
    uint64_t room = c->total > c->outside ? c->total - c->outside : c->cap;
    return c->growth_per_step && room > c->split.floor ? (room - c->split.floor) / c->growth_per_step : 0;
}

/* Memory that grows (advice.c): the line, its rate, when the device runs out at it and the
 * device that would last the recording plus ADVICE_STEPS_PAST steps; never a setting. */
static void growth_text(FILE *f, const model_t *m, const model_oom_t *o, const cause_t *c)
{
    char a[32], b[32], d[32], t[48], lbl[512];
    const char *w = c->epoch_system == EPOCH_MARKS || c->growth_peaks ? "mark" : c->epoch_steps ? "step" : "iteration";
    uint64_t room = c->total > c->outside ? c->total - c->outside : c->cap, left = steps_left(c);
    uint32_t site = c->leak_site ? c->leak_site : c->fail_site; /* a growing transient: the line that asked */
    fprintf(f, "    - settings: none is a remedy: %s grows by %s per %s%s%s; a setting or a larger cap "
            "only postpones the OOM\n", c->growth_peaks ? "each step's peak of live memory" : "the memory",
            rep_bytes(c->growth_per_step, a), c->growth_peaks ? "mark" : w, site ? " at " : "",
            site ? site_label(m, site, lbl, sizeof lbl) : "");
    if (left) {
        t[0] = 0;
        if (c->step_ns)
            snprintf(t, sizeof t, ", about %s", rep_time(left * c->step_ns, d));
        fprintf(f, "    - at that rate the whole device, %s for the pool, runs out %" PRIu64 " %ss after the "
                "failure%s\n", rep_bytes(room, b), left, w, t);
    } else {
        fprintf(f, "    - at that rate the %s the pool could reserve ran out at %s %u, %s into the run\n",
                rep_bytes(c->cap, b), w, c->epoch_index, rep_time(o->t, d));
    }
    fprintf(f, "    - a device that lasts the recorded run and %d %ss more at that rate: %s\n", ADVICE_STEPS_PAST, w,
            rep_bytes(c->lasting_device_bytes, a));
}

static void remedies_text(FILE *f, const model_t *m, const model_oom_t *o, const cause_t *c, const oom_verdict_t *v,
                          int replayed)
{
    char a[32], lbl[512];
    fprintf(f, "  %sremedies%s:\n", rep_green(), rep_reset());
    if (replayed && c->env_name[0])
        fprintf(f, "    - %s=%s (tested by replay: %s)\n", c->env_name, c->env_value, c->tested);
    else if (replayed && c->growing)
        growth_text(f, m, o, c);
    else if (replayed && c->cause == OOM_LEAK)
        fprintf(f, "    - settings: no setting replayed gets past it, and a larger device only postpones a leak\n");
    else if (replayed)
        fprintf(f, "    - settings: %s\n", c->tested);
    for (int i = 0; practices[v->cause][i]; i++)
        if (practice_shown(m, o, v->cause, i))
            fprintf(f, "    - %s\n", practices[v->cause][i]);
    if (replayed && c->cause == OOM_LEAK && c->leak_site)
        fprintf(f, "    - the line to look at: %s\n", site_label(m, c->leak_site, lbl, sizeof lbl));
    else if (replayed && (c->cause == OOM_TRANSIENT || c->cause == OOM_CAPACITY) && c->fail_site)
        fprintf(f, "    - the line that asked: %s\n", site_label(m, c->fail_site, lbl, sizeof lbl));
    if (replayed && c->min_found && c->cause != OOM_LEAK && !c->growing)
        fprintf(f, "    - the smallest device the recording fits on: %s (gmshim whatif)%s\n",
                rep_bytes(c->min_device_bytes, a), c->climbing ? ": it gets past the recorded failure, not "
                "what the job asked for after it" : "");
}

static void plan_split_text(FILE *f, const cause_t *c)
{
    char a[32], b[32];
    if (c->plan.valid)
        fprintf(f, "  plan     the recorded allocations placed by their lifetimes (best-fit-decreasing, %" PRIu64
                " placed%s): %s at the failure, against %s needed\n", c->plan.placed,
                c->plan.windowed ? c->plan.narrowed ? ", a narrowed window of the run" : ", a window of the run" : "", rep_bytes(c->plan.planned, a),
                rep_bytes(c->plan.floor, b));
    split_text(f, &c->split, "  ");
}

/* The term outside the pool that decided the OOM: only where the cause is memory outside the
 * pool. Any small request would fit without some term (the context, a library), and for a leak
 * or a fragmented pool naming one would send the user the wrong way. */
static const ledger_term_t *deciding(const ledger_t *l, const model_oom_t *o, int cause)
{
    return cause == OOM_OUTSIDE ? ledger_deciding(l, o->rec.request) : NULL;
}

/* The card at the failure, and the term outside the pool that decided it, with its remedy. */
static void card_text(FILE *f, const model_t *m, const model_oom_t *o, int cause)
{
    const ledger_t *l = o->history ? NULL : ledger_at_oom(ledger_of(m), o->seq);
    if (!l)
        return;
    char a[32], lbl[160], rem[320];
    fprintf(f, "  card     the device's %s at the failure:\n", rep_bytes(l->total, a));
    ledger_text(f, l, "    ");
    const ledger_term_t *t = deciding(l, o, cause);
    if (t) {
        fprintf(f, "  %soutside%s  %s held %s: without it the request would have fit\n", rep_red(), rep_reset(),
                ledger_term_label(t, l->torch, lbl, sizeof lbl), rep_bytes(t->bytes, a));
        fprintf(f, "  remedy   %s\n", ledger_remedy(t, rem, sizeof rem));
    }
}

static void card_json(json_t *j, const model_t *m, const model_oom_t *o, int cause)
{
    const ledger_t *l = o->history ? NULL : ledger_at_oom(ledger_of(m), o->seq);
    if (!l)
        return;
    char lbl[160], rem[320];
    ledger_json(j, "ledger", l);
    const ledger_term_t *t = deciding(l, o, cause);
    if (!t)
        return;
    json_obj(j, "deciding_term");
    json_str(j, "term", ledger_term_label(t, l->torch, lbl, sizeof lbl));
    if (t->kind == LK_PROCESS)
        json_u64(j, "pid", t->pid);
    json_u64(j, "bytes", t->bytes);
    json_str(j, "remedy", ledger_remedy(t, rem, sizeof rem));
    json_obj_end(j);
}

static void one_text(cli_ctx_t *c, const model_t *m, const model_oom_t *o, unsigned n)
{
    FILE *f = c->out;
    char a[32], b[32], d[32], e[32], t[32], lbl[512];
    oom_verdict_t v;
    cause_t cz;
    int replayed = verdict(m, o, &cz, &v);
    fprintf(f, "%sOOM %u%s on device %u at %s: %s asked for (the pool asked the driver for %s)\n", rep_bold(), n,
            rep_reset(), o->dev, rep_time(o->t, t), rep_bytes(o->rec.request, a), rep_bytes(o->rec.segment, b));
    if (o->history)
        fprintf(f, "  (before the log's checkpoint: its record was kept, not the live blocks and sites of then)\n");
    fprintf(f, "  from     %s\n", site_label(m, o->rec.site, lbl, sizeof lbl));
    if (v.torch_limit)
        fprintf(f, "  device   refused by PyTorch's own cap%s of the device's %s, not by the driver\n",
                causes_limit_name(lbl, sizeof lbl, v.available, v.total, 1), rep_bytes(v.total, a));
    else if (v.under_limit)
        fprintf(f, "  device   refused by GMSHIM_DEVICE_LIMIT: cap %s\n", rep_bytes(v.available, a));
    else
        fprintf(f, "  device   %s total, %s free in the driver, %s held outside the pool\n",
                rep_bytes(o->rec.driver_total ? o->rec.driver_total : o->device_total, a),
                rep_bytes(o->rec.driver_free, b), rep_bytes(v.outside, d));
    fprintf(f, "  pool     reserved %s, allocated %s (requested %s), cached %s, pending %s, largest free %s\n",
            rep_bytes(o->rec.reserved, a), rep_bytes(o->rec.allocated, b), rep_bytes(o->rec.requested, d),
            rep_bytes(o->rec.cached, e), rep_bytes(o->rec.pending, t), rep_bytes(o->rec.largest_free, lbl));
    if (o->nseg && o->seg[0].free)
        fprintf(f, "  segments %" PRIu64 " of PyTorch's; %" PRIu64 " inactive split blocks hold %s free between tensors, "
                   "the most in %#" PRIx64 " (%s free of %s, largest piece %s)\n", o->seg_total, o->frag.free_gaps,
                rep_bytes(o->frag.external, a), o->seg[0].base, rep_bytes(o->seg[0].free, b),
                rep_bytes(o->seg[0].size, d), rep_bytes(o->seg[0].largest_free, e));
    if (replayed) {
        fprintf(f, "  replay   %s: reserved %s after the cache release, of the %s the pool could reserve\n",
                cz.reproduced      ? "under the recorded settings it fails here too"
                : cz.torch_expandable ? "the model of PyTorch's expandable segments got past it (the recorded figures are used)"
                                      : "it got past this failure (the recorded figures are used)",
                rep_bytes(cz.reserved, e), rep_bytes(cz.cap, t));
        fprintf(f, "  live     %s = %s persistent + %s since the iteration began (%s)\n", rep_bytes(cz.live, a),
                rep_bytes(cz.persistent, b), rep_bytes(cz.transient, d), epoch_label(m, o, lbl, sizeof lbl));
    } else {
        fprintf(f, "  live     %s persistent, %s since the epoch start (%s)\n", rep_bytes(o->persistent, a),
                rep_bytes(o->transient, b), epoch_label(m, o, lbl, sizeof lbl));
    }
    fprintf(f, "  %scause    %s%s: %s\n", rep_red(), oom_cause_name(v.cause), rep_reset(), replayed ? cz.why : v.why);
    card_text(f, m, o, v.cause);
    if (replayed && cz.cannot_tell[0])
        fprintf(f, "  %scannot tell%s: %s\n", rep_yellow(), rep_reset(), cz.cannot_tell);
    if (replayed)
        plan_split_text(f, &cz);
    if (v.cause == OOM_LEAK && o->ngrow) {
        fprintf(f, "  growing sites:\n");
        for (unsigned i = 0; i < o->ngrow; i++) {
            const model_sstat_t *s = &m->sst[o->grow[i].sidx];
            int steps = o->epoch_system == EPOCH_TROUGHS && m->dev[o->dev] && m->dev[o->dev]->step.period;
            fprintf(f, "    +%s per %s: %s\n", rep_bytes(model_series_rate(&o->grow[i].ser), a),
                    o->epoch_system == EPOCH_MARKS ? "mark" : steps ? "step" : "iteration",
                    site_label(m, s->site, lbl, sizeof lbl));
            site_print(f, m, s->site, "        ", c->depth, !c->frames_all);
        }
    }
    if (o->ntop) {
        fprintf(f, "  top live call sites then:\n");
        for (unsigned i = 0; i < o->ntop; i++) {
            const model_sstat_t *s = &m->sst[o->top[i].sidx];
            fprintf(f, "    %10s %6s x  %s\n", rep_bytes(o->top[i].bytes, a), rep_count(o->top[i].count, b),
                    site_label(m, s->site, lbl, sizeof lbl));
            if (i < 3)
                site_print(f, m, s->site, "                     ", c->depth < 4 && c->depth ? c->depth : 4, !c->frames_all);
        }
    }
    remedies_text(f, m, o, &cz, &v, replayed);
}

void rep_oom_text(cli_ctx_t *c, const model_t *m)
{
    FILE *f = c->out;
    char a[32], t[32];
    if (!m->ooms_total && !m->retries_total) {
        fprintf(f, "no out-of-memory failures\n");
        return;
    }
    cause_t cz;
    if (m->nooms && causes_of(m, &m->ooms[0], &cz) == 0 && cz.torch_cache_kept)
        fprintf(f, "%snote%s: %s\n", rep_yellow(), rep_reset(), torch_note);
    else if (m->nooms && causes_of(m, &m->ooms[0], &cz) == 0 && cz.torch_tensors)
        fprintf(f, "note: %s\n", torch_tensors_note);
    for (size_t i = 0; i < m->nooms; i++)
        one_text(c, m, &m->ooms[i], (unsigned)i + 1);
    if (m->ooms_total > m->nooms)
        fprintf(f, "... %" PRIu64 " more OOMs, counted but not analysed\n", m->ooms_total - m->nooms);
    if (m->retries_total) {
        fprintf(f, "%sretries%s: %" PRIu64 " allocation%s failed in the driver first and succeeded after gmshim "
                "released its cache:", rep_bold(), rep_reset(), m->retries_total, m->retries_total == 1 ? "" : "s");
        for (size_t i = 0; i < m->nretries && i < 8; i++)
            fprintf(f, "%s %s at %s", i ? "," : "", rep_bytes(m->retries[i].request, a), rep_time(m->retries[i].t, t));
        fprintf(f, "%s\n", m->retries_total > 8 ? ", ..." : "");
    }
}

static void cause_json(json_t *j, const model_t *m, const cause_t *c)
{
    json_obj(j, "replay");
    json_bool(j, "reproduced", c->reproduced);
    json_bool(j, "torch_cache_kept", c->torch_cache_kept);
    if (c->torch_tensors) /* only then: the JSON of other logs stays as it was */
        json_bool(j, "torch_tensors", 1);
    json_u64(j, "request", c->request);
    json_u64(j, "cap", c->cap);
    json_u64(j, "total", c->total);
    json_u64(j, "outside", c->outside);
    json_u64(j, "live", c->live);
    json_u64(j, "persistent", c->persistent);
    json_u64(j, "transient", c->transient);
    json_u64(j, "leaked", c->leaked);
    json_u64(j, "leak_per_epoch", c->leak_per_epoch);
    json_u64(j, "reserved", c->reserved);
    json_u64(j, "pool_free", c->pool_free);
    json_u64(j, "largest_free", c->largest_free);
    json_u64(j, "free_blocks", c->free_blocks);
    json_u64(j, "epoch", c->epoch_index);
    if (c->cannot_tell[0])
        json_str(j, "cannot_tell", c->cannot_tell);
    if (c->leak_site) {
        json_obj(j, "leak_site");
        site_json(j, m, c->leak_site);
        json_obj_end(j);
    }
    json_obj_end(j);
    json_obj(j, "recommendation");
    json_obj(j, "env");
    if (c->env_name[0])
        json_str(j, c->env_name, c->env_value);
    json_obj_end(j);
    json_str(j, "why", c->tested);
    if (c->min_found)
        json_u64(j, "min_device_bytes", c->min_device_bytes);
    json_u64(j, "headroom", c->headroom);
    json_bool(j, "growing", c->growing);
    if (c->growing) {
        json_u64(j, "growth_per_step", c->growth_per_step);
        json_bool(j, "growth_of_peaks", c->growth_peaks);
        json_u64(j, "step_ns", c->step_ns);
        json_u64(j, "lasting_device_bytes", c->lasting_device_bytes);
        json_u64(j, "lasting_steps_past", ADVICE_STEPS_PAST);
        json_u64(j, "device_steps_left", steps_left(c));
    } else if (c->reproduced) {
        json_bool(j, "climbing", c->climbing);
        json_u64(j, "climb_need", c->climb_need);
        json_u64(j, "climb_held", c->climb_held);
    }
    json_obj_end(j);
    json_obj(j, "plan");
    json_bool(j, "valid", c->plan.valid);
    json_u64(j, "floor", c->plan.floor);
    json_u64(j, "planned", c->plan.planned);
    json_u64(j, "placed", c->plan.placed);
    json_bool(j, "windowed", c->plan.windowed);
    json_obj_end(j);
    split_json(j, &c->split);
}

static void one_json(json_t *j, const model_t *m, const model_oom_t *o)
{
    oom_verdict_t v;
    cause_t cz;
    int replayed = verdict(m, o, &cz, &v);
    json_obj(j, NULL);
    json_u64(j, "device", o->dev);
    json_u64(j, "t", o->t);
    json_u64(j, "requested", o->rec.request);
    json_u64(j, "segment", o->rec.segment);
    if (o->history)
        json_bool(j, "before_checkpoint", 1);
    json_str(j, "cause", oom_cause_name(v.cause));
    json_str(j, "why", replayed ? cz.why : v.why);
    json_bool(j, "replayed", replayed);
    if (replayed)
        cause_json(j, m, &cz);
    card_json(j, m, o, v.cause);
    json_obj(j, "evidence");
    json_u64(j, "request_rounded", v.request);
    json_u64(j, "available", v.available);
    json_bool(j, "under_limit", v.under_limit);
    if (v.torch_limit && v.total)
        json_dbl(j, "torch_memory_fraction", (double)v.available / (double)v.total);
    json_u64(j, "outside", v.outside);
    json_u64(j, "pool_free", v.pool_free);
    json_u64(j, "driver_total", o->rec.driver_total);
    json_u64(j, "driver_free", o->rec.driver_free);
    json_u64(j, "released_before", o->released_before);
    json_u64(j, "reserved", o->rec.reserved);
    json_u64(j, "allocated", o->rec.allocated);
    json_u64(j, "cached", o->rec.cached);
    json_u64(j, "pending", o->rec.pending);
    json_u64(j, "largest_free", o->rec.largest_free);
    json_u64(j, "free_blocks", o->rec.free_blocks);
    json_u64(j, "persistent", o->persistent);
    json_u64(j, "transient", o->transient);
    json_u64(j, "unpooled_live", o->unpooled_live);
    json_str(j, "epochs", o->epoch_system >= 0 ? model_epoch_noun(m, o->dev, o->epoch_system, 1) : NULL);
    json_u64(j, "epoch", o->epoch_index);
    json_u64(j, "epoch_start", o->epoch_start);
    json_obj(j, "lowwater");
    json_u64(j, "epochs", o->lowwater.n);
    json_u64(j, "first", o->lowwater.first);
    json_u64(j, "last", o->lowwater.last);
    json_u64(j, "rises", o->lowwater.ups);
    json_u64(j, "falls", o->lowwater.downs);
    json_obj_end(j);
    if (v.cause == OOM_LEAK) {
        json_u64(j, "growth", v.growth);
        json_u64(j, "growth_per_epoch", v.growth_per_epoch);
    }
    json_obj_end(j);
    json_obj(j, "site");
    site_json(j, m, o->rec.site);
    json_obj_end(j);
    json_arr(j, "growing_sites");
    for (unsigned k = 0; k < o->ngrow; k++) {
        const model_sstat_t *s = &m->sst[o->grow[k].sidx];
        json_obj(j, NULL);
        json_u64(j, "bytes_per_epoch", model_series_rate(&o->grow[k].ser));
        json_u64(j, "bytes", s->live_req);
        json_u64(j, "count", s->live_count);
        site_json(j, m, s->site);
        json_obj_end(j);
    }
    json_arr_end(j);
    json_arr(j, "top_sites");
    for (unsigned k = 0; k < o->ntop; k++) {
        json_obj(j, NULL);
        json_u64(j, "bytes", o->top[k].bytes);
        json_u64(j, "count", o->top[k].count);
        site_json(j, m, m->sst[o->top[k].sidx].site);
        json_obj_end(j);
    }
    json_arr_end(j);
    json_arr(j, "remedies");
    if (replayed && cz.env_name[0]) {
        char r[200];
        snprintf(r, sizeof r, "%s=%s", cz.env_name, cz.env_value);
        json_str(j, NULL, r);
    }
    for (int k = 0; practices[v.cause][k]; k++)
        if (practice_shown(m, o, v.cause, k))
            json_str(j, NULL, practices[v.cause][k]);
    json_arr_end(j);
    json_obj_end(j);
}

void rep_oom_json(cli_ctx_t *c, const model_t *m)
{
    json_t *j = &c->j;
    cause_t first;
    if (m->nooms && causes_of(m, &m->ooms[0], &first) == 0 && first.torch_cache_kept)
        json_str(j, "note", torch_note);
    else if (m->nooms && causes_of(m, &m->ooms[0], &first) == 0 && first.torch_tensors)
        json_str(j, "note", torch_tensors_note);
    json_arr(j, "ooms");
    for (size_t i = 0; i < m->nooms; i++)
        one_json(j, m, &m->ooms[i]);
    json_arr_end(j);
    json_u64(j, "ooms_total", m->ooms_total);
    json_arr(j, "retries");
    for (size_t i = 0; i < m->nretries; i++) {
        json_obj(j, NULL);
        json_u64(j, "device", m->retries[i].dev);
        json_u64(j, "t", m->retries[i].t);
        json_u64(j, "requested", m->retries[i].request);
        json_obj_end(j);
    }
    json_arr_end(j);
    json_u64(j, "retries_total", m->retries_total);
}

static void oom_one(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg)
{
    (void)lf;
    (void)arg;
    if (c->json)
        rep_oom_json(c, m);
    else
        rep_oom_text(c, m);
}

static const char usage[] =
    "usage: gmshim oom [--depth N] [--frames all] [--json] LOG...\n"
    "\n"
    "Each allocation that failed with out of memory: what was asked, what the device and the pool\n"
    "had, one cause with its evidence, the top live call sites at that moment and remedies.\n"
    "Causes, tested in this order (docs/cli.md has the exact rules):\n"
    "  fragmentation  the pool had enough free bytes, but no free block large enough\n"
    "  outside        memory the pool does not hold (context, other libraries or processes) is at\n"
    "                 least a tenth of the device, and without it the request would have fit\n"
    "  leak           the low-water mark rises steadily from mark to mark (or iteration to\n"
    "                 iteration) and that growth is at least a fifth of what is live\n"
    "  capacity       memory live across iterations plus the request exceed the device (or the\n"
    "                 GMSHIM_DEVICE_LIMIT cap)\n"
    "  transient      otherwise: the current iteration's own memory overflowed\n"
    "Each failure also gets its floor (live + the request), the offline plan of the recorded\n"
    "allocations and the split of what the pool reserved: needed, only by planning, avoidable by a\n"
    "tested setting, capacity. A setting is recommended only when its replay gets past every OOM\n"
    "with headroom (5% of the cap or three steps' growth), never for memory that grows per step.\n"
    "Allocations that failed and then succeeded after the cache was released are listed as retries.\n"
    "\n"
    "  -d, --depth N  lines of frames shown per site (default 12; 0: all)\n"
    "      --frames all  under a Python line, show each frame inside PyTorch and CUDA libraries\n"
    "                 (default folded: one line per run of them)\n"
    "  -j, --json     one JSON document\n"
    "  -h, --help     this text\n";

int cmd_oom(int argc, char **argv)
{
    cli_ctx_t c;
    cli_init(&c, stdout, stderr, "oom");
    c.json = cli_global.json;
    c.progress = isatty(2);
    int rc = cli_parse_common(&c, argc, argv, usage, CLI_OPT_DEPTH | CLI_OPT_FRAMES);
    if (rc >= 0)
        return rc;
    rc = cli_run_logs(&c, c.nargs, c.args, MODEL_SITES | MODEL_EPOCHS, oom_one, NULL);
    return cli_finish(&c, rc);
}
