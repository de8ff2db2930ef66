/* whatif's PyTorch settings (whatif_torch.h): the model run under the log's own
 * PYTORCH_CUDA_ALLOC_CONF, each key a user reaches for changed on its own, or every combination
 * of them (--grid); the lowest replayed peak that adds no failure wins. */
#include "whatif_torch.h"
#include "output.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WT_FAR_ABOVE 1.25            /* a peak this far above the best is flagged */
#define WT_FAR_SLACK (64ull << 20)   /* ...and at least this many bytes above it */

static const uint64_t split_mb[] = {128, 512};
static const unsigned divisions[] = {4};

static int limited(const rt_log_t *log)
{
    if (log->torch_limit)
        return 1;
    for (size_t i = 0; i < log->nev; i++)
        if (log->ev[i].type == RT_LIMIT && log->ev[i].size)
            return 1;
    return 0;
}

static int add(wt_plan_t *p, size_t cap, const rt_conf_t *c)
{
    for (size_t i = 0; i < p->nruns; i++)
        if (!memcmp(&p->runs[i].conf, c, sizeof *c))
            return 0;
    if (p->nruns >= cap)
        return 0;
    wt_run_t *r = &p->runs[p->nruns++];
    memset(r, 0, sizeof *r);
    r->conf = *c;
    replay_torch_conf_text(c, r->text, sizeof r->text);
    return 0;
}

static void flag_runs(wt_plan_t *p)
{
    p->best = -1;
    for (size_t i = 0; i < p->nruns; i++) {
        const wt_run_t *r = &p->runs[i];
        if (r->conf.async)
            continue;
        /* Fewer failures first (past the recorded OOM), then the lower peak. */
        const rt_result_t *b = p->best >= 0 ? &p->runs[p->best].res : NULL;
        if (!b || r->res.failures < b->failures ||
            (r->res.failures == b->failures && r->res.peak_reserved < b->peak_reserved))
            p->best = (int)i;
    }
    uint64_t best = p->best >= 0 ? p->runs[p->best].res.peak_reserved : 0;
    for (size_t i = 0; i < p->nruns; i++) {
        wt_run_t *r = &p->runs[i];
        char a[32], b[32];
        if (r->conf.expandable && r->conf.max_split)
            snprintf(r->flag, sizeof r->flag, "known to misbehave (PyTorch's report: reserved 220 -> 14060 MiB, "
                     "allocated < 306 MiB)");
        else if (best && (double)r->res.peak_reserved > WT_FAR_ABOVE * (double)best &&
                 r->res.peak_reserved > best + WT_FAR_SLACK)
            snprintf(r->flag, sizeof r->flag, "peak %s, %.0f %% above the best (%s)", rep_bytes(r->res.peak_reserved, a),
                     100.0 * ((double)r->res.peak_reserved / (double)best - 1), rep_bytes(best, b));
    }
}

/* The runs shared by the threads: each takes the next not yet taken. */
typedef struct wt_work {
    const rt_log_t *log;
    wt_plan_t *p;
    size_t next;
    pthread_mutex_t lock;
} wt_work_t;

static void *work_run(void *arg)
{
    wt_work_t *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        size_t i = w->next++;
        pthread_mutex_unlock(&w->lock);
        if (i >= w->p->nruns)
            return NULL;
        w->p->runs[i].res = replay_torch_run(w->log, &w->p->runs[i].conf);
    }
}

/* The runs, on up to `threads` threads (0: one per CPU, at most 16); where a thread cannot
 * start, the caller's does the rest. */
static void run_all(const rt_log_t *log, wt_plan_t *p, unsigned threads)
{
    wt_work_t w = {log, p, 0, PTHREAD_MUTEX_INITIALIZER};
    if (!threads) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)n : 1;
    }
    if (threads > 16)
        threads = 16;
    if (threads > p->nruns)
        threads = (unsigned)p->nruns;
    pthread_t tid[16];
    unsigned started = 0;
    for (unsigned i = 1; i < threads; i++)
        if (pthread_create(&tid[started], NULL, work_run, &w) == 0)
            started++;
    work_run(&w);
    for (unsigned i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
}

int wt_plan_make(const rt_log_t *log, int grid, unsigned threads, wt_plan_t *p)
{
    memset(p, 0, sizeof *p);
    p->grid = grid;
    size_t cap = WT_MAX_RUNS;
    p->runs = calloc(cap, sizeof *p->runs);
    if (!p->runs)
        return -1;
    rt_conf_t own = log->conf, c;
    own.async = 0; /* not modelled: its replay is the native one's, said in the text */
    add(p, cap, &own);
    p->runs[0].as_recorded = 1;
    int gc = limited(log);
    if (!grid) {
        c = own, c.expandable = !own.expandable;
        add(p, cap, &c);
        for (size_t i = 0; i < sizeof split_mb / sizeof *split_mb; i++)
            c = own, c.max_split = split_mb[i] << 20, add(p, cap, &c);
        for (size_t i = 0; i < sizeof divisions / sizeof *divisions; i++)
            c = own, c.divisions = divisions[i], add(p, cap, &c);
        if (gc)
            c = own, c.gc_threshold = 0.8, add(p, cap, &c);
    } else {
        for (int e = 0; e < 2; e++)
            for (size_t s = 0; s <= sizeof split_mb / sizeof *split_mb; s++)
                for (size_t d = 0; d <= sizeof divisions / sizeof *divisions; d++)
                    for (int g = 0; g <= gc; g++) {
                        memset(&c, 0, sizeof c);
                        c.expandable = e;
                        c.max_split = s ? split_mb[s - 1] << 20 : 0;
                        c.divisions = d ? divisions[d - 1] : 0;
                        c.gc_threshold = g ? 0.8 : 0;
                        add(p, cap, &c);
                    }
    }
    run_all(log, p, threads);
    flag_runs(p);
    return 0;
}

void wt_plan_free(wt_plan_t *p)
{
    free(p->runs);
    memset(p, 0, sizeof *p);
}

static const char *conf_label(const wt_run_t *r, char *buf, size_t len)
{
    snprintf(buf, len, "PYTORCH_CUDA_ALLOC_CONF=%s", r->text);
    return buf;
}

void wt_plan_text(FILE *f, const rt_log_t *log, const wt_plan_t *p, int rec)
{
    char a[32];
    fprintf(f, "PyTorch's allocator, modelled%s: recorded peak reserved %s\n", p->grid ? " (--grid)" : "",
            rep_bytes(log->peak_reserved_recorded, a));
    if (log->conf.async)
        fprintf(f, "  (backend:cudaMallocAsync is not modelled: the runs are PyTorch's native allocator)\n");
    if (log->wrapped)
        fprintf(f, "  (a bounded log: the model starts at its checkpoint, its live tensors placed afresh)\n");
    /* The setting last: PyTorch's combinations are long, the figures line up before them. */
    fprintf(f, "  %9s %6s  %s\n", "reserved", "failed", "PYTORCH_CUDA_ALLOC_CONF=");
    for (size_t i = 0; i < p->nruns; i++) {
        const wt_run_t *r = &p->runs[i];
        fprintf(f, "  %9s %6" PRIu64 "  %s%s%s%s%s\n", rep_bytes(r->res.peak_reserved, a), r->res.failures,
                r->text[0] ? r->text : "(PyTorch's defaults)", r->also[0] ? ", with " : "", r->also,
                r->as_recorded ? " (as run)" : "", (int)i == rec ? "  <- recommended" : "");
        if (r->flag[0])
            fprintf(f, "      ! %s\n", r->flag);
    }
    /* the recommendation is the one rule's (advice.c), stated once above */
}

void wt_plan_json(json_t *j, const rt_log_t *log, const wt_plan_t *p, int rec)
{
    char buf[200];
    json_u64(j, "torch_recorded_peak_reserved", log->peak_reserved_recorded);
    json_arr(j, "torch_replays");
    for (size_t i = 0; i < p->nruns; i++) {
        const wt_run_t *r = &p->runs[i];
        json_obj(j, NULL);
        json_str(j, "conf", r->text);
        json_str(j, "env", conf_label(r, buf, sizeof buf));
        json_bool(j, "as_recorded", r->as_recorded);
        json_bool(j, "recommended", (int)i == rec);
        if (r->also[0])
            json_str(j, "also", r->also);
        json_u64(j, "peak_reserved", r->res.peak_reserved);
        json_u64(j, "peak_allocated", r->res.peak_allocated);
        json_u64(j, "failures", r->res.failures);
        json_u64(j, "recorded_failed", r->res.recorded_failed);
        json_u64(j, "recorded_passed", r->res.recorded_passed);
        json_u64(j, "new_failures", r->res.new_failures);
        if (r->flag[0])
            json_str(j, "flag", r->flag);
        json_obj_end(j);
    }
    json_arr_end(j);
    if (p->best >= 0)
        json_str(j, "torch_best", p->runs[p->best].text);
    else
        json_null(j, "torch_best");
}
