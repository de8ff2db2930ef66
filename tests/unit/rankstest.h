/* Rank logs written with chosen times for the verdict's tests (tests/unit/rankstest.c): a start
 * on the wall clock, a close (or none), an OOM, a last record, the file's time, header entries. */
#ifndef GM_RANKSTEST_H
#define GM_RANKSTEST_H

#include <stdint.h>

#define T0 1700000000000000000ull /* 2023-11-14, the runs' wall clock */
#define MS 1000000ull

enum { END_EXIT, END_SIGNAL, END_OPEN };

typedef struct spec {
    int rank;
    int end;                   /* END_* */
    unsigned sig;
    uint64_t start_ms;         /* wall clock: ms after T0 */
    uint64_t end_ms;           /* the close, ms into the log (closed logs) */
    uint64_t last_ms;          /* the last record, ms into the log */
    int64_t oom_ms;            /* -1: none */
    uint64_t mtime_ms;         /* the file's last write, ms after T0; 0: its last record's time */
    const char *meta[4];       /* more header entries: rank variables or the job's (GMLOG_META_JOB) */
    const char *host;          /* NULL: node0 */
} spec_t;

/* Other processes on rank r's GPU, "PID:MiB,PID:MiB", written as a LEDGER sample of its log
 * (NULL: none); a test sets and clears them. */
extern const char *ranks_test_guests[8];
/* Writes one rank's log under dir (gm-rank<r>-<pid>.gmlog) with the times of spec. */
void ranks_test_write(const char *dir, const spec_t *s, uint32_t pid);
/* A fresh directory holding the n logs (pids 100, 101, ...). */
const char *ranks_test_job(const spec_t *s, int n);
/* gmshim report on the directory: the verdict's text (before the first log's section), or JSON. */
char *ranks_test_report(const char *dir, int json);

#endif
