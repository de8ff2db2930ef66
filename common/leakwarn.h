/* The early-warning rule, once for the shim (GMSHIM_WARN) and the analyzer (`gmshim top`): what
 * a step's low-water mark is when there are no marks (a trough of allocated bytes), when the
 * step lows say "leak", how soon the device is full at that rate, and the warning's words.
 * Decisions and text only: no allocation, no lock, no CUDA. */
#ifndef GM_LEAKWARN_H
#define GM_LEAKWARN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* Consecutive rising step lows a leak needs, after the first LEAKWARN_WARMUP steps (a cache
 * filling up, the first batch's buffers). Strict rises of low-water marks: steady jobs whose
 * troughs wander at random rise this many times in a row about once in 11! windows, and the
 * shape checks below rule most of those out too. */
#define LEAKWARN_RISES 10
#define LEAKWARN_WARMUP 5
/* Growth below this per step is not worth a warning (a list of small tensors kept for logging). */
#define LEAKWARN_MIN_RISE (64u << 10)

/* Troughs of a device's allocated bytes (the analyzer's epochs when there are no marks, the shim's
 * steps): a trough closes at the lowest point after a fall of a tenth of the peak or of 7/10 of the
 * steps' swing, whichever is less — the swing being the largest fall yet from a high since the
 * last trough — and a climb as large again. A tenth of the peak alone let a leak outgrow its own
 * steps (its peak grows, its swing does not); the swing alone is inflated for good by one large
 * fall (a cache freed once). The count opens once the figure has made one fall of a tenth of its
 * peak and a climb as large (the first whole step): before that the swing is only the first
 * forward pass's temporaries, whose falls are small and whose lows rise layer after layer, or a
 * load's buffer freed once; the swing starts there from that tenth (a GiB freed before the first
 * step left the swing at a GiB, and a leak beside a 144 MiB step, once its peak passed ten
 * swings, made no trough again).
 * Replayed on real logs (run 121's ResNet-50, a GPT-2-like and ViT-B/16, 20 steps each; an
 * unmarked loop keeping 64 MiB beside a 32 MiB scratch, 1 258 steps): 22, 40, 20 and 1 258
 * troughs, where a tenth of the peak alone gave 22, 40, 20 and 4; none of the steady three warned. */
typedef struct leakwarn_zig {
    int up;                   /* rising: the next fall starts a trough */
    uint64_t hi, lo;
} leakwarn_zig_t;

typedef struct leakwarn_trough {
    leakwarn_zig_t z;         /* the steps' troughs (z.lo: the newest one's low-water mark) */
    uint64_t lo_t;            /* its time */
    uint64_t top, swing;      /* the high since the last trough; the largest fall from it yet */
    int open;                 /* the count opened (by `first`, a whole step at a tenth of the peak) */
    leakwarn_zig_t first;
} leakwarn_trough_t;

/* One value `a` through a zigzag of threshold thr: 1 when it climbs thr above the lowest point
 * after a fall of thr (z->lo); *low set when `a` is that lowest point so far. */
static inline int leakwarn_zig(leakwarn_zig_t *z, uint64_t a, uint64_t thr, int *low)
{
    *low = 0;
    if (z->up) {
        if (a > z->hi) {
            z->hi = a;
        } else if (a + thr <= z->hi) {
            z->up = 0;
            z->lo = a;
            *low = 1;
        }
    } else if (a < z->lo) {
        z->lo = a;
        *low = 1;
    } else if (a >= z->lo + thr) {
        z->up = 1;
        z->hi = a;
        return 1;
    }
    return 0;
}

static inline void leakwarn_trough_init(leakwarn_trough_t *tr)
{
    memset(tr, 0, sizeof *tr);
    tr->z.up = tr->first.up = 1; /* the first trough needs a fall first: a run that only grows has none */
}

/* One value of allocated bytes at time t (peak: the most allocated so far). 1 when it closes a
 * trough that counts: tr->z.lo is its low-water mark, tr->lo_t its time. */
static inline int leakwarn_trough_feed(leakwarn_trough_t *tr, uint64_t a, uint64_t peak, uint64_t t)
{
    uint64_t tenth = peak / 10 < 4096 ? 4096 : peak / 10;
    int low;
    if (!tr->open && leakwarn_zig(&tr->first, a, tenth, &low)) {
        tr->open = 1; /* the swing from here: falls before the first whole step are not the steps' */
        tr->top = a;
        tr->swing = tenth;
    }
    if (a > tr->top)
        tr->top = a;
    if (tr->top - a > tr->swing)
        tr->swing = tr->top - a;
    uint64_t thr = tr->swing / 10 * 7;
    if (thr > tenth)
        thr = tenth;
    if (thr < 4096)
        thr = 4096;
    int closed = leakwarn_zig(&tr->z, a, thr, &low);
    if (low)
        tr->lo_t = t;
    if (!closed)
        return 0;
    tr->top = a;
    return tr->open;
}

/* A figure's troughs found as it changes, by the code that changes it (the shim: under the lock
 * that orders its changes), so that no trough between two readings is missed however short the
 * steps; a reader (another thread) takes the closed troughs and the least since its last reading.
 * The fields a reader sees are written with relaxed atomics; the ring holds the newest
 * LEAKWARN_TAP_RING - 1 troughs (a reader further behind skips the older ones). */
#define LEAKWARN_TAP_RING 16
typedef struct leakwarn_tap {
    leakwarn_trough_t tr;     /* the writer's */
    uint64_t peak;            /* the writer's: the most so far (the troughs' scale) */
    uint64_t low;             /* the least since the reader last set it to UINT64_MAX */
    uint64_t closed;          /* troughs closed so far; ring[k % RING] holds trough k */
    uint64_t ring_lo[LEAKWARN_TAP_RING], ring_t[LEAKWARN_TAP_RING];
} leakwarn_tap_t;

static inline void leakwarn_tap_init(leakwarn_tap_t *tap)
{
    memset(tap, 0, sizeof *tap);
    leakwarn_trough_init(&tap->tr);
    tap->low = UINT64_MAX;
}

/* The figure is now `a` (after a change; the caller serialises the changes). */
static inline void leakwarn_tap_feed(leakwarn_tap_t *tap, uint64_t a)
{
    if (a < __atomic_load_n(&tap->low, __ATOMIC_RELAXED))
        __atomic_store_n(&tap->low, a, __ATOMIC_RELAXED);
    if (a > tap->peak)
        tap->peak = a;
    if (leakwarn_trough_feed(&tap->tr, a, tap->peak, 0)) {
        /* Once a step: the clock is read only here. */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t k = tap->closed;
        __atomic_store_n(&tap->ring_lo[k % LEAKWARN_TAP_RING], tap->tr.z.lo, __ATOMIC_RELAXED);
        __atomic_store_n(&tap->ring_t[k % LEAKWARN_TAP_RING],
                         (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec, __ATOMIC_RELAXED);
        __atomic_store_n(&tap->closed, k + 1, __ATOMIC_RELEASE);
    }
}

/* The reader: the next trough after the *seen first (its low-water mark and CLOCK_MONOTONIC time
 * in ns), 1; 0 when it has read them all. Troughs overwritten before they were read are skipped. */
static inline int leakwarn_tap_next(const leakwarn_tap_t *tap, uint64_t *seen, uint64_t *lo, uint64_t *t)
{
    for (;;) {
        uint64_t n = __atomic_load_n(&tap->closed, __ATOMIC_ACQUIRE);
        if (*seen >= n)
            return 0;
        if (n - *seen >= LEAKWARN_TAP_RING)
            *seen = n - LEAKWARN_TAP_RING + 1; /* the slot of trough n may be being written */
        uint64_t k = *seen;
        *lo = __atomic_load_n(&tap->ring_lo[k % LEAKWARN_TAP_RING], __ATOMIC_RELAXED);
        *t = __atomic_load_n(&tap->ring_t[k % LEAKWARN_TAP_RING], __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&tap->closed, __ATOMIC_RELAXED) - k < LEAKWARN_TAP_RING) {
            *seen = k + 1;
            return 1;
        }
        /* the writer went round meanwhile: read from the oldest it still holds */
    }
}

/* The reader: the least since its last call (or `now`, if less), and starts again. */
static inline uint64_t leakwarn_tap_take_low(leakwarn_tap_t *tap, uint64_t now)
{
    uint64_t l = __atomic_exchange_n(&tap->low, UINT64_MAX, __ATOMIC_RELAXED);
    return l < now ? l : now;
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
