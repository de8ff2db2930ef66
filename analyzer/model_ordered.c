/* The ordered replay: the log's records in time order, a batch at a time, through the reducer,
 * with progress on stderr for a large log. */
#include "model_int.h"

#include <stdio.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A batch of records. A native-order log's records are used in place (the reader keeps each
 * thread's previous chunk, and the batch ends at the first buffer switch); a byte-swapped
 * log's are copied, since each lives in one buffer until the next call. */
int model_fill_batch(rd_log_t *lf, batch_t *b)
{
    int n = 0;
    if (!lf->swapped) {
        uint64_t refills = lf->refills;
        while (n < BATCH && rd_next(lf, &b->rec[n])) {
            n++;
            if (lf->refills != refills)
                break;
        }
        return b->n = n;
    }
    size_t used = 0;
    while (n < BATCH && used + 256 * 8 <= ARENA && rd_next(lf, &b->rec[n])) {
        memcpy(b->arena + used, b->rec[n].p, b->rec[n].len);
        b->rec[n].p = b->arena + used;
        used += b->rec[n].len;
        n++;
    }
    return b->n = n;
}

static void show_progress(model_t *m, int n, double *last, int *shown)
{
    if (!m->progress || (m->records & ~(uint64_t)0xfffff) == ((m->records - (uint64_t)n) & ~(uint64_t)0xfffff))
        return;
    double now = now_s();
    if (now - *last > 0.25) {
        fprintf(stderr, "\rgmshim: reading %s: %3.0f%%", m->lf->name, 100.0 * rd_progress(m->lf));
        *last = now;
        *shown = 1;
    }
}

/* Replays the records from time `from` on (0: all of them), numbering them from m->records. */
void model_replay_from(model_t *m, uint64_t from)
{
    rd_log_t *lf = m->lf;
    double last_progress = now_s();
    int shown = 0;
    if (from)
        rd_window(lf, from, UINT64_MAX);
    rd_rewind(lf);
    lf->seq = m->records;
    /* One thread: a second one reading ahead was slower, the batches' bytes crossing between
     * cores costing more than the reading they save (docs/performance.md). */
    batch_t *b = malloc(sizeof *b);
    if (!b)
        model_die_oom();
    while (!m->stopped && model_fill_batch(lf, b)) {
        model_apply(m, b->rec, b->n);
        show_progress(m, b->n, &last_progress, &shown);
    }
    free(b);
    if (shown)
        fprintf(stderr, "\r\033[K");
    if (from)
        rd_window(lf, 0, UINT64_MAX); /* later passes read the whole log again */
}
