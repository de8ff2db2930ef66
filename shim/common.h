/* Macros and small types every shim module uses. Nothing here may allocate, lock or call CUDA. */
#ifndef GM_COMMON_H
#define GM_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

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

#define GMSHIM_VERSION_STRING "0.1.0"
#define GM_MAX_DEVICES 64
#define GM_KiB ((size_t)1 << 10)
#define GM_MiB ((size_t)1 << 20)
#define GM_GiB ((size_t)1 << 30)

/* A statistic as PyTorch and RMM keep them: now, the most ever, the sum of all ever added. */
typedef gmshim_stat_t gm_stat_t;

static inline void gm_stat_add(gm_stat_t *s, uint64_t n)
{
    s->current += n;
    s->total += n;
    if (s->current > s->peak)
        s->peak = s->current;
}

static inline void gm_stat_sub(gm_stat_t *s, uint64_t n)
{
    s->current = n > s->current ? 0 : s->current - n;
}

/* CLOCK_MONOTONIC in ns (vDSO, no system call). */
static inline uint64_t gm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline size_t gm_round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

#endif
