/* The replay the exports and the timeline share (export.h): every live block and segment of a
 * log, by address, with the figures of each device, each of the decoder's events (events.h)
 * handed on. It trusts nothing in the log: a free of an unknown pointer or segment is skipped,
 * a pointer allocated twice ends its first block. Memory grows with what is live, never with
 * events. */
#include "export_replay.h"
#include "vec.h"

#include <stdlib.h>
#include <string.h>

int xr_utf8_len(const unsigned char *s, size_t left)
{
    unsigned c = s[0];
    int n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!n || (size_t)n > left || (n == 2 && c < 0xc2) || (n == 4 && c > 0xf4))
        return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if (n == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0)))
        return 0; /* overlong, or a surrogate (which Python's unpickler refuses) */
    if (n == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90)))
        return 0;
    return n;
}

int xr_kind_on_device(unsigned kind)
{
    return kind != GMLOG_KIND_HOST;
}

int xr_kind_allocated(unsigned kind)
{
    return kind == GMLOG_KIND_POOL || kind == GMLOG_KIND_PASS || kind == GMLOG_KIND_OBSERVED;
}

/* The driver's own allocations are reserved memory too: no pool stands between them and it. */
static int kind_reserved(unsigned kind)
{
    return kind == GMLOG_KIND_PASS || kind == GMLOG_KIND_OBSERVED;
}

/* ---- the live blocks and segments, by address (table.h; 0 is never a key) ---- */

static xr_block_t *block_find(const xr_t *x, uint64_t ptr)
{
    return x->capblk && ptr ? table_find(x->blk, x->capblk, x->shblk, sizeof *x->blk, ptr) : NULL;
}

static xr_segment_t *segment_find(const xr_t *x, uint64_t base)
{
    return x->capseg && base ? table_find(x->seg, x->capseg, x->shseg, sizeof *x->seg, base) : NULL;
}

/* A new zeroed entry for key (never 0, not there), or NULL when out of memory. */
static void *entry_insert(void **slots, size_t *n, size_t *cap, unsigned *shift, size_t esize, uint64_t key)
{
    if ((*n + 1) * 4 > *cap * 3 && table_grow(slots, cap, shift, esize))
        return NULL;
    int found;
    void *p = table_probe(*slots, *cap, *shift, esize, key, &found);
    memset(p, 0, esize);
    memcpy(p, &key, sizeof key);
    (*n)++;
    return p;
}

static xr_block_t *block_insert(xr_t *x, uint64_t ptr)
{
    void *s = x->blk;
    xr_block_t *b = entry_insert(&s, &x->nblk, &x->capblk, &x->shblk, sizeof *x->blk, ptr);
    x->blk = s;
    return b;
}

static xr_segment_t *segment_insert(xr_t *x, uint64_t base)
{
    void *s = x->seg;
    xr_segment_t *g = entry_insert(&s, &x->nseg, &x->capseg, &x->shseg, sizeof *x->seg, base);
    x->seg = s;
    return g;
}

static void block_remove(xr_t *x, xr_block_t *b)
{
    table_remove_at(x->blk, x->capblk, x->shblk, sizeof *x->blk, (size_t)(b - x->blk));
    x->nblk--;
}

static void segment_remove(xr_t *x, xr_segment_t *g)
{
    table_remove_at(x->seg, x->capseg, x->shseg, sizeof *x->seg, (size_t)(g - x->seg));
    x->nseg--;
}

size_t xr_bases_upper(const xr_t *x, uint64_t base)
{
    size_t lo = 0, hi = x->nbases;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (x->bases[mid] <= base)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int bases_add(xr_t *x, uint64_t base)
{
    uint64_t *n = vec_grow(x->bases, &x->capbases, x->nbases + 1, sizeof *n, 256);
    if (!n)
        return -1;
    x->bases = n;
    size_t i = xr_bases_upper(x, base);
    memmove(x->bases + i + 1, x->bases + i, (x->nbases - i) * sizeof *x->bases);
    x->bases[i] = base;
    x->nbases++;
    return 0;
}

static void bases_remove(xr_t *x, uint64_t base)
{
    size_t i = xr_bases_upper(x, base);
    if (i && x->bases[i - 1] == base) {
        memmove(x->bases + i - 1, x->bases + i, (x->nbases - i) * sizeof *x->bases);
        x->nbases--;
    }
}

const xr_segment_t *xr_segment_of(const xr_t *x, unsigned dev, uint64_t ptr)
{
    size_t i = xr_bases_upper(x, ptr);
    if (!i)
        return NULL;
    const xr_segment_t *g = segment_find(x, x->bases[i - 1]);
    return g && g->dev == dev && ptr < g->base + g->size ? g : NULL;
}

const model_oom_t *xr_model_oom(const model_t *m, uint64_t seq)
{
    for (size_t i = 0; i < m->nooms; i++)
        if (m->ooms[i].seq == seq)
            return &m->ooms[i];
    return NULL;
}

const char *xr_log_title(const rd_log_t *lf, const model_t *m, char *buf, size_t len)
{
    char name[96];
    const char *host = rd_meta_get(lf, GMLOG_META_HOST);
    snprintf(buf, len, "%s%s%s", cli_log_name(lf, m, name, sizeof name), host ? " on " : "", host ? host : "");
    return buf;
}

int xr_mark_matches(const char *want, uint32_t id, const char *label)
{
    if (!want)
        return 0;
    char *end;
    long n = strtol(want, &end, 10);
    if (!*end && *want && n > 0 && (uint64_t)n == id)
        return 1;
    return label && !strcmp(label, want);
}

/* The label memory outside the pool is counted under, for a block of this kind. */
static unsigned lib_index(xr_t *x, xr_dev_t *d, unsigned kind, const rd_rec_t *r, const ev_t *ev)
{
    char name[64];
    switch (kind) {
    case GMLOG_KIND_PASS: snprintf(name, sizeof name, "cudaMalloc (pool off)"); break;
    case GMLOG_KIND_MANAGED: snprintf(name, sizeof name, "cudaMallocManaged"); break;
    case GMLOG_KIND_PITCHED: snprintf(name, sizeof name, "cudaMallocPitch"); break;
    case GMLOG_KIND_ASYNC: snprintf(name, sizeof name, "cudaMallocAsync"); break;
    default: {
        const char *s = r->len >= 40 ? model_string(x->m, (uint32_t)ev->aux) : NULL;
        snprintf(name, sizeof name, "%s", s && *s ? s : "unknown library");
        break;
    }
    }
    for (unsigned i = 0; i < d->nlibs; i++)
        if (!strcmp(d->lib[i], name))
            return i;
    if (d->nlibs < XR_MAX_LIBS - 1) {
        snprintf(d->lib[d->nlibs], sizeof d->lib[0], "%s", name);
        return d->nlibs++;
    }
    snprintf(d->lib[XR_MAX_LIBS - 1], sizeof d->lib[0], "other libraries");
    d->nlibs = XR_MAX_LIBS;
    return XR_MAX_LIBS - 1;
}

static xr_dev_t *dev_of(xr_t *x, unsigned id)
{
    if (id >= GMLOG_NO_DEVICE)
        return NULL;
    xr_dev_t *d = &x->dev[id];
    d->present = 1;
    if ((int)id + 1 > x->ndev)
        x->ndev = (int)id + 1;
    return d;
}

static void count_block(xr_dev_t *d, const xr_block_t *b, int sign)
{
    uint64_t *f[3] = {&d->allocated, &d->requested, &d->reserved};
    uint64_t v[3] = {b->size, b->req, b->size};
    int n = xr_kind_allocated(b->kind) ? (kind_reserved(b->kind) ? 3 : 2) : 0;
    for (int i = 0; i < n; i++)
        *f[i] = sign > 0 ? *f[i] + v[i] : (*f[i] > v[i] ? *f[i] - v[i] : 0);
    if (b->kind != GMLOG_KIND_POOL && xr_kind_on_device(b->kind)) {
        uint64_t *l = &d->lib_bytes[b->lib];
        *l = sign > 0 ? *l + b->size : (*l > b->size ? *l - b->size : 0);
    }
}

static uint64_t minus(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

/* A block goes. A pending tensor (its free requested, counted out already) completes its free. */
static void free_block(xr_t *x, xr_block_t *b, const rd_rec_t *r, uint32_t free_site, int state, xr_fn fn,
                       void *arg)
{
    xr_dev_t *d = &x->dev[b->dev];
    xr_event_t e = {b->pending ? XR_FREE_COMPLETED : XR_FREE, r, b, NULL, b->dev, state, free_site, NULL, 0};
    fn(x, &e, arg);
    if (b->pending)
        d->pending = minus(d->pending, b->size);
    else
        count_block(d, b, -1);
    if (r && r->type == GMLOG_FREE && b->kind == GMLOG_KIND_POOL && (r->flags & GMLOG_F_DEFERRED))
        d->pending += b->size;
    block_remove(x, b);
}

/* A new block at ptr (a pointer allocated twice ends its first block). */
static int new_block(xr_t *x, const rd_rec_t *r, const xr_block_t *want, xr_fn fn, void *arg)
{
    int state = r->ckpt == RD_CKPT_STATE;
    xr_block_t *old = block_find(x, want->ptr);
    if (old)
        free_block(x, old, NULL, 0, state, fn, arg);
    xr_block_t *b = block_insert(x, want->ptr);
    if (!b)
        return -1;
    *b = *want;
    b->t = r->t;
    b->dev = r->device;
    b->stray = b->kind == GMLOG_KIND_POOL && !xr_segment_of(x, r->device, b->ptr);
    count_block(&x->dev[r->device], b, +1);
    xr_event_t e = {XR_ALLOC, r, b, NULL, r->device, state, 0, NULL, 0};
    fn(x, &e, arg);
    return 0;
}

static int on_alloc(xr_t *x, const rd_rec_t *r, const ev_t *ev, xr_fn fn, void *arg)
{
    xr_dev_t *d = dev_of(x, r->device);
    if (!d || !ev->ptr)
        return 0;
    unsigned kind = ev->kind;
    xr_block_t b = {.ptr = ev->ptr, .size = ev->size, .req = ev->req, .site = ev->site, .kind = (uint8_t)kind};
    b.stream = ev->stream;
    b.lib = kind != GMLOG_KIND_POOL && xr_kind_on_device(kind) ? (uint8_t)lib_index(x, d, kind, r, ev) : 0;
    return new_block(x, r, &b, fn, arg);
}

static void on_free(xr_t *x, const rd_rec_t *r, const ev_t *ev, xr_fn fn, void *arg)
{
    xr_block_t *b = block_find(x, ev->ptr);
    if (b)
        free_block(x, b, r, ev->site, r->ckpt == RD_CKPT_STATE, fn, arg);
}

/* A segment made or gone (a PyTorch segment's with its stream and site). */
static int on_segment(xr_t *x, const rd_rec_t *r, const ev_t *ev, xr_fn fn, void *arg)
{
    xr_dev_t *d = dev_of(x, r->device);
    if (!d || !ev->ptr)
        return 0;
    xr_segment_t *g = segment_find(x, ev->ptr);
    int state = r->ckpt == RD_CKPT_STATE;
    if (ev->type == EV_SEGMENT_FREE) {
        if (!g)
            return 0;
        xr_event_t e = {XR_SEGMENT_FREE, r, NULL, g, g->dev, state, 0, NULL, 0};
        fn(x, &e, arg);
        d->reserved = d->reserved > g->size ? d->reserved - g->size : 0;
        bases_remove(x, g->base);
        segment_remove(x, g);
        return 0;
    }
    if (g) { /* the same base twice: the first one is gone */
        xr_dev_t *od = &x->dev[g->dev];
        xr_event_t e = {XR_SEGMENT_FREE, r, NULL, g, g->dev, state, 0, NULL, 0};
        fn(x, &e, arg);
        od->reserved = od->reserved > g->size ? od->reserved - g->size : 0;
        bases_remove(x, g->base);
        segment_remove(x, g);
    }
    if (!(g = segment_insert(x, ev->ptr)) || bases_add(x, ev->ptr))
        return -1;
    g->size = ev->size;
    g->t = r->t;
    g->graph = ev->graph;
    g->stream = ev->stream;
    g->site = ev->site;
    g->dev = r->device;
    d->reserved += ev->size;
    xr_event_t e = {XR_SEGMENT_ALLOC, r, NULL, g, r->device, state, 0, NULL, 0};
    fn(x, &e, arg);
    return 0;
}

/* cudaDeviceReset: every block and segment of the device is gone. */
static void on_reset(xr_t *x, const rd_rec_t *r, xr_fn fn, void *arg)
{
    for (size_t i = 0; i < x->capblk;) {
        xr_block_t *b = &x->blk[i];
        if (b->ptr && b->dev == r->device)
            free_block(x, b, r, 0, 0, fn, arg); /* the run shifts back: look at slot i again */
        else
            i++;
    }
    for (size_t i = 0; i < x->capseg;) {
        xr_segment_t *g = &x->seg[i];
        if (g->base && g->dev == r->device) {
            xr_event_t e = {XR_SEGMENT_FREE, r, NULL, g, g->dev, 0, 0, NULL, 0};
            fn(x, &e, arg);
            bases_remove(x, g->base);
            segment_remove(x, g);
        } else {
            i++;
        }
    }
    if (r->device < GMLOG_NO_DEVICE)
        x->dev[r->device].reserved = x->dev[r->device].pending = 0;
}

static void on_mark(xr_t *x, const rd_rec_t *r, xr_fn fn, void *arg)
{
    const gmlog_mark_t *mk = (const gmlog_mark_t *)r->p;
    const char *label;
    size_t len = mk->len;
    if (rd_tail_bytes(r, sizeof *mk, len, &label))
        label = "", len = 0;
    if (len >= sizeof x->label)
        len = sizeof x->label - 1;
    memcpy(x->label, label, len);
    x->label[len] = 0;
    xr_event_t e = {XR_MARK, r, NULL, NULL, GMLOG_NO_DEVICE, 0, 0, x->label, mk->id};
    fn(x, &e, arg);
    if ((x->stop_mark_id && (int64_t)mk->id == x->stop_mark_id) ||
        (x->stop_mark_label && !strcmp(x->label, x->stop_mark_label)))
        x->stopped = 1;
}

static int changed(xr_t *x, const rd_rec_t *r, int rc, xr_fn fn, void *arg)
{
    xr_event_t e = {XR_CHANGED, r, NULL, NULL, r->device, r->ckpt == RD_CKPT_STATE, 0, NULL, 0};
    if (!rc && r->device < GMLOG_NO_DEVICE && x->dev[r->device].present)
        fn(x, &e, arg);
    return rc;
}

/* ---- PyTorch's tensors (the decoder's view, events.c) -------------------------------------- */

/* PyTorch's OutOfMemoryError: the model's record of it (its pool figures are PyTorch's), or the
 * decoder's with this replay's figures when the model kept no more OOMs. */
static void t_oom(xr_t *x, const rd_rec_t *r, const ev_t *ev, xr_fn fn, void *arg)
{
    const model_oom_t *mo = xr_model_oom(x->m, r->seq);
    gmlog_oom_t o;
    if (mo) {
        o = mo->rec;
    } else {
        o = *ev->oom;
        const xr_dev_t *d = &x->dev[r->device];
        o.reserved = d->reserved, o.allocated = d->allocated, o.requested = d->requested, o.pending = d->pending;
        if (!ev->aux)
            o.driver_free = ev->ptr;
    }
    rd_rec_t n = *r;
    n.p = (const uint8_t *)&o;
    n.type = GMLOG_OOM;
    n.flags = o.h.flags;
    n.len = sizeof o;
    xr_event_t e = {XR_OOM, &n, NULL, NULL, r->device, r->ckpt == RD_CKPT_STATE, 0, NULL, 0};
    fn(x, &e, arg);
}

/* Expandable segments: each segment the ranges changed resized in place (its blocks stay where
 * they are; two segments joined become one), new or gone; then one event for the record. */
static int t_mapped(xr_t *x, const rd_rec_t *r, const ev_t *ev, int n, xr_fn fn, void *arg)
{
    xr_dev_t *d = &x->dev[r->device];
    int changes = 0;
    for (int i = 0; i < n && x->want_resizing; i++)
        if (ev[i].mapped) {
            xr_event_t pre = {XR_RESIZING, r, NULL, NULL, r->device, r->ckpt == RD_CKPT_STATE, 0, NULL, 0};
            fn(x, &pre, arg);
            break;
        }
    for (int i = 0; i < n; i++) {
        if (!ev[i].mapped)
            continue;
        changes++;
        xr_segment_t *g = segment_find(x, ev[i].ptr);
        if (ev[i].type == EV_SEGMENT_FREE) {
            if (g) {
                d->reserved = d->reserved > g->size ? d->reserved - g->size : 0;
                bases_remove(x, g->base);
                segment_remove(x, g);
            }
            continue;
        }
        if (g) {
            d->reserved = d->reserved - g->size + ev[i].size;
            g->size = ev[i].size;
            continue;
        }
        if (!(g = segment_insert(x, ev[i].ptr)) || bases_add(x, ev[i].ptr))
            return -1;
        *g = (xr_segment_t){.base = ev[i].ptr, .size = ev[i].size, .t = r->t, .stream = ev[i].stream,
                            .site = ev[i].site, .graph = ev[i].graph, .dev = r->device, .expandable = 1};
        d->reserved += ev[i].size;
    }
    if (changes) {
        int map = r->type == GMLOG_T_SEGMENT_MAP;
        const xr_segment_t *seg = map ? xr_segment_of(x, r->device, ((const gmlog_tensor_t *)r->p)->addr) : NULL;
        xr_event_t e = {map ? XR_SEGMENT_MAP : XR_SEGMENT_UNMAP, r, NULL, seg, r->device, r->ckpt == RD_CKPT_STATE,
                        0, NULL, 0};
        fn(x, &e, arg);
    }
    return 0;
}

static xr_block_t tensor_block(const ev_t *ev)
{
    xr_block_t b = {.ptr = ev->ptr, .req = ev->req, .site = ev->site, .kind = GMLOG_KIND_POOL, .stream = ev->stream};
    b.size = ((b.req ? b.req : 1) + 511) & ~511ull; /* PyTorch rounds every block to 512 bytes */
    return b;
}

/* A tensor's free requested: it is gone (allocated no more), its block pending until the free
 * completes (PyTorch's wait for the streams record_stream named). */
static void t_free_requested(xr_t *x, const rd_rec_t *r, const ev_t *ev, xr_fn fn, void *arg)
{
    xr_block_t *b = block_find(x, ev->ptr);
    if (!b && r->ckpt == RD_CKPT_STATE && ev->ptr) { /* pending at a wrapped log's cut: its tensor first */
        xr_block_t want = tensor_block(ev);
        if (new_block(x, r, &want, fn, arg) == 0)
            b = block_find(x, ev->ptr);
    }
    if (!b || b->pending || b->dev != r->device)
        return;
    xr_dev_t *d = &x->dev[b->dev];
    b->pending = 1;
    xr_event_t e = {XR_FREE, r, b, NULL, b->dev, r->ckpt == RD_CKPT_STATE, ev->site, NULL, 0};
    fn(x, &e, arg);
    count_block(d, b, -1);
    d->pending += b->size;
}

static int tensor_events(xr_t *x, const rd_rec_t *r, const ev_t *ev, int n, xr_fn fn, void *arg)
{
    if (ev[0].malformed || !dev_of(x, r->device))
        return 0;
    xr_block_t *b;
    switch (r->type) {
    case GMLOG_T_ALLOC: {
        xr_block_t want = tensor_block(&ev[0]);
        return ev[0].ptr ? changed(x, r, new_block(x, r, &want, fn, arg), fn, arg) : 0;
    }
    case GMLOG_T_FREE_REQUESTED: t_free_requested(x, r, &ev[0], fn, arg); break;
    case GMLOG_T_FREE_COMPLETED:
        if (!(b = block_find(x, ev[0].ptr)) || !b->pending)
            return 0;
        free_block(x, b, r, ev[0].site, r->ckpt == RD_CKPT_STATE, fn, arg);
        break;
    case GMLOG_T_SEGMENT_ALLOC:
    case GMLOG_T_SEGMENT_FREE: return changed(x, r, on_segment(x, r, &ev[0], fn, arg), fn, arg);
    case GMLOG_T_SEGMENT_MAP:
    case GMLOG_T_SEGMENT_UNMAP: return changed(x, r, t_mapped(x, r, ev, n, fn, arg), fn, arg);
    case GMLOG_T_OOM: t_oom(x, r, &ev[0], fn, arg); return 0;
    default: return 0;
    }
    return changed(x, r, 0, fn, arg);
}

/* The decoder's events of one record: a block's, a segment's, an OOM. */
static int events(xr_t *x, const rd_rec_t *r, const ev_t *ev, int n, xr_fn fn, void *arg)
{
    if (ev[0].tensor)
        return tensor_events(x, r, ev, n, fn, arg);
    switch (ev[0].type) {
    case EV_ALLOC: return changed(x, r, on_alloc(x, r, &ev[0], fn, arg), fn, arg);
    case EV_FREE: on_free(x, r, &ev[0], fn, arg); return changed(x, r, 0, fn, arg);
    case EV_SEGMENT_ALLOC:
    case EV_SEGMENT_FREE: return changed(x, r, on_segment(x, r, &ev[0], fn, arg), fn, arg);
    case EV_OOM: {
        dev_of(x, r->device);
        xr_event_t e = {XR_OOM, r, NULL, NULL, r->device, r->ckpt == RD_CKPT_STATE, 0, NULL, 0};
        fn(x, &e, arg);
        return 0;
    }
    default: return 0; /* a hook record PyTorch's events stand for */
    }
}

static int step(xr_t *x, const rd_rec_t *r, xr_fn fn, void *arg)
{
    ev_t ev[EV_MAX];
    int n = ev_decode(&x->ev, r, ev);
    if (n < 0)
        return -1;
    if (n > 0)
        return events(x, r, ev, n, fn, arg);
    xr_dev_t *d;
    xr_event_t e = {0, r, NULL, NULL, r->device, r->ckpt == RD_CKPT_STATE, 0, NULL, 0};
    switch (r->type) {
    case GMLOG_RESET: on_reset(x, r, fn, arg); return changed(x, r, 0, fn, arg);
    case GMLOG_MARK: on_mark(x, r, fn, arg); return 0;
    case GMLOG_DEVICE:
        if ((d = dev_of(x, r->device)))
            d->total = ((const gmlog_device_t *)r->p)->total;
        e.type = XR_DEVICE;
        break;
    case GMLOG_FENCE:
        /* on a tensor device gmshim's fences are not PyTorch's: its pending blocks stand for them */
        if (ev_tensor_dev(&x->ev, r->device) || !(d = dev_of(x, r->device)) || r->ckpt)
            return 0;
        d->pending = ((const gmlog_fence_t *)r->p)->pending_bytes;
        e.type = XR_FENCE;
        fn(x, &e, arg);
        return changed(x, r, 0, fn, arg);
    case GMLOG_EMPTY_CACHE: e.type = XR_EMPTY_CACHE; dev_of(x, r->device); break;
    case GMLOG_LEDGER: /* a wrapped log's checkpoint repeats each device's last sample, at its time */
        if ((r->ckpt && r->ckpt != RD_CKPT_HISTORY) || !dev_of(x, r->device))
            return 0;
        e.type = XR_LEDGER;
        break;
    default: return 0;
    }
    fn(x, &e, arg);
    return 0;
}

int xr_run(xr_t *x, rd_log_t *lf, const model_t *m, xr_fn fn, void *arg)
{
    x->lf = lf;
    x->m = m;
    if (m && m->torch && ev_dec_seed(&x->ev, &m->ev))
        return -1; /* the model's scan found PyTorch's tensors: no second pass for them */
    rd_window(lf, 0, UINT64_MAX);
    rd_rewind(lf);
    rd_rec_t r;
    while (!x->stopped && rd_next(lf, &r)) {
        if (r.ckpt == RD_CKPT_DEF || (r.ckpt == RD_CKPT_STATE && r.type == GMLOG_CUT))
            continue;
        if (rd_min_len(r.type) && r.len < rd_min_len(r.type))
            continue;
        if (r.t > x->last_t)
            x->last_t = r.t;
        x->events++;
        if (step(x, &r, fn, arg))
            return -1;
        if (x->stop_events && x->events >= x->stop_events)
            break;
    }
    return 0;
}

void xr_free(xr_t *x)
{
    free(x->blk);
    free(x->seg);
    free(x->bases);
    ev_dec_free(&x->ev);
    x->blk = NULL;
    x->seg = NULL;
    x->bases = NULL;
    x->nblk = x->capblk = x->nseg = x->capseg = x->nbases = x->capbases = 0;
}
