/* The cross-rank verdict of `gmshim report` on the logs of one job: which rank failed first (in
 * wall-clock order), why, how the others ended and when, which ranks have no log, and the
 * imbalance of peaks between ranks. It keeps a small summary per log, never a log's model. */
#ifndef GM_RANKS_H
#define GM_RANKS_H

#include "cli.h"
#include "ranks_int.h"

#include <stdint.h>

/* Whether report opens with the verdict: several logs, or a log that carries a rank. */
int ranks_wanted(int n, char *const *paths);
/* Summarises n logs, in parallel (GMSHIM_ANALYZER_THREADS, default up to 8 threads), each
 * thread holding one log's model at a time. out[n]. */
void ranks_collect(int n, char *const *paths, ranks_log_t *out);
/* The verdict, as text or into the open JSON object ("ranks": {...}): the logs told apart into
 * runs (ranks_runs.c), each run's verdict of its own (ranks_job.c). */
void ranks_report(cli_ctx_t *c, const ranks_log_t *r, int n);

#endif
