/* The logs given to `gmshim report` told apart into runs (ranks_int.h), so that no verdict spans
 * unrelated runs: a run is what torchrun or Slurm says it is (TORCHELASTIC_RUN_ID and its restart
 * count, SLURM_JOB_ID and SLURM_STEP_ID, MASTER_ADDR/PORT, WORLD_SIZE, recorded in the headers);
 * one rank appears once in a run; and logs without an identity in common belong together only if
 * they lived at the same time (within RANKS_RUN_GAP_NS). */
#include "ranks_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value of KEY in a log's identity, NULL if absent; torchrun's "none" (a static rendezvous)
 * identifies nothing. */
static const char *id_get(const ranks_log_t *x, const char *key)
{
    size_t kl = strlen(key);
    for (unsigned k = 0; k < x->nids; k++)
        if (!strncmp(x->ids[k], key, kl) && x->ids[k][kl] == '=') {
            const char *v = x->ids[k] + kl + 1;
            return *v && strcmp(v, "none") ? v : NULL;
        }
    return NULL;
}

/* -1: the two logs cannot be of one run; 1: they are (the same run id or Slurm step); 0: unknown. */
static int id_compare(const ranks_log_t *a, const ranks_log_t *b)
{
    static const char *const keys[] = {"TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "SLURM_JOB_ID",
                                       "SLURM_STEP_ID", "MASTER_ADDR", "MASTER_PORT"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const char *x = id_get(a, keys[k]), *y = id_get(b, keys[k]);
        if (x && y && strcmp(x, y))
            return -1;
    }
    if (a->world_size > 0 && b->world_size > 0 && a->world_size != b->world_size)
        return -1;
    if (a->rank >= 0 && a->rank == b->rank)
        return -1;
    const char *ra = id_get(a, "TORCHELASTIC_RUN_ID"), *sa = id_get(a, "SLURM_JOB_ID");
    return (ra && id_get(b, "TORCHELASTIC_RUN_ID")) || (sa && id_get(b, "SLURM_JOB_ID")) ? 1 : 0;
}

/* The latest moment a log is known alive from its own contents (its close, else its last record or
 * its header's heartbeat):
 * the file's time is left out here, since a copy without its times would join every run. */
static uint64_t lived_until(const ranks_log_t *x)
{
    uint64_t t = x->start_ns + x->end_t;
    return !x->closed && x->alive_t && x->start_ns + x->alive_t > t ? x->start_ns + x->alive_t : t;
}

static const ranks_log_t *g_r;
static int by_start(const void *a, const void *b)
{
    int i = *(const int *)a, k = *(const int *)b;
    if (g_r[i].start_ns != g_r[k].start_ns)
        return g_r[i].start_ns < g_r[k].start_ns ? -1 : 1;
    return i < k ? -1 : i > k;
}

int ranks_runs_group(const ranks_log_t *r, int n, int *run_of)
{
    int *order = calloc((size_t)n + 1, sizeof *order);
    uint64_t *until = calloc((size_t)n + 1, sizeof *until); /* per run: the latest known alive */
    int nruns = 0, no = 0;
    for (int i = 0; i < n; i++)
        run_of[i] = 0;
    if (!order || !until) {
        free(order);
        free(until);
        return 1;
    }
    for (int i = 0; i < n; i++)
        if (r[i].opened)
            order[no++] = i;
    g_r = r;
    qsort(order, (size_t)no, sizeof *order, by_start);
    for (int o = 0; o < no; o++) {
        const ranks_log_t *x = &r[order[o]];
        int join = -1, strong = id_get(x, "TORCHELASTIC_RUN_ID") || id_get(x, "SLURM_JOB_ID");
        for (int g = nruns - 1; g >= 0 && join < 0; g--) {
            int near = x->start_ns <= until[g] + RANKS_RUN_GAP_NS;
            if (!near && !strong)
                continue; /* only an identity in common could join them: x has none */
            int same = 0, conflict = 0;
            for (int p = 0; p < o && !conflict; p++) {
                if (run_of[order[p]] != g)
                    continue;
                int c = id_compare(x, &r[order[p]]);
                conflict = c < 0;
                same |= c > 0;
            }
            if (!conflict && (same || near))
                join = g;
        }
        if (join < 0)
            join = nruns++;
        run_of[order[o]] = join;
        if (lived_until(x) > until[join])
            until[join] = lived_until(x);
    }
    free(order);
    free(until);
    return nruns ? nruns : 1; /* unreadable logs only: one run of them */
}

void ranks_runs_name(const ranks_log_t *r, const int *members, int n, char *buf, size_t len)
{
    static const char *const keys[] = {"TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "SLURM_JOB_ID",
                                       "SLURM_STEP_ID", "MASTER_ADDR", "MASTER_PORT"};
    size_t at = 0;
    buf[0] = 0;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0] && at < len; k++) {
        const char *v = NULL;
        for (int i = 0; i < n && !v; i++)
            v = id_get(&r[members[i]], keys[k]);
        if (v)
            at += (size_t)snprintf(buf + at, len - at, "%s%s=%s", at ? ", " : "", keys[k], v);
    }
}
