/* An OOM's verdict (oom_classify.h): the counterfactual replay's (causes.c) where the log can be
 * replayed, else the snapshot rules, from the model's figures at the failure alone (docs/cli.md
 * has the rules). */
#include "oom_classify.h"
#include "output.h"

#include <stdio.h>
#include <string.h>

static const char *const cause_names[] = {"capacity", "transient", "leak", "fragmentation", "outside"};

const char *oom_cause_name(oom_cause_t c)
{
    return (unsigned)c < 5 ? cause_names[c] : "?";
}

static uint64_t sub0(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

void oom_classify_snapshot(const model_t *m, const model_oom_t *o, oom_verdict_t *v)
{
    int steps = o->epoch_system == EPOCH_TROUGHS && m->dev[o->dev] && m->dev[o->dev]->step.period;
    char a[32], b[32], c[32], d[32], e[32], lim[96], req[96];
    const gmlog_oom_t *r = &o->rec;
    memset(v, 0, sizeof *v);
    v->request = r->request ? (r->request + 511) / 512 * 512 : 512;
    causes_request_words(r->request, v->request, req, sizeof req);
    v->under_limit = (o->rec.h.flags & GMLOG_OOM_LIMIT) != 0;
    v->torch_limit = v->under_limit && o->limit_torch;
    /* The driver's free figure was taken before the OOM's cache release, the pool's figures
     * after it: put the released bytes back to compare like with like. */
    uint64_t reserved_then = r->reserved + o->released_before;
    uint64_t total = r->driver_total ? r->driver_total : o->device_total;
    v->total = total;
    if (v->under_limit) {
        v->available = o->limit ? o->limit : r->reserved;
        v->outside = 0;
    } else {
        v->outside = r->driver_total ? sub0(r->driver_total, r->driver_free + reserved_then) : 0;
        v->available = sub0(total, v->outside);
        if (o->limit && o->limit < v->available)
            v->available = o->limit;
    }
    v->pool_free = sub0(r->reserved, r->allocated);
    uint64_t live = r->allocated ? r->allocated : o->allocated;
    uint64_t driver_free_now = r->driver_free + o->released_before;

    if (v->pool_free >= v->request && r->largest_free < v->request && v->pool_free * 10 >= r->reserved) {
        v->cause = OOM_FRAGMENTATION;
        snprintf(v->why, sizeof v->why,
                 "the pool had %s free (reserved %s - allocated %s) but its largest free block was %s, "
                 "smaller than %s: the free memory is split into %u pieces",
                 rep_bytes(v->pool_free, a), rep_bytes(r->reserved, b), rep_bytes(r->allocated, c),
                 rep_bytes(r->largest_free, d), req, r->free_blocks);
        return;
    }
    if (!v->under_limit && total && v->outside >= total / 10 && v->outside + driver_free_now >= v->request) {
        v->cause = OOM_OUTSIDE;
        snprintf(v->why, sizeof v->why,
                 "%s of the device's %s is held outside gmshim's pool (the CUDA context, libraries with "
                 "their own allocator, other processes%s); without it %s would have fit",
                 rep_bytes(v->outside, a), rep_bytes(total, b),
                 o->unpooled_live ? ", this program's unpooled allocations" : "", req);
        return;
    }
    model_series_t lw = o->lowwater;
    if (model_series_grows(&lw, NULL) && (lw.last - lw.first) * 5 >= live) {
        uint64_t per = model_oom_leak_rate(o);
        v->cause = OOM_LEAK;
        v->growth = lw.last - lw.first;
        v->growth_per_epoch = per;
        snprintf(v->why, sizeof v->why,
                 "the low-water mark of allocated memory rose from %s to %s over %u %s (%s per %s, up at "
                 "%u of %u steps): %s of the %s live at the failure is growth that was never freed",
                 rep_bytes(lw.first, a), rep_bytes(lw.last, b), lw.n,
                 o->epoch_system == EPOCH_MARKS ? "marks" : steps ? "steps" : "iterations", rep_bytes(per, c),
                 o->epoch_system == EPOCH_MARKS ? "mark" : steps ? "step" : "iteration", lw.ups, lw.n - 1,
                 rep_bytes(v->growth, d), rep_bytes(live, e));
        return;
    }
    if (o->persistent + v->request > v->available || o->epoch_system < 0 || !o->transient) {
        v->cause = OOM_CAPACITY;
        if (o->persistent + v->request > v->available)
            snprintf(v->why, sizeof v->why,
                     "%s live %s plus %s exceed the %s the device gives this process%s",
                     rep_bytes(o->persistent, a),
                     o->epoch_system < 0 ? "(no marks or iterations seen: all of it counts as persistent)"
                                         : "across iterations (allocated before the current one)",
                     req, rep_bytes(v->available, c),
                     v->under_limit ? causes_limit_name(lim, sizeof lim, v->available, total, v->torch_limit) : "");
        else
            snprintf(v->why, sizeof v->why,
                     "%s live plus %s (a %s segment from the driver) did not fit in the %s the "
                     "device gives this process%s; %s",
                     rep_bytes(o->persistent + o->transient, a), req,
                     rep_bytes(r->segment, e), rep_bytes(v->available, c),
                     v->under_limit ? causes_limit_name(lim, sizeof lim, v->available, total, v->torch_limit) : "",
                     o->epoch_system < 0 ? "with no marks or iterations in the log, all of it counts as persistent"
                                         : "nothing was allocated in the current iteration");
        return;
    }
    v->cause = OOM_TRANSIENT;
    snprintf(v->why, sizeof v->why,
             "%s of the %s live were allocated in the current %s (since %s); the %s that lives across "
             "iterations plus the request would fit in %s, the iteration's own memory does not",
             rep_bytes(o->transient, a), rep_bytes(o->persistent + o->transient, b),
             o->epoch_system == EPOCH_MARKS ? "iteration" : steps ? "step" : "iteration",
             o->epoch_system == EPOCH_MARKS ? "the last mark" : steps ? "the step's start" : "the last low-water trough",
             rep_bytes(o->persistent, c), rep_bytes(v->available, d));
}

void oom_classify(const model_t *m, const model_oom_t *o, oom_verdict_t *v)
{
    cause_t c;
    if (causes_of(m, o, &c)) {
        oom_classify_snapshot(m, o, v);
        return;
    }
    memset(v, 0, sizeof *v);
    v->cause = c.cause;
    v->request = c.request;
    v->available = c.cap;
    v->outside = c.outside;
    v->pool_free = c.pool_free;
    v->growth = c.leaked;
    v->growth_per_epoch = c.leak_per_epoch;
    v->under_limit = c.by_limit;
    v->torch_limit = c.torch_limit;
    v->total = c.total;
    memcpy(v->why, c.why, sizeof v->why - 1);
    v->why[sizeof v->why - 1] = 0;
}
