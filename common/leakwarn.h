/* The early-warning rule, once for the shim (GMSHIM_WARN) and the analyzer (`gmshim top`): what
 * a step's low-water mark is when there are no marks (a trough of allocated bytes), when the
 * step lows say "leak", how soon the device is full at that rate, and the warning's words.
 * Decisions and text only: no allocation, no lock, no CUDA. */
#ifndef GM_LEAKWARN_H
#define GM_LEAKWARN_H

#include <stddef.h>
#include <stdint.h>

/* Consecutive rising step lows a leak needs, after the first LEAKWARN_WARMUP steps (a cache
 * filling up, the first batch's buffers). Strict rises of low-water marks: steady jobs whose
 * troughs wander at random rise this many times in a row about once in 11! windows, and the
 * shape checks below rule most of those out too. */
#define LEAKWARN_RISES 10
#define LEAKWARN_WARMUP 5
/* Growth below this per step is not worth a warning (a list of small tensors kept for logging). */
#define LEAKWARN_MIN_RISE (64u << 10)

/* Troughs of a device's allocated bytes (the analyzer's epochs when there are no marks): a fall
 * of a tenth of the peak (at least 4 KiB) below the highest point, then a rise as large above
 * the lowest point closes a trough at that lowest point. */
typedef struct leakwarn_trough {
    int up;                   /* rising: the next fall starts a trough */
    uint64_t hi, lo, lo_t;
} leakwarn_trough_t;

static inline void leakwarn_trough_init(leakwarn_trough_t *tr)
{
    tr->up = 1; /* the first trough needs a fall first: a run that only grows has none */
    tr->hi = tr->lo = tr->lo_t = 0;
}

/* One value of allocated bytes at time t (peak: the most allocated so far). 1 when it closes a
 * trough: tr->lo is its low-water mark, tr->lo_t its time. */
static inline int leakwarn_trough_feed(leakwarn_trough_t *tr, uint64_t a, uint64_t peak, uint64_t t)
{
    uint64_t thr = peak / 10;
    if (thr < 4096)
        thr = 4096;
    if (tr->up) {
        if (a > tr->hi) {
            tr->hi = a;
        } else if (a + thr <= tr->hi) {
            tr->up = 0;
            tr->lo = a;
            tr->lo_t = t;
        }
    } else if (a < tr->lo) {
        tr->lo = a;
        tr->lo_t = t;
    } else if (a >= tr->lo + thr) {
        tr->up = 1;
        tr->hi = a;
        return 1;
    }
    return 0;
}

/* The last steps' low-water marks and times, oldest first once full. */
typedef struct leakwarn {
    uint64_t low[LEAKWARN_RISES + 1];
    uint64_t t[LEAKWARN_RISES + 1];
    uint32_t steps;           /* steps fed so far */
} leakwarn_t;

/* The verdict on the window. */
typedef struct leakwarn_verdict {
    uint64_t per_step;        /* mean rise of the low-water mark per step */
    uint64_t floor;           /* the newest step's low-water mark */
    uint64_t steps_left;      /* at this rate, steps until capacity (UINT64_MAX: no capacity known) */
    double step_s;            /* mean seconds per step over the window (0: unknown) */
    uint64_t window_start_t;  /* time of the window's first step: its sites' growth is measured from it */
} leakwarn_verdict_t;

/* One step ended with low-water mark `low` at time t_ns. */
void leakwarn_step(leakwarn_t *w, uint64_t low, uint64_t t_ns);
/* Consecutive rises at the end of the window (0 after a step that did not rise). */
unsigned leakwarn_rising(const leakwarn_t *w);
/* 1 when the window says leak: past the warm-up, LEAKWARN_RISES strict rises in a row, each at
 * least a quarter of their mean (no one-off jump), their mean at least LEAKWARN_MIN_RISE, and
 * the later half not slowing to under half the earlier half's (a cache filling up slows down).
 * `capacity` (the device's memory or its cap; 0: unknown) gives the steps left. */
int leakwarn_check(const leakwarn_t *w, uint64_t capacity, leakwarn_verdict_t *v);
/* "leak suspected on device D: +16.0 MiB per step at SITE; at this rate the device is full in ~3
 * min (180 steps)": the one wording of the shim's stderr line and of `gmshim top`. */
const char *leakwarn_format(char *buf, size_t len, int dev, const leakwarn_verdict_t *v, const char *site);

#endif
