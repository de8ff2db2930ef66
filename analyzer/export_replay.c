/* The replay the exports and the timeline share (export.h): every live block and segment of a
 * log, by address, with the figures of each device, each record handed on as an event. It
 * trusts nothing in the log: a free of an unknown pointer or segment is skipped, a pointer
 * allocated twice ends its first block. Memory grows with what is live, never with events. */
#include "export.h"
#include "vec.h"
#include "torch_events.h"

#include <stddef.h>
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

static size_t slot_of(uint64_t key, size_t cap)
{
    return (size_t)((key >> 9) * 0x9E3779B97F4A7C15ull >> 17) & (cap - 1);
}

/* Open addressing with linear probing; deletion shifts the run back (no tombstones). The two
 * tables differ only in their element, so the code is written once over byte offsets. */
typedef struct table {
    void **arr;
    size_t *n, *cap, elem, key_off, used_off;
} table_t;

#define KEY(t, p) (*(uint64_t *)((char *)(p) + (t)->key_off))
#define USED(t, p) (*(uint8_t *)((char *)(p) + (t)->used_off))
#define AT(t, i) ((char *)*(t)->arr + (i) * (t)->elem)

static void *table_find(const table_t *t, uint64_t key)
{
    if (!*t->cap)
        return NULL;
    for (size_t i = slot_of(key, *t->cap);; i = (i + 1) & (*t->cap - 1)) {
        char *p = AT(t, i);
        if (!USED(t, p))
            return NULL;
        if (KEY(t, p) == key)
            return p;
    }
}

static int table_grow(table_t *t)
{
    size_t ncap = *t->cap ? *t->cap * 2 : 1024;
    char *nar = calloc(ncap, t->elem);
    if (!nar)
        return -1;
    char *old = *t->arr;
    size_t ocap = *t->cap;
    for (size_t i = 0; i < ocap; i++) {
        char *p = old + i * t->elem;
        if (!USED(t, p))
            continue;
        size_t j = slot_of(KEY(t, p), ncap);
        while (USED(t, nar + j * t->elem))
            j = (j + 1) & (ncap - 1);
        memcpy(nar + j * t->elem, p, t->elem);
    }
    free(old);
    *t->arr = nar;
    *t->cap = ncap;
    return 0;
}

/* A new slot for key (which must not be there), or NULL when out of memory. */
static void *table_insert(table_t *t, uint64_t key)
{
    if ((*t->n + 1) * 4 > *t->cap * 3 && table_grow(t))
        return NULL;
    size_t i = slot_of(key, *t->cap);
    while (USED(t, AT(t, i)))
        i = (i + 1) & (*t->cap - 1);
    char *p = AT(t, i);
    memset(p, 0, t->elem);
    KEY(t, p) = key;
    USED(t, p) = 1;
    (*t->n)++;
    return p;
}

static void table_remove(table_t *t, void *victim)
{
    size_t cap = *t->cap, i = (size_t)((char *)victim - (char *)*t->arr) / t->elem;
    USED(t, AT(t, i)) = 0;
    (*t->n)--;
    for (size_t j = (i + 1) & (cap - 1); USED(t, AT(t, j)); j = (j + 1) & (cap - 1)) {
        size_t home = slot_of(KEY(t, AT(t, j)), cap);
        /* move j back into the hole at i unless its home lies cyclically in (i, j] */
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (stays)
            continue;
        memcpy(AT(t, i), AT(t, j), t->elem);
        USED(t, AT(t, j)) = 0;
        i = j;
    }
}

/* The sorted bases: the first index whose base is above `base`. */
static size_t bases_upper(const xr_t *x, uint64_t base)
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
    size_t i = bases_upper(x, base);
    memmove(x->bases + i + 1, x->bases + i, (x->nbases - i) * sizeof *x->bases);
    x->bases[i] = base;
    x->nbases++;
    return 0;
}

static void bases_remove(xr_t *x, uint64_t base)
{
    size_t i = bases_upper(x, base);
    if (i && x->bases[i - 1] == base) {
        memmove(x->bases + i - 1, x->bases + i, (x->nbases - i) * sizeof *x->bases);
        x->nbases--;
    }
}

static table_t blocks_of(xr_t *x)
{
    return (table_t){(void **)&x->blk, &x->nblk, &x->capblk, sizeof(xr_block_t), offsetof(xr_block_t, ptr),
                     offsetof(xr_block_t, used)};
}

static table_t segments_of(xr_t *x)
{
    return (table_t){(void **)&x->seg, &x->nseg, &x->capseg, sizeof(xr_segment_t), offsetof(xr_segment_t, base),
                     offsetof(xr_segment_t, used)};
}

const xr_segment_t *xr_segment_of(const xr_t *x, unsigned dev, uint64_t ptr)
{
    size_t i = bases_upper(x, ptr);
    if (!i)
        return NULL;
    table_t t = segments_of((xr_t *)x);
    const xr_segment_t *g = table_find(&t, x->bases[i - 1]);
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
static unsigned lib_index(xr_t *x, xr_dev_t *d, unsigned kind, const rd_rec_t *r)
{
    const gmlog_alloc_t *a = (const gmlog_alloc_t *)r->p;
    char name[64];
    switch (kind) {
    case GMLOG_KIND_PASS: snprintf(name, sizeof name, "cudaMalloc (pool off)"); break;
    case GMLOG_KIND_MANAGED: snprintf(name, sizeof name, "cudaMallocManaged"); break;
    case GMLOG_KIND_PITCHED: snprintf(name, sizeof name, "cudaMallocPitch"); break;
    case GMLOG_KIND_ASYNC: snprintf(name, sizeof name, "cudaMallocAsync"); break;
    default: {
        const char *s = r->len >= 40 ? model_string(x->m, (uint32_t)a->block) : NULL;
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
    table_t t = blocks_of(x);
    table_remove(&t, b);
}

/* A new block at ptr (a pointer allocated twice ends its first block). */
static int new_block(xr_t *x, const rd_rec_t *r, const xr_block_t *want, xr_fn fn, void *arg)
{
    int state = r->ckpt == RD_CKPT_STATE;
    table_t t = blocks_of(x);
    xr_block_t *old = table_find(&t, want->ptr);
    if (old)
        free_block(x, old, NULL, 0, state, fn, arg);
    xr_block_t *b = table_insert(&t, want->ptr);
    if (!b)
        return -1;
    *b = *want;
    b->used = 1;
    b->t = r->t;
    b->dev = r->device;
    b->stray = b->kind == GMLOG_KIND_POOL && !xr_segment_of(x, r->device, b->ptr);
    count_block(&x->dev[r->device], b, +1);
    xr_event_t e = {XR_ALLOC, r, b, NULL, r->device, state, 0, NULL, 0};
    fn(x, &e, arg);
    return 0;
}

static int on_alloc(xr_t *x, const rd_rec_t *r, xr_fn fn, void *arg)
{
    const gmlog_alloc_t *a = (const gmlog_alloc_t *)r->p;
    xr_dev_t *d = dev_of(x, r->device);
    if (!d || !a->ptr)
        return 0;
    unsigned kind = (r->flags & GMLOG_KIND_MASK) >> GMLOG_KIND_SHIFT;
    uint64_t req = a->size & GMLOG_SIZE_MASK, extra = a->size >> GMLOG_SIZE_BITS, block = req;
    if (kind == GMLOG_KIND_POOL) {
        uint64_t rounded = ((req ? req : 1) + 511) & ~511ull;
        block = extra == 0xffff ? (r->len >= 40 ? a->block : rounded) : rounded + extra * 512;
        if (block & ~GMLOG_SIZE_MASK)
            block = rounded;
    }
    xr_block_t b = {.ptr = a->ptr, .size = block, .req = req, .site = a->site, .kind = (uint8_t)kind};
    b.stream = kind == GMLOG_KIND_ASYNC && r->len >= 40 ? a->block : 0;
    b.lib = kind != GMLOG_KIND_POOL && xr_kind_on_device(kind) ? (uint8_t)lib_index(x, d, kind, r) : 0;
    return new_block(x, r, &b, fn, arg);
}

static void on_free(xr_t *x, const rd_rec_t *r, xr_fn fn, void *arg)
{
    const gmlog_free_t *f = (const gmlog_free_t *)r->p;
    table_t t = blocks_of(x);
    xr_block_t *b = table_find(&t, f->ptr);
    if (b)
        free_block(x, b, r, f->site, r->ckpt == RD_CKPT_STATE, fn, arg);
}

static int on_segment(xr_t *x, const rd_rec_t *r, uint64_t stream, uint32_t site, xr_fn fn, void *arg)
{
    const gmlog_segment_t *s = (const gmlog_segment_t *)r->p;
    xr_dev_t *d = dev_of(x, r->device);
    if (!d)
        return 0;
    table_t t = segments_of(x);
    xr_segment_t *g = table_find(&t, s->base);
    int state = r->ckpt == RD_CKPT_STATE;
    if (r->type == GMLOG_SEGMENT_FREE) {
        if (!g)
            return 0;
        xr_event_t e = {XR_SEGMENT_FREE, r, NULL, g, g->dev, state, 0, NULL, 0};
        fn(x, &e, arg);
        d->reserved = d->reserved > g->size ? d->reserved - g->size : 0;
        bases_remove(x, g->base);
        table_remove(&t, g);
        return 0;
    }
    if (g) { /* the same base twice: the first one is gone */
        xr_dev_t *od = &x->dev[g->dev];
        xr_event_t e = {XR_SEGMENT_FREE, r, NULL, g, g->dev, state, 0, NULL, 0};
        fn(x, &e, arg);
        od->reserved = od->reserved > g->size ? od->reserved - g->size : 0;
        bases_remove(x, g->base);
        table_remove(&t, g);
    }
    if (!(g = table_insert(&t, s->base)) || bases_add(x, s->base))
        return -1;
    g->size = s->size;
    g->t = r->t;
    g->graph = s->graph;
    g->stream = stream;
    g->site = site;
    g->dev = r->device;
    d->reserved += s->size;
    xr_event_t e = {XR_SEGMENT_ALLOC, r, NULL, g, r->device, state, 0, NULL, 0};
    fn(x, &e, arg);
    return 0;
}

/* cudaDeviceReset: every block and segment of the device is gone. */
static void on_reset(xr_t *x, const rd_rec_t *r, xr_fn fn, void *arg)
{
    for (size_t i = 0; i < x->capblk;) {
        xr_block_t *b = &x->blk[i];
        if (b->used && b->dev == r->device)
            free_block(x, b, r, 0, 0, fn, arg); /* the run shifts back: look at slot i again */
        else
            i++;
    }
    table_t t = segments_of(x);
    for (size_t i = 0; i < x->capseg;) {
        xr_segment_t *g = &x->seg[i];
        if (g->used && g->dev == r->device) {
            xr_event_t e = {XR_SEGMENT_FREE, r, NULL, g, g->dev, 0, 0, NULL, 0};
            fn(x, &e, arg);
            bases_remove(x, g->base);
            table_remove(&t, g);
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

/* ---- PyTorch's tensors (the model's rules, model_torch.c) ---------------------------------- */

static int torch_device(const xr_t *x, unsigned dev)
{
    return x->m && x->m->torch && dev < 256 && x->m->torch_dev[dev];
}

/* A hook record that PyTorch's own events stand for on a tensor device: gmshim's segments and
 * fences, the cudaMalloc and cudaFree of PyTorch's segments, the failed cudaMalloc (kept for
 * the T_OOM that follows when PyTorch raises). */
static int torch_drops(xr_t *x, const rd_rec_t *r)
{
    uint64_t ptr;
    switch (r->type) {
    case GMLOG_SEGMENT_ALLOC:
    case GMLOG_SEGMENT_FREE:
    case GMLOG_FENCE: return 1;
    case GMLOG_OOM:
        memset(&x->hook_oom, 0, sizeof x->hook_oom);
        memcpy(&x->hook_oom, r->p, r->len < sizeof x->hook_oom ? r->len : sizeof x->hook_oom);
        x->hook_oom_seen = 1;
        return 1;
    case GMLOG_ALLOC:
    case GMLOG_FREE:
        memcpy(&ptr, r->p + 8, 8);
        return model_torch_segment_base(x->m, ptr);
    default: return 0;
    }
}

/* PyTorch's OutOfMemoryError: the model's record of it (its pool figures are PyTorch's), or one
 * made the model's way when the model kept no more OOMs. */
static void t_oom(xr_t *x, const rd_rec_t *r, const gmlog_tensor_t *t, xr_fn fn, void *arg)
{
    const model_oom_t *mo = xr_model_oom(x->m, r->seq);
    gmlog_oom_t o;
    if (mo) {
        o = mo->rec;
    } else {
        torch_oom_record(&o, x->hook_oom_seen ? &x->hook_oom : NULL, t);
        const xr_dev_t *d = &x->dev[r->device];
        o.reserved = d->reserved, o.allocated = d->allocated, o.requested = d->requested, o.pending = d->pending;
        if (!x->hook_oom_seen)
            o.driver_free = t->addr;
    }
    x->hook_oom_seen = 0;
    rd_rec_t n = *r;
    n.p = (const uint8_t *)&o;
    n.type = GMLOG_OOM;
    n.flags = o.h.flags;
    n.len = sizeof o;
    xr_event_t e = {XR_OOM, &n, NULL, NULL, r->device, r->ckpt == RD_CKPT_STATE, 0, NULL, 0};
    fn(x, &e, arg);
}

static int t_segment(xr_t *x, const rd_rec_t *r, const gmlog_tensor_t *t, int alloc, xr_fn fn, void *arg)
{
    gmlog_segment_t g;
    memset(&g, 0, sizeof g);
    g.base = t->addr;
    g.size = t->size;
    g.graph = t->pool;
    rd_rec_t n = *r;
    n.p = (const uint8_t *)&g;
    n.type = alloc ? GMLOG_SEGMENT_ALLOC : GMLOG_SEGMENT_FREE;
    n.len = sizeof g;
    return on_segment(x, &n, t->stream, t->site, fn, arg);
}

/* Expandable segments: the range's segment resized in place (its blocks stay where they are; two
 * segments joined become one), new, split or gone (torch_events.h); then one event for the record. */
static int t_mapped(xr_t *x, const rd_rec_t *r, const gmlog_tensor_t *t, int map, xr_fn fn, void *arg)
{
    xr_dev_t *d = dev_of(x, r->device);
    torch_change_t ch[4];
    int n = d ? torch_ranges_apply(&x->ranges, r->device, map, t->addr, t->size, ch) : 0;
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        table_t tb = segments_of(x);
        xr_segment_t *g = table_find(&tb, ch[i].base);
        if (!ch[i].size) {
            if (g) {
                d->reserved = d->reserved > g->size ? d->reserved - g->size : 0;
                bases_remove(x, g->base);
                table_remove(&tb, g);
            }
            continue;
        }
        if (g) {
            d->reserved = d->reserved - g->size + ch[i].size;
            g->size = ch[i].size;
            continue;
        }
        if (!(g = table_insert(&tb, ch[i].base)) || bases_add(x, ch[i].base))
            return -1;
        *g = (xr_segment_t){.base = ch[i].base, .size = ch[i].size, .t = r->t, .stream = t->stream, .site = t->site,
                            .graph = t->pool, .dev = r->device, .used = 1, .expandable = 1};
        d->reserved += ch[i].size;
    }
    if (n) {
        const xr_segment_t *seg = map ? xr_segment_of(x, r->device, t->addr) : NULL;
        xr_event_t e = {map ? XR_SEGMENT_MAP : XR_SEGMENT_UNMAP, r, NULL, seg, r->device, r->ckpt == RD_CKPT_STATE,
                        0, NULL, 0};
        fn(x, &e, arg);
    }
    return 0;
}

static xr_block_t tensor_block(const gmlog_tensor_t *t)
{
    xr_block_t b = {.ptr = t->addr, .req = t->size & GMLOG_SIZE_MASK, .site = t->site, .kind = GMLOG_KIND_POOL,
                    .stream = t->stream};
    b.size = ((b.req ? b.req : 1) + 511) & ~511ull; /* PyTorch rounds every block to 512 bytes */
    return b;
}

/* A tensor's free requested: it is gone (allocated no more), its block pending until the free
 * completes (PyTorch's wait for the streams record_stream named). */
static void t_free_requested(xr_t *x, const rd_rec_t *r, const gmlog_tensor_t *t, xr_fn fn, void *arg)
{
    table_t tb = blocks_of(x);
    xr_block_t *b = table_find(&tb, t->addr);
    if (!b && r->ckpt == RD_CKPT_STATE && t->addr) { /* pending at a wrapped log's cut: its tensor first */
        xr_block_t want = tensor_block(t);
        if (new_block(x, r, &want, fn, arg) == 0)
            b = table_find(&tb, t->addr);
    }
    if (!b || b->pending || b->dev != r->device)
        return;
    xr_dev_t *d = &x->dev[b->dev];
    b->pending = 1;
    xr_event_t e = {XR_FREE, r, b, NULL, b->dev, r->ckpt == RD_CKPT_STATE, t->site, NULL, 0};
    fn(x, &e, arg);
    count_block(d, b, -1);
    d->pending += b->size;
}

static int torch_step(xr_t *x, const rd_rec_t *r, xr_fn fn, void *arg)
{
    const gmlog_tensor_t *t = (const gmlog_tensor_t *)r->p;
    table_t tb = blocks_of(x);
    xr_block_t *b;
    if (!dev_of(x, r->device))
        return 0;
    switch (r->type) {
    case GMLOG_T_ALLOC: {
        xr_block_t want = tensor_block(t);
        return t->addr ? changed(x, r, new_block(x, r, &want, fn, arg), fn, arg) : 0;
    }
    case GMLOG_T_FREE_REQUESTED: t_free_requested(x, r, t, fn, arg); break;
    case GMLOG_T_FREE_COMPLETED:
        if (!(b = table_find(&tb, t->addr)) || !b->pending)
            return 0;
        free_block(x, b, r, t->site, r->ckpt == RD_CKPT_STATE, fn, arg);
        break;
    case GMLOG_T_SEGMENT_ALLOC: return changed(x, r, t_segment(x, r, t, 1, fn, arg), fn, arg);
    case GMLOG_T_SEGMENT_MAP: return changed(x, r, t_mapped(x, r, t, 1, fn, arg), fn, arg);
    case GMLOG_T_SEGMENT_FREE: return changed(x, r, t_segment(x, r, t, 0, fn, arg), fn, arg);
    case GMLOG_T_SEGMENT_UNMAP: return changed(x, r, t_mapped(x, r, t, 0, fn, arg), fn, arg);
    case GMLOG_T_OOM: t_oom(x, r, t, fn, arg); return 0;
    default: return 0;
    }
    return changed(x, r, 0, fn, arg);
}

static int step(xr_t *x, const rd_rec_t *r, xr_fn fn, void *arg)
{
    if (torch_device(x, r->device)) {
        if (torch_is_tensor_type(r->type))
            return r->len >= sizeof(gmlog_tensor_t) ? torch_step(x, r, fn, arg) : 0;
        if (r->len >= 16 && torch_drops(x, r))
            return 0;
    }
    xr_dev_t *d;
    xr_event_t e = {0, r, NULL, NULL, r->device, r->ckpt == RD_CKPT_STATE, 0, NULL, 0};
    switch (r->type) {
    case GMLOG_ALLOC: return changed(x, r, on_alloc(x, r, fn, arg), fn, arg);
    case GMLOG_FREE: on_free(x, r, fn, arg); return changed(x, r, 0, fn, arg);
    case GMLOG_SEGMENT_ALLOC:
    case GMLOG_SEGMENT_FREE: return changed(x, r, on_segment(x, r, 0, 0, fn, arg), fn, arg);
    case GMLOG_RESET: on_reset(x, r, fn, arg); return changed(x, r, 0, fn, arg);
    case GMLOG_MARK: on_mark(x, r, fn, arg); return 0;
    case GMLOG_DEVICE:
        if ((d = dev_of(x, r->device)))
            d->total = ((const gmlog_device_t *)r->p)->total;
        e.type = XR_DEVICE;
        break;
    case GMLOG_FENCE:
        if (!(d = dev_of(x, r->device)) || r->ckpt)
            return 0;
        d->pending = ((const gmlog_fence_t *)r->p)->pending_bytes;
        e.type = XR_FENCE;
        fn(x, &e, arg);
        return changed(x, r, 0, fn, arg);
    case GMLOG_OOM: e.type = XR_OOM; dev_of(x, r->device); break;
    case GMLOG_EMPTY_CACHE: e.type = XR_EMPTY_CACHE; dev_of(x, r->device); break;
    default: return 0;
    }
    fn(x, &e, arg);
    return 0;
}

int xr_run(xr_t *x, rd_log_t *lf, const model_t *m, xr_fn fn, void *arg)
{
    x->lf = lf;
    x->m = m;
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
    }
    return 0;
}

void xr_free(xr_t *x)
{
    free(x->blk);
    free(x->seg);
    free(x->bases);
    torch_ranges_free(&x->ranges);
    x->blk = NULL;
    x->seg = NULL;
    x->bases = NULL;
    x->nblk = x->capblk = x->nseg = x->capseg = x->nbases = x->capbases = 0;
}
