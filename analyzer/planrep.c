/* `report`'s floor and plan at the peak: each device's events decoded (replay_load.c, the
 * decoder the causes use), planned around where live bytes peaked, and printed beside the
 * recorded reserved peak. A log too large to decode is said to be, never half planned. */
#include "planrep.h"
#include "output.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* A log beyond this is not decoded again for `report`'s plan (GMSHIM_REPLAY_MAX_BYTES moves it):
 * the decoding costs about what the report's own replay does, and the report's speed is its
 * first promise (docs/performance.md, P5); `whatif` plans any log. */
#define PLANREP_MAX_LOG_BYTES (256ull << 20)

void planrep_peak_text(FILE *f, const rp_log_t *log, const plan_point_t *p, const char *lead)
{
    char a[32], b[32], d[32], e[32], g[32], t[32];
    fprintf(f, "%slive %s at %s, planned %s (best-fit-decreasing by the recorded lifetimes, %" PRIu64
            " allocations%s), reserved at its peak as recorded %s; utilization (allocated / reserved) %s planned, "
            "%s as recorded\n", lead, rep_bytes(p->floor, a), rep_time(p->t, t), rep_bytes(p->planned, b), p->placed,
            p->windowed ? p->narrowed ? " around the peak, a window narrowed to bound the work" : " around the peak" : "", rep_bytes(log->peak_reserved_recorded, d),
            rep_pct(p->floor, p->planned, e), rep_pct(p->floor, log->peak_reserved_recorded, g));
}

void planrep_peak_json(json_t *j, const rp_log_t *log, const plan_point_t *p)
{
    json_u64(j, "floor", p->floor);
    json_u64(j, "t", p->t);
    json_u64(j, "planned", p->planned);
    json_u64(j, "placed", p->placed);
    json_bool(j, "windowed", p->windowed);
    json_u64(j, "reserved_recorded", log->peak_reserved_recorded);
    json_dbl(j, "utilization_planned", p->planned ? (double)p->floor / (double)p->planned : 0);
    json_dbl(j, "utilization_recorded",
             log->peak_reserved_recorded ? (double)p->floor / (double)log->peak_reserved_recorded : 0);
}

static int too_large(const model_t *m)
{
    const char *env = getenv("GMSHIM_REPLAY_MAX_BYTES");
    uint64_t max = env ? strtoull(env, NULL, 10) : PLANREP_MAX_LOG_BYTES;
    return !m->lf || (max && m->lf->size > max);
}

/* Device d decoded and planned at its peak: 0, or -1. */
static int device_plan(const model_t *m, int d, rp_log_t *log, plan_point_t *p)
{
    rd_log_t clone;
    if (rd_clone(m->lf, &clone))
        return -1;
    int rc = rp_load_events(log, &clone, d); /* the plan replays nothing */
    rd_close(&clone);
    if (rc)
        return -1;
    if (plan_at_peak(log, p) || !p->floor) {
        rp_log_free(log);
        return -1;
    }
    return 0;
}

void rep_plan_text(cli_ctx_t *c, const model_t *m)
{
    FILE *f = c->out;
    if (too_large(m)) {
        fprintf(f, "not planned here: the log is larger than report's bound for it (256 MiB, GMSHIM_REPLAY_MAX_BYTES "
                   "moves it); gmshim whatif plans it\n");
        return;
    }
    int any = 0;
    for (int d = 0; d < m->ndev; d++) {
        rp_log_t log;
        plan_point_t p;
        if (!m->dev[d] || device_plan(m, d, &log, &p))
            continue;
        char lead[32];
        snprintf(lead, sizeof lead, "device %d: ", d);
        planrep_peak_text(f, &log, &p, lead);
        rp_log_free(&log);
        any = 1;
    }
    if (!any)
        fprintf(f, "no allocations to plan\n");
}

void rep_plan_json(cli_ctx_t *c, const model_t *m)
{
    json_t *j = &c->j;
    json_arr(j, "plans");
    for (int d = 0; d < m->ndev && !too_large(m); d++) {
        rp_log_t log;
        plan_point_t p;
        if (!m->dev[d] || device_plan(m, d, &log, &p))
            continue;
        json_obj(j, NULL);
        json_u64(j, "device", (uint64_t)d);
        planrep_peak_json(j, &log, &p);
        json_obj_end(j);
        rp_log_free(&log);
    }
    json_arr_end(j);
}
