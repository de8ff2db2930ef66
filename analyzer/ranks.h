/* The cross-rank verdict of `gmshim report` on the logs of one job: which rank failed first (in
 * wall-clock order), why, how the others ended and when, which ranks have no log, and the
 * imbalance of peaks between ranks. It keeps a small summary per log, never a log's model. */
#ifndef GM_RANKS_H
#define GM_RANKS_H

#include "cli.h"

#include <stdint.h>

/* The clock skew assumed between hosts (NTP-synchronised clocks): failures on different hosts
 * closer than this are ordered with a warning. Logs of one host share its clock. */
#define RANKS_SKEW_NS 100000000ull
#define RANKS_TOP 3
/* Logs without an identity in common are of one run only if their lives (start to the last moment
 * known alive) come within this of each other: ranks of a run live at once. */
#define RANKS_RUN_GAP_NS 60000000000ull
#define RANKS_IDS 8

enum {
    RANKS_FAIL_NONE = 0,
    RANKS_FAIL_OOM,            /* an OOM that reached the program (not recovered) */
    RANKS_FAIL_SIGNAL,         /* closed by a fatal signal */
    RANKS_FAIL_KILLED,         /* never closed: killed (SIGKILL, the OOM killer) or still running */
};

typedef struct ranks_site {
    uint64_t bytes, count;
    char label[160];
} ranks_site_t;

typedef struct ranks_log {
    const char *path;
    int opened;
    int rank, local_rank, world_size;   /* -1: unknown */
    char host[128];
    uint32_t pid;
    uint64_t start_ns;         /* wall clock at the log's start (Unix epoch, ns) */
    uint64_t end_t;            /* the close, else the last record: ns since the start */
    uint64_t alive_t;          /* the header's alive_ns: ns since the start, 0: not written */
    uint64_t mtime_ns;         /* the file's last write (wall clock), 0: unknown */
    int closed;
    unsigned reason, sig;      /* GMLOG_CLOSE_*, the signal */
    int fail;                  /* RANKS_FAIL_*: the log's first failure */
    uint64_t fail_t;           /* ns since the start */
    int fail_dev;
    char cause[24], why[512], site[160];
    uint64_t request;
    uint64_t peak_reserved, peak_live, peak_t;   /* summed over devices; t of the largest device's */
    int peak_dev;
    ranks_site_t top[RANKS_TOP];
    unsigned ntop;
    char ids[RANKS_IDS][128];  /* what identifies the run: "TORCHELASTIC_RUN_ID=x" (GMLOG_META_JOB) */
    unsigned nids;
} ranks_log_t;

/* Whether report opens with the verdict: several logs, or a log that carries a rank. */
int ranks_wanted(int n, char *const *paths);
/* Summarises n logs, in parallel (GMSHIM_ANALYZER_THREADS, default up to 8 threads), each
 * thread holding one log's model at a time. out[n]. */
void ranks_collect(int n, char *const *paths, ranks_log_t *out);
/* The verdict, as text or into the open JSON object ("ranks": {...}): the logs told apart into
 * runs (ranks_runs.c), each run's verdict of its own (ranks_job.c). */
void ranks_report(cli_ctx_t *c, const ranks_log_t *r, int n);
/* Operands with each directory replaced by the *.gmlog files in it (sorted). *out is malloc'd
 * (with the names it holds: ranks_args_free); -1 after a message when a directory cannot be read
 * or holds no log. */
int ranks_expand_args(int n, char *const *args, char ***out, int *nout);
void ranks_args_free(char **v, int n);

#endif
