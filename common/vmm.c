/* Growable ranges (vmm.h): which pages a block needs mapped, which pages are idle. A range's
 * blocks tile it as a segment's do; a live or pending block is mapped whole (pool.c splits a
 * range's block exactly at the request), a free block may be mapped in part. */
#include "vmm.h"

#include <stdlib.h>

#define PAGE GM_VMM_PAGE

/* Index of the page holding addr, and the first page boundary at or after addr. */
static size_t page_of(const gm_segment_t *seg, uintptr_t addr)
{
    return (addr - seg->base) / PAGE;
}

static size_t missing_pages(const gm_segment_t *seg, uintptr_t ptr, size_t n)
{
    size_t miss = 0;
    for (size_t i = page_of(seg, ptr), last = page_of(seg, ptr + n - 1); i <= last; i++)
        miss += !seg->page[i];
    return miss;
}

size_t vmm_pages_wanted(const gm_heap_t *h, size_t rounded)
{
    const gm_block_t *b = pool_best_fit(h, rounded);
    if (!b)
        return SIZE_MAX;
    return b->seg->vmm ? missing_pages(b->seg, b->ptr, rounded) : 0;
}

static void note_mapped(gm_heap_t *h, gm_segment_t *seg, size_t first, size_t n, int on)
{
    for (size_t i = first; i < first + n; i++)
        seg->page[i] = !on ? 0 : seg->page[i] ? seg->page[i] : 1; /* a token, whatever map wrote */
    if (on) {
        h->unmapped[seg->small] -= n * PAGE;
        seg->nmapped += n;
        gm_stat_add(&h->stats->reserved, n * PAGE);
        gm_stat_add(&h->stats->cached, n * PAGE);
    } else {
        h->unmapped[seg->small] += n * PAGE;
        seg->nmapped -= n;
        gm_stat_sub(&h->stats->reserved, n * PAGE);
        gm_stat_sub(&h->stats->cached, n * PAGE);
    }
}

gm_block_t *vmm_alloc(gm_heap_t *h, size_t rounded, size_t requested, vmm_map_fn map, void *arg, int *refused)
{
    *refused = 0;
    gm_block_t *b = pool_best_fit(h, rounded);
    if (!b)
        return NULL;
    gm_segment_t *seg = b->seg;
    if (seg->vmm) {
        size_t i = page_of(seg, b->ptr), last = page_of(seg, b->ptr + rounded - 1);
        while (i <= last) {
            if (seg->page[i]) {
                i++;
                continue;
            }
            size_t run = 1;
            while (i + run <= last && !seg->page[i + run])
                run++;
            if (map(arg, seg, seg->base + i * PAGE, run, &seg->page[i]) != 0) {
                for (size_t k = i; k < i + run; k++)
                    seg->page[k] = 0;
                *refused = 1;
                return NULL;
            }
            note_mapped(h, seg, i, run, 1);
            i += run;
        }
    }
    return pool_take(h, b, rounded, requested);
}

/* The idle pages of free block b: [*first, *first + n). */
static size_t idle_span(const gm_block_t *b, size_t *first)
{
    const gm_segment_t *seg = b->seg;
    uintptr_t lo = gm_round_up(b->ptr - seg->base, PAGE), hi = (b->ptr + b->size - seg->base) / PAGE * PAGE;
    *first = lo / PAGE;
    return hi > lo ? (hi - lo) / PAGE : 0;
}

static size_t mapped_in(const gm_segment_t *seg, size_t first, size_t n)
{
    size_t m = 0;
    for (size_t i = first; i < first + n; i++)
        m += seg->page[i] != 0;
    return m;
}

/* The mapping that holds mapped page i: the pages around it with its token, [*start, end). */
static size_t mapping_end(const gm_segment_t *seg, size_t i, size_t *start)
{
    uint64_t t = seg->page[i];
    size_t s = i, e = i + 1, np = seg->size / PAGE;
    while (s > 0 && seg->page[s - 1] == t)
        s--;
    while (e < np && seg->page[e] == t)
        e++;
    *start = s;
    return e;
}

/* Pages of [first, first + n) in mappings that lie wholly inside it (what can be unmapped). */
static size_t releasable_in(const gm_segment_t *seg, size_t first, size_t n)
{
    size_t pages = 0;
    for (size_t i = first; i < first + n;) {
        if (!seg->page[i]) {
            i++;
            continue;
        }
        size_t s, e = mapping_end(seg, i, &s);
        if (s >= first && e <= first + n)
            pages += e - i;
        i = e;
    }
    return pages;
}

size_t vmm_idle_bytes(const gm_heap_t *h)
{
    size_t bytes = 0;
    for (const gm_segment_t *seg = pool_segments(h); seg; seg = seg->next) {
        if (!seg->vmm || !seg->nmapped)
            continue;
        for (const gm_block_t *b = seg->first; b; b = b->next) {
            size_t first, n;
            if (b->state == GM_BLOCK_FREE && (n = idle_span(b, &first)))
                bytes += releasable_in(seg, first, n) * PAGE;
        }
    }
    return bytes;
}

typedef struct idle_block {
    uint64_t free_ns;
    gm_block_t *b;
} idle_block_t;

static int oldest_first(const void *x, const void *y)
{
    const idle_block_t *a = x, *b = y;
    if (a->free_ns != b->free_ns)
        return a->free_ns < b->free_ns ? -1 : 1;
    return a->b->ptr < b->b->ptr ? -1 : a->b->ptr > b->b->ptr;
}

/* Unmaps the mappings that lie wholly inside [first, first + n) of seg, one call each, until
 * `over` bytes went. */
static size_t unmap_span(gm_heap_t *h, gm_segment_t *seg, size_t first, size_t n, size_t over, vmm_unmap_fn unmap,
                         void *arg, unsigned *npages)
{
    size_t bytes = 0;
    for (size_t i = first; i < first + n && bytes < over;) {
        if (!seg->page[i]) {
            i++;
            continue;
        }
        size_t s, e = mapping_end(seg, i, &s);
        if (s < first || e > first + n) {
            i = e; /* shared with a block in use */
            continue;
        }
        size_t run = e - i;
        if (unmap(arg, seg, seg->base + i * PAGE, run, &seg->page[i]) == 0) {
            note_mapped(h, seg, i, run, 0);
            bytes += run * PAGE;
            *npages += (unsigned)run;
        }
        i = e;
    }
    return bytes;
}

/* Idle pages of free block b, those of `skip` only from skip_end on (where a request taking it
 * ends). */
static size_t idle_span_but(const gm_block_t *b, const gm_block_t *skip, uintptr_t skip_end, size_t *first)
{
    size_t n = idle_span(b, first);
    if (b == skip && n) {
        size_t lo = gm_round_up(skip_end - b->seg->base, PAGE) / PAGE;
        if (lo > *first) {
            n = *first + n > lo ? *first + n - lo : 0;
            *first = lo;
        }
    }
    return n;
}

/* Unmaps up to `goal` bytes of idle pages, the longest free first. */
static size_t release_idle(gm_heap_t *h, size_t goal, uint64_t idle_ns, uint64_t now, vmm_unmap_fn unmap, void *arg,
                           unsigned *npages, const gm_block_t *skip, uintptr_t skip_end)
{
    size_t n = 0, room = 0;
    idle_block_t *v = NULL;
    for (gm_segment_t *seg = pool_segments(h); seg; seg = seg->next) {
        if (!seg->vmm || !seg->nmapped)
            continue;
        for (gm_block_t *b = seg->first; b; b = b->next) {
            size_t first, span;
            if (b->state != GM_BLOCK_FREE || !(span = idle_span_but(b, skip, skip_end, &first)) ||
                !releasable_in(seg, first, span))
                continue;
            if (idle_ns && now - b->free_ns < idle_ns)
                continue;
            if (n == room) {
                size_t nroom = room ? 2 * room : 64;
                idle_block_t *m = realloc(v, nroom * sizeof *m);
                if (!m)
                    break; /* short of host memory: what is listed still goes */
                v = m;
                room = nroom;
            }
            v[n++] = (idle_block_t){b->free_ns, b};
        }
    }
    if (n)
        qsort(v, n, sizeof *v, oldest_first);
    size_t bytes = 0;
    for (size_t k = 0; k < n && bytes < goal; k++) {
        size_t first, span = idle_span_but(v[k].b, skip, skip_end, &first);
        bytes += unmap_span(h, v[k].b->seg, first, span, goal - bytes, unmap, arg, npages);
    }
    free(v);
    return bytes;
}

size_t vmm_release_idle(gm_heap_t *h, size_t keep, uint64_t idle_ns, uint64_t now, vmm_unmap_fn unmap, void *arg,
                        unsigned *npages)
{
    size_t idle = vmm_idle_bytes(h);
    return idle > keep ? release_idle(h, idle - keep, idle_ns, now, unmap, arg, npages, NULL, 0) : 0;
}

gm_block_t *vmm_alloc_within(gm_heap_t *h, size_t rounded, size_t requested, size_t budget, vmm_map_fn map,
                             vmm_unmap_fn unmap, void *arg, int *refused, unsigned *moved)
{
    const gm_block_t *b = pool_best_fit(h, rounded);
    if (b && b->seg->vmm) {
        size_t need = missing_pages(b->seg, b->ptr, rounded) * PAGE, now = h->stats->reserved.current;
        if (need && now + need > budget)
            release_idle(h, now + need - budget, 0, 0, unmap, arg, moved, b, b->ptr + rounded);
    }
    return vmm_alloc(h, rounded, requested, map, arg, refused);
}

const char *vmm_check(const gm_heap_t *h)
{
    for (const gm_segment_t *seg = pool_segments(h); seg; seg = seg->next) {
        if (!seg->vmm)
            continue;
        if (mapped_in(seg, 0, seg->size / PAGE) != seg->nmapped)
            return "a range's mapped page count is wrong";
        for (const gm_block_t *b = seg->first; b; b = b->next)
            if (b->state != GM_BLOCK_FREE && missing_pages(seg, b->ptr, b->size))
                return "a live or pending block of a range is not mapped whole";
    }
    return NULL;
}
