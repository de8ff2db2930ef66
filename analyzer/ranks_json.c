/* One run's verdict as JSON (ranks_int.h), the fields of the text (ranks_text.c) with every time
 * in ns: "first_failure", "ranks" (each log's end, or the latest moment it is known alive when its
 * end is unknown), "uncertain" with its reason, "missing", "pattern", "imbalance". */
#include "ranks_int.h"

#include <stdio.h>
#include <string.h>

static void rank_id(json_t *js, const ranks_log_t *x)
{
    if (x->rank >= 0)
        json_i64(js, "rank", x->rank);
    else
        json_null(js, "rank");
}

/* "first_failure": {...} or null. */
static void first_failure(json_t *js, const job_t *j)
{
    const ranks_log_t *r = j->r;
    char b[32];
    if (j->first < 0) {
        json_null(js, "first_failure");
        return;
    }
    const ranks_log_t *x = &r[j->first];
    json_obj(js, "first_failure");
    rank_id(js, x);
    json_str(js, "host", x->host);
    json_u64(js, "pid", x->pid);
    json_str(js, "path", x->path);
    if (x->fail_dev >= 0)
        json_i64(js, "device", x->fail_dev);
    else
        json_null(js, "device");
    json_str(js, "kind", ranks_job_fail_kind(x->fail));
    json_u64(js, "realtime_ns", ranks_job_fail_ns(x));
    json_u64(js, "t", ranks_job_fail_ns(x) - x->start_ns);
    json_bool(js, "time_known", !j->first_unknown);
    if (x->fail == RANKS_FAIL_OOM) {
        json_str(js, "cause", x->cause);
        json_str(js, "why", x->why);
        json_str(js, "site", x->site);
        json_u64(js, "requested", x->request);
    } else {
        json_null(js, "cause");
    }
    if (x->fail == RANKS_FAIL_SIGNAL) {
        json_u64(js, "signal", x->sig);
        json_str(js, "signal_name", ranks_job_sig_name(x->sig, b, sizeof b));
    }
    json_str(js, "ended", ranks_job_end_kind(x));
    json_bool(js, "uncertain", j->uncertain);
    json_str(js, "uncertain_reason", j->uncertain ? j->reason : NULL);
    if (j->second >= 0) {
        json_obj(js, "uncertain_with");
        rank_id(js, &r[j->second]);
        json_str(js, "host", r[j->second].host);
        json_u64(js, "after_ns", ranks_job_fail_ns(&r[j->second]) - ranks_job_fail_ns(x));
        json_obj_end(js);
    }
    json_obj_end(js);
}

/* "ranks": [...], each log's failure and end against the first failure (or the job's start). */
static void ranks(json_t *js, const job_t *j)
{
    const ranks_log_t *r = j->r;
    char b[32];
    uint64_t ref = ranks_job_ref_ns(j);
    const char *after = j->first >= 0 ? "first_failure_ns" : "job_start_ns";
    char key[64];
    json_arr(js, "ranks");
    for (int k = 0; k < j->readable; k++) {
        const ranks_log_t *x = &r[j->order[k]];
        json_obj(js, NULL);
        rank_id(js, x);
        if (x->local_rank >= 0)
            json_i64(js, "local_rank", x->local_rank);
        json_str(js, "host", x->host);
        json_u64(js, "pid", x->pid);
        json_str(js, "path", x->path);
        json_u64(js, "start_realtime_ns", x->start_ns);
        json_str(js, "failure", ranks_job_fail_kind(x->fail));
        if (x->fail == RANKS_FAIL_OOM || x->fail == RANKS_FAIL_SIGNAL) {
            json_u64(js, "failure_realtime_ns", ranks_job_fail_ns(x));
            snprintf(key, sizeof key, "failure_after_%s", after);
            json_i64(js, key, (int64_t)(ranks_job_fail_ns(x) - ref));
        }
        if (x->fail == RANKS_FAIL_OOM)
            json_str(js, "cause", x->cause);
        json_str(js, "end", ranks_job_end_kind(x));
        if (x->reason == GMLOG_CLOSE_SIGNAL && x->closed) {
            json_u64(js, "signal", x->sig);
            json_str(js, "signal_name", ranks_job_sig_name(x->sig, b, sizeof b));
        }
        int src;
        uint64_t alive = ranks_job_alive_ns(x, &src);
        json_bool(js, "end_known", ranks_job_end_known(x));
        if (ranks_job_end_known(x)) {
            json_u64(js, "end_realtime_ns", alive);
            snprintf(key, sizeof key, "end_after_%s", after);
            json_i64(js, key, (int64_t)(alive - ref));
        } else {
            json_null(js, "end_realtime_ns");
            json_u64(js, "alive_until_realtime_ns", alive);
            json_str(js, "alive_until_source", ranks_job_alive_kind(src));
            snprintf(key, sizeof key, "alive_after_%s", after);
            json_i64(js, key, (int64_t)(alive - ref));
        }
        json_bool(js, "first_failure", j->order[k] == j->first);
        json_obj_end(js);
    }
    json_arr_end(js);
}

/* "imbalance": {...}: the peaks per rank and the outlier. */
static void imbalance(json_t *js, const job_t *j)
{
    const ranks_log_t *r = j->r;
    json_obj(js, "imbalance");
    json_u64(js, "median_peak_live", j->median_live);
    json_arr(js, "ranks");
    for (int k = 0; k < j->readable; k++) {
        const ranks_log_t *x = &r[j->order[k]];
        json_obj(js, NULL);
        rank_id(js, x);
        json_u64(js, "pid", x->pid);
        json_u64(js, "peak_reserved", x->peak_reserved);
        json_u64(js, "peak_live", x->peak_live);
        json_u64(js, "peak_t", x->peak_t);
        json_u64(js, "peak_job_t", x->start_ns + x->peak_t - j->t0);
        json_obj_end(js);
    }
    json_arr_end(js);
    if (j->outlier < 0) {
        json_null(js, "outlier");
    } else {
        const ranks_log_t *x = &r[j->outlier];
        json_obj(js, "outlier");
        rank_id(js, x);
        json_u64(js, "pid", x->pid);
        json_u64(js, "peak_live", x->peak_live);
        json_u64(js, "excess", x->peak_live - j->median_live);
        json_arr(js, "top_sites");
        for (unsigned k = 0; k < x->ntop; k++) {
            json_obj(js, NULL);
            json_u64(js, "bytes", x->top[k].bytes);
            json_u64(js, "count", x->top[k].count);
            json_str(js, "site", x->top[k].label);
            json_obj_end(js);
        }
        json_arr_end(js);
        json_obj_end(js);
    }
    json_obj_end(js);
}

/* "crowded": [{rank, pid, bytes, others: [{rank, pid, bytes}]}]: GPUs that held other ranks' processes. */
static void crowded(json_t *js, const job_t *j)
{
    json_arr(js, "crowded");
    for (int k = 0; k < j->ncrowd; k++) {
        const crowd_t *c = &j->crowd[k];
        json_obj(js, NULL);
        rank_id(js, &j->r[c->log]);
        json_u64(js, "pid", j->r[c->log].pid);
        json_u64(js, "bytes", c->total);
        json_arr(js, "others");
        for (int i = 0; i < c->n; i++) {
            json_obj(js, NULL);
            rank_id(js, &j->r[c->others[i]]);
            json_u64(js, "pid", j->r[c->others[i]].pid);
            json_u64(js, "bytes", c->bytes[i]);
            json_obj_end(js);
        }
        json_arr_end(js);
        json_obj_end(js);
    }
    json_arr_end(js);
    json_str(js, "crowded_remedy", j->ncrowd ? ranks_job_crowd_text : NULL);
}

/* The run's fields into the open object. */
void ranks_json_job(json_t *js, const job_t *j)
{
    json_str(js, "run", j->run[0] ? j->run : NULL);
    json_u64(js, "logs", (uint64_t)j->n);
    json_u64(js, "readable", (uint64_t)j->readable);
    json_u64(js, "hosts", (uint64_t)j->hosts);
    if (j->world > 0)
        json_i64(js, "world_size", j->world);
    else
        json_null(js, "world_size");
    json_u64(js, "clock_skew_assumed_ns", j->hosts > 1 ? RANKS_SKEW_NS : 0);
    json_u64(js, "job_start_realtime_ns", j->t0);
    json_bool(js, "uncertain", j->uncertain);
    json_str(js, "uncertain_reason", j->uncertain ? j->reason : NULL);
    first_failure(js, j);
    ranks(js, j);
    json_arr(js, "missing");
    for (int k = 0; k < j->nmissing; k++)
        json_i64(js, NULL, j->missing[k]);
    json_arr_end(js);
    group_t g[16];
    int ng = ranks_job_groups(j, g, 16), pattern = 0;
    for (int k = 0; k < ng; k++)
        pattern |= ranks_job_pattern(j, &g[k]);
    json_str(js, "pattern", pattern ? "collective_timeout_after_peer_failure" : NULL);
    imbalance(js, j);
    crowded(js, j);
}
