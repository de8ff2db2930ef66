/* The C entry point of the PyTorch bridge: each event of PyTorch's caching allocator becomes one
 * GMLOG_T_* record. It runs under PyTorch's allocator lock in the allocating thread (the autograd
 * thread too): no lock PyTorch could wait for, no GIL (Python frames are read as the hooks read
 * them), no CUDA call, and never a failure that reaches PyTorch. For a bounded log it also keeps
 * PyTorch's live tensors and segments, which each checkpoint repeats (torchev_cut). */
#include "torchev.h"
#include "common.h"
#include "device.h"
#include "evlog.h"
#include "logrec.h"
#include "state.h"
#include "stacks.h"
#include "warntensor.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SPANS 4

static struct {
    uintptr_t lo, hi;
} spans[MAX_SPANS];
static int nspans;
static uint64_t events, last_ns;

int torchev_record_type(int action)
{
    switch (action) {
    case GMSHIM_TORCH_ALLOC: return GMLOG_T_ALLOC;
    case GMSHIM_TORCH_FREE_REQUESTED: return GMLOG_T_FREE_REQUESTED;
    case GMSHIM_TORCH_FREE_COMPLETED: return GMLOG_T_FREE_COMPLETED;
    case GMSHIM_TORCH_SEGMENT_ALLOC: return GMLOG_T_SEGMENT_ALLOC;
    case GMSHIM_TORCH_SEGMENT_FREE: return GMLOG_T_SEGMENT_FREE;
    case GMSHIM_TORCH_SEGMENT_MAP: return GMLOG_T_SEGMENT_MAP;
    case GMSHIM_TORCH_SEGMENT_UNMAP: return GMLOG_T_SEGMENT_UNMAP;
    case GMSHIM_TORCH_OOM: return GMLOG_T_OOM;
    default: return 0;
    }
}

void torchev_add_machinery(uintptr_t lo, uintptr_t hi)
{
    if (nspans < MAX_SPANS && lo < hi) {
        spans[nspans].lo = lo;
        spans[nspans].hi = hi;
        __atomic_store_n(&nspans, nspans + 1, __ATOMIC_RELEASE);
    }
}

uint64_t torchev_count(void)
{
    return __atomic_load_n(&events, __ATOMIC_RELAXED);
}

uint64_t torchev_last_ns(void)
{
    return __atomic_load_n(&last_ns, __ATOMIC_RELAXED);
}

static int is_machinery(uintptr_t pc)
{
    int n = __atomic_load_n(&nspans, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (pc >= spans[i].lo && pc < spans[i].hi)
            return 1;
    return 0;
}

/* ---- PyTorch's live tensors and segments, for a bounded log's checkpoints --------------------
 * One lock of its own, taken for a table update only: never while calling out (no log write, no
 * stack walk, no allocation besides the table's own growth), so that a thread holding PyTorch's
 * allocator lock waits at most for one update or one copy of the tables. */

typedef struct tv_entry {
    uint64_t addr, size, stream;  /* size: a tensor's request, a segment's bytes */
    uint32_t site, pool;
    uint8_t dev, pending, used;   /* pending: its free requested, not completed */
    uint8_t mapped;               /* a range of an expandable segment (T_SEGMENT_MAP) */
} tv_entry_t;

typedef struct tv_table {
    tv_entry_t *e;
    size_t n, cap;                /* cap: 0 or a power of two */
} tv_table_t;

typedef struct tv_dev {
    uint64_t requested, allocated, reserved, pending;
    uint64_t peak_requested, peak_allocated, peak_reserved;
    uint64_t allocs, frees, ooms;
    uint8_t seen;
} tv_dev_t;

static struct {
    pthread_mutex_t lock;
    tv_table_t tensors, segments;
    tv_dev_t dev[GMLOG_NO_DEVICE];
    int failed;                   /* a table could not grow: checkpoints carry no tensors */
} TV = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t tv_block(uint64_t req)
{
    return ((req ? req : 1) + 511) & ~(uint64_t)511; /* PyTorch rounds every block to 512 bytes */
}

static size_t tv_slot(uint64_t addr, size_t cap)
{
    return (size_t)((addr >> 9) * 0x9E3779B97F4A7C15ull >> 17) & (cap - 1);
}

static tv_entry_t *tv_find(const tv_table_t *t, uint64_t addr)
{
    if (!t->cap)
        return NULL;
    for (size_t i = tv_slot(addr, t->cap);; i = (i + 1) & (t->cap - 1)) {
        if (!t->e[i].used)
            return NULL;
        if (t->e[i].addr == addr)
            return &t->e[i];
    }
}

static int tv_grow(tv_table_t *t)
{
    size_t ncap = t->cap ? t->cap * 2 : 1024;
    tv_entry_t *n = calloc(ncap, sizeof *n);
    if (!n)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->e[i].used)
            continue;
        size_t j = tv_slot(t->e[i].addr, ncap);
        while (n[j].used)
            j = (j + 1) & (ncap - 1);
        n[j] = t->e[i];
    }
    free(t->e);
    t->e = n;
    t->cap = ncap;
    return 0;
}

static tv_entry_t *tv_insert(tv_table_t *t, uint64_t addr)
{
    if ((t->n + 1) * 4 > t->cap * 3 && tv_grow(t))
        return NULL;
    size_t i = tv_slot(addr, t->cap);
    while (t->e[i].used)
        i = (i + 1) & (t->cap - 1);
    memset(&t->e[i], 0, sizeof t->e[i]);
    t->e[i].addr = addr;
    t->e[i].used = 1;
    t->n++;
    return &t->e[i];
}

/* Removes an entry, shifting the run after it back (no tombstones). */
static void tv_remove(tv_table_t *t, tv_entry_t *victim)
{
    size_t cap = t->cap, i = (size_t)(victim - t->e);
    t->e[i].used = 0;
    t->n--;
    for (size_t j = (i + 1) & (cap - 1); t->e[j].used; j = (j + 1) & (cap - 1)) {
        size_t home = tv_slot(t->e[j].addr, cap);
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (stays)
            continue;
        t->e[i] = t->e[j];
        t->e[j].used = 0;
        i = j;
    }
}

static uint64_t tv_minus(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

static void tv_peaks(tv_dev_t *d)
{
    if (d->requested > d->peak_requested)
        d->peak_requested = d->requested;
    if (d->allocated > d->peak_allocated)
        d->peak_allocated = d->allocated;
    if (d->reserved > d->peak_reserved)
        d->peak_reserved = d->reserved;
}

/* A tensor's block leaves the table (its free completed, or its address taken again). */
static void tv_drop_tensor(tv_entry_t *e)
{
    tv_dev_t *od = &TV.dev[e->dev];
    if (e->pending) {
        od->pending = tv_minus(od->pending, tv_block(e->size));
    } else {
        od->requested = tv_minus(od->requested, e->size);
        od->allocated = tv_minus(od->allocated, tv_block(e->size));
    }
    tv_remove(&TV.tensors, e);
}

static void tv_alloc(tv_dev_t *d, const gmlog_tensor_t *r, int segment)
{
    tv_table_t *t = segment ? &TV.segments : &TV.tensors;
    tv_entry_t *e = tv_find(t, r->addr);
    if (e && segment) {
        TV.dev[e->dev].reserved = tv_minus(TV.dev[e->dev].reserved, e->size);
        tv_remove(t, e);
    } else if (e) {
        tv_drop_tensor(e);
    }
    if (!(e = tv_insert(t, r->addr))) {
        TV.failed = 1;
        return;
    }
    e->size = r->size, e->stream = r->stream, e->site = r->site, e->pool = r->pool, e->dev = r->h.device;
    if (segment) {
        d->reserved += r->size;
    } else {
        d->requested += r->size;
        d->allocated += tv_block(r->size);
        d->allocs++;
    }
    tv_peaks(d);
}

/* What is left of mapped range `from` after an unmap: [addr, addr + size). */
static void tv_piece(const tv_entry_t *from, uint64_t addr, uint64_t size)
{
    tv_entry_t *e = tv_insert(&TV.segments, addr);
    if (!e) {
        TV.failed = 1;
        return;
    }
    *e = *from;
    e->addr = addr, e->size = size, e->used = 1;
    TV.dev[from->dev].reserved += size;
}

/* Expandable segments: PyTorch unmaps free pages, which may be part of a mapped range or span
 * several; each range it covers is trimmed to what stays mapped. A scan: unmaps are rare. */
static void tv_unmap(const gmlog_tensor_t *r)
{
    uint64_t lo = r->addr, hi = r->addr + r->size;
    tv_entry_t hit[16];
    size_t n = 0;
    for (size_t i = 0; i < TV.segments.cap && n < GM_ARRAY_LEN(hit); i++) {
        const tv_entry_t *e = &TV.segments.e[i];
        if (e->used && e->dev == r->h.device && e->addr < hi && e->addr + e->size > lo)
            hit[n++] = *e;
    }
    for (size_t k = 0; k < n; k++) {
        tv_entry_t *e = tv_find(&TV.segments, hit[k].addr);
        if (!e)
            continue;
        TV.dev[hit[k].dev].reserved = tv_minus(TV.dev[hit[k].dev].reserved, hit[k].size);
        tv_remove(&TV.segments, e);
        uint64_t end = hit[k].addr + hit[k].size;
        if (hit[k].addr < lo)
            tv_piece(&hit[k], hit[k].addr, lo - hit[k].addr);
        if (end > hi)
            tv_piece(&hit[k], hi, end - hi);
    }
}

/* One event's effect on the tables, under TV.lock. */
static void tv_apply(const gmlog_tensor_t *r)
{
    if (r->h.device >= GMLOG_NO_DEVICE || !r->addr)
        return;
    tv_dev_t *d = &TV.dev[r->h.device];
    tv_entry_t *e;
    d->seen = 1;
    switch (r->h.type) {
    case GMLOG_T_ALLOC: tv_alloc(d, r, 0); break;
    case GMLOG_T_SEGMENT_ALLOC: tv_alloc(d, r, 1); break;
    case GMLOG_T_SEGMENT_MAP:
        tv_alloc(d, r, 1);
        if ((e = tv_find(&TV.segments, r->addr)))
            e->mapped = 1;
        break;
    case GMLOG_T_FREE_REQUESTED:
        d->frees++;
        if ((e = tv_find(&TV.tensors, r->addr)) && !e->pending) {
            tv_dev_t *od = &TV.dev[e->dev];
            od->requested = tv_minus(od->requested, e->size);
            od->allocated = tv_minus(od->allocated, tv_block(e->size));
            od->pending += tv_block(e->size);
            e->pending = 1;
        }
        break;
    case GMLOG_T_FREE_COMPLETED:
        if ((e = tv_find(&TV.tensors, r->addr)))
            tv_drop_tensor(e);
        break;
    case GMLOG_T_SEGMENT_UNMAP: tv_unmap(r); break;
    case GMLOG_T_SEGMENT_FREE:
        if ((e = tv_find(&TV.segments, r->addr))) {
            TV.dev[e->dev].reserved = tv_minus(TV.dev[e->dev].reserved, e->size);
            tv_remove(&TV.segments, e);
        }
        break;
    case GMLOG_T_OOM: d->ooms++; break;
    default: break;
    }
}

/* The fields every version of the event has (the first layout, API version 1). */
#define EVENT_V1_SIZE (offsetof(gmshim_torch_event_t, stream) + sizeof(unsigned long long))
#define EVENT_FRACTION_SIZE (offsetof(gmshim_torch_event_t, memory_fraction) + sizeof(double))

/* PyTorch's OOM under its own cap (set_per_process_memory_fraction, per_process_memory_fraction):
 * the cap, fraction x the device's total as PyTorch computes it, logged as a LIMIT of PyTorch's
 * before the OOM, so that the reports name it and the replay applies it. An OOM only: the device
 * (created here if the hooks never needed it) asks the driver for its total once. */
static void torch_cap(const gmshim_torch_event_t *ev)
{
    if (ev->size < EVENT_FRACTION_SIZE || !(ev->memory_fraction > 0 && ev->memory_fraction < 1) || ev->device < 0)
        return;
    gm_device_t *d = device_get(ev->device);
    if (d && d->total)
        logrec_limit_flags(ev->device, (uint64_t)(ev->memory_fraction * (double)d->total), GMLOG_LIMIT_TORCH);
}

GM_EXPORT int gmshim_torch_event(const gmshim_torch_event_t *ev)
{
    if (unlikely(!ev || ev->size < EVENT_V1_SIZE))
        return -1;
    if (unlikely(!evlog_enabled() || __atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) == GM_CHILD))
        return -1;
    int type = torchev_record_type(ev->action);
    if (!type)
        return -1;
    uint64_t now;
    /* Inside gmshim from here: nothing we call may come back through a hook. */
    int depth = gm_depth;
    gm_depth = 1;
    uint32_t site = 0;
    /* A completed free happens in whatever call let PyTorch see the block's events done: its
     * site says nothing about the tensor (the FREE_REQUESTED before it has the one that does). */
    if (type != GMLOG_T_FREE_COMPLETED)
        site = stacks_site_from_skip(__builtin_return_address(0), is_machinery);
    /* GMSHIM_WARN follows the tensors: a counter and a compare (a table only near a warning). */
    if (type == GMLOG_T_ALLOC)
        warntensor_alloc(ev->device, ev->addr, ev->bytes, site);
    else if (type == GMLOG_T_FREE_REQUESTED)
        warntensor_free(ev->device, ev->addr, ev->bytes);
    if (unlikely(type == GMLOG_T_OOM))
        torch_cap(ev);
    gmlog_tensor_t r;
    evlog_hdr(&r.h, type, sizeof r, ev->device, 0);
    r.addr = ev->addr;
    r.size = ev->bytes;
    r.stream = ev->stream;
    r.site = site;
    r.pool = ev->pool;
    if (evlog_bounded()) {
        /* Its time is read with the table locked: a checkpoint's copy holds exactly the events
         * timed at or before its cut (torchev_cut). */
        pthread_mutex_lock(&TV.lock);
        now = gm_now_ns();
        tv_apply(&r);
        pthread_mutex_unlock(&TV.lock);
    } else {
        now = gm_now_ns(); /* after the site: one clock read an event */
    }
    evlog_append(&r, sizeof r, now);
    __atomic_add_fetch(&events, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&last_ns, now, __ATOMIC_RELAXED);
    gm_depth = depth;
    return 0;
}

/* ---- the checkpoint's copy ----------------------------------------------------------------- */

static uint64_t write_state(int type, const tv_entry_t *e, uint64_t now)
{
    gmlog_tensor_t r;
    evlog_hdr(&r.h, type, sizeof r, e->dev, 0);
    r.addr = e->addr;
    r.size = e->size;
    r.stream = e->stream;
    r.site = e->site;
    r.pool = e->pool;
    evlog_append(&r, sizeof r, now);
    return 1;
}

/* One device's state: its CUT (GMLOG_CUT_TORCH), its segments, its live tensors, its pending
 * frees (a T_FREE_REQUESTED each, with the tensor's request and site). */
static uint64_t write_device(int dev, const tv_dev_t *d, const tv_entry_t *seg, size_t nseg, const tv_entry_t *ten,
                             size_t nten, uint64_t cut_ns, uint64_t now)
{
    gmlog_cut_t c;
    memset(&c, 0, sizeof c);
    evlog_hdr(&c.h, GMLOG_CUT, sizeof c, dev, GMLOG_CUT_TORCH);
    c.cut_ns = cut_ns;
    c.requested = d->requested, c.allocated = d->allocated, c.reserved = d->reserved, c.pending = d->pending;
    c.cached = tv_minus(d->reserved, d->allocated + d->pending);
    c.peak_requested = d->peak_requested, c.peak_allocated = d->peak_allocated, c.peak_reserved = d->peak_reserved;
    c.allocs = d->allocs, c.frees = d->frees, c.ooms = d->ooms;
    for (size_t i = 0; i < nseg; i++)
        c.segments += seg[i].dev == dev;
    for (size_t i = 0; i < nten; i++)
        c.blocks += ten[i].dev == dev;
    evlog_append(&c, sizeof c, now);
    uint64_t n = 1;
    for (size_t i = 0; i < nseg; i++)
        if (seg[i].dev == dev)
            n += write_state(seg[i].mapped ? GMLOG_T_SEGMENT_MAP : GMLOG_T_SEGMENT_ALLOC, &seg[i], now);
    for (int pending = 0; pending < 2; pending++)
        for (size_t i = 0; i < nten; i++)
            if (ten[i].dev == dev && ten[i].pending == pending)
                n += write_state(pending ? GMLOG_T_FREE_REQUESTED : GMLOG_T_ALLOC, &ten[i], now);
    return n;
}

/* The used entries of a table, copied (NULL with *n 0 when empty or out of memory). */
static tv_entry_t *tv_copy(const tv_table_t *t, size_t *n)
{
    *n = 0;
    tv_entry_t *out = t->n ? malloc(t->n * sizeof *out) : NULL;
    for (size_t i = 0; out && i < t->cap; i++)
        if (t->e[i].used)
            out[(*n)++] = t->e[i];
    return out;
}

uint64_t torchev_cut(uint64_t start_mono)
{
    tv_dev_t dev[GMLOG_NO_DEVICE];
    size_t nseg, nten;
    pthread_mutex_lock(&TV.lock);
    uint64_t now = gm_now_ns();
    int any = 0;
    for (int i = 0; i < GMLOG_NO_DEVICE; i++)
        any |= TV.dev[i].seen;
    tv_entry_t *seg = any && !TV.failed ? tv_copy(&TV.segments, &nseg) : NULL;
    tv_entry_t *ten = any && !TV.failed ? tv_copy(&TV.tensors, &nten) : NULL;
    int ok = any && !TV.failed && (seg || !TV.segments.n) && (ten || !TV.tensors.n);
    memcpy(dev, TV.dev, sizeof dev);
    /* Events after the copy must be timed after it. */
    while (ok && gm_now_ns() <= now)
        ;
    pthread_mutex_unlock(&TV.lock);
    uint64_t n = 0, cut_ns = now > start_mono ? now - start_mono : 0;
    for (int i = 0; ok && i < GMLOG_NO_DEVICE; i++)
        if (dev[i].seen)
            n += write_device(i, &dev[i], seg, nseg, ten, nten, cut_ns, now);
    free(seg);
    free(ten);
    return n;
}

void torchev_forget(void)
{
    pthread_mutex_lock(&TV.lock);
    free(TV.tensors.e);
    free(TV.segments.e);
    memset(&TV.tensors, 0, sizeof TV.tensors);
    memset(&TV.segments, 0, sizeof TV.segments);
    memset(TV.dev, 0, sizeof TV.dev);
    TV.failed = 0;
    pthread_mutex_unlock(&TV.lock);
}
