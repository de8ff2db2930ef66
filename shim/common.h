/* Macros and small types every shim module uses. Nothing here may allocate, lock or call CUDA. */
#ifndef GM_COMMON_H
#define GM_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "gmbase.h"
#include "version.h"
#include "gmshim.h"

#define GM_EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define GM_NOINLINE __attribute__((noinline))
#define GM_COLD __attribute__((cold, noinline))
#define GM_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#ifdef GM_DEBUG
#include <assert.h>
#define gm_assert(x) assert(x)
#else
#define gm_assert(x) ((void)0)
#endif

#define GM_MAX_DEVICES 64
#define GM_KiB ((size_t)1 << 10)
#define GM_MiB ((size_t)1 << 20)
#define GM_GiB ((size_t)1 << 30)

/* The shim's clock: CLOCK_MONOTONIC in ns. Where the kernel keeps time with the CPU's invariant
 * time-stamp counter, shim/clock.c calibrates the counter against CLOCK_MONOTONIC once, over the
 * process's first GM_CLOCK_CALIBRATE_NS, and from then on the clock is the counter scaled (one
 * rdtscp, a multiply): no vDSO call on the hit path. Before that, and elsewhere, clock_gettime. */
typedef struct gm_tsc_clock {
    uint64_t base_tsc, base_ns; /* a pair read together at calibration */
    uint64_t mult;              /* ns per tick, 32.32 fixed point */
} gm_tsc_clock_t;
extern gm_tsc_clock_t gm_tsc;
extern int gm_tsc_on;
uint64_t clock_slow(void);

/* A counter reading as CLOCK_MONOTONIC ns, by the calibrated rate. */
static inline uint64_t gm_tsc_ns(uint64_t tsc)
{
    uint64_t d = tsc > gm_tsc.base_tsc ? tsc - gm_tsc.base_tsc : 0;
    return gm_tsc.base_ns + (uint64_t)(((unsigned __int128)d * gm_tsc.mult) >> 32);
}

static inline uint64_t gm_now_ns(void)
{
#if defined(__x86_64__)
    if (__builtin_expect(__atomic_load_n(&gm_tsc_on, __ATOMIC_ACQUIRE), 1)) {
        unsigned lo, hi, aux;
        /* rdtscp waits for the instructions before it (a lock just taken): times taken inside a
         * lock keep the lock's order across threads, as the vDSO's ordered read does. */
        __asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
        return gm_tsc_ns((uint64_t)hi << 32 | lo);
    }
#endif
    return clock_slow();
}

/* The counter's time read without waiting for the instructions before it (plain rdtsc), 0 where
 * the counter is not in use: a time read inside a lock may then come from before the lock was
 * taken, so it keeps the lock's order only through the lock's newest stamp (stamp_after). */
static inline uint64_t gm_counter_unordered_ns(void)
{
#if defined(__x86_64__)
    if (__builtin_expect(__atomic_load_n(&gm_tsc_on, __ATOMIC_ACQUIRE), 1)) {
        unsigned lo, hi;
        __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
        return gm_tsc_ns((uint64_t)hi << 32 | lo);
    }
#endif
    return 0;
}

/* gm_now_ns by the unordered counter read, clock_gettime where the counter is not in use. */
static inline uint64_t gm_now_unordered_ns(void)
{
    uint64_t t = gm_counter_unordered_ns();
    return likely(t != 0) ? t : clock_slow();
}

/* t, raised to the newest time stamped before it under the same lock (*last), which it becomes:
 * the rule that keeps an unordered reading in its lock's order (devtypes.h, arena_stamp). */
static inline uint64_t stamp_after(uint64_t *last, uint64_t t)
{
    if (t < *last)
        t = *last;
    *last = t;
    return t;
}

#endif
