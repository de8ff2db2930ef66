/* Placement of one repeating step's allocations by their lifetimes: each block an offset in one
 * range so that no two blocks live at once overlap, the step's time taken as a circle (a block
 * born late in a step may die early in the next), the range's top as low as a heuristic for
 * dynamic storage allocation gets it. Pure arithmetic on arrays: no CUDA, no lock. */
#ifndef GM_PLANPACK_H
#define GM_PLANPACK_H

#include <stddef.h>
#include <stdint.h>

/* One block of the step: born at `birth` in [0, period), dead at `death` (birth < death <=
 * birth + period: a life past one period would meet its own next instance), `size` bytes. */
typedef struct planpack_iv {
    uint64_t birth, death, size;
} planpack_iv_t;

/* Whether a and b live at once in some step (the circle of `period`). */
int planpack_conflict(const planpack_iv_t *a, const planpack_iv_t *b, uint64_t period);

/* The most bytes live at once on the circle: no placement's top is lower. */
uint64_t planpack_floor(const planpack_iv_t *iv, size_t n, uint64_t period);

/* Places the n blocks: off[i] for each, aligned to `align` (a power of two; sizes are taken
 * rounded up to it), the lowest offset where no conflicting block placed before lies. Two orders
 * are tried (largest first; longest-lived first) and the lower top kept; ties break on the index,
 * so the same input gives the same offsets. Returns the top (the highest end of a block), or
 * UINT64_MAX when out of host memory (off is then undefined). */
uint64_t planpack_place(const planpack_iv_t *iv, size_t n, uint64_t period, uint64_t align, uint64_t *off);

/* For the tests: NULL, or what is wrong with the placement (two blocks live at once that
 * overlap, an offset out of alignment, a top below the floor). */
const char *planpack_check(const planpack_iv_t *iv, size_t n, uint64_t period, uint64_t align,
                           const uint64_t *off, uint64_t top);

#endif
