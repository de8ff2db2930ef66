/* What the verdict's files share (ranks.c, ranks_job.c, ranks_runs.c, ranks_text.c,
 * ranks_json.c): a log's summary, one run's verdict built from its logs' summaries, below the
 * text and JSON that print it. Nothing here reads a log. */
#ifndef GM_RANKS_INT_H
#define GM_RANKS_INT_H

#include "cli.h"
#include "json.h"

#include <stddef.h>
#include <stdint.h>

/* The clock skew assumed between hosts (NTP-synchronised clocks): failures on different hosts
 * closer than this are ordered with a warning. Logs of one host share its clock. */
#define RANKS_SKEW_NS 100000000ull
#define RANKS_TOP 3
/* Logs without an identity in common are of one run only if their lives (start to the last moment
 * known alive) come within this of each other: ranks of a run live at once. */
#define RANKS_RUN_GAP_NS 60000000000ull
#define RANKS_IDS 8
#define RANKS_GUESTS 16            /* other processes kept per log from its card's ledger */
#define RANKS_CROWDS 8

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
    struct { uint32_t pid; uint64_t bytes; } guest[RANKS_GUESTS]; /* other processes on its GPUs
                               * (the card's ledger at each device's peak and OOMs: the most each held) */
    unsigned nguests;
} ranks_log_t;

/* A rank whose GPU held other ranks' processes (their contexts): matched by host and pid. */
typedef struct crowd {
    int log;                   /* the rank whose GPU it was */
    int others[RANKS_GUESTS];  /* the other ranks' logs... */
    uint64_t bytes[RANKS_GUESTS]; /* ...and what each held there */
    int n;
    uint64_t total;
} crowd_t;

/* Where the latest moment a log's process is known alive comes from. */
enum { RANKS_ALIVE_CLOSE, RANKS_ALIVE_RECORD, RANKS_ALIVE_BEAT, RANKS_ALIVE_MTIME };

typedef struct job {
    const ranks_log_t *r;
    int n, readable;
    int *order;                /* readable logs by rank (then pid) */
    int first;                 /* index of the first failure, -1 none (or none known) */
    int first_unknown;         /* the first failure's log was not closed: its time a lower bound */
    int uncertain;             /* the order cannot be known: reason says why */
    int second;                /* a failure on another host within the skew of the first, -1 */
    char reason[640];
    int hosts;
    int world;                 /* WORLD_SIZE, -1 unknown */
    int *missing;
    int nmissing;
    uint64_t median_live;
    int outlier;               /* -1 none */
    uint64_t t0;               /* the earliest start */
    char run[400];             /* what identifies the run ("TORCHELASTIC_RUN_ID=x, ..."), "" none */
    crowd_t crowd[RANKS_CROWDS]; /* in rank order */
    int ncrowd;
} job_t;

/* The others grouped by how they ended: one group per end state, in rank order. */
typedef struct group {
    char words[128];
    char tail[64];             /* after the time: ", then exit", " (its last record)" */
    int members[64];
    int n, more;
    int64_t lo, hi;            /* after the first failure (or the job's start), ns */
} group_t;

void ranks_job_build(job_t *j, const ranks_log_t *r, int n);
void ranks_job_free(job_t *j);
int ranks_job_groups(const job_t *j, group_t *g, int max);
/* SIGABRT in peers after another rank's failure: the NCCL watchdog's timeout. */
int ranks_job_pattern(const job_t *j, const group_t *g);
extern const char *const ranks_job_pattern_text;

/* Whether the log's end is known (closed), the latest moment it is known alive (wall clock) and
 * from what (RANKS_ALIVE_*), and its failure's time (a lower bound for a log never closed). */
int ranks_job_end_known(const ranks_log_t *x);
uint64_t ranks_job_alive_ns(const ranks_log_t *x, int *src);
uint64_t ranks_job_fail_ns(const ranks_log_t *x);
uint64_t ranks_job_end_ns(const ranks_log_t *x);
/* The reference of the others' times: the first failure, else the job's start. */
uint64_t ranks_job_ref_ns(const job_t *j);
const char *ranks_job_alive_words(int src);    /* "its last record" */
const char *ranks_job_alive_kind(int src);     /* "last_record" */

const char *ranks_job_sig_name(unsigned sig, char *buf, size_t len);
const char *ranks_job_fail_kind(int k);
const char *ranks_job_end_words(const ranks_log_t *r, char *buf, size_t len);
const char *ranks_job_end_kind(const ranks_log_t *r);
const char *ranks_job_who(const ranks_log_t *r, char *buf, size_t len);
const char *ranks_job_gap_text(int64_t ns, char *buf, size_t len);

/* The remedy of a crowded GPU, one sentence. */
extern const char *const ranks_job_crowd_text;

/* Runs: run_of[i] gets each log's run (0.., by their earliest start); returns the count. */
int ranks_runs_group(const ranks_log_t *r, int n, int *run_of);
/* "TORCHELASTIC_RUN_ID=x, MASTER_PORT=29500" from what the logs share; "" when nothing. */
void ranks_runs_name(const ranks_log_t *r, const int *members, int n, char *buf, size_t len);

void ranks_text_job(cli_ctx_t *c, const job_t *j, const char *heading);
void ranks_json_job(json_t *js, const job_t *j);

#endif
