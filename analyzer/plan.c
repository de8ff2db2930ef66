/* The floor and the offline plan: the recorded allocations' lifetimes (event indices, from the
 * replay's packed events) packed best-fit-decreasing — largest first, each at the lowest offset
 * where nothing placed overlaps it in time — found through buckets of time so that a placement
 * looks only at its neighbours in time. Bounded to a window of PLAN_WINDOW_ALLOCS allocations. */
#include "plan.h"
#include "vec.h"

#include <stdlib.h>
#include <string.h>

#define PLAN_BUCKETS 4096
#define PLAN_LONG 16         /* an interval over more buckets than this goes on the long list */
/* Steps of the search (neighbours looked at, long-list entries swept) one packing of a window may
 * take: where most blocks live long and many at once, each placement sweeps nearly every block
 * placed, quadratic in the window; past this budget the window is halved around its moment and
 * packed again. The fixtures and the golden logs stay below it; a window with L long lives is
 * not started where L * L passes it. */
#define PLAN_BUDGET (64u << 20)
#define PLAN_MIN_WINDOW 1024u /* no budget at this window or below */
#define PLAN_OVER (UINT64_MAX - 1)

/* ---- the packing ------------------------------------------------------------------------------ */

typedef struct span {
    uint64_t off, end;
} span_t;

typedef struct bucket {
    uint32_t *ids;
    size_t n, cap;
} bucket_t;

/* An interval's sort keys beside its index: the order needs no shared state (plans of several
 * logs run on several threads). */
typedef struct key {
    uint64_t size, start;
    uint32_t i;
} plan_key_t;

static int by_size_desc(const void *a, const void *b)
{
    const plan_key_t *x = a, *y = b;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int by_start(const void *a, const void *b)
{
    const plan_key_t *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* The spans by offset (a merge sort through tmp, of m entries too): inline, where qsort's call of
 * a comparison for each pair cost more than the search itself. Spans at one offset may come in
 * any order: the sweep of place() finds the same gap whichever it meets first. */
static void sort_by_off(span_t *sp, span_t *tmp, size_t m)
{
    for (size_t r = 0; r < m; r += 8) { /* runs of 8 by insertion, then merged */
        size_t end = r + 8 < m ? r + 8 : m;
        for (size_t k = r + 1; k < end; k++) {
            span_t x = sp[k];
            size_t j = k;
            while (j > r && sp[j - 1].off > x.off)
                sp[j] = sp[j - 1], j--;
            sp[j] = x;
        }
    }
    span_t *from = sp, *to = tmp;
    for (size_t w = 8; w < m; w *= 2) {
        for (size_t lo = 0; lo < m; lo += 2 * w) {
            size_t mid = lo + w < m ? lo + w : m, hi = lo + 2 * w < m ? lo + 2 * w : m;
            size_t x = lo, y = mid, k = lo;
            while (x < mid && y < hi)
                to[k++] = from[y].off < from[x].off ? from[y++] : from[x++];
            while (x < mid)
                to[k++] = from[x++];
            while (y < hi)
                to[k++] = from[y++];
        }
        span_t *t = from;
        from = to, to = t;
    }
    if (from != sp)
        memcpy(sp, from, m * sizeof *sp);
}

static int bucket_push(bucket_t *b, uint32_t id)
{
    if (b->n == b->cap) {
        uint32_t *n = vec_grow_raw(b->ids, &b->cap, b->n + 1, sizeof *n, 8);
        if (!n)
            return -1;
        b->ids = n;
    }
    b->ids[b->n++] = id;
    return 0;
}

/* A placed life on the long list: its place and its time, side by side for the sweep. */
typedef struct long_life {
    uint64_t off, top;       /* [off, top) */
    uint64_t start, end;
} long_life_t;

typedef struct long_list {
    long_life_t *v;
    size_t n, cap;
} long_list_t;

/* The neighbours' spans, with room for a merge sort's copy of them: grown together. */
typedef struct spans {
    span_t *v, *tmp;
    size_t n, cap, captmp;
} spans_t;

/* Adds placed interval j's span to the list if it overlaps [s, e) and was not seen this query. */
static int take(spans_t *sp, uint32_t j, const uint64_t *start, const uint64_t *end, const uint64_t *size,
                const uint64_t *off, uint32_t *stamp, uint32_t q, uint64_t s, uint64_t e)
{
    if (stamp[j] == q || start[j] >= e || end[j] <= s)
        return 0;
    stamp[j] = q;
    if (sp->n == sp->cap) {
        span_t *g = vec_grow_raw(sp->v, &sp->cap, sp->n + 1, sizeof *g, 64);
        if (!g)
            return -1;
        sp->v = g;
        if (!(g = vec_grow_raw(sp->tmp, &sp->captmp, sp->cap, sizeof *g, 64)))
            return -1;
        sp->tmp = g;
    }
    sp->v[sp->n++] = (span_t){off[j], off[j] + size[j]};
    return 0;
}

/* One placement, in the order `cmp` gives: each interval at the lowest offset free for its life.
 * Its steps (what the budget counts) are the neighbours looked at in the buckets, then the long
 * list's entries and the neighbours the sweep passed. */
static uint64_t place(const uint64_t *start, const uint64_t *end, const uint64_t *size, uint64_t *off, size_t n,
                      int (*cmp)(const void *, const void *), uint64_t *budget)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < n; i++) {
        lo = start[i] < lo ? start[i] : lo;
        hi = end[i] > hi ? end[i] : hi;
    }
    size_t nb = n / 8 > PLAN_BUCKETS ? PLAN_BUCKETS : n / 8 ? n / 8 : 1;
    uint64_t width = (hi - lo + nb - 1) / nb;
    if (!width)
        width = 1;
    plan_key_t *order = malloc(n * sizeof *order);
    uint32_t *stamp = calloc(n, sizeof *stamp);
    bucket_t *bk = calloc(nb, sizeof *bk);
    long_list_t lng = {0};
    spans_t sp = {0};
    uint64_t peak = UINT64_MAX;
    if (!order || !stamp || !bk)
        goto out;
    for (size_t i = 0; i < n; i++)
        order[i] = (plan_key_t){size[i], start[i], (uint32_t)i};
    qsort(order, n, sizeof *order, cmp);
    peak = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t i = order[k].i, q = (uint32_t)k + 1;
        uint64_t s = start[i], e = end[i] > s ? end[i] : s + 1;
        size_t b0 = (size_t)((s - lo) / width), b1 = (size_t)((e - 1 - lo) / width);
        b1 = b1 >= nb ? nb - 1 : b1;
        int bad = 0;
        uint64_t steps = 0;
        sp.n = 0;
        for (size_t b = b0; b <= b1 && !bad; b++) {
            steps += bk[b].n;
            for (size_t x = 0; x < bk[b].n && !bad; x++)
                bad = take(&sp, bk[b].ids[x], start, end, size, off, stamp, q, s, e);
        }
        if (bad) {
            peak = UINT64_MAX;
            goto out;
        }
        size_t m = sp.n;
        if (m > 1)
            sort_by_off(sp.v, sp.tmp, m);
        /* The lowest gap: the short neighbours (sorted here) and the long list (kept sorted by
         * offset, those not alive with it passed over) swept together in order of offset, a
         * neighbour before a long life at the same offset, stopping at the first that starts
         * above a gap that holds it. The steps are every entry of either passed, and the long
         * list's up to the next one alive with it: x + y of them. */
        const span_t *sv = sp.v;
        const long_life_t *lv = lng.v;
        size_t nl = lng.n;
        uint64_t at = 0, need = size[i];
        size_t x = 0, y = 0;
        for (;;) {
            uint64_t sx = x < m ? sv[x].off : UINT64_MAX;
            for (; y < nl && lv[y].off < sx; y++)
                if (lv[y].start < e && lv[y].end > s) {
                    if (lv[y].off >= at + need)
                        goto found;
                    at = lv[y].top > at ? lv[y].top : at;
                }
            if (x >= m || sx >= at + need)
                break;
            at = sv[x].end > at ? sv[x].end : at;
            x++;
        }
        while (y < nl && (lv[y].start >= e || lv[y].end <= s))
            y++;
    found:
        steps += x + y;
        if (steps > *budget) {
            peak = PLAN_OVER;
            goto out;
        }
        *budget -= steps;
        off[i] = at;
        if (at + need > peak)
            peak = at + need;
        if (b1 - b0 + 1 > PLAN_LONG) {
            if (lng.n == lng.cap) {
                long_life_t *g = vec_grow_raw(lng.v, &lng.cap, lng.n + 1, sizeof *g, 64);
                if (!g) {
                    peak = UINT64_MAX;
                    goto out;
                }
                lng.v = g;
            }
            size_t z = lng.n; /* into its place by offset, after those at the same offset */
            while (z && lng.v[z - 1].off > at)
                z--;
            memmove(&lng.v[z + 1], &lng.v[z], (lng.n - z) * sizeof *lng.v);
            lng.v[z] = (long_life_t){at, at + need, start[i], end[i]};
            lng.n++;
        }
        for (size_t b = b0; b <= b1 && b1 - b0 + 1 <= PLAN_LONG && !bad; b++)
            bad = bucket_push(&bk[b], i);
        if (bad) {
            peak = UINT64_MAX;
            goto out;
        }
    }
out:
    if (bk)
        for (size_t b = 0; b < nb; b++)
            free(bk[b].ids);
    free(bk);
    free(lng.v);
    free(sp.v);
    free(sp.tmp);
    free(order);
    free(stamp);
    return peak;
}

/* Best-fit-decreasing (largest first) and, where it packs lower, the allocations in the order
 * they were born: no single order wins on every log, and either is a valid plan.
 * Why not common/planpack.c, the shim's packer: its rule is this one (each block at the lowest
 * offset free for its life; a line of time is its circle with a period longer than the window),
 * but it looks at every placed block for each new one, quadratic where this looks at its
 * neighbours in time through buckets: planpack_place timed on 16 384 random lives (sizes 512 B
 * to 32 KiB, -O2, the development machine) takes 1.8 s, this packer well under one; and its second order is the longest-lived first, not the born order that packs a
 * recording's window lower. One rule, two searches: the analyzer's plan is a bound on a whole
 * run, the shim's one step's slots. */
/* The most bytes alive at once among the intervals of positive length: no packing peaks lower,
 * since blocks alive at one moment overlap pairwise in place()'s sense. 0 when out of memory. */
static uint64_t pack_floor(const uint64_t *start, const uint64_t *end, const uint64_t *size, size_t n)
{
    plan_key_t *ev = malloc(2 * n * sizeof *ev);
    if (!ev)
        return 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (end[i] > start[i]) { /* ends sort before starts at one moment: the lives are half open */
            ev[m++] = (plan_key_t){.size = 0, .start = start[i], .i = (uint32_t)i};
            ev[m++] = (plan_key_t){.size = 1, .start = end[i], .i = (uint32_t)i};
        }
    qsort(ev, m, sizeof *ev, by_start); /* by moment, then ends (size 1) before starts */
    uint64_t live = 0, most = 0;
    for (size_t k = 0; k < m; k++) {
        if (ev[k].size)
            live -= size[ev[k].i];
        else
            live += size[ev[k].i];
        most = live > most ? live : most;
    }
    free(ev);
    return most;
}

/* How many of the lives place() puts on its long list (the same buckets). */
static uint64_t long_lives(const uint64_t *start, const uint64_t *end, size_t n)
{
    uint64_t lo = UINT64_MAX, hi = 0, l = 0;
    for (size_t i = 0; i < n; i++) {
        lo = start[i] < lo ? start[i] : lo;
        hi = end[i] > hi ? end[i] : hi;
    }
    size_t nb = n / 8 > PLAN_BUCKETS ? PLAN_BUCKETS : n / 8 ? n / 8 : 1;
    uint64_t width = (hi - lo + nb - 1) / nb;
    width = width ? width : 1;
    for (size_t i = 0; i < n; i++) {
        uint64_t s = start[i], e = end[i] > s ? end[i] : s + 1;
        size_t b0 = (size_t)((s - lo) / width), b1 = (size_t)((e - 1 - lo) / width);
        b1 = b1 >= nb ? nb - 1 : b1;
        l += b1 - b0 + 1 > PLAN_LONG;
    }
    return l;
}

/* plan_pack under a budget of search steps: PLAN_OVER when the packing would take more. */
static uint64_t pack_budget(const uint64_t *start, const uint64_t *end, const uint64_t *size, uint64_t *off, size_t n,
                            uint64_t budget)
{
    if (!n)
        return 0;
    if (n > UINT32_MAX - 1)
        return UINT64_MAX;
    if (budget != UINT64_MAX) { /* L long lives: about L * L / 2 steps an order, two orders */
        uint64_t l = long_lives(start, end, n);
        if (l * l > budget)
            return PLAN_OVER;
    }
    uint64_t *alt = malloc(n * sizeof *alt);
    if (!alt)
        return UINT64_MAX;
    uint64_t peak = place(start, end, size, off, n, by_size_desc, &budget);
    /* The born order only where best-fit-decreasing left room: at the floor nothing packs lower. */
    if (peak < PLAN_OVER && peak > pack_floor(start, end, size, n)) {
        uint64_t born = place(start, end, size, alt, n, by_start, &budget);
        if (born == PLAN_OVER || born == UINT64_MAX)
            peak = born;
        else if (born < peak) {
            memcpy(off, alt, n * sizeof *off);
            peak = born;
        }
    }
    free(alt);
    return peak;
}

/* Best-fit-decreasing (largest first) and, where it packs lower, the allocations in the order
 * they were born: no single order wins on every log, and either is a valid plan.
 * Why not common/planpack.c, the shim's packer: its rule is this one (each block at the lowest
 * offset free for its life; a line of time is its circle with a period longer than the window),
 * but it looks at every placed block for each new one, quadratic where this looks at its
 * neighbours in time through buckets: planpack_place timed on 16 384 random lives (sizes 512 B
 * to 32 KiB, -O2, the development machine) takes 1.8 s, this packer well under one; and its second order is the longest-lived first, not the born order that packs a
 * recording's window lower. One rule, two searches: the analyzer's plan is a bound on a whole
 * run, the shim's one step's slots. */
uint64_t plan_pack(const uint64_t *start, const uint64_t *end, const uint64_t *size, uint64_t *off, size_t n)
{
    return pack_budget(start, end, size, off, n, UINT64_MAX);
}

/* ---- the allocations of a window --------------------------------------------------------------- */

static int is_alloc(unsigned type)
{
    return type == RP_ALLOC || type == RP_ALLOC_CACHED || type == RP_EXACT_ALLOC;
}

/* A program's free: the block's life ends here (a block freed into a thread's cache too). */
static int is_free(unsigned type)
{
    return type == RP_FREE || type == RP_FREE_DEFERRED || type == RP_FREE_CACHED || type == RP_EXACT_FREE;
}

/* A request as the pool counts it; a size no device holds (a damaged record) counts as none. */
static uint64_t req_bytes(uint64_t x)
{
    return x > GMLOG_SIZE_MASK ? 0 : pool_round((size_t)x);
}

static uint64_t ev_bytes(const rp_ev_t *e)
{
    return req_bytes(e->x);
}

/* Where a later pass may start reading the events instead of at the first: after `ev` events
 * (the cursor c), `allocs` of them allocations, with the blocks then live (their ids and bytes,
 * scan_t.live[first, first + n)). What a pass from the start would know there and then, but when
 * each of those blocks was born: a window opened later starts them at its own start anyway. */
typedef struct resume {
    rp_cursor_t c;
    size_t ev;
    uint64_t allocs;
    size_t first, n;
} resume_t;

typedef struct live_block {
    uint64_t bytes;
    uint32_t id;
} live_block_t;

/* Resume points kept at most; past this every other one goes and they come half as often. */
#define PLAN_RESUMES 32

typedef struct scan {
    size_t until;            /* events read: [0, until) */
    uint64_t live, peak_live;
    size_t peak_ev;
    uint64_t peak_t;
    uint64_t allocs, allocs_at_peak;
    /* Resume points along the events, [0] the start (collect reads from the last one before its
     * window instead of from the first event): one every `every` allocations, their live blocks
     * in one array kept to about as many entries as half the allocations read (as the packed
     * events, memory grows with the log, not faster). */
    resume_t res[PLAN_RESUMES];
    size_t nres;
    uint64_t every;
    live_block_t *lives;
    size_t nlives, caplives;
} scan_t;

static void scan_free(scan_t *s)
{
    free(s->lives);
}

/* Every other resume point dropped (the start stays), their live blocks with them. */
static void resume_thin(scan_t *s)
{
    size_t k = 0, at = 0;
    for (size_t r = 0; r < s->nres; r += 2) {
        resume_t x = s->res[r];
        memmove(&s->lives[at], &s->lives[x.first], x.n * sizeof *s->lives);
        x.first = at;
        at += x.n;
        s->res[k++] = x;
    }
    s->nres = k, s->nlives = at;
    s->every *= 2;
}

/* A resume point before event i (c: its cursor), the blocks live then from open[]. 0, or -1. */
static int resume_add(scan_t *s, const uint64_t *open, size_t nids, const rp_cursor_t *c, size_t i)
{
    size_t n = 0;
    for (size_t id = 0; id < nids; id++)
        n += open[id] != 0;
    while (s->nres == PLAN_RESUMES || (s->nres > 1 && s->nlives + n > s->allocs / 2 + 65536))
        resume_thin(s);
    if (s->nlives + n > s->allocs / 2 + 65536)
        return 0; /* the live blocks alone pass the bound: the start serves */
    live_block_t *g = vec_grow_raw(s->lives, &s->caplives, s->nlives + n, sizeof *g, 1024);
    if (!g)
        return -1;
    s->lives = g;
    resume_t *r = &s->res[s->nres++];
    *r = (resume_t){*c, i, s->allocs, s->nlives, n};
    for (size_t id = 0; id < nids; id++)
        if (open[id])
            s->lives[s->nlives++] = (live_block_t){open[id], (uint32_t)id};
    return 0;
}

/* Live bytes along the events before `until`: where they peaked, allocations counted, resume
 * points left on the way. */
static int scan_live(const rp_log_t *log, size_t until, scan_t *s)
{
    memset(s, 0, sizeof *s);
    s->until = until;
    size_t nids = log->nids ? log->nids : 1;
    /* A resume point costs a sweep of the ids: at least as many allocations apart as half of
     * them, so that the sweeps cost at most two steps an allocation. */
    s->every = nids / 2 > PLAN_MIN_WINDOW ? nids / 2 : PLAN_MIN_WINDOW;
    s->nres = 1; /* the start: nothing live */
    uint64_t *open = calloc(nids, sizeof *open);
    if (!open)
        return -1;
    rp_cursor_t c = {0};
    uint64_t next = s->every;
    for (size_t i = 0; i < until; i++) {
        if (s->allocs >= next) {
            if (resume_add(s, open, nids, &c, i)) {
                free(open);
                scan_free(s);
                return -1;
            }
            next = s->allocs + s->every;
        }
        rp_ev_t e;
        rp_unpack(log->packed, &c, &e);
        unsigned type = rp_ev_type(&e);
        if (e.id >= log->nids && type != RP_RESET)
            continue;
        if (is_alloc(type)) {
            s->live -= open[e.id];
            open[e.id] = ev_bytes(&e);
            s->live += open[e.id];
            s->allocs++;
            if (s->live > s->peak_live) {
                s->peak_live = s->live, s->peak_ev = i, s->peak_t = rp_ev_t_ns(&e);
                s->allocs_at_peak = s->allocs;
            }
        } else if (is_free(type)) {
            s->live -= open[e.id];
            open[e.id] = 0;
        } else if (type == RP_RESET) {
            memset(open, 0, nids * sizeof *open);
            s->live = 0;
        }
    }
    free(open);
    return 0;
}

typedef struct ivs {
    uint64_t *start, *end, *size, *off;
    size_t n, cap[4];
} ivs_t;

static int ivs_add(ivs_t *v, uint64_t s, uint64_t e, uint64_t size)
{
    if (e <= s || !size) /* freed as the window opened, or nothing: no life in it */
        return 0;
    uint64_t **arr[4] = {&v->start, &v->end, &v->size, &v->off};
    for (int k = 0; k < 4; k++) {
        uint64_t *g = vec_grow_raw(*arr[k], &v->cap[k], v->n + 1, sizeof *g, 1024);
        if (!g)
            return -1;
        *arr[k] = g;
    }
    v->start[v->n] = s, v->end[v->n] = e, v->size[v->n] = size;
    v->n++;
    return 0;
}

static void ivs_free(ivs_t *v)
{
    free(v->start), free(v->end), free(v->size), free(v->off);
}

/* The lives of the allocations from the `first`-th allocation (counted from 1) up to `last`
 * (or the event `until`), those live at the window's start starting there. Read from the last of
 * the scan's resume points before the window: what the events before it would have left is the
 * point's live blocks (a block's birth before the window's start is never looked at: its life in
 * the window starts at the start). The start serves where the window might not open (first past
 * the allocations the scan counted). */
static int collect(const rp_log_t *log, const scan_t *sc, uint64_t first, uint64_t last, size_t until, ivs_t *v)
{
    size_t nids = log->nids ? log->nids : 1;
    uint64_t *open_at = malloc(nids * sizeof *open_at), *open_size = calloc(nids, sizeof *open_size);
    int rc = -1;
    if (!open_at || !open_size)
        goto out;
    const resume_t *from = &sc->res[0];
    for (size_t r = 1; r < sc->nres && first <= sc->allocs; r++)
        if (sc->res[r].allocs < first)
            from = &sc->res[r];
    for (size_t k = 0; k < from->n; k++) {
        const live_block_t *b = &sc->lives[from->first + k];
        open_at[b->id] = 0, open_size[b->id] = b->bytes;
    }
    rp_cursor_t c = from->c;
    uint64_t allocs = from->allocs, ws = 0;
    int in = first <= 1;
    size_t i = from->ev;
    for (; i < until; i++) {
        rp_ev_t e;
        rp_unpack(log->packed, &c, &e);
        unsigned type = rp_ev_type(&e);
        if (e.id >= log->nids && type != RP_RESET)
            continue;
        if (is_alloc(type)) {
            if (++allocs > last)
                break;
            if (!in && allocs >= first)
                in = 1, ws = i;
        }
        if (is_alloc(type) || is_free(type)) {
            if (open_size[e.id] && in && ivs_add(v, open_at[e.id] > ws ? open_at[e.id] : ws, i, open_size[e.id]))
                goto out;
            open_size[e.id] = 0;
        }
        if (is_alloc(type))
            open_at[e.id] = i, open_size[e.id] = ev_bytes(&e);
        if (type == RP_RESET) {
            for (size_t id = 0; id < nids && in; id++)
                if (open_size[id] && ivs_add(v, open_at[id] > ws ? open_at[id] : ws, i, open_size[id]))
                    goto out;
            memset(open_size, 0, nids * sizeof *open_size);
        }
    }
    for (size_t id = 0; id < nids; id++) /* live at the window's end: to its end */
        if (open_size[id] && ivs_add(v, open_at[id] > ws ? open_at[id] : ws, (uint64_t)i + 1, open_size[id]))
            goto out;
    rc = 0;
out:
    free(open_at);
    free(open_size);
    return rc;
}

/* 0, 1 when the packing ran past its budget (nothing set), -1 out of memory. */
static int plan_window(const rp_log_t *log, const scan_t *sc, uint64_t first, uint64_t last, size_t until,
                       uint64_t request, uint64_t budget, plan_point_t *out)
{
    ivs_t v = {0};
    int rc = -1;
    if (collect(log, sc, first, last, until, &v))
        goto out;
    if (request && ivs_add(&v, until, (uint64_t)until + 1, req_bytes(request)))
        goto out;
    uint64_t peak = pack_budget(v.start, v.end, v.size, v.off, v.n, budget);
    if (peak == PLAN_OVER)
        rc = 1;
    if (peak >= PLAN_OVER)
        goto out;
    out->planned = peak;
    out->placed = v.n;
    rc = 0;
out:
    ivs_free(&v);
    return rc;
}

/* The window packed, halved while its packing runs past the budget: `centred` on the peak (moved
 * inside the run where it would reach past either end), else the allocations up to the OOM.
 * 0, or -1. */
static int plan_halving(const rp_log_t *log, scan_t *s, int centred, size_t until, uint64_t request,
                        plan_point_t *out)
{
    for (uint64_t w = PLAN_WINDOW_ALLOCS;; w /= 2) {
        uint64_t first, last = UINT64_MAX;
        if (centred) {
            first = s->allocs_at_peak > w / 2 ? s->allocs_at_peak - w / 2 : 1;
            if (s->allocs > w && first + w - 1 > s->allocs)
                first = s->allocs - w + 1;
            if (s->allocs <= w)
                first = 1;
            last = first + w - 1;
            out->windowed = first > 1 || last < s->allocs;
        } else {
            first = s->allocs > w ? s->allocs - w + 1 : 1;
            out->windowed = first > 1;
        }
        out->narrowed = w < PLAN_WINDOW_ALLOCS;
        int rc = plan_window(log, s, first, last, until, request, w > PLAN_MIN_WINDOW ? PLAN_BUDGET : UINT64_MAX, out);
        if (rc <= 0)
            return rc;
        while (w / 2 >= s->allocs && w / 2 > PLAN_MIN_WINDOW) /* the same allocations again: skip */
            w /= 2;
    }
}

int plan_at_peak(const rp_log_t *log, plan_point_t *out)
{
    memset(out, 0, sizeof *out);
    scan_t s;
    if (scan_live(log, log->nev, &s))
        return -1;
    out->ev = s.peak_ev, out->t = s.peak_t, out->floor = s.peak_live, out->allocs = s.allocs;
    int rc = plan_halving(log, &s, 1, log->nev, 0, out);
    scan_free(&s);
    if (rc < 0)
        return -1;
    out->valid = 1;
    return 0;
}

int plan_at_oom(const rp_log_t *log, size_t k, plan_point_t *out)
{
    memset(out, 0, sizeof *out);
    if (k >= log->nooms || log->ooms[k].ev > log->nev)
        return -1;
    size_t until = (size_t)log->ooms[k].ev;
    uint64_t request = log->ooms[k].rec.request;
    scan_t s;
    if (scan_live(log, until, &s))
        return -1;
    out->ev = until, out->t = log->ooms[k].t, out->allocs = s.allocs;
    out->floor = s.live + req_bytes(request);
    int rc = plan_halving(log, &s, 0, until, request, out);
    scan_free(&s);
    if (rc < 0)
        return -1;
    out->valid = 1;
    return 0;
}

int plan_step_growth(const rp_log_t *log, uint64_t *per_step, uint32_t *steps)
{
    *per_step = 0, *steps = 0;
    size_t until = log->nev;
    for (size_t k = 0; k < log->nooms; k++)
        if (!log->ooms[k].recovered && log->ooms[k].ev < until)
            until = (size_t)log->ooms[k].ev;
    uint64_t *open = calloc(log->nids ? log->nids : 1, sizeof *open);
    if (!open)
        return 0;
    uint64_t live = 0, peak = 0, first = 0, last = 0;
    uint32_t n = 0, ups = 0, marks = 0;
    rp_cursor_t c = {0};
    for (size_t i = 0; i < until; i++) {
        rp_ev_t e;
        rp_unpack(log->packed, &c, &e);
        unsigned type = rp_ev_type(&e);
        if (type == RP_MARK) {
            if (marks++) { /* a step ended: its peak joins the series */
                if (n && peak > last)
                    ups++;
                first = n ? first : peak;
                last = peak;
                n++;
            }
            peak = live;
            continue;
        }
        if (e.id >= log->nids && type != RP_RESET)
            continue;
        if (is_alloc(type)) {
            live -= open[e.id];
            open[e.id] = ev_bytes(&e);
            live += open[e.id];
            peak = live > peak ? live : peak;
        } else if (is_free(type)) {
            live -= open[e.id];
            open[e.id] = 0;
        } else if (type == RP_RESET) {
            memset(open, 0, (log->nids ? log->nids : 1) * sizeof *open);
            live = 0;
        }
    }
    free(open);
    *steps = n;
    if (n < 3 || last <= first || ups * 4 < (n - 1) * 3 || (last - first) * 100 < last)
        return 0;
    *per_step = (last - first) / (n - 1);
    return 1;
}
