/* One run's verdict (ranks_int.h): each log's end timed by what is known of it — its close (and
 * the signal it records), an OOM, else only a lower bound: its last record or the file's last
 * write — then the first failure among the failures whose time is known. A log never closed is
 * never first on the strength of its last record: where it may have ended first, the order is
 * uncertain and the reason says so. */
#include "ranks_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An outlier's peak is at least this much above the median, and a tenth of it. */
#define RANKS_OUTLIER_MIN (1ull << 20)

int ranks_job_end_known(const ranks_log_t *x)
{
    return x->closed;
}

uint64_t ranks_job_alive_ns(const ranks_log_t *x, int *src)
{
    uint64_t t = x->start_ns + x->end_t;
    int s = x->closed ? RANKS_ALIVE_CLOSE : RANKS_ALIVE_RECORD;
    /* The header's heartbeat, or the file written after the last record: the process (or its
     * writer) was alive then. */
    if (!x->closed && x->alive_t && x->start_ns + x->alive_t > t)
        t = x->start_ns + x->alive_t, s = RANKS_ALIVE_BEAT;
    if (!x->closed && x->mtime_ns > t)
        t = x->mtime_ns, s = RANKS_ALIVE_MTIME;
    if (src)
        *src = s;
    return t;
}

uint64_t ranks_job_fail_ns(const ranks_log_t *x)
{
    return x->fail == RANKS_FAIL_KILLED ? ranks_job_alive_ns(x, NULL) : x->start_ns + x->fail_t;
}

uint64_t ranks_job_end_ns(const ranks_log_t *x)
{
    return ranks_job_alive_ns(x, NULL);
}

uint64_t ranks_job_ref_ns(const job_t *j)
{
    return j->first >= 0 ? ranks_job_fail_ns(&j->r[j->first]) : j->t0;
}

const char *ranks_job_alive_words(int src)
{
    return src == RANKS_ALIVE_MTIME    ? "the file's last write"
           : src == RANKS_ALIVE_BEAT   ? "its log's heartbeat"
           : src == RANKS_ALIVE_RECORD ? "its last record"
                                       : "its close";
}

const char *ranks_job_alive_kind(int src)
{
    return src == RANKS_ALIVE_MTIME    ? "file_mtime"
           : src == RANKS_ALIVE_BEAT   ? "heartbeat"
           : src == RANKS_ALIVE_RECORD ? "last_record"
                                       : "close";
}

const char *ranks_job_sig_name(unsigned sig, char *buf, size_t len)
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

const char *ranks_job_fail_kind(int k)
{
    switch (k) {
    case RANKS_FAIL_OOM: return "oom";
    case RANKS_FAIL_SIGNAL: return "signal";
    case RANKS_FAIL_KILLED: return "killed";
    default: return NULL;
    }
}

/* How a log ended, in a few words: "SIGABRT", "exit", "not closed (killed?)". */
const char *ranks_job_end_words(const ranks_log_t *r, char *buf, size_t len)
{
    if (!r->closed)
        return "not closed (killed, e.g. SIGKILL or the OOM killer, or still running)";
    switch (r->reason) {
    case GMLOG_CLOSE_EXIT: return "exit";
    case GMLOG_CLOSE_SIGNAL: return ranks_job_sig_name(r->sig, buf, len);
    case GMLOG_CLOSE_DISK: return "log stopped early (disk full)";
    default: return "closed";
    }
}

const char *ranks_job_end_kind(const ranks_log_t *r)
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

const char *ranks_job_who(const ranks_log_t *r, char *buf, size_t len)
{
    if (r->rank >= 0)
        snprintf(buf, len, "rank %d", r->rank);
    else
        snprintf(buf, len, "pid %u", r->pid);
    return buf;
}

/* "1.02" for a signed gap, in seconds with three digits when short. */
const char *ranks_job_gap_text(int64_t ns, char *buf, size_t len)
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

/* "rank 0", "ranks 0, 2", "pid 7, rank 1" (then "and N more") into buf: the logs in rank order
 * whose flag is set. */
static void names_of(const job_t *j, const char *flag, char *buf, size_t len)
{
    int total = 0, ranked = 1, k = 0;
    for (int o = 0; o < j->readable; o++)
        if (flag[j->order[o]])
            total++, ranked &= j->r[j->order[o]].rank >= 0;
    size_t at = (size_t)snprintf(buf, len, "%s", ranked ? (total == 1 ? "rank " : "ranks ") : "");
    for (int o = 0; o < j->readable && at < len; o++) {
        const ranks_log_t *x = &j->r[j->order[o]];
        if (!flag[j->order[o]])
            continue;
        char w[32];
        if (k == 8) {
            snprintf(buf + at, len - at, " and %d more", total - 8);
            return;
        }
        if (ranked)
            snprintf(w, sizeof w, "%d", x->rank);
        else
            ranks_job_who(x, w, sizeof w);
        at += (size_t)snprintf(buf + at, len - at, "%s%s", k++ ? ", " : "", w);
    }
}

/* The first failure: the earliest whose time is known (an OOM, a fatal signal); a log never closed
 * only when it is the one failure. Logs never closed whose last sign of life comes before it, or a
 * failure on another host within the clock skew, make the order uncertain. */
static void job_first(job_t *j)
{
    const ranks_log_t *r = j->r;
    int n = j->n, unknown = 0, last_unknown = -1;
    for (int i = 0; i < n; i++) {
        if (!r[i].opened || !r[i].fail)
            continue;
        if (r[i].fail == RANKS_FAIL_KILLED) {
            unknown++, last_unknown = i;
            continue;
        }
        if (j->first < 0 || ranks_job_fail_ns(&r[i]) < ranks_job_fail_ns(&r[j->first]))
            j->first = i;
    }
    char names[256], b[32];
    char *flag = calloc((size_t)n + 1, 1);
    if (!flag)
        return;
    if (j->first < 0) {
        if (unknown == 1) {
            j->first = last_unknown;
            j->first_unknown = 1;
        } else if (unknown > 1) {
            for (int i = 0; i < n; i++)
                flag[i] = r[i].opened && r[i].fail == RANKS_FAIL_KILLED;
            names_of(j, flag, names, sizeof names);
            j->uncertain = 1;
            snprintf(j->reason, sizeof j->reason,
                     "the logs of %s were not closed and no failure's time is known: each ended at an unknown "
                     "time after its last sign of life, so which failed first cannot be known", names);
        }
        free(flag);
        return;
    }
    const ranks_log_t *f = &r[j->first];
    uint64_t tf = ranks_job_fail_ns(f), earliest = UINT64_MAX;
    int before = 0, src = RANKS_ALIVE_RECORD;
    for (int i = 0; i < n; i++)
        if (r[i].opened && r[i].fail == RANKS_FAIL_KILLED) {
            int s;
            uint64_t a = ranks_job_alive_ns(&r[i], &s);
            /* on another host, alive a little after it may still be before it */
            if (a < tf + (strcmp(r[i].host, f->host) ? RANKS_SKEW_NS : 0)) {
                flag[i] = 1, before++;
                if (a < earliest)
                    earliest = a, src = s;
            }
        }
    if (before) {
        names_of(j, flag, names, sizeof names);
        j->uncertain = 1;
        int after = earliest >= tf; /* another host's, within the skew */
        snprintf(j->reason, sizeof j->reason,
                 "%s%s not closed and %s last sign of life (%s) came %s s %s this failure%s: when %s ended is "
                 "unknown, and %s may have failed first",
                 names, before == 1 ? "'s log was" : ": their logs were", before == 1 ? "its" : "the earliest",
                 ranks_job_alive_words(src),
                 ranks_job_gap_text(after ? (int64_t)(earliest - tf) : (int64_t)(tf - earliest), b, sizeof b),
                 after ? "after" : "before", after ? ", within the clock skew assumed between hosts" : "",
                 before == 1 ? "it" : "each", before == 1 ? "it" : "any");
    }
    free(flag);
    for (int i = 0; i < n; i++)
        if (i != j->first && r[i].opened && r[i].fail && r[i].fail != RANKS_FAIL_KILLED &&
            strcmp(r[i].host, f->host) && ranks_job_fail_ns(&r[i]) - tf < RANKS_SKEW_NS &&
            (j->second < 0 || ranks_job_fail_ns(&r[i]) < ranks_job_fail_ns(&r[j->second])))
            j->second = i;
    if (j->second >= 0) {
        const ranks_log_t *y = &r[j->second];
        char a[32], c[32];
        size_t at = strlen(j->reason);
        snprintf(j->reason + at, sizeof j->reason - at, "%s%s on %s failed %s s later (%s), within the clock skew "
                 "assumed between hosts: either may be first", at ? "; " : "", ranks_job_who(y, a, sizeof a),
                 y->host, ranks_job_gap_text((int64_t)(ranks_job_fail_ns(y) - tf), c, sizeof c),
                 ranks_job_fail_kind(y->fail));
        j->uncertain = 1;
    }
}

static void job_missing(job_t *j)
{
    if (j->world <= 0)
        return;
    j->missing = calloc((size_t)j->world, sizeof *j->missing);
    for (int k = 0; j->missing && k < j->world; k++) {
        int have = 0;
        for (int i = 0; i < j->n && !have; i++)
            have = j->r[i].opened && j->r[i].rank == k;
        if (!have)
            j->missing[j->nmissing++] = k;
    }
}

static void job_outlier(job_t *j)
{
    const ranks_log_t *r = j->r;
    uint64_t *lives = calloc((size_t)j->n + 1, sizeof *lives);
    int nl = 0;
    for (int i = 0; lives && i < j->n; i++)
        if (r[i].opened)
            lives[nl++] = r[i].peak_live;
    if (nl >= 2) {
        qsort(lives, (size_t)nl, sizeof *lives, by_u64);
        j->median_live = nl % 2 ? lives[nl / 2] : lives[nl / 2 - 1] / 2 + lives[nl / 2] / 2;
        int top = -1;
        for (int i = 0; i < j->n; i++)
            if (r[i].opened && (top < 0 || r[i].peak_live > r[top].peak_live))
                top = i;
        uint64_t excess = r[top].peak_live - j->median_live;
        if (excess >= RANKS_OUTLIER_MIN && excess * 10 >= j->median_live)
            j->outlier = top;
    }
    free(lives);
}

const char *const ranks_job_crowd_text =
    "each rank should make its own GPU current before its first CUDA call (torch.cuda.set_device(LOCAL_RANK), "
    "or CUDA_VISIBLE_DEVICES set per rank) and load tensors with map_location: a context on another rank's GPU "
    "costs that GPU its memory";

/* Ranks whose GPU held other ranks' processes: a guest pid of one log that is another log's pid on
 * the same host. */
static void job_crowded(job_t *j)
{
    const ranks_log_t *r = j->r;
    for (int a = 0; a < j->readable && j->ncrowd < RANKS_CROWDS; a++) {
        int i = j->order[a];
        crowd_t *c = &j->crowd[j->ncrowd];
        memset(c, 0, sizeof *c);
        c->log = i;
        for (int b = 0; b < j->readable; b++) {
            int k = j->order[b];
            if (k == i || strcmp(r[k].host, r[i].host))
                continue;
            for (unsigned g = 0; g < r[i].nguests; g++)
                if (r[i].guest[g].pid == r[k].pid && c->n < RANKS_GUESTS) {
                    c->others[c->n] = k;
                    c->bytes[c->n++] = r[i].guest[g].bytes;
                    c->total += r[i].guest[g].bytes;
                    break;
                }
        }
        if (c->n)
            j->ncrowd++;
    }
}

void ranks_job_build(job_t *j, const ranks_log_t *r, int n)
{
    memset(j, 0, sizeof *j);
    j->r = r;
    j->n = n;
    j->first = j->second = j->outlier = -1;
    j->world = -1;
    j->order = calloc((size_t)n + 1, sizeof *j->order);
    if (!j->order)
        return;
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
    }
    g_sort = r;
    qsort(j->order, (size_t)j->readable, sizeof *j->order, by_rank);
    job_first(j);
    job_missing(j);
    job_outlier(j);
    job_crowded(j);
    ranks_runs_name(r, j->order, j->readable, j->run, sizeof j->run);
}

void ranks_job_free(job_t *j)
{
    free(j->order);
    free(j->missing);
}

/* How one log ended, for its group: the words, the time (against ref) and what follows it. */
static int64_t end_of(const job_t *j, const ranks_log_t *x, char *words, size_t wl, char *tail, size_t tl)
{
    char b[32];
    uint64_t ref = ranks_job_ref_ns(j);
    int src;
    uint64_t alive = ranks_job_alive_ns(x, &src);
    tail[0] = 0;
    if (x->fail == RANKS_FAIL_OOM) {
        snprintf(words, wl, "out of memory (cause %s)", x->cause);
        snprintf(tail, tl, ", then %s", ranks_job_end_words(x, b, sizeof b));
        return (int64_t)(ranks_job_fail_ns(x) - ref);
    }
    if (!ranks_job_end_known(x)) {
        snprintf(words, wl, "%s, end unknown, alive", ranks_job_end_words(x, b, sizeof b));
        snprintf(tail, tl, " (%s)", ranks_job_alive_words(src));
        return (int64_t)(alive - ref);
    }
    snprintf(words, wl, "%s", ranks_job_end_words(x, b, sizeof b));
    return (int64_t)(alive - ref);
}

int ranks_job_groups(const job_t *j, group_t *g, int max)
{
    int ng = 0;
    for (int k = 0; k < j->readable; k++) {
        int i = j->order[k];
        if (i == j->first)
            continue;
        char words[128], tail[64];
        int64_t d = end_of(j, &j->r[i], words, sizeof words, tail, sizeof tail);
        int x = 0;
        while (x < ng && (strcmp(g[x].words, words) || strcmp(g[x].tail, tail)))
            x++;
        if (x == ng) {
            if (ng == max)
                continue;
            memset(&g[ng], 0, sizeof g[ng]);
            snprintf(g[ng].words, sizeof g[ng].words, "%s", words);
            snprintf(g[ng].tail, sizeof g[ng].tail, "%s", tail);
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

int ranks_job_pattern(const job_t *j, const group_t *g)
{
    return j->first >= 0 && !j->first_unknown && !strcmp(g->words, "SIGABRT") && g->lo > 0;
}

const char *const ranks_job_pattern_text =
    "the pattern of a collective timeout after a peer's failure (the NCCL watchdog aborts a rank whose "
    "collective waited past its timeout)";
