/* One side of `gmshim diff` (diff.c): a log reduced to what two runs are compared by, taken from
 * the model's own figures (never a second computation of them). Sites are keyed by source line and
 * function, never by address: addresses differ between builds and processes. */
#ifndef GM_DIFF_SIDE_H
#define GM_DIFF_SIDE_H

#include "cli.h"

#include <stdint.h>

/* One call site of one device, as matched across runs: the innermost Python frame, else the
 * innermost native frame with a source line, else the site's label. Several sites of a log that
 * share the key (other stacks below one line) are summed into one. */
typedef struct diff_site {
    char *key;                /* "function (file:line)": file by its base name */
    char *file;               /* the frame's file as recorded (NULL: none) */
    char *function;
    unsigned line;
    uint64_t peak_bytes;      /* live when the device's reserved memory peaked */
    uint64_t growth;          /* per step, when the site grows steadily (leaks' rule), else 0 */
} diff_site_t;

/* The figures of one device of one log. */
typedef struct diff_dev {
    int id;
    char name[128];
    uint64_t peak_allocated, peak_reserved;
    uint64_t floor;           /* live bytes when reserved peaked */
    uint64_t frag;            /* external fragmentation then: free gaps in segments with live blocks */
    uint64_t low_water;       /* the lowest live bytes of the last closed step (0: no steps) */
    uint64_t ooms;
    char first_cause[24];     /* the first OOM's cause ("" without one) */
    int epochs;               /* EPOCH_MARKS, EPOCH_TROUGHS, or -1: no steps */
    int by_steps;             /* the unmarked epochs are steps of repeating allocations, not troughs */
    uint32_t steps;
    diff_site_t *sites;       /* sorted by key */
    size_t nsites;
} diff_dev_t;

/* One log, reduced. */
typedef struct diff_side {
    char *path;
    int rank;                 /* -1: none */
    int partial;              /* parts of the log could not be read */
    diff_dev_t *devs;         /* by device id, ascending */
    int ndevs;
} diff_side_t;

/* Reads and replays the log at path into s (its messages on stderr, as every command's). Returns
 * 0, 1 when the log is damaged but read in part (s filled, s->partial set), or -1 when it cannot
 * be read at all (after the message). */
int diff_side_read(diff_side_t *s, const char *path, FILE *err);
void diff_side_free(diff_side_t *s);
/* The device of that id, or NULL. */
const diff_dev_t *diff_side_dev(const diff_side_t *s, int id);

#endif
