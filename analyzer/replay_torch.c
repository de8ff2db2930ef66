/* The model of PyTorch's caching allocator run over a keep-mode log's tensors (replay_torch.h):
 * the same decisions PyTorch makes, in the same order, so that under the log's own settings it
 * reserves what PyTorch reserved, and under others what PyTorch would have. Addresses are its
 * own (segments laid out in order), so ties between equal free blocks may fall otherwise than in
 * the recording. Work is bounded by the events and the free blocks; it never trusts an id. */
#include "replay_torch.h"
#include "replay_torch_set.h"
#include "table.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RT_MIN_BLOCK 512ull                 /* every block a multiple of it */
#define RT_SMALL_SIZE (1ull << 20)          /* requests up to it go to the small pool */
#define RT_SMALL_BUFFER (2ull << 20)        /* the small pool's segments, and its expandable pages */
#define RT_LARGE_BUFFER (20ull << 20)       /* 1-10 MiB requests' segments, the large pool's pages */
#define RT_MIN_LARGE_ALLOC (10ull << 20)
#define RT_ROUND_LARGE (2ull << 20)
#define RT_SYNTH_BASE (1ull << 47) /* above the addresses a process sees: the model's own */
#define RT_MAX_BYTES (1ull << 50)           /* a request or device beyond it is a damaged log's */

typedef struct rt_pool {     /* one stream's small or large pool */
    rt_set_t free, unmapped;
    int small;
} rt_pool_t;

typedef struct rt_sim {
    const rt_log_t *log;
    rt_conf_t c;
    uint64_t max_split;      /* UINT64_MAX: none */
    rt_pool_t *pools;
    unsigned npools;
    rt_blk_t **tensor;       /* by id */
    uint64_t reserved, allocated, cap, limit;
    uint64_t next_addr;
    size_t next_seg;         /* log->seg_*: the recorded segments before it are taken or passed */
    uint8_t *seg_taken;      /* by index of log->seg_*: given to a segment of the model */
    table_map_t bases;       /* the model's classic segments by base address, live */
    uint64_t gc_calls[2];    /* get_free_block calls, large [0] and small [1] */
    int nomem;               /* the model's own malloc failed: the result is incomplete */
    rt_result_t res;
} rt_sim_t;

/* ---- the ordered sets ----------------------------------------------------------------------- */

/* The ordered set's calls, an out-of-memory noted (the run ends there). */
static int set_insert(rt_sim_t *m, rt_set_t *s, rt_blk_t *b)
{
    if (rt_set_insert(s, b) == 0)
        return 0;
    m->nomem = 1;
    return -1;
}

static rt_blk_t **set_list(rt_sim_t *m, const rt_set_t *s, size_t *n)
{
    rt_blk_t **out = rt_set_list(s, n);
    if (s->n && !out)
        m->nomem = 1;
    return out;
}

static rt_set_t *set_of(rt_sim_t *m, const rt_blk_t *b)
{
    return b->mapped ? &m->pools[b->pool].free : &m->pools[b->pool].unmapped;
}

/* A block becomes free (mapped) or unmapped: into its set, its age counted from now. */
static void pool_put(rt_sim_t *m, rt_blk_t *b)
{
    b->gc_base = m->gc_calls[m->pools[b->pool].small];
    set_insert(m, set_of(m, b), b);
}

static rt_blk_t *blk_new(rt_sim_t *m, uint64_t addr, uint64_t size, uint32_t pool)
{
    rt_blk_t *b = calloc(1, sizeof *b);
    if (!b) {
        m->nomem = 1;
        return NULL;
    }
    b->addr = addr, b->size = size, b->pool = pool, b->mapped = 1;
    return b;
}

/* ---- PyTorch's sizes -------------------------------------------------------------------------- */

static unsigned log2_floor(uint64_t v)
{
    return 63u - (unsigned)__builtin_clzll(v);
}

uint64_t replay_torch_round(uint64_t size, unsigned divisions)
{
    if (size < RT_MIN_BLOCK)
        return RT_MIN_BLOCK;
    if (divisions > 1 && size > RT_MIN_BLOCK * divisions) { /* one division: 512-byte steps, as PyTorch */
        /* Up to the next of `divisions` equal steps between two powers of two. */
        if (!(size & (size - 1)))
            return size;
        uint64_t floor2 = 1ull << log2_floor(size);
        uint64_t step = floor2 >> log2_floor(divisions);
        if (!step)
            return floor2 << 1;
        uint64_t down = size & ~(step - 1);
        return down == size ? size : down + step;
    }
    return (size + RT_MIN_BLOCK - 1) / RT_MIN_BLOCK * RT_MIN_BLOCK;
}

static uint64_t alloc_size(uint64_t rounded)
{
    if (rounded <= RT_SMALL_SIZE)
        return RT_SMALL_BUFFER;
    if (rounded < RT_MIN_LARGE_ALLOC)
        return RT_LARGE_BUFFER;
    return (rounded + RT_ROUND_LARGE - 1) / RT_ROUND_LARGE * RT_ROUND_LARGE;
}

static void reserve(rt_sim_t *m, uint64_t bytes)
{
    m->reserved += bytes;
    m->res.segments++;
    if (m->reserved > m->res.peak_reserved)
        m->res.peak_reserved = m->reserved;
}

/* ---- merging, splitting, releasing ----------------------------------------------------------- */

/* Joins src into dst when src is free and mapped alike (PyTorch's try_merge_blocks). */
static void try_merge(rt_sim_t *m, rt_blk_t *dst, rt_blk_t *src)
{
    if (!src || src->allocated || src->mapped != dst->mapped)
        return;
    rt_set_erase(set_of(m, src), src);
    if (dst->prev == src) {
        dst->addr = src->addr;
        dst->prev = src->prev;
        if (dst->prev)
            dst->prev->next = dst;
    } else {
        dst->next = src->next;
        if (dst->next)
            dst->next->prev = dst;
    }
    dst->size += src->size;
    free(src);
}

static void release_block(rt_sim_t *m, rt_blk_t *b)
{
    uint64_t was;
    table_map_del(&m->bases, b->addr, &was);
    rt_set_erase(&m->pools[b->pool].free, b);
    m->reserved -= b->size;
    free(b);
}

static uint64_t page_of(const rt_sim_t *m, const rt_blk_t *b)
{
    return m->pools[b->pool].small ? RT_SMALL_BUFFER : RT_LARGE_BUFFER;
}

/* Gives back the pages wholly inside a free block of an expandable segment; the free ends stay. */
static void unmap_block(rt_sim_t *m, rt_blk_t *b)
{
    uint64_t pg = page_of(m, b), off = b->addr - b->seg;
    uint64_t lo = b->seg + (off + pg - 1) / pg * pg, hi = b->seg + (off + b->size) / pg * pg;
    if (hi <= lo)
        return;
    rt_set_erase(&m->pools[b->pool].free, b);
    if (lo > b->addr) {
        rt_blk_t *f = blk_new(m, b->addr, lo - b->addr, b->pool);
        if (!f) { /* out of memory: the block stays as it was (the run ends there) */
            pool_put(m, b);
            return;
        }
        f->exp = 1, f->seg = b->seg;
        f->prev = b->prev, f->next = b;
        if (b->prev)
            b->prev->next = f;
        b->prev = f;
        pool_put(m, f);
    }
    if (b->addr + b->size > hi) {
        rt_blk_t *f = blk_new(m, hi, b->addr + b->size - hi, b->pool);
        if (!f) {
            b->size -= lo - b->addr; /* less what the first part took */
            b->addr = lo;
            pool_put(m, b);
            return;
        }
        f->exp = 1, f->seg = b->seg;
        f->next = b->next, f->prev = b;
        if (b->next)
            b->next->prev = f;
        b->next = f;
        pool_put(m, f);
    }
    b->addr = lo, b->size = hi - lo, b->mapped = 0;
    m->reserved -= hi - lo;
    try_merge(m, b, b->prev);
    try_merge(m, b, b->next);
    if (!b->prev && !b->next) { /* the whole segment unmapped: its range goes too */
        free(b);
        return;
    }
    pool_put(m, b);
}

/* Every cached block that is a whole segment back to the driver, every free page unmapped
 * (PyTorch's release_cached_blocks: empty_cache, and the last step of its OOM retry). */
static void release_cached(rt_sim_t *m)
{
    for (unsigned p = 0; p < m->npools; p++) {
        size_t n;
        rt_blk_t **snap = set_list(m, &m->pools[p].free, &n);
        for (size_t i = 0; i < n; i++) {
            if (snap[i]->exp)
                unmap_block(m, snap[i]);
            else if (!snap[i]->prev && !snap[i]->next)
                release_block(m, snap[i]);
        }
        free(snap);
    }
}

/* Oversize blocks (max_split_size_mb) back to the driver, enough for the request: the one that
 * fits, else the largest down (release_available_cached_blocks). */
static int release_available(rt_sim_t *m, rt_pool_t *pool, uint64_t rounded)
{
    if (m->max_split == UINT64_MAX || m->c.expandable)
        return 0;
    rt_set_t *s = &pool->free;
    uint64_t key = rounded < m->max_split ? m->max_split : rounded;
    rt_blk_t *b = rt_set_get(s, rt_set_lower(s, key, 0));
    if (b) {
        release_block(m, b);
        return 1;
    }
    uint64_t released = 0;
    while ((b = rt_set_last(s)) && released < key && b->size >= m->max_split) {
        released += b->size;
        release_block(m, b);
    }
    return released >= key;
}

/* garbage_collection_threshold: above the fraction of the cap, whole free large segments older
 * than the average (in get_free_block calls) go back, until enough is reclaimed. */
static void garbage_collect(rt_sim_t *m)
{
    uint64_t thr = (uint64_t)(m->c.gc_threshold * (double)m->limit);
    if (m->reserved <= thr)
        return;
    uint64_t target = m->reserved - thr, got = 0;
    double total_age = 0;
    size_t count = 0;
    for (unsigned p = 0; p < m->npools; p++) {
        const rt_set_t *s = &m->pools[p].free;
        if (m->pools[p].small)
            continue;
        for (rt_pos_t at = {0, 0}; rt_set_get(s, at); rt_set_next(s, &at)) {
            const rt_blk_t *b = rt_set_get(s, at);
            if (!b->prev && !b->next)
                total_age += (double)(m->gc_calls[0] - b->gc_base), count++;
        }
    }
    int freed = 1;
    while (got < target && freed && count) {
        double thr_age = total_age / (double)count;
        freed = 0;
        for (unsigned p = 0; p < m->npools; p++) {
            if (m->pools[p].small)
                continue;
            size_t n;
            rt_blk_t **snap = set_list(m, &m->pools[p].free, &n);
            for (size_t i = 0; i < n; i++) {
                rt_blk_t *b = snap[i];
                double age = (double)(m->gc_calls[0] - b->gc_base);
                if (!b->prev && !b->next && age >= thr_age) {
                    freed = 1, got += b->size, total_age -= age, count--;
                    release_block(m, b);
                }
            }
            free(snap);
        }
    }
}

/* ---- finding and making blocks --------------------------------------------------------------- */

static uint64_t expandable_size(const rt_blk_t *b)
{
    return b->size + (b->next && !b->next->mapped ? b->next->size : 0);
}

static rt_blk_t *get_free_block(rt_sim_t *m, rt_pool_t *pool, uint64_t rounded)
{
    rt_set_t *s = &pool->free;
    if (m->limit && m->c.gc_threshold > 0)
        m->gc_calls[pool->small]++;
    rt_pos_t at = rt_set_lower(s, rounded, 0);
    rt_blk_t *b = rt_set_get(s, at), *n;
    if (!b)
        return NULL;
    if (b->exp && m->c.expandable) { /* best fit by what the block could grow to */
        rt_set_next(s, &at);
        while (b->exp && (n = rt_set_get(s, at)) && expandable_size(n) < expandable_size(b)) {
            b = n;
            rt_set_next(s, &at);
        }
    }
    if (rounded < m->max_split && b->size >= m->max_split)
        return NULL; /* an oversize block is not split for a smaller request */
    if (rounded >= m->max_split && b->size >= rounded + RT_LARGE_BUFFER)
        return NULL;
    rt_set_erase(s, b);
    return b;
}

/* Maps the pages covering the first `size` bytes of an unmapped block; 0 when the driver has no
 * room for them. */
static int map_block(rt_sim_t *m, rt_blk_t *b, uint64_t size)
{
    uint64_t pg = page_of(m, b);
    uint64_t bytes = (size + pg - 1) / pg * pg;
    if (bytes > b->size)
        bytes = b->size;
    if (m->reserved + bytes > m->cap)
        return 0;
    rt_set_erase(&m->pools[b->pool].unmapped, b);
    b->mapped = 1;
    if (bytes < b->size) {
        rt_blk_t *rest = blk_new(m, b->addr + bytes, b->size - bytes, b->pool);
        if (!rest)
            return 0;
        rest->exp = 1, rest->seg = b->seg, rest->mapped = 0;
        rest->prev = b, rest->next = b->next;
        if (b->next)
            b->next->prev = rest;
        b->next = rest;
        b->size = bytes;
        pool_put(m, rest);
    }
    try_merge(m, b, b->prev);
    try_merge(m, b, b->next);
    pool_put(m, b);
    reserve(m, bytes);
    return 1;
}

/* The lowest free-or-unmapped run of this pool's expandable segments with room for size, or a
 * new segment spanning more than the device. */
static rt_blk_t *find_expandable(rt_sim_t *m, rt_pool_t *pool, uint32_t pi, uint64_t size)
{
    rt_set_t *u = &pool->unmapped;
    for (rt_pos_t at = {0, 0}; rt_set_get(u, at); rt_set_next(u, &at)) {
        rt_blk_t *c = rt_set_get(u, at);
        if (c->prev && !c->prev->allocated)
            c = c->prev;
        uint64_t room = 0;
        for (rt_blk_t *x = c; x && !x->allocated && room < size; x = x->next)
            room += x->size;
        if (room >= size)
            return c;
    }
    uint64_t pg = pool->small ? RT_SMALL_BUFFER : RT_LARGE_BUFFER;
    uint64_t dev = m->log->total ? m->log->total : m->cap;
    if (dev > RT_MAX_BYTES)
        dev = RT_MAX_BYTES;
    uint64_t va = ((dev + dev / 8) / pg + 1) * pg;
    rt_blk_t *b = blk_new(m, m->next_addr, va, pi);
    if (!b)
        return NULL;
    b->exp = 1, b->seg = b->addr, b->mapped = 0;
    m->next_addr += va;
    pool_put(m, b);
    return b;
}

static rt_blk_t *alloc_expandable(rt_sim_t *m, rt_pool_t *pool, uint32_t pi, uint64_t size)
{
    rt_blk_t *c = find_expandable(m, pool, pi, size);
    if (!c)
        return NULL;
    if (!c->mapped && !map_block(m, c, c->size < size ? c->size : size))
        return NULL;
    while (c->size < size) {
        rt_blk_t *n = c->next;
        if (!n || n->mapped || n->allocated)
            return NULL;
        uint64_t want = size - c->size;
        if (!map_block(m, n, want < n->size ? want : n->size))
            return NULL;
        c = n; /* map_block merged c into it */
    }
    rt_set_erase(&pool->free, c);
    return c;
}

/* The address of a new classic segment of `size`: the next recorded segment of that size not
 * yet given (looking a few ahead, for a model that made one in another order), unless a live
 * segment of the model holds it; else the next of the model's own, above every real address. */
#define RT_SEG_LOOKAHEAD 8
static uint64_t segment_addr(rt_sim_t *m, uint64_t size)
{
    const rt_log_t *log = m->log;
    while (m->next_seg < log->nsegs && m->seg_taken && m->seg_taken[m->next_seg])
        m->next_seg++;
    for (size_t i = m->next_seg; m->seg_taken && i < log->nsegs && i < m->next_seg + RT_SEG_LOOKAHEAD; i++)
        if (!m->seg_taken[i] && log->seg_size[i] == size && log->seg_addr[i] < RT_SYNTH_BASE &&
            !table_map_find(&m->bases, log->seg_addr[i])) {
            m->seg_taken[i] = 1;
            return log->seg_addr[i];
        }
    uint64_t addr = m->next_addr;
    m->next_addr += (size + RT_ROUND_LARGE - 1) / RT_ROUND_LARGE * RT_ROUND_LARGE;
    return addr;
}

static rt_blk_t *alloc_block(rt_sim_t *m, rt_pool_t *pool, uint32_t pi, uint64_t rounded)
{
    uint64_t asz = alloc_size(rounded);
    if (m->limit && m->reserved + asz > m->limit)
        return NULL;
    if (m->c.expandable)
        return alloc_expandable(m, pool, pi, rounded);
    if (m->reserved + asz > m->cap)
        return NULL;
    uint64_t addr = segment_addr(m, asz);
    rt_blk_t *b = blk_new(m, addr, asz, pi);
    if (!b || table_map_put(&m->bases, addr, asz)) {
        free(b);
        m->nomem = 1;
        return NULL;
    }
    reserve(m, asz);
    return b;
}

static int should_split(const rt_sim_t *m, const rt_pool_t *pool, const rt_blk_t *b, uint64_t rounded)
{
    uint64_t rest = b->size - rounded;
    if (pool->small || m->c.expandable)
        return rest >= RT_MIN_BLOCK;
    return rounded < m->max_split && rest > RT_SMALL_SIZE;
}

/* PyTorch's malloc: the block, or NULL when it would raise OutOfMemoryError. */
static rt_blk_t *sim_malloc(rt_sim_t *m, uint64_t size, unsigned stream)
{
    if (size > RT_MAX_BYTES) /* no device holds it; and the sums below stay far from overflow */
        return NULL;
    uint64_t rounded = replay_torch_round(size, m->c.divisions);
    int small = rounded <= RT_SMALL_SIZE;
    uint32_t pi = (uint32_t)(stream * 2 + (unsigned)small);
    if (pi >= m->npools)
        return NULL;
    rt_pool_t *pool = &m->pools[pi];
    rt_blk_t *b = get_free_block(m, pool, rounded);
    if (!b) {
        if (m->limit && m->c.gc_threshold > 0)
            garbage_collect(m);
        b = alloc_block(m, pool, pi, rounded);
        if (!b && release_available(m, pool, rounded))
            b = alloc_block(m, pool, pi, rounded);
        if (!b) {
            release_cached(m);
            b = alloc_block(m, pool, pi, rounded);
        }
    }
    if (!b)
        return NULL;
    if (should_split(m, pool, b, rounded)) {
        rt_blk_t *rest = blk_new(m, b->addr + rounded, b->size - rounded, pi);
        if (rest) {
            rest->exp = b->exp, rest->seg = b->seg;
            rest->prev = b, rest->next = b->next;
            if (b->next)
                b->next->prev = rest;
            b->next = rest;
            b->size = rounded;
            pool_put(m, rest);
        }
    }
    b->allocated = 1;
    m->allocated += b->size;
    if (m->allocated > m->res.peak_allocated)
        m->res.peak_allocated = m->allocated;
    return b;
}

static void sim_free(rt_sim_t *m, rt_blk_t *b)
{
    b->allocated = 0;
    m->allocated -= b->size;
    try_merge(m, b, b->prev);
    try_merge(m, b, b->next);
    pool_put(m, b);
}

/* ---- the run --------------------------------------------------------------------------------- */

static void fail(rt_sim_t *m, size_t at, uint64_t size)
{
    if (!m->res.failures++) {
        m->res.first_ev = at;
        m->res.first_request = size;
    }
}

static void sim_destroy(rt_sim_t *m)
{
    for (unsigned p = 0; p < m->npools; p++) {
        rt_set_t *sets[2] = {&m->pools[p].free, &m->pools[p].unmapped};
        for (int k = 0; k < 2; k++) {
            for (rt_pos_t at = {0, 0}; rt_set_get(sets[k], at); rt_set_next(sets[k], &at))
                free(rt_set_get(sets[k], at));
            rt_set_free(sets[k]);
        }
    }
    if (m->tensor)
        for (uint32_t i = 0; i < m->log->nids; i++)
            free(m->tensor[i]);
    free(m->seg_taken);
    table_map_free(&m->bases);
    free(m->pools);
    free(m->tensor);
}

/* The model at its failure: the figures `oom` reads. */
static void sim_state(const rt_sim_t *m, uint64_t size, uint64_t epoch_t, rt_oom_state_t *out)
{
    memset(out, 0, sizeof *out);
    uint64_t asz = alloc_size(replay_torch_round(size, m->c.divisions));
    out->by_limit = m->limit && m->reserved + asz > m->limit;
    out->cap = out->by_limit ? m->limit : m->cap;
    out->reserved = m->reserved;
    out->live = m->allocated;
    for (unsigned p = 0; p < m->npools; p++)
        for (rt_pos_t at = {0, 0}; rt_set_get(&m->pools[p].free, at); rt_set_next(&m->pools[p].free, &at)) {
            out->free_blocks++;
            if (rt_set_get(&m->pools[p].free, at)->size > out->largest_free)
                out->largest_free = rt_set_get(&m->pools[p].free, at)->size;
        }
    for (uint32_t id = 0; id < m->log->nids; id++)
        if (m->tensor[id] && m->tensor[id]->born < epoch_t)
            out->persistent += m->tensor[id]->size;
}

/* A cap of `cap` bytes with `head` taken from it (0: no cap stays none; at least 1 MiB). */
static uint64_t less(uint64_t cap, uint64_t head)
{
    if (!cap || !head)
        return cap;
    return cap > head + (1ull << 20) ? cap - head : 1ull << 20;
}

/* An RT_CAP's bytes, under gmshim's limit `dev_limit` instead of the log's (0: as recorded). */
static uint64_t cap_of(const rt_ev_t *e, uint64_t dev_limit)
{
    uint64_t room = (uint64_t)e->id << 32 | e->site;
    if (!dev_limit)
        return e->size;
    return room && room < dev_limit ? room : dev_limit;
}

/* Runs the log; stops at the recorded OOM `stop` (an index among them) when the model fails it
 * too, filling *st (returns 1 then). */
static int sim_run(const rt_log_t *log, const rt_conf_t *conf, size_t stop, uint64_t epoch_t, rt_oom_state_t *st,
                   rt_result_t *res)
{
    rt_sim_t m;
    memset(&m, 0, sizeof m);
    m.log = log;
    m.c = *conf;
    m.max_split = conf->max_split ? conf->max_split : UINT64_MAX;
    m.cap = log->cap ? log->cap : UINT64_MAX / 2;
    if (conf->dev_limit && conf->dev_limit < m.cap)
        m.cap = conf->dev_limit;
    m.cap = less(m.cap, conf->less);
    m.next_addr = RT_SYNTH_BASE;
    m.limit = less(conf->limit ? conf->limit : log->torch_limit, conf->less);
    m.npools = (log->nstreams ? log->nstreams : 1) * 2;
    m.pools = calloc(m.npools, sizeof *m.pools);
    m.tensor = calloc(log->nids ? log->nids : 1, sizeof *m.tensor);
    m.seg_taken = log->nsegs ? calloc(log->nsegs, 1) : NULL;
    memset(res, 0, sizeof *res);
    if (!m.pools || !m.tensor || (log->nsegs && !m.seg_taken)) {
        free(m.pools);
        free(m.tensor);
        free(m.seg_taken);
        return -1;
    }
    size_t nooms = 0;
    int stopped = 0;
    for (unsigned p = 0; p < m.npools; p++)
        m.pools[p].small = p & 1;
    for (size_t i = 0; i < log->nev && !m.nomem && !stopped; i++) {
        const rt_ev_t *e = &log->ev[i];
        switch (e->type) {
        case RT_ALLOC:
            if (e->id >= log->nids)
                break;
            if (m.tensor[e->id]) /* a damaged log: the id still live */
                sim_free(&m, m.tensor[e->id]);
            m.tensor[e->id] = sim_malloc(&m, e->size, e->stream);
            if (m.tensor[e->id])
                m.tensor[e->id]->born = e->t;
            if (!m.tensor[e->id]) {
                fail(&m, i, e->size);
                m.res.new_failures++;
            }
            break;
        case RT_FREE:
            if (e->id < log->nids && m.tensor[e->id]) {
                sim_free(&m, m.tensor[e->id]);
                m.tensor[e->id] = NULL;
            }
            break;
        case RT_EMPTY:
            release_cached(&m);
            break;
        case RT_OOM: {
            rt_blk_t *b = sim_malloc(&m, e->size, e->stream);
            if (b) { /* past it: what the program did next is not in the log */
                m.res.recorded_passed++;
                sim_free(&m, b);
            } else {
                m.res.recorded_failed++;
                fail(&m, i, e->size);
                if (nooms == stop && st) {
                    sim_state(&m, e->size, epoch_t, st);
                    stopped = 1;
                }
            }
            if (nooms++ == stop && st && !stopped)
                stopped = 2; /* past it: nothing more to see */
            break;
        }
        case RT_CAP:
            m.cap = less(cap_of(e, conf->dev_limit), conf->less); /* the driver's room, as recorded */
            break;
        case RT_LIMIT:
            m.limit = less(conf->limit ? conf->limit : e->size, conf->less);
            break;
        default:
            break;
        }
    }
    m.res.reserved = m.reserved;
    *res = m.res;
    int nomem = m.nomem;
    sim_destroy(&m);
    return nomem ? -1 : stopped == 1;
}

rt_result_t replay_torch_run(const rt_log_t *log, const rt_conf_t *conf)
{
    rt_result_t res;
    sim_run(log, conf, SIZE_MAX, 0, NULL, &res);
    return res;
}

int replay_torch_oom_state(const rt_log_t *log, const rt_conf_t *conf, size_t k, uint64_t epoch_t, rt_oom_state_t *out)
{
    size_t n = 0;
    for (size_t i = 0; i < log->nev; i++)
        n += log->ev[i].type == RT_OOM;
    if (k >= n)
        return -1;
    rt_result_t res;
    return sim_run(log, conf, k, epoch_t, out, &res);
}
