/* What the verdict's files share (ranks.c, ranks_job.c, ranks_runs.c, ranks_text.c,
 * ranks_json.c): one run's verdict built from its logs' summaries, below the text and JSON that
 * print it. Nothing here reads a log. */
#ifndef GM_RANKS_INT_H
#define GM_RANKS_INT_H

#include "json.h"
#include "ranks.h"

#include <stddef.h>
#include <stdint.h>

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

/* Runs: run_of[i] gets each log's run (0.., by their earliest start); returns the count. */
int ranks_runs_group(const ranks_log_t *r, int n, int *run_of);
/* "TORCHELASTIC_RUN_ID=x, MASTER_PORT=29500" from what the logs share; "" when nothing. */
void ranks_runs_name(const ranks_log_t *r, const int *members, int n, char *buf, size_t len);

void ranks_text_job(cli_ctx_t *c, const job_t *j, const char *heading);
void ranks_json_job(json_t *js, const job_t *j);

#endif
