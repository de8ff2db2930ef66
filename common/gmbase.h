/* The few types and helpers the pool's policy code needs, shared by the shim and the analyzer
 * (which replays logs through the same code). Nothing here may allocate, lock or call CUDA. */
#ifndef GM_BASE_H
#define GM_BASE_H

#include <stddef.h>
#include <stdint.h>

/* A statistic as PyTorch and RMM keep them: now, the most ever, the sum of all ever added.
 * Laid out as gmshim_stat_t of the public API. */
typedef struct gm_stat {
    unsigned long long current, peak, total;
} gm_stat_t;

/* Written under their owner's lock; `current` is stored atomically, for the shim's readers that
 * hold no lock (a thread cache's peak, shim/tcache.c). */
static inline void gm_stat_add(gm_stat_t *s, uint64_t n)
{
    unsigned long long now = s->current + n;
    __atomic_store_n(&s->current, now, __ATOMIC_RELAXED);
    s->total += n;
    if (now > s->peak)
        s->peak = now;
}

static inline void gm_stat_sub(gm_stat_t *s, uint64_t n)
{
    __atomic_store_n(&s->current, n > s->current ? 0 : s->current - n, __ATOMIC_RELAXED);
}

#define GM_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* For the few helpers of the pool's hot paths that the compiler would otherwise call. */
#define GM_INLINE static inline __attribute__((always_inline))

static inline size_t gm_round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

#endif
