/* The cross-rank verdict (ranks.h): each log summarised by a pool of threads, one model held per
 * thread at a time; then the logs told apart into runs (ranks_runs.c) and each run's verdict
 * built (ranks_job.c) and printed (ranks_text.c, ranks_json.c). */
#include "ranks_int.h"

#include "ledger.h"
#include "oom_classify.h"
#include "ranks.h"
#include "output.h"
#include "sites.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RANKS_MAX_THREADS 8

/* The symbolizer's caches are not shared between threads: site labels are made one at a time. */
static pthread_mutex_t label_lock = PTHREAD_MUTEX_INITIALIZER;

static int meta_int(const rd_log_t *lf, const char *key)
{
    const char *v = rd_meta_keyed(lf, GMLOG_META_RANK, key);
    if (!v || !*v)
        return -1;
    char *end;
    long r = strtol(v, &end, 10);
    return *end || r < 0 || r > 1 << 30 ? -1 : (int)r;
}

/* RANK (torchrun), else SLURM_PROCID (srun), else LOCAL_RANK (one node). */
static int log_rank(const rd_log_t *lf)
{
    int r = meta_int(lf, "RANK");
    if (r < 0)
        r = meta_int(lf, "SLURM_PROCID");
    if (r < 0)
        r = meta_int(lf, "LOCAL_RANK");
    return r;
}

int ranks_wanted(int n, char *const *paths)
{
    if (n != 1)
        return n > 1;
    rd_log_t *lf = calloc(1, sizeof *lf);
    if (!lf)
        return 0;
    int want = rd_open_path(lf, paths[0]) == 0 && log_rank(lf) >= 0;
    rd_close(lf);
    free(lf);
    return want;
}

/* The other processes of one ledger: the most each held. */
static void guests_of(ranks_log_t *r, const ledger_t *l)
{
    for (unsigned i = 0; l && l->valid && i < l->nterms; i++) {
        const ledger_term_t *t = &l->term[i];
        if (t->kind != LK_PROCESS)
            continue;
        unsigned k = 0;
        while (k < r->nguests && r->guest[k].pid != t->pid)
            k++;
        if (k == r->nguests) {
            if (k == RANKS_GUESTS)
                continue;
            r->nguests++;
            r->guest[k].pid = t->pid;
            r->guest[k].bytes = 0;
        }
        if (t->bytes > r->guest[k].bytes)
            r->guest[k].bytes = t->bytes;
    }
}

static void summarise_card(ranks_log_t *r, const model_t *m)
{
    const ledger_set_t *s = ledger_of(m);
    if (!s)
        return;
    for (int d = 0; d < 256; d++)
        guests_of(r, &s->peak[d]);
    for (size_t i = 0; i < s->nooms; i++)
        guests_of(r, &s->ooms[i]);
}

static void summarise(ranks_log_t *r, rd_log_t *lf, model_t *m)
{
    const gmlog_file_header_t *h = &lf->hdr;
    r->rank = log_rank(lf);
    r->local_rank = meta_int(lf, "LOCAL_RANK");
    r->world_size = meta_int(lf, "WORLD_SIZE");
    const char *host = rd_meta_get(lf, GMLOG_META_HOST);
    snprintf(r->host, sizeof r->host, "%s", host ? host : "?");
    r->pid = h->pid;
    r->start_ns = h->start_realtime_ns;
    r->closed = !lf->no_header && (h->flags & GMLOG_F_CLOSED);
    r->reason = r->closed ? h->close_reason & 0xff : GMLOG_CLOSE_OPEN;
    r->sig = r->closed ? (h->close_reason >> 8) & 0xff : 0;
    r->end_t = r->closed && h->end_ns ? h->end_ns : m->last_t;
    r->alive_t = h->alive_ns;
    for (unsigned i = 0; i < lf->nmeta && r->nids < RANKS_IDS; i++)
        if (lf->meta[i].tag == GMLOG_META_JOB)
            snprintf(r->ids[r->nids++], sizeof r->ids[0], "%s", lf->meta[i].value);
    r->fail_dev = -1;
    if (m->nooms) {
        const model_oom_t *o = &m->ooms[0];
        oom_verdict_t v;
        oom_classify(m, o, &v);
        r->fail = RANKS_FAIL_OOM;
        r->fail_t = o->t;
        r->fail_dev = o->dev;
        r->request = o->rec.request;
        snprintf(r->cause, sizeof r->cause, "%s", oom_cause_name(v.cause));
        snprintf(r->why, sizeof r->why, "%s", v.why);
        pthread_mutex_lock(&label_lock);
        site_label(m, o->rec.site, r->site, sizeof r->site);
        pthread_mutex_unlock(&label_lock);
    } else if (r->reason == GMLOG_CLOSE_SIGNAL) {
        r->fail = RANKS_FAIL_SIGNAL;
        r->fail_t = r->end_t;
    } else if (!r->closed) {
        r->fail = RANKS_FAIL_KILLED;
        r->fail_t = r->end_t;
    }
    uint64_t best = 0;
    for (int i = 0; i < m->ndev; i++) {
        const model_dev_t *d = m->dev[i];
        if (!d)
            continue;
        r->peak_reserved += d->peak_reserved;
        r->peak_live += d->peak_allocated;
        if (!best || d->peak_allocated > best) {
            best = d->peak_allocated ? d->peak_allocated : 1;
            r->peak_t = d->peak_allocated_t;
            r->peak_dev = d->id;
        }
    }
    if (best) {
        model_top_t top[RANKS_TOP];
        unsigned k = model_top_sites(m, r->peak_dev, top, RANKS_TOP);
        pthread_mutex_lock(&label_lock);
        for (unsigned i = 0; i < k; i++) {
            r->top[i].bytes = top[i].bytes;
            r->top[i].count = top[i].count;
            site_label(m, m->sst[top[i].sidx].site, r->top[i].label, sizeof r->top[i].label);
        }
        pthread_mutex_unlock(&label_lock);
        r->ntop = k;
    }
    summarise_card(r, m);
}

static void collect_one(ranks_log_t *r, const char *path)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    r->rank = r->local_rank = r->world_size = r->fail_dev = -1;
    rd_log_t *lf = calloc(1, sizeof *lf);
    model_t *m = calloc(1, sizeof *m);
    if (lf && m && rd_open_path(lf, path) == 0) {
        lf->quiet = 1; /* its problems are reported by the log's own section */
        r->opened = 1;
        struct stat st;
        if (stat(path, &st) == 0 && st.st_mtim.tv_sec > 0)
            r->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
        model_build(m, lf, MODEL_SITES | MODEL_EPOCHS);
        summarise(r, lf, m);
        model_free(m);
    }
    if (lf)
        rd_close(lf);
    free(lf);
    free(m);
}

typedef struct pool {
    pthread_mutex_t lock;
    int next, n;
    char *const *paths;
    ranks_log_t *out;
} pool_t;

static void *worker(void *arg)
{
    pool_t *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        int i = p->next < p->n ? p->next++ : -1;
        pthread_mutex_unlock(&p->lock);
        if (i < 0)
            return NULL;
        collect_one(&p->out[i], p->paths[i]);
    }
}

static unsigned thread_count(int n)
{
    const char *env = getenv("GMSHIM_ANALYZER_THREADS");
    long want;
    if (env && *env) {
        want = strtol(env, NULL, 10);
        if (want < 1)
            want = 1;
    } else {
        want = sysconf(_SC_NPROCESSORS_ONLN);
        if (want > RANKS_MAX_THREADS)
            want = RANKS_MAX_THREADS;
    }
    if (want > n)
        want = n;
    return want < 1 ? 1 : (unsigned)want;
}

void ranks_collect(int n, char *const *paths, ranks_log_t *out)
{
    pool_t p = {PTHREAD_MUTEX_INITIALIZER, 0, n, paths, out};
    unsigned nt = thread_count(n), started = 0;
    pthread_t th[RANKS_MAX_THREADS * 8];
    if (nt > sizeof th / sizeof th[0])
        nt = sizeof th / sizeof th[0];
    for (unsigned i = 1; i < nt; i++)
        if (pthread_create(&th[started], NULL, worker, &p) == 0)
            started++;
    worker(&p);
    for (unsigned i = 0; i < started; i++)
        pthread_join(th[i], NULL);
}

/* ---- the verdict, one per run ------------------------------------------------------------- */

static void report_run(cli_ctx_t *c, const ranks_log_t *r, const int *members, int nm, const char *heading)
{
    ranks_log_t *sub = calloc((size_t)nm + 1, sizeof *sub);
    if (!sub)
        return;
    for (int k = 0; k < nm; k++)
        sub[k] = r[members[k]];
    job_t j;
    ranks_job_build(&j, sub, nm);
    if (c->json)
        ranks_json_job(&c->j, &j);
    else
        ranks_text_job(c, &j, heading);
    ranks_job_free(&j);
    free(sub);
}

void ranks_report(cli_ctx_t *c, const ranks_log_t *r, int n)
{
    int *run_of = calloc((size_t)n + 1, sizeof *run_of), *members = calloc((size_t)n + 1, sizeof *members);
    if (!run_of || !members) {
        free(run_of);
        free(members);
        return;
    }
    int nruns = ranks_runs_group(r, n, run_of);
    if (c->json) {
        json_obj(&c->j, "ranks");
        json_u64(&c->j, "run_count", (uint64_t)nruns);
        if (nruns > 1) {
            json_u64(&c->j, "logs", (uint64_t)n);
            json_arr(&c->j, "runs");
        }
    } else if (nruns > 1) {
        rep_heading(c->out, "== %d logs of %d runs, told apart by their torchrun and Slurm variables, ranks and "
                    "times: a verdict for each ==", n, nruns);
        fputc('\n', c->out);
    }
    for (int g = 0; g < nruns; g++) {
        int nm = 0;
        for (int i = 0; i < n; i++)
            if (run_of[i] == g)
                members[nm++] = i;
        char heading[64];
        if (nruns > 1)
            snprintf(heading, sizeof heading, "Run %d of %d", g + 1, nruns);
        else
            snprintf(heading, sizeof heading, "Job");
        if (c->json && nruns > 1)
            json_obj(&c->j, NULL);
        report_run(c, r, members, nm, heading);
        if (c->json && nruns > 1)
            json_obj_end(&c->j);
    }
    if (c->json) {
        if (nruns > 1)
            json_arr_end(&c->j);
        json_obj_end(&c->j);
    }
    free(run_of);
    free(members);
}
