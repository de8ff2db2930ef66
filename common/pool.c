/* Segments, blocks and best-fit bins. Small requests (<= 1 MiB) live in 2 MiB segments apart
 * from large ones, so that long-lived small tensors do not pin large segments. Blocks merge
 * only with free neighbours of their own segment; only wholly free segments leave the pool. */
#include "pool.h"

#include <stdlib.h>
#include <string.h>

#define GM_LARGE 0
#define GM_SMALL 1

size_t pool_segment_size(size_t rounded)
{
    if (pool_is_small(rounded))
        return GM_SMALL_SEGMENT;
    if (rounded < GM_MID_REQUEST)
        return GM_MID_SEGMENT;
    return gm_round_up(rounded, GM_LARGE_ROUND);
}

/* Exact bins for 512 B .. 1 MiB, then 16 bins per power of two: a block's bin never holds a
 * block smaller than the bin before it. */
GM_INLINE uint32_t bin_of(size_t size)
{
    uint64_t units = size / GM_ROUND;
    if (units <= GM_EXACT_BINS)
        return (uint32_t)(units - 1);
    unsigned octave = 63u - (unsigned)__builtin_clzll(units); /* >= 11 */
    unsigned sub = (unsigned)(units >> (octave - 4)) & (GM_SUB_BINS - 1);
    uint32_t bin = GM_EXACT_BINS + (octave - 11) * GM_SUB_BINS + sub;
    return bin < GM_NBINS ? bin : GM_NBINS - 1;
}

static int bin_is_exact(uint32_t bin)
{
    return bin < GM_EXACT_BINS;
}

#define SLAB_BLOCKS 63

/* Block structs come in slabs (the first word links the heap's slabs), so that a split on the
 * hot path does not call malloc. */
typedef struct slab {
    struct slab *next;
    gm_block_t blocks[SLAB_BLOCKS];
} slab_t;

GM_INLINE gm_block_t *block_new(gm_heap_t *heap)
{
    gm_block_t *b = heap->spare;
    if (!b) {
        slab_t *sl = malloc(sizeof *sl);
        if (!sl)
            return NULL;
        sl->next = heap->slabs;
        heap->slabs = sl;
        for (int i = SLAB_BLOCKS - 1; i >= 0; i--) {
            sl->blocks[i].fl.next = heap->spare;
            heap->spare = &sl->blocks[i];
        }
        b = heap->spare;
    }
    heap->spare = b->fl.next;
    if (heap->spare)
        __builtin_prefetch(heap->spare, 1); /* the next split's struct, often out of cache */
    /* Field by field: a memset of the whole struct is a `rep stos`, slower on this hot path;
     * the live map's handle (hh) is written whole when the block enters a map. */
    b->ptr = 0;
    b->size = b->requested = 0;
    b->seg = NULL;
    b->prev = b->next = NULL;
    b->fl = b->pl = (gm_link_t){NULL, NULL, 0};
    b->fence_seq = 0;
    b->state = b->ipc = b->kind = 0;
    b->site = 0;
    b->tc = 0;
    b->tc_owner = NULL;
    return b;
}

static void block_recycle(gm_heap_t *heap, gm_block_t *b)
{
    b->fl.next = heap->spare;
    heap->spare = b;
}

/* Bin lists are threaded through a block's free links (fl) or, for pending blocks, its pending
 * links (pl): the same code files both. */
static inline gm_link_t *lk(gm_block_t *b, int pend)
{
    return pend ? &b->pl : &b->fl;
}

GM_INLINE void bin_insert_links(gm_bins_t *bins, gm_block_t *b, int pend)
{
    uint32_t bin = bin_of(b->size);
    lk(b, pend)->bin = bin;
    gm_block_t **link = &bins->head[bin];
    gm_block_t *prev = NULL;
    if (!bin_is_exact(bin)) {
        /* Sorted by (size, address): the first block that fits is the best fit. */
        while (*link && ((*link)->size < b->size || ((*link)->size == b->size && (*link)->ptr < b->ptr))) {
            prev = *link;
            link = &lk(*link, pend)->next;
        }
    }
    lk(b, pend)->next = *link;
    lk(b, pend)->prev = prev;
    if (*link)
        lk(*link, pend)->prev = b;
    *link = b;
    bins->map[bin / 64] |= 1ull << (bin % 64);
    bins->summary |= 1ull << (bin / 64);
}

GM_INLINE void bin_remove_links(gm_bins_t *bins, gm_block_t *b, int pend)
{
    gm_link_t *l = lk(b, pend);
    if (l->prev)
        lk(l->prev, pend)->next = l->next;
    else
        bins->head[l->bin] = l->next;
    if (l->next)
        lk(l->next, pend)->prev = l->prev;
    if (!bins->head[l->bin]) {
        bins->map[l->bin / 64] &= ~(1ull << (l->bin % 64));
        if (!bins->map[l->bin / 64])
            bins->summary &= ~(1ull << (l->bin / 64));
    }
    l->next = l->prev = NULL;
}

GM_INLINE void bin_insert(gm_bins_t *bins, gm_block_t *b)
{
    bin_insert_links(bins, b, 0);
}

GM_INLINE void bin_remove(gm_bins_t *bins, gm_block_t *b)
{
    bin_remove_links(bins, b, 0);
}

/* First non-empty bin at or after `from`, or GM_NBINS. */
GM_INLINE uint32_t bin_next(const gm_bins_t *bins, uint32_t from)
{
    if (from >= GM_NBINS)
        return GM_NBINS;
    uint32_t w = from / 64;
    uint64_t word = bins->map[w] & (~0ull << (from % 64));
    if (word)
        return w * 64 + (uint32_t)__builtin_ctzll(word);
    uint64_t rest = w + 1 < 64 ? bins->summary & (~0ull << (w + 1)) : 0;
    if (!rest)
        return GM_NBINS;
    w = (uint32_t)__builtin_ctzll(rest);
    return w * 64 + (uint32_t)__builtin_ctzll(bins->map[w]);
}

/* The smallest free block >= size that the max-split rules allow. */
GM_INLINE gm_block_t *bins_best_fit_links(const gm_bins_t *bins, size_t size, size_t max_split, int pend)
{
    for (uint32_t bin = bin_next(bins, bin_of(size)); bin < GM_NBINS; bin = bin_next(bins, bin + 1)) {
        for (gm_block_t *b = bins->head[bin]; b; b = lk(b, pend)->next) {
            if (b->size < size)
                continue;
            if (max_split) {
                /* Blocks at or above max_split serve only requests about their size. */
                if (size < max_split && b->size >= max_split)
                    return NULL;
                if (size >= max_split && b->size >= size + GM_OVERSIZE_SLACK)
                    return NULL;
            }
            return b;
        }
    }
    return NULL;
}

GM_INLINE gm_block_t *bins_best_fit(const gm_bins_t *bins, size_t size, size_t max_split)
{
    return bins_best_fit_links(bins, size, max_split, 0);
}

void pool_init(gm_heap_t *heap, gm_pool_stats_t *stats, void *owner)
{
    memset(heap, 0, sizeof *heap);
    heap->stats = stats;
    heap->owner = owner;
}

static void segment_free(gm_segment_t *seg)
{
    free(seg->page);
    free(seg);
}

static void segment_free_blocks(gm_heap_t *heap, gm_segment_t *seg)
{
    gm_block_t *b = seg->first;
    while (b) {
        gm_block_t *next = b->next;
        block_recycle(heap, b);
        b = next;
    }
}

void pool_destroy(gm_heap_t *heap)
{
    gm_segment_t *seg = heap->segments;
    while (seg) {
        gm_segment_t *next = seg->next;
        segment_free(seg);
        seg = next;
    }
    slab_t *sl = heap->slabs;
    while (sl) {
        slab_t *next = sl->next;
        free(sl);
        sl = next;
    }
    heap->segments = NULL;
    heap->spare = NULL;
    heap->slabs = NULL;
}

void pool_reset(gm_heap_t *heap)
{
    for (gm_segment_t *seg = heap->segments, *next; seg; seg = next) {
        next = seg->next;
        segment_free_blocks(heap, seg);
        segment_free(seg);
    }
    gm_pool_stats_t *stats = heap->stats;
    void *owner = heap->owner, *slabs = heap->slabs;
    gm_block_t *spare = heap->spare;
    memset(heap, 0, sizeof *heap);
    heap->stats = stats;
    heap->owner = owner;
    heap->slabs = slabs;
    heap->spare = spare;
}

void pool_adopt_storage(gm_heap_t *to, gm_heap_t *from)
{
    if (from->slabs) {
        slab_t *last = from->slabs;
        while (last->next)
            last = last->next;
        last->next = to->slabs;
        to->slabs = from->slabs;
        from->slabs = NULL;
    }
    while (from->spare) {
        gm_block_t *b = from->spare;
        from->spare = b->fl.next;
        block_recycle(to, b);
    }
}

GM_INLINE int class_of(const gm_block_t *b)
{
    return b->seg->small ? GM_SMALL : GM_LARGE;
}

static void pending_append(gm_heap_t *heap, gm_block_t *b)
{
    b->fl.next = NULL;
    b->fl.prev = heap->pending_tail;
    if (heap->pending_tail)
        heap->pending_tail->fl.next = b;
    else
        heap->pending_head = b;
    heap->pending_tail = b;
    /* Keep the FIFO ordered by fence: a block may wait longer than it must, never shorter. */
    if (b->fl.prev && b->fence_seq < b->fl.prev->fence_seq)
        b->fence_seq = b->fl.prev->fence_seq;
    heap->pending_bytes[class_of(b)] += b->size;
    bin_insert_links(&heap->pbins[class_of(b)], b, 1);
}

/* Takes b out of the pending FIFO and the pending bins. */
static void pending_unlink(gm_heap_t *heap, gm_block_t *b)
{
    if (b->fl.prev)
        b->fl.prev->fl.next = b->fl.next;
    else
        heap->pending_head = b->fl.next;
    if (b->fl.next)
        b->fl.next->fl.prev = b->fl.prev;
    else
        heap->pending_tail = b->fl.prev;
    b->fl.next = b->fl.prev = NULL;
    heap->pending_bytes[class_of(b)] -= b->size;
    bin_remove_links(&heap->pbins[class_of(b)], b, 1);
}

uint64_t pool_better_pending(const gm_heap_t *heap, size_t rounded)
{
    if (pool_is_small(rounded) || !heap->pending_bytes[GM_LARGE])
        return 0;
    const gm_block_t *p = bins_best_fit_links(&heap->pbins[GM_LARGE], rounded, heap->max_split, 1);
    if (!p)
        return 0;
    const gm_block_t *f = bins_best_fit(&heap->bins[GM_LARGE], rounded, heap->max_split);
    if (f && (f->size <= p->size || f->size - rounded <= GM_LARGE_SPLIT_MIN))
        return 0;
    return p->fence_seq;
}

/* Takes free block b for a rounded request, splitting off the rest when it is worth keeping.
 * Requests at or above max_split never split their block (PyTorch's rule). */
GM_INLINE gm_block_t *take(gm_heap_t *heap, gm_block_t *b, size_t rounded, size_t requested)
{
    /* A range's block must be split exactly (what is left may not be mapped): without a struct
     * for the rest, nothing is taken. */
    if (GM_UNLIKELY(b->seg->vmm) && b->size - rounded >= GM_ROUND && !heap->spare) {
        gm_block_t *r = block_new(heap);
        if (!r)
            return NULL;
        block_recycle(heap, r);
    }
    int cls = class_of(b);
    gm_bins_t *bins = &heap->bins[cls];
    bin_remove(bins, b);
    heap->free_bytes[cls] -= b->size;
    size_t rest = b->size - rounded;
    int split = cls == GM_SMALL ? rest >= GM_ROUND : rest > GM_LARGE_SPLIT_MIN;
    if (split && cls == GM_LARGE && heap->max_split && rounded >= heap->max_split)
        split = 0;
    if (GM_UNLIKELY(b->seg->vmm))
        split = rest >= GM_ROUND; /* a live block of a range is exactly what was mapped for it */
    if (split) {
        gm_block_t *r = block_new(heap);
        if (r) {
            r->ptr = b->ptr + rounded;
            r->size = rest;
            r->seg = b->seg;
            r->prev = b;
            r->next = b->next;
            if (b->next)
                b->next->prev = r;
            b->next = r;
            b->size = rounded;
            r->state = GM_BLOCK_FREE;
            r->free_ns = b->free_ns;
            bin_insert(bins, r);
            heap->free_bytes[cls] += rest;
        }
    }
    b->state = GM_BLOCK_LIVE;
    b->fence_seq = 0; /* its free_ns, while it was free */
    b->requested = requested;
    b->seg->free_since_ns = 0;
    gm_stat_sub(&heap->stats->cached, b->size);
    gm_stat_add(&heap->stats->allocated, b->size);
    gm_stat_add(&heap->stats->requested, requested);
    pool_stats_note(heap->stats);
    return b;
}

gm_block_t *pool_best_fit(const gm_heap_t *heap, size_t rounded)
{
    int cls = pool_is_small(rounded) ? GM_SMALL : GM_LARGE;
    return bins_best_fit(&heap->bins[cls], rounded, cls == GM_LARGE ? heap->max_split : 0);
}

gm_block_t *pool_alloc(gm_heap_t *heap, size_t rounded, size_t requested)
{
    int cls = pool_is_small(rounded) ? GM_SMALL : GM_LARGE;
    size_t max_split = cls == GM_LARGE ? heap->max_split : 0;
    gm_block_t *b = bins_best_fit(&heap->bins[cls], rounded, max_split);
    if (GM_UNLIKELY(b && b->seg->vmm) && !pool_pages_mapped(b->seg, b->ptr, rounded))
        return NULL;
    return b ? take(heap, b, rounded, requested) : NULL;
}

gm_block_t *pool_take(gm_heap_t *heap, gm_block_t *b, size_t rounded, size_t requested)
{
    return take(heap, b, rounded, requested);
}

gm_block_t *pool_alloc_fresh(gm_heap_t *heap, gm_segment_t *seg, size_t rounded, size_t requested)
{
    return take(heap, seg->first, rounded, requested);
}

/* A segment of one free block; a growable range (vmm) counts as reserved only what it maps. */
static gm_segment_t *add_segment(gm_heap_t *heap, uintptr_t base, size_t size, int small, int vmm, uint64_t now_ns)
{
    gm_segment_t *seg = calloc(1, sizeof *seg);
    gm_block_t *b = block_new(heap);
    if (seg && vmm && !(seg->page = calloc(size / GM_VMM_PAGE, sizeof *seg->page)))
        b = (block_recycle(heap, b), NULL);
    if (!seg || !b) {
        if (seg)
            free(seg->page);
        free(seg);
        if (b)
            block_recycle(heap, b);
        return NULL;
    }
    seg->vmm = (uint8_t)vmm;
    seg->base = base;
    seg->size = size;
    seg->heap = heap;
    seg->small = (uint8_t)small;
    seg->first = b;
    seg->free_since_ns = now_ns;
    seg->next = heap->segments;
    if (heap->segments)
        heap->segments->prev = seg;
    heap->segments = seg;
    heap->nsegments++;
    b->ptr = base;
    b->size = size;
    b->seg = seg;
    b->state = GM_BLOCK_FREE;
    b->free_ns = now_ns;
    bin_insert(&heap->bins[small ? GM_SMALL : GM_LARGE], b);
    heap->free_bytes[small ? GM_SMALL : GM_LARGE] += size;
    if (!vmm) {
        gm_stat_add(&heap->stats->reserved, size);
        gm_stat_add(&heap->stats->cached, size);
    } else {
        heap->unmapped[small ? GM_SMALL : GM_LARGE] += size;
    }
    return seg;
}

gm_segment_t *pool_add_segment(gm_heap_t *heap, uintptr_t base, size_t size, int small, uint64_t now_ns)
{
    return add_segment(heap, base, size, small, 0, now_ns);
}

gm_segment_t *pool_add_range(gm_heap_t *heap, uintptr_t base, size_t size, int small, uint64_t now_ns)
{
    if (base % GM_VMM_PAGE || size % GM_VMM_PAGE || !size)
        return NULL;
    return add_segment(heap, base, size, small, 1, now_ns);
}

/* Makes b (not in any list) FREE: merges it with free neighbours and files it in a bin. */
static void make_free(gm_heap_t *heap, gm_block_t *b, uint64_t now_ns)
{
    int cls = class_of(b);
    gm_bins_t *bins = &heap->bins[cls];
    heap->free_bytes[cls] += b->size;
    gm_block_t *p = b->prev;
    if (p && p->state == GM_BLOCK_FREE) {
        bin_remove(bins, p);
        p->size += b->size;
        p->next = b->next;
        if (b->next)
            b->next->prev = p;
        block_recycle(heap, b);
        b = p;
    }
    gm_block_t *n = b->next;
    if (n && n->state == GM_BLOCK_FREE) {
        bin_remove(bins, n);
        b->size += n->size;
        b->next = n->next;
        if (n->next)
            n->next->prev = b;
        block_recycle(heap, n);
    }
    b->state = GM_BLOCK_FREE;
    b->requested = 0;
    b->ipc = 0;
    b->free_ns = now_ns;
    bin_insert(bins, b);
    if (b->size == b->seg->size)
        b->seg->free_since_ns = now_ns ? now_ns : 1;
}

static void leave_live(gm_heap_t *heap, gm_block_t *b)
{
    gm_stat_sub(&heap->stats->allocated, b->size);
    gm_stat_sub(&heap->stats->requested, b->requested);
    pool_stats_note(heap->stats);
}

void pool_free_block(gm_heap_t *heap, gm_block_t *b, uint64_t now_ns)
{
    leave_live(heap, b);
    gm_stat_add(&heap->stats->cached, b->size);
    make_free(heap, b, now_ns);
}

void pool_defer_block(gm_heap_t *heap, gm_block_t *b, uint64_t seq)
{
    leave_live(heap, b);
    gm_stat_add(&heap->stats->pending, b->size);
    b->state = GM_BLOCK_PENDING;
    b->fence_seq = seq;
    pending_append(heap, b);
}

void pool_hold_block(gm_heap_t *heap, gm_block_t *b)
{
    leave_live(heap, b);
    gm_stat_add(&heap->stats->pending, b->size);
    b->state = GM_BLOCK_HELD;
    b->seg->ipc = 1;
}

size_t pool_release_pending(gm_heap_t *heap, uint64_t done, uint64_t now_ns)
{
    size_t bytes = 0;
    gm_block_t *b;
    while ((b = heap->pending_head) && b->fence_seq <= done) {
        pending_unlink(heap, b);
        gm_stat_sub(&heap->stats->pending, b->size);
        gm_stat_add(&heap->stats->cached, b->size);
        bytes += b->size;
        make_free(heap, b, now_ns);
    }
    return bytes;
}

int pool_segment_has_pending(const gm_segment_t *seg)
{
    for (const gm_block_t *b = seg->first; b; b = b->next)
        if (b->state == GM_BLOCK_PENDING)
            return 1;
    return 0;
}

int pool_segment_is_free(const gm_segment_t *seg)
{
    if (seg->vmm)
        return 0;
    for (const gm_block_t *b = seg->first; b; b = b->next)
        if (b->state == GM_BLOCK_LIVE || b->state == GM_BLOCK_PENDING)
            return 0;
    return 1;
}

void pool_remove_segment(gm_heap_t *heap, gm_segment_t *seg)
{
    int cls = seg->small ? GM_SMALL : GM_LARGE;
    for (gm_block_t *b = seg->first; b; b = b->next) {
        if (b->state == GM_BLOCK_FREE) {
            bin_remove(&heap->bins[cls], b);
            heap->free_bytes[cls] -= b->size;
            if (!seg->vmm) /* a range's free bytes count as cached only while mapped (none now) */
                gm_stat_sub(&heap->stats->cached, b->size);
        } else { /* HELD */
            gm_stat_sub(&heap->stats->pending, b->size);
        }
    }
    if (!seg->vmm)
        gm_stat_sub(&heap->stats->reserved, seg->size);
    else
        heap->unmapped[cls] -= seg->size; /* the caller unmapped every page */
    if (seg->prev)
        seg->prev->next = seg->next;
    else
        heap->segments = seg->next;
    if (seg->next)
        seg->next->prev = seg->prev;
    heap->nsegments--;
    segment_free_blocks(heap, seg);
    segment_free(seg);
}

void pool_move_segment(gm_heap_t *from, gm_heap_t *to, gm_segment_t *seg, uint64_t defer_seq)
{
    int cls = seg->small ? GM_SMALL : GM_LARGE;
    if (seg->prev)
        seg->prev->next = seg->next;
    else
        from->segments = seg->next;
    if (seg->next)
        seg->next->prev = seg->prev;
    from->nsegments--;
    seg->prev = NULL;
    seg->next = to->segments;
    if (to->segments)
        to->segments->prev = seg;
    to->segments = seg;
    to->nsegments++;
    seg->heap = to;
    for (gm_block_t *b = seg->first; b; b = b->next) {
        if (b->state == GM_BLOCK_FREE) {
            bin_remove(&from->bins[cls], b);
            from->free_bytes[cls] -= b->size;
            if (defer_seq) {
                gm_stat_sub(&to->stats->cached, b->size);
                gm_stat_add(&to->stats->pending, b->size);
                b->state = GM_BLOCK_PENDING;
                b->fence_seq = defer_seq;
                pending_append(to, b);
            } else {
                bin_insert(&to->bins[cls], b);
                to->free_bytes[cls] += b->size;
            }
        } else if (b->state == GM_BLOCK_PENDING) {
            pending_unlink(from, b);
            pending_append(to, b);
        }
    }
}

size_t pool_whole_free_bytes(const gm_heap_t *heap)
{
    size_t whole = 0;
    for (const gm_segment_t *seg = heap->segments; seg; seg = seg->next)
        if (pool_segment_is_free(seg))
            whole += seg->size;
    return whole;
}

gm_segment_t *pool_oldest_free_segment(const gm_heap_t *heap)
{
    gm_segment_t *oldest = NULL;
    for (gm_segment_t *seg = heap->segments; seg; seg = seg->next)
        if (pool_segment_is_free(seg) && (!oldest || seg->free_since_ns < oldest->free_since_ns))
            oldest = seg;
    return oldest;
}

gm_segment_t *pool_best_free_segment(const gm_heap_t *heap, size_t rounded)
{
    int small = pool_is_small(rounded);
    gm_segment_t *best = NULL;
    for (gm_segment_t *seg = heap->segments; seg; seg = seg->next)
        if (seg->small == small && !seg->ipc && seg->size >= rounded && pool_segment_is_free(seg) &&
            (!best || seg->size < best->size))
            best = seg;
    return best;
}

gm_segment_t *pool_find_segment(const gm_heap_t *heap, uintptr_t addr)
{
    for (gm_segment_t *seg = heap->segments; seg; seg = seg->next)
        if (addr >= seg->base && addr - seg->base < seg->size)
            return seg;
    return NULL;
}

gm_block_t *pool_segment_find_block(const gm_segment_t *seg, uintptr_t addr)
{
    for (gm_block_t *b = seg->first; b; b = b->next)
        if (addr >= b->ptr && addr - b->ptr < b->size)
            return b;
    return NULL;
}

/* The bytes of free block b of a range that lie in mapped pages (what it holds of the cache). */
static size_t mapped_bytes(const gm_block_t *b)
{
    const gm_segment_t *seg = b->seg;
    size_t bytes = 0;
    for (uintptr_t at = b->ptr, end = b->ptr + b->size; at < end;) {
        size_t i = (at - seg->base) / GM_VMM_PAGE;
        uintptr_t next = seg->base + (i + 1) * GM_VMM_PAGE;
        if (next > end)
            next = end;
        if (seg->page[i])
            bytes += next - at;
        at = next;
    }
    return bytes;
}

void pool_free_summary(const gm_heap_t *heap, size_t *largest, size_t *count)
{
    size_t big = 0, n = 0;
    for (int cls = 0; cls < 2; cls++) {
        const gm_bins_t *bins = &heap->bins[cls];
        for (uint32_t bin = bin_next(bins, 0); bin < GM_NBINS; bin = bin_next(bins, bin + 1))
            for (const gm_block_t *b = bins->head[bin]; b; b = b->fl.next) {
                size_t size = b->seg->vmm ? mapped_bytes(b) : b->size;
                if (!size)
                    continue;
                n++;
                if (size > big)
                    big = size;
            }
    }
    *largest = big;
    *count = n;
}

const char *pool_check(const gm_heap_t *heap)
{
    size_t free_bytes[2] = {0, 0}, pending_bytes[2] = {0, 0}, nfree = 0, nseg = 0;
    for (const gm_segment_t *seg = heap->segments; seg; seg = seg->next) {
        nseg++;
        if (seg->heap != heap)
            return "segment points to another heap";
        uintptr_t at = seg->base;
        const gm_block_t *prev = NULL;
        for (const gm_block_t *b = seg->first; b; b = b->next) {
            if (b->seg != seg)
                return "block points to another segment";
            if (b->prev != prev)
                return "broken prev link";
            if (b->ptr != at)
                return "blocks do not tile their segment";
            if (b->size == 0 || b->size % GM_ROUND || b->ptr % GM_ROUND)
                return "block size or address not a multiple of 512";
            if (b->state == GM_BLOCK_FREE) {
                if (prev && prev->state == GM_BLOCK_FREE)
                    return "two free neighbours not merged";
                free_bytes[seg->small] += b->size;
                nfree++;
            } else if (b->state == GM_BLOCK_PENDING) {
                pending_bytes[seg->small] += b->size;
            }
            at += b->size;
            prev = b;
        }
        if (at != seg->base + seg->size)
            return "blocks do not cover their segment";
    }
    if (nseg != heap->nsegments)
        return "segment count wrong";
    size_t unmapped[2] = {0, 0};
    for (const gm_segment_t *seg = heap->segments; seg; seg = seg->next)
        if (seg->vmm)
            unmapped[seg->small] += seg->size - seg->nmapped * GM_VMM_PAGE;
    if (unmapped[0] != heap->unmapped[0] || unmapped[1] != heap->unmapped[1])
        return "unmapped byte count wrong";
    size_t nbinned = 0;
    for (int cls = 0; cls < 2; cls++) {
        if (free_bytes[cls] != heap->free_bytes[cls])
            return "free byte count wrong";
        if (pending_bytes[cls] != heap->pending_bytes[cls])
            return "pending byte count wrong";
        const gm_bins_t *bins = &heap->bins[cls];
        for (uint32_t bin = 0; bin < GM_NBINS; bin++) {
            int mapped = (bins->map[bin / 64] >> (bin % 64)) & 1;
            if (mapped != (bins->head[bin] != NULL))
                return "bin bitmap out of date";
            size_t last = 0;
            for (const gm_block_t *b = bins->head[bin]; b; b = b->fl.next) {
                if (b->state != GM_BLOCK_FREE)
                    return "non-free block in a bin";
                if (b->seg->small != cls)
                    return "block in the wrong class of bins";
                if (bin_of(b->size) != bin || b->fl.bin != bin)
                    return "block in the wrong bin";
                if (b->size < last)
                    return "bin not sorted by size";
                last = b->size;
                nbinned++;
            }
        }
    }
    if (nbinned != nfree)
        return "free blocks missing from the bins";
    uint64_t seq = 0;
    size_t npending = 0;
    for (const gm_block_t *b = heap->pending_head; b; b = b->fl.next) {
        if (b->state != GM_BLOCK_PENDING)
            return "non-pending block in the pending list";
        if (b->fence_seq < seq)
            return "pending list out of fence order";
        seq = b->fence_seq;
        npending++;
    }
    size_t nbinned_pending = 0;
    for (int cls = 0; cls < 2; cls++) {
        const gm_bins_t *bins = &heap->pbins[cls];
        for (uint32_t bin = 0; bin < GM_NBINS; bin++) {
            if (((bins->map[bin / 64] >> (bin % 64)) & 1) != (bins->head[bin] != NULL))
                return "pending bin bitmap out of date";
            for (const gm_block_t *b = bins->head[bin]; b; b = b->pl.next) {
                if (b->state != GM_BLOCK_PENDING)
                    return "non-pending block in a pending bin";
                if (b->seg->small != cls || b->pl.bin != bin)
                    return "pending block in the wrong bin";
                nbinned_pending++;
            }
        }
    }
    if (nbinned_pending != npending)
        return "pending blocks missing from the pending bins";
    return NULL;
}
