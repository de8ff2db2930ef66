/* Placement of a step's blocks (planpack.h): greedy, in a fixed order, each block at the lowest
 * offset free for its whole life, against every block placed before that lives at once with it.
 * Quadratic in the blocks: a step of a few thousand allocations places in milliseconds. */
#include "planpack.h"

#include <stdlib.h>

static int overlaps(uint64_t a1, uint64_t a2, uint64_t b1, uint64_t b2)
{
    return a1 < b2 && b1 < a2;
}

int planpack_conflict(const planpack_iv_t *a, const planpack_iv_t *b, uint64_t period)
{
    /* a against b in the step before, the same step and the step after (a moved up one period
     * so that nothing goes below zero). */
    uint64_t a1 = a->birth + period, a2 = a->death + period;
    return overlaps(a1, a2, b->birth, b->death) || overlaps(a1, a2, b->birth + period, b->death + period) ||
           overlaps(a1, a2, b->birth + 2 * period, b->death + 2 * period);
}

typedef struct change {
    uint64_t t;
    int64_t d;
} change_t;

static int by_time(const void *x, const void *y)
{
    const change_t *a = x, *b = y;
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    return (a->d > 0) - (b->d > 0); /* a death before a birth at the same moment */
}

uint64_t planpack_floor(const planpack_iv_t *iv, size_t n, uint64_t period)
{
    change_t *c = malloc((4 * n + 1) * sizeof *c);
    if (!c)
        return 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t s = (int64_t)iv[i].size;
        if (iv[i].death <= period) {
            c[m++] = (change_t){iv[i].birth, s};
            c[m++] = (change_t){iv[i].death, -s};
        } else { /* round the circle: to the step's end, then from its start */
            c[m++] = (change_t){iv[i].birth, s};
            c[m++] = (change_t){period, -s};
            c[m++] = (change_t){0, s};
            c[m++] = (change_t){iv[i].death - period, -s};
        }
    }
    qsort(c, m, sizeof *c, by_time);
    int64_t live = 0, peak = 0;
    for (size_t i = 0; i < m; i++) {
        live += c[i].d;
        peak = live > peak ? live : peak;
    }
    free(c);
    return (uint64_t)peak;
}

typedef struct order_key {
    uint64_t a, b;
    uint32_t i;
} order_key_t;

static int by_keys(const void *x, const void *y)
{
    const order_key_t *p = x, *q = y;
    if (p->a != q->a)
        return p->a > q->a ? -1 : 1;
    if (p->b != q->b)
        return p->b > q->b ? -1 : 1;
    return p->i < q->i ? -1 : p->i > q->i;
}

typedef struct span {
    uint64_t off, end;
} span_t;

static int by_off(const void *x, const void *y)
{
    const span_t *a = x, *b = y;
    return a->off < b->off ? -1 : a->off > b->off;
}

static uint64_t sized(const planpack_iv_t *iv, uint64_t align)
{
    return (iv->size + align - 1) & ~(align - 1);
}

/* One greedy pass in the order of `keys`; the top. */
static uint64_t place_in(const planpack_iv_t *iv, size_t n, uint64_t period, uint64_t align, const order_key_t *keys,
                         uint32_t *placed, span_t *sp, uint64_t *off)
{
    uint64_t top = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t i = keys[k].i;
        uint64_t size = sized(&iv[i], align);
        size_t m = 0;
        for (size_t j = 0; j < k; j++) {
            uint32_t o = placed[j];
            if (planpack_conflict(&iv[i], &iv[o], period))
                sp[m++] = (span_t){off[o], off[o] + sized(&iv[o], align)};
        }
        qsort(sp, m, sizeof *sp, by_off);
        uint64_t at = 0;
        for (size_t x = 0; x < m && sp[x].off < at + size; x++)
            at = sp[x].end > at ? sp[x].end : at;
        off[i] = at;
        placed[k] = i;
        top = at + size > top ? at + size : top;
    }
    return top;
}

uint64_t planpack_place(const planpack_iv_t *iv, size_t n, uint64_t period, uint64_t align, uint64_t *off)
{
    if (!n)
        return 0;
    order_key_t *keys = malloc(n * sizeof *keys);
    uint32_t *placed = malloc(n * sizeof *placed);
    span_t *sp = malloc(n * sizeof *sp);
    uint64_t *alt = malloc(n * sizeof *alt);
    uint64_t best = UINT64_MAX;
    if (!keys || !placed || !sp || !alt)
        goto out;
    /* Largest first, then longest-lived first: neither wins on every step. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            uint64_t size = sized(&iv[i], align), life = iv[i].death - iv[i].birth;
            keys[i] = pass ? (order_key_t){life, size, (uint32_t)i} : (order_key_t){size, life, (uint32_t)i};
        }
        qsort(keys, n, sizeof *keys, by_keys);
        uint64_t top = place_in(iv, n, period, align, keys, placed, sp, pass ? alt : off);
        if (!pass)
            best = top;
        else if (top < best) {
            best = top;
            for (size_t i = 0; i < n; i++)
                off[i] = alt[i];
        }
    }
out:
    free(keys);
    free(placed);
    free(sp);
    free(alt);
    return best;
}

const char *planpack_check(const planpack_iv_t *iv, size_t n, uint64_t period, uint64_t align,
                           const uint64_t *off, uint64_t top)
{
    uint64_t hi = 0;
    for (size_t i = 0; i < n; i++) {
        if (off[i] % align)
            return "an offset out of alignment";
        if (iv[i].death <= iv[i].birth || iv[i].death > iv[i].birth + period)
            return "a life outside one period";
        uint64_t end = off[i] + sized(&iv[i], align);
        hi = end > hi ? end : hi;
        for (size_t j = 0; j < i; j++)
            if (planpack_conflict(&iv[i], &iv[j], period) &&
                overlaps(off[i], end, off[j], off[j] + sized(&iv[j], align)))
                return "two blocks live at once overlap";
    }
    if (hi != top)
        return "the top is not the highest end";
    if (top < planpack_floor(iv, n, period))
        return "the top is below the floor";
    return NULL;
}
