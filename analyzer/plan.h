/* The floor and the offline plan of one device's allocations (the replay's packed events,
 * rp_log_t): the floor is the bytes live at a moment (plus the failed request at an OOM), the
 * plan a placement of the recorded allocations by their recorded lifetimes, best-fit-decreasing
 * interval packing, whose peak no online allocator beats by much. It reads the events only:
 * it never replays the pool and never trusts the log (frees of unknown blocks are skipped). */
#ifndef GM_PLAN_H
#define GM_PLAN_H

#include "replay.h"

#include <stddef.h>
#include <stdint.h>

/* Allocations a plan places at most: the ones around the moment planned (a window of the run,
 * plus everything live in it), so that a log of 20 M events is planned in well under a second. */
#define PLAN_WINDOW_ALLOCS (1u << 14)

typedef struct plan_point {
    size_t ev;               /* the moment: its event index (the OOM's, or where live bytes peaked) */
    uint64_t t;
    uint64_t floor;          /* bytes live then, as the program asked them rounded to 512 B (the
                                pool's unit), plus the failed request at an OOM */
    uint64_t planned;        /* the peak of the planned placement (>= floor) */
    uint64_t placed;         /* allocations placed */
    uint64_t allocs;         /* allocations recorded up to the moment (all of them at the peak) */
    int windowed;            /* the plan covers a window of the run, not all of it */
    int narrowed;            /* that window smaller than PLAN_WINDOW_ALLOCS: packing the full one
                                would have taken too long (many blocks alive at once, long-lived) */
    int valid;
} plan_point_t;

/* The device's peak: where live bytes peaked, and the plan of the allocations around it. */
int plan_at_peak(const rp_log_t *log, plan_point_t *out);
/* Recorded OOM k (index in log->ooms): live bytes before it plus its request, and the plan of the
 * allocations up to it with the request placed last. 0, or -1 (no such OOM, out of memory). */
int plan_at_oom(const rp_log_t *log, size_t k, plan_point_t *out);

/* Whether the peaks of live bytes between marks rise steadily up to the first failed OOM (a
 * transient that grows every step): at least three steps whole, rising at three of four
 * transitions, by at least 1 % of the last peak in all. *per_step gets the mean rise, *steps
 * the steps seen; 0 when they do not rise (or there are no marks). */
int plan_step_growth(const rp_log_t *log, uint64_t *per_step, uint32_t *steps);

/* The packing itself, for the tests: n intervals [start[i], end[i]) of size[i] bytes placed,
 * largest first, at the lowest offset where no interval overlapping in time lies; off[i] is each
 * offset; returns the peak (the highest end of a placed block), or UINT64_MAX when out of memory. */
uint64_t plan_pack(const uint64_t *start, const uint64_t *end, const uint64_t *size, uint64_t *off, size_t n);

#endif
