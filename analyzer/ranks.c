/* The cross-rank verdict (ranks.h): each log summarised by a pool of threads, one model held per
 * thread at a time, then ordered on the wall clock (each log's start + its event times). It must
 * never claim an order the clocks cannot give: across hosts, closer than RANKS_SKEW_NS is said to
 * be uncertain. */
#include "ranks.h"

#include "commands.h"
#include "output.h"
#include "sites.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RANKS_MAX_THREADS 8
/* An outlier's peak is at least this much above the median, and a tenth of it. */
#define RANKS_OUTLIER_MIN (1ull << 20)

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

/* ---- the verdict ---------------------------------------------------------------------------- */

static const char *sig_name(unsigned sig, char *buf, size_t len)
{
    static const char *const names[] = {[1] = "SIGHUP", [2] = "SIGINT", [3] = "SIGQUIT", [4] = "SIGILL",
                                        [5] = "SIGTRAP", [6] = "SIGABRT", [7] = "SIGBUS", [8] = "SIGFPE",
                                        [9] = "SIGKILL", [11] = "SIGSEGV", [13] = "SIGPIPE", [14] = "SIGALRM",
                                        [15] = "SIGTERM", [24] = "SIGXCPU", [25] = "SIGXFSZ"};
    if (sig < sizeof names / sizeof names[0] && names[sig])
        return names[sig];
    snprintf(buf, len, "signal %u", sig);
    return buf;
}

static const char *fail_kind(int k)
{
    switch (k) {
    case RANKS_FAIL_OOM: return "oom";
    case RANKS_FAIL_SIGNAL: return "signal";
    case RANKS_FAIL_KILLED: return "killed";
    default: return NULL;
    }
}

/* How a log ended, in a few words: "SIGABRT", "exit", "not closed (killed?)". */
static const char *end_words(const ranks_log_t *r, char *buf, size_t len)
{
    if (!r->closed)
        return "not closed (killed, e.g. SIGKILL or the OOM killer, or still running)";
    switch (r->reason) {
    case GMLOG_CLOSE_EXIT: return "exit";
    case GMLOG_CLOSE_SIGNAL: return sig_name(r->sig, buf, len);
    case GMLOG_CLOSE_DISK: return "log stopped early (disk full)";
    default: return "closed";
    }
}

static const char *end_kind(const ranks_log_t *r)
{
    if (!r->closed)
        return "killed";
    switch (r->reason) {
    case GMLOG_CLOSE_EXIT: return "exit";
    case GMLOG_CLOSE_SIGNAL: return "signal";
    case GMLOG_CLOSE_DISK: return "log_stopped";
    default: return "closed";
    }
}

static uint64_t wall_fail(const ranks_log_t *r) { return r->start_ns + r->fail_t; }
static uint64_t wall_end(const ranks_log_t *r) { return r->start_ns + r->end_t; }

static const char *who(const ranks_log_t *r, char *buf, size_t len)
{
    if (r->rank >= 0)
        snprintf(buf, len, "rank %d", r->rank);
    else
        snprintf(buf, len, "pid %u", r->pid);
    return buf;
}

static const char *wall_text(uint64_t ns, char *buf, size_t len)
{
    time_t s = (time_t)(ns / 1000000000u);
    struct tm tm;
    char hms[40] = "?";
    if (localtime_r(&s, &tm))
        strftime(hms, sizeof hms, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03u", hms, (unsigned)(ns / 1000000u % 1000u));
    return buf;
}

/* "1.02 s" for a signed gap, in seconds with three digits when short. */
static const char *gap_text(int64_t ns, char *buf, size_t len)
{
    double s = (double)(ns < 0 ? -ns : ns) / 1e9;
    if (s >= 100)
        snprintf(buf, len, "%.0f", s);
    else if (s >= 10)
        snprintf(buf, len, "%.1f", s);
    else
        snprintf(buf, len, "%.2f", s);
    return buf;
}

typedef struct job {
    const ranks_log_t *r;
    int n, readable;
    int *order;                /* readable logs by rank (then pid) */
    int first;                 /* index of the first failure, -1 none */
    int uncertain;             /* another host's failure is within the skew of it */
    int second;                /* that failure */
    int hosts;
    int world;                 /* WORLD_SIZE, -1 unknown */
    int *missing;
    int nmissing;
    uint64_t median_live;
    int outlier;               /* -1 none */
    uint64_t t0;               /* the earliest start */
} job_t;

static const ranks_log_t *g_sort;
static int by_rank(const void *a, const void *b)
{
    const ranks_log_t *x = &g_sort[*(const int *)a], *y = &g_sort[*(const int *)b];
    if (x->rank != y->rank)
        return x->rank < 0 ? 1 : y->rank < 0 ? -1 : x->rank < y->rank ? -1 : 1;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}
static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void job_build(job_t *j, const ranks_log_t *r, int n)
{
    memset(j, 0, sizeof *j);
    j->r = r;
    j->n = n;
    j->first = j->second = j->outlier = -1;
    j->world = -1;
    j->order = calloc((size_t)n + 1, sizeof *j->order);
    uint64_t *lives = calloc((size_t)n + 1, sizeof *lives);
    if (!j->order || !lives) {
        free(lives);
        return;
    }
    for (int i = 0; i < n; i++) {
        if (!r[i].opened)
            continue;
        if (!j->readable || r[i].start_ns < j->t0)
            j->t0 = r[i].start_ns;
        j->order[j->readable++] = i;
        if (r[i].world_size > j->world)
            j->world = r[i].world_size;
        int seen = 0;
        for (int k = 0; k < i && !seen; k++)
            seen = r[k].opened && !strcmp(r[k].host, r[i].host);
        j->hosts += !seen;
        if (r[i].fail && (j->first < 0 || wall_fail(&r[i]) < wall_fail(&r[j->first])))
            j->first = i;
    }
    g_sort = r;
    qsort(j->order, (size_t)j->readable, sizeof *j->order, by_rank);
    if (j->first >= 0) {
        const ranks_log_t *f = &r[j->first];
        for (int i = 0; i < n; i++)
            if (i != j->first && r[i].opened && r[i].fail && strcmp(r[i].host, f->host) &&
                wall_fail(&r[i]) - wall_fail(f) < RANKS_SKEW_NS && (j->second < 0 || wall_fail(&r[i]) < wall_fail(&r[j->second])))
                j->second = i;
        j->uncertain = j->second >= 0;
    }
    if (j->world > 0) {
        j->missing = calloc((size_t)j->world, sizeof *j->missing);
        for (int k = 0; j->missing && k < j->world; k++) {
            int have = 0;
            for (int i = 0; i < n && !have; i++)
                have = r[i].opened && r[i].rank == k;
            if (!have)
                j->missing[j->nmissing++] = k;
        }
    }
    int nl = 0;
    for (int i = 0; i < n; i++)
        if (r[i].opened)
            lives[nl++] = r[i].peak_live;
    if (nl >= 2) {
        qsort(lives, (size_t)nl, sizeof *lives, by_u64);
        j->median_live = nl % 2 ? lives[nl / 2] : lives[nl / 2 - 1] / 2 + lives[nl / 2] / 2;
        int top = -1;
        for (int i = 0; i < n; i++)
            if (r[i].opened && (top < 0 || r[i].peak_live > r[top].peak_live))
                top = i;
        uint64_t excess = r[top].peak_live - j->median_live;
        if (excess >= RANKS_OUTLIER_MIN && excess * 10 >= j->median_live)
            j->outlier = top;
    }
    free(lives);
}

static void job_free(job_t *j)
{
    free(j->order);
    free(j->missing);
}

/* The others grouped by how they ended: one group per end state, in rank order. */
typedef struct group {
    char words[96];
    int members[64];
    int n, more;
    int64_t lo, hi;            /* after the first failure (or the job's start), ns */
} group_t;

static int groups_make(const job_t *j, group_t *g, int max)
{
    int ng = 0;
    uint64_t ref = j->first >= 0 ? wall_fail(&j->r[j->first]) : j->t0;
    for (int k = 0; k < j->readable; k++) {
        int i = j->order[k];
        if (i == j->first)
            continue;
        char b[32], words[96];
        snprintf(words, sizeof words, "%s", end_words(&j->r[i], b, sizeof b));
        int64_t d = (int64_t)(wall_end(&j->r[i]) - ref);
        int x = 0;
        while (x < ng && strcmp(g[x].words, words))
            x++;
        if (x == ng) {
            if (ng == max)
                continue;
            memset(&g[ng], 0, sizeof g[ng]);
            snprintf(g[ng].words, sizeof g[ng].words, "%s", words);
            g[ng].lo = g[ng].hi = d;
            ng++;
        }
        if (g[x].n < 64)
            g[x].members[g[x].n++] = i;
        else
            g[x].more++;
        if (d < g[x].lo)
            g[x].lo = d;
        if (d > g[x].hi)
            g[x].hi = d;
    }
    return ng;
}

/* SIGABRT in a peer after another rank's failure: what the NCCL watchdog does when a collective
 * waits past its timeout (PyTorch's default 10 min), and what torchrun's teardown looks like. */
static int collective_pattern(const job_t *j, const group_t *g)
{
    return j->first >= 0 && !strcmp(g->words, "SIGABRT") && g->lo > 0;
}

static const char *pattern_text =
    "the pattern of a collective timeout after a peer's failure (the NCCL watchdog aborts a rank whose "
    "collective waited past its timeout)";

static void members_text(FILE *f, const job_t *j, const group_t *g)
{
    int ranked = 1;
    for (int k = 0; k < g->n; k++)
        ranked &= j->r[g->members[k]].rank >= 0;
    fprintf(f, "%s", ranked ? (g->n + g->more == 1 ? "rank " : "ranks ") : "");
    for (int k = 0; k < g->n; k++) {
        const ranks_log_t *x = &j->r[g->members[k]];
        if (ranked)
            fprintf(f, "%s%d", k ? ", " : "", x->rank);
        else {
            char b[32];
            fprintf(f, "%s%s", k ? ", " : "", who(x, b, sizeof b));
        }
    }
    if (g->more)
        fprintf(f, " and %d more", g->more);
}

/* The first failure: who, where and when, what it was, and a second one within the skew. */
static void first_failure_text(FILE *f, const job_t *j)
{
    const ranks_log_t *r = j->r;
    char a[32], b[32], d[32], e[64], w[64];
    if (j->first < 0) {
        fprintf(f, "first failure  none: no OOM reached a program, every log was closed without a signal\n");
        return;
    }
    const ranks_log_t *x = &r[j->first];
    fprintf(f, "%sfirst failure%s  %s on host %s", rep_red(), rep_reset(), who(x, a, sizeof a), x->host);
    if (x->fail_dev >= 0)
        fprintf(f, ", device %d", x->fail_dev);
    fprintf(f, ", at %s (%s s into its log, +%s s into the job): ", wall_text(wall_fail(x), w, sizeof w),
            gap_text((int64_t)x->fail_t, b, sizeof b), gap_text((int64_t)(wall_fail(x) - j->t0), d, sizeof d));
    if (x->fail == RANKS_FAIL_OOM) {
        fprintf(f, "out of memory, cause %s, %s asked for from %s\n", x->cause, rep_bytes(x->request, e), x->site);
        fprintf(f, "  why          %s\n", x->why);
        fprintf(f, "  then         it ended: %s, %s s after the OOM\n", end_words(x, b, sizeof b),
                gap_text((int64_t)(x->end_t - x->fail_t), d, sizeof d));
    } else if (x->fail == RANKS_FAIL_SIGNAL) {
        fprintf(f, "killed by %s\n", sig_name(x->sig, b, sizeof b));
    } else {
        fprintf(f, "its log was not closed (killed, e.g. SIGKILL or the OOM killer): the time is its last "
                   "record's\n");
    }
    if (j->uncertain) {
        const ranks_log_t *y = &r[j->second];
        fprintf(f, "%s  uncertain%s    %s on %s failed %s s later (%s), within the clock skew assumed between "
                "hosts: either may be first\n", rep_yellow(), rep_reset(), who(y, a, sizeof a), y->host,
                gap_text((int64_t)(wall_fail(y) - wall_fail(x)), b, sizeof b), fail_kind(y->fail));
    }
}

/* The other logs, one line per way they ended, with when relative to the first failure. */
static void others_text(FILE *f, const job_t *j)
{
    char a[32], b[32];
    group_t g[16];
    int ng = groups_make(j, g, 16);
    for (int k = 0; k < ng; k++) {
        fprintf(f, "%s", k ? "               " : "the others     ");
        members_text(f, j, &g[k]);
        fprintf(f, ": %s ", g[k].words);
        int before = g[k].hi < 0;
        int64_t lo = before ? -g[k].hi : g[k].lo, hi = before ? -g[k].lo : g[k].hi;
        if (lo < 0)
            lo = 0;
        if (gap_text(lo, a, sizeof a) && strcmp(gap_text(lo, a, sizeof a), gap_text(hi, b, sizeof b)))
            fprintf(f, "%s–%s s", a, b);
        else
            fprintf(f, "%s s", b);
        fprintf(f, " %s", j->first >= 0 ? (before ? "before the first failure" : "later")
                                        : "after the job's first start");
        if (collective_pattern(j, &g[k]))
            fprintf(f, ", %s", pattern_text);
        fputc('\n', f);
    }
}

/* The ranks WORLD_SIZE promised that left no log, and how far the logs' clocks agree. */
static void missing_and_clocks_text(FILE *f, const job_t *j)
{
    char a[32];
    if (j->nmissing) {
        fprintf(f, "%smissing%s        rank%s ", rep_yellow(), rep_reset(), j->nmissing == 1 ? "" : "s");
        for (int k = 0; k < j->nmissing && k < 64; k++)
            fprintf(f, "%s%d", k ? ", " : "", j->missing[k]);
        if (j->nmissing > 64)
            fprintf(f, " and %d more", j->nmissing - 64);
        fprintf(f, ": no log (WORLD_SIZE %d)\n", j->world);
    }
    if (j->hosts > 1)
        fprintf(f, "clocks         %d hosts: times are each log's wall-clock start plus its own monotonic times; "
                   "the hosts' clocks are assumed NTP-synchronised, within %s of each other, and orderings "
                   "across hosts closer than that are uncertain\n", j->hosts, rep_dur(RANKS_SKEW_NS, a));
    else if (j->readable > 1)
        fprintf(f, "clocks         one host: every log's times are on its clock\n");
}

/* Each rank's peaks in a table, and the outlier's top live sites (or why there is none). */
static void imbalance_text(FILE *f, const job_t *j)
{
    const ranks_log_t *r = j->r;
    char a[32], b[32], d[32], e[64];
    rep_heading(f, "Imbalance");
    fprintf(f, "  %-8s %-20s %14s %14s %12s\n", "rank", "host", "peak reserved", "peak live", "peak at");
    for (int k = 0; k < j->readable; k++) {
        const ranks_log_t *x = &r[j->order[k]];
        char rk[32];
        if (x->rank >= 0)
            snprintf(rk, sizeof rk, "%d", x->rank);
        else
            snprintf(rk, sizeof rk, "pid %u", x->pid);
        char at[40];
        snprintf(at, sizeof at, "+%s s", gap_text((int64_t)(x->start_ns + x->peak_t - j->t0), d, sizeof d));
        fprintf(f, "  %-8s %-20.20s %14s %14s %12s%s\n", rk, x->host, rep_bytes(x->peak_reserved, a),
                rep_bytes(x->peak_live, b), at, j->order[k] == j->outlier ? "  <- outlier" : "");
    }
    fprintf(f, "  (peak at: job time of the peak live bytes; the job starts at the earliest log's start)\n");
    if (j->outlier >= 0) {
        const ranks_log_t *x = &r[j->outlier];
        fprintf(f, "%soutlier%s        %s: peak live %s, %s over the median (%s); its top live sites at the end:\n",
                rep_yellow(), rep_reset(), who(x, a, sizeof a), rep_bytes(x->peak_live, b),
                rep_bytes(x->peak_live - j->median_live, d), rep_bytes(j->median_live, e));
        for (unsigned k = 0; k < x->ntop; k++)
            fprintf(f, "  %12s %6" PRIu64 " x  %s\n", rep_bytes(x->top[k].bytes, a), x->top[k].count, x->top[k].label);
    } else if (j->readable >= 2) {
        fprintf(f, "no outlier: no rank's peak live is a tenth (and 1 MiB) above the median (%s)\n",
                rep_bytes(j->median_live, a));
    }
}

static void text_report(cli_ctx_t *c, const job_t *j)
{
    FILE *f = c->out;
    rep_heading(f, "== Job: %d log%s, %d host%s%s ==", j->n, j->n == 1 ? "" : "s", j->hosts, j->hosts == 1 ? "" : "s",
                j->world > 0 ? "" : "");
    if (j->world > 0)
        fprintf(f, "ranks          %d of WORLD_SIZE %d have a log\n", j->world - j->nmissing, j->world);
    if (j->readable < j->n)
        fprintf(f, "unreadable     %d log%s (see the messages below)\n", j->n - j->readable, j->n - j->readable == 1 ? "" : "s");
    first_failure_text(f, j);
    others_text(f, j);
    missing_and_clocks_text(f, j);
    fprintf(f, "\n");
    imbalance_text(f, j);
    fputc('\n', f);
}

static void json_rank_id(json_t *js, const ranks_log_t *x)
{
    if (x->rank >= 0)
        json_i64(js, "rank", x->rank);
    else
        json_null(js, "rank");
}

/* "first_failure": {...} or null. */
static void json_first_failure(json_t *js, const job_t *j)
{
    const ranks_log_t *r = j->r;
    char b[32];
    if (j->first < 0) {
        json_null(js, "first_failure");
    } else {
        const ranks_log_t *x = &r[j->first];
        json_obj(js, "first_failure");
        json_rank_id(js, x);
        json_str(js, "host", x->host);
        json_u64(js, "pid", x->pid);
        json_str(js, "path", x->path);
        if (x->fail_dev >= 0)
            json_i64(js, "device", x->fail_dev);
        else
            json_null(js, "device");
        json_str(js, "kind", fail_kind(x->fail));
        json_u64(js, "realtime_ns", wall_fail(x));
        json_u64(js, "t", x->fail_t);
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
            json_str(js, "signal_name", sig_name(x->sig, b, sizeof b));
        }
        json_str(js, "ended", end_kind(x));
        json_bool(js, "uncertain", j->uncertain);
        if (j->uncertain) {
            json_obj(js, "uncertain_with");
            json_rank_id(js, &r[j->second]);
            json_str(js, "host", r[j->second].host);
            json_u64(js, "after_ns", wall_fail(&r[j->second]) - wall_fail(x));
            json_obj_end(js);
        }
        json_obj_end(js);
    }
}

/* "ranks": [...], each log's end against the first failure (or the job's start). */
static void json_ranks(json_t *js, const job_t *j)
{
    const ranks_log_t *r = j->r;
    char b[32];
    uint64_t ref = j->first >= 0 ? wall_fail(&r[j->first]) : j->t0;
    json_arr(js, "ranks");
    for (int k = 0; k < j->readable; k++) {
        const ranks_log_t *x = &r[j->order[k]];
        json_obj(js, NULL);
        json_rank_id(js, x);
        if (x->local_rank >= 0)
            json_i64(js, "local_rank", x->local_rank);
        json_str(js, "host", x->host);
        json_u64(js, "pid", x->pid);
        json_str(js, "path", x->path);
        json_u64(js, "start_realtime_ns", x->start_ns);
        json_str(js, "failure", fail_kind(x->fail));
        json_str(js, "end", end_kind(x));
        if (x->reason == GMLOG_CLOSE_SIGNAL && x->closed) {
            json_u64(js, "signal", x->sig);
            json_str(js, "signal_name", sig_name(x->sig, b, sizeof b));
        }
        json_u64(js, "end_realtime_ns", wall_end(x));
        json_i64(js, j->first >= 0 ? "end_after_first_failure_ns" : "end_after_job_start_ns",
                 (int64_t)(wall_end(x) - ref));
        json_bool(js, "first_failure", j->order[k] == j->first);
        json_obj_end(js);
        (void)b;
    }
    json_arr_end(js);
}

/* "imbalance": {...}: the peaks per rank and the outlier. */
static void json_imbalance(json_t *js, const job_t *j)
{
    const ranks_log_t *r = j->r;
    json_obj(js, "imbalance");
    json_u64(js, "median_peak_live", j->median_live);
    json_arr(js, "ranks");
    for (int k = 0; k < j->readable; k++) {
        const ranks_log_t *x = &r[j->order[k]];
        json_obj(js, NULL);
        json_rank_id(js, x);
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
        json_rank_id(js, x);
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

static void json_report(cli_ctx_t *c, const job_t *j)
{
    json_t *js = &c->j;
    json_obj(js, "ranks");
    json_u64(js, "logs", (uint64_t)j->n);
    json_u64(js, "readable", (uint64_t)j->readable);
    json_u64(js, "hosts", (uint64_t)j->hosts);
    if (j->world > 0)
        json_i64(js, "world_size", j->world);
    else
        json_null(js, "world_size");
    json_u64(js, "clock_skew_assumed_ns", j->hosts > 1 ? RANKS_SKEW_NS : 0);
    json_u64(js, "job_start_realtime_ns", j->t0);
    json_first_failure(js, j);
    json_ranks(js, j);
    json_arr(js, "missing");
    for (int k = 0; k < j->nmissing; k++)
        json_i64(js, NULL, j->missing[k]);
    json_arr_end(js);
    group_t g[16];
    int ng = groups_make(j, g, 16), pattern = 0;
    for (int k = 0; k < ng; k++)
        pattern |= collective_pattern(j, &g[k]);
    json_str(js, "pattern", pattern ? "collective_timeout_after_peer_failure" : NULL);
    json_imbalance(js, j);
    json_obj_end(js);
}

void ranks_report(cli_ctx_t *c, const ranks_log_t *r, int n)
{
    job_t j;
    job_build(&j, r, n);
    if (c->json)
        json_report(c, &j);
    else
        text_report(c, &j);
    job_free(&j);
}
