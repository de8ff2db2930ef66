/* PyTorch's expandable segments as whole segments (torch_events.h). */
#include "torch_events.h"
#include "vec.h"

#include <stdlib.h>

/* ---- expandable segments ------------------------------------------------------------------ */

static int range_before(const torch_range_t *r, unsigned dev, uint64_t addr)
{
    return r->dev < dev || (r->dev == dev && r->base < addr);
}

/* The index of the first range of dev at or after addr (the insertion point). */
static size_t range_find(const torch_ranges_t *x, unsigned dev, uint64_t addr)
{
    size_t lo = 0, hi = x->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (range_before(&x->r[mid], dev, addr))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int range_insert(torch_ranges_t *x, size_t at, unsigned dev, uint64_t base, uint64_t size)
{
    torch_range_t *r = vec_grow(x->r, &x->cap, x->n + 1, sizeof *r, 8);
    if (!r)
        return -1;
    x->r = r;
    memmove(&x->r[at + 1], &x->r[at], (x->n - at) * sizeof *x->r);
    x->r[at] = (torch_range_t){base, size, (uint8_t)dev};
    x->n++;
    return 0;
}

static void range_remove(torch_ranges_t *x, size_t at)
{
    memmove(&x->r[at], &x->r[at + 1], (x->n - at - 1) * sizeof *x->r);
    x->n--;
}

static int map_range(torch_ranges_t *x, unsigned dev, uint64_t addr, uint64_t size, torch_change_t *out)
{
    int n = 0;
    size_t at = range_find(x, dev, addr);
    torch_range_t *prev = at > 0 && x->r[at - 1].dev == dev && x->r[at - 1].base + x->r[at - 1].size == addr
                              ? &x->r[at - 1] : NULL;
    torch_range_t *next = at < x->n && x->r[at].dev == dev && x->r[at].base == addr + size ? &x->r[at] : NULL;
    if (prev) {
        prev->size += size;
        if (next) { /* the gap between two closed: one segment */
            out[n++] = (torch_change_t){next->base, 0, 0};
            prev->size += next->size;
            range_remove(x, at);
        }
        out[n++] = (torch_change_t){prev->base, prev->size, 1};
        return n;
    }
    if (next) { /* grown downwards: a new base */
        out[n++] = (torch_change_t){next->base, 0, 0};
        next->base = addr;
        next->size += size;
        out[n++] = (torch_change_t){next->base, next->size, 0};
        return n;
    }
    if (range_insert(x, at, dev, addr, size))
        return -1;
    out[n++] = (torch_change_t){addr, size, 0};
    return n;
}

static int unmap_range(torch_ranges_t *x, unsigned dev, uint64_t addr, uint64_t size, torch_change_t *out)
{
    uint64_t end = addr + size;
    size_t at = range_find(x, dev, addr);
    if (at > 0 && x->r[at - 1].dev == dev && x->r[at - 1].base + x->r[at - 1].size > addr)
        at--; /* the segment that holds addr */
    if (at >= x->n || x->r[at].dev != dev || x->r[at].base >= end)
        return 0;
    torch_range_t r = x->r[at];
    uint64_t rend = r.base + r.size;
    int n = 0;
    if (addr <= r.base && end >= rend) {
        out[n++] = (torch_change_t){r.base, 0, 0};
        range_remove(x, at);
    } else if (addr <= r.base) { /* its head: a new base */
        out[n++] = (torch_change_t){r.base, 0, 0};
        x->r[at].base = end, x->r[at].size = rend - end;
        out[n++] = (torch_change_t){end, rend - end, 0};
    } else {
        x->r[at].size = addr - r.base; /* its tail, or its middle: the head stays at its base */
        out[n++] = (torch_change_t){r.base, addr - r.base, 1};
        if (end < rend) {
            if (range_insert(x, at + 1, dev, end, rend - end))
                return -1;
            out[n++] = (torch_change_t){end, rend - end, 0};
        }
    }
    return n;
}

int torch_ranges_apply(torch_ranges_t *x, unsigned dev, int map, uint64_t addr, uint64_t size, torch_change_t out[4])
{
    if (!size || addr + size < addr)
        return 0;
    return map ? map_range(x, dev, addr, size, out) : unmap_range(x, dev, addr, size, out);
}

int torch_ranges_has(const torch_ranges_t *x, unsigned dev, uint64_t base)
{
    size_t at = range_find(x, dev, base);
    return at < x->n && x->r[at].dev == dev && x->r[at].base == base;
}

void torch_ranges_free(torch_ranges_t *x)
{
    free(x->r);
    memset(x, 0, sizeof *x);
}
