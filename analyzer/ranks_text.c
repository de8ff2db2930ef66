/* One run's verdict as text (ranks_int.h): the first failure, how the others ended and when, the
 * ranks without a log, the clocks, and the peaks per rank. It prints what ranks_job.c decided and
 * decides nothing. */
#include "output.h"
#include "ranks_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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
            fprintf(f, "%s%s", k ? ", " : "", ranks_job_who(x, b, sizeof b));
        }
    }
    if (g->more)
        fprintf(f, " and %d more", g->more);
}

/* The first failure: who, where and when, what it was, and why the order may be otherwise. */
static void first_failure_text(FILE *f, const job_t *j)
{
    char a[32], b[32], d[32], e[64], w[64];
    if (j->first < 0) {
        if (j->uncertain)
            fprintf(f, "first failure  unknown: %s\n", j->reason);
        else
            fprintf(f, "first failure  none: no OOM reached a program, every log was closed without a signal\n");
        return;
    }
    const ranks_log_t *x = &j->r[j->first];
    uint64_t t = ranks_job_fail_ns(x);
    fprintf(f, "%sfirst failure%s  %s on host %s", rep_red(), rep_reset(), ranks_job_who(x, a, sizeof a), x->host);
    if (x->fail_dev >= 0)
        fprintf(f, ", device %d", x->fail_dev);
    fprintf(f, ", at %s%s (%s s into its log, +%s s into the job): ", j->first_unknown ? "or after " : "",
            wall_text(t, w, sizeof w), ranks_job_gap_text((int64_t)(t - x->start_ns), b, sizeof b),
            ranks_job_gap_text((int64_t)(t - j->t0), d, sizeof d));
    if (x->fail == RANKS_FAIL_OOM) {
        fprintf(f, "out of memory, cause %s, %s asked for from %s\n", x->cause, rep_bytes(x->request, e), x->site);
        fprintf(f, "  why          %s\n", x->why);
        if (ranks_job_end_known(x))
            fprintf(f, "  then         it ended: %s, %s s after the OOM\n", ranks_job_end_words(x, b, sizeof b),
                    ranks_job_gap_text((int64_t)(x->end_t - x->fail_t), d, sizeof d));
        else
            fprintf(f, "  then         its log was not closed: it ended at an unknown time\n");
    } else if (x->fail == RANKS_FAIL_SIGNAL) {
        fprintf(f, "killed by %s\n", ranks_job_sig_name(x->sig, b, sizeof b));
    } else {
        int src;
        ranks_job_alive_ns(x, &src);
        fprintf(f, "its log was not closed (killed, e.g. SIGKILL or the OOM killer): it ended at an unknown "
                   "time at or after its last sign of life (%s), the only rank that failed\n",
                ranks_job_alive_words(src));
    }
    if (j->uncertain)
        fprintf(f, "%s  uncertain%s    %s\n", rep_yellow(), rep_reset(), j->reason);
}

/* The other logs, one line per way they ended, with when relative to the first failure. */
static void others_text(FILE *f, const job_t *j)
{
    char a[32], b[32];
    group_t g[16];
    int ng = ranks_job_groups(j, g, 16);
    for (int k = 0; k < ng; k++) {
        fprintf(f, "%s", k ? "               " : "the others     ");
        members_text(f, j, &g[k]);
        fprintf(f, ": %s ", g[k].words);
        int before = g[k].hi < 0;
        int64_t lo = before ? -g[k].hi : g[k].lo, hi = before ? -g[k].lo : g[k].hi;
        if (lo < 0)
            lo = 0;
        if (strcmp(ranks_job_gap_text(lo, a, sizeof a), ranks_job_gap_text(hi, b, sizeof b)))
            fprintf(f, "%s–%s s", a, b);
        else
            fprintf(f, "%s s", b);
        fprintf(f, " %s%s", j->first >= 0 ? (before ? "before the first failure" : "later") : "after the job's first start",
                g[k].tail);
        if (ranks_job_pattern(j, &g[k]))
            fprintf(f, ", %s", ranks_job_pattern_text);
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
        snprintf(at, sizeof at, "+%s s", ranks_job_gap_text((int64_t)(x->start_ns + x->peak_t - j->t0), d, sizeof d));
        fprintf(f, "  %-8s %-20.20s %14s %14s %12s%s\n", rk, x->host, rep_bytes(x->peak_reserved, a),
                rep_bytes(x->peak_live, b), at, j->order[k] == j->outlier ? "  <- outlier" : "");
    }
    fprintf(f, "  (peak at: job time of the peak live bytes; the job starts at the earliest log's start)\n");
    if (j->outlier >= 0) {
        const ranks_log_t *x = &r[j->outlier];
        fprintf(f, "%soutlier%s        %s: peak live %s, %s over the median (%s); its top live sites at the end:\n",
                rep_yellow(), rep_reset(), ranks_job_who(x, a, sizeof a), rep_bytes(x->peak_live, b),
                rep_bytes(x->peak_live - j->median_live, d), rep_bytes(j->median_live, e));
        for (unsigned k = 0; k < x->ntop; k++)
            fprintf(f, "  %12s %6" PRIu64 " x  %s\n", rep_bytes(x->top[k].bytes, a), x->top[k].count, x->top[k].label);
    } else if (j->readable >= 2) {
        fprintf(f, "no outlier: no rank's peak live is a tenth (and 1 MiB) above the median (%s)\n",
                rep_bytes(j->median_live, a));
    }
}

/* Ranks whose GPU held other ranks' processes (their CUDA contexts, at least). */
static const char *rank_pid(const ranks_log_t *x, char *buf, size_t len)
{
    if (x->rank >= 0)
        snprintf(buf, len, "rank %d (pid %u)", x->rank, x->pid);
    else
        snprintf(buf, len, "pid %u", x->pid);
    return buf;
}

static void crowded_text(FILE *f, const job_t *j)
{
    char a[32], b[64];
    for (int k = 0; k < j->ncrowd; k++) {
        const crowd_t *c = &j->crowd[k];
        fprintf(f, "%scrowded%s        %s: its GPU also held %d other rank%s' processes (%s in all):", rep_yellow(),
                rep_reset(), rank_pid(&j->r[c->log], b, sizeof b), c->n, c->n == 1 ? "" : "s",
                rep_bytes(c->total, a));
        for (int i = 0; i < c->n; i++)
            fprintf(f, "%s %s %s", i ? "," : "", rank_pid(&j->r[c->others[i]], b, sizeof b),
                    rep_bytes(c->bytes[i], a));
        fprintf(f, "\n               %s\n", ranks_job_crowd_text);
    }
}

void ranks_text_job(cli_ctx_t *c, const job_t *j, const char *heading)
{
    FILE *f = c->out;
    rep_heading(f, "== %s: %d log%s, %d host%s ==", heading, j->n, j->n == 1 ? "" : "s", j->hosts,
                j->hosts == 1 ? "" : "s");
    if (j->run[0])
        fprintf(f, "run            %s\n", j->run);
    if (j->world > 0)
        fprintf(f, "ranks          %d of WORLD_SIZE %d have a log\n", j->world - j->nmissing, j->world);
    if (j->readable < j->n)
        fprintf(f, "unreadable     %d log%s (see the messages below)\n", j->n - j->readable, j->n - j->readable == 1 ? "" : "s");
    first_failure_text(f, j);
    others_text(f, j);
    missing_and_clocks_text(f, j);
    fprintf(f, "\n");
    imbalance_text(f, j);
    crowded_text(f, j);
    fputc('\n', f);
}
