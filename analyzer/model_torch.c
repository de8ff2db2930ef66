/* PyTorch's tensors as the model's allocations. With PyTorch's cache kept and its bridge
 * attached (docs/pytorch.md), a device's log holds two views of the same memory: the cudaMalloc
 * calls the hooks saw (ALLOC records, one per PyTorch segment, inside gmshim's SEGMENT_ALLOCs)
 * and PyTorch's own events (GMLOG_T_*). On such a device the model takes PyTorch's view:
 * T_ALLOC is an allocation (its site, its stream), T_FREE_REQUESTED the program's free (the
 * block then pending until T_FREE_COMPLETED), T_SEGMENT_* the segments. The segment ALLOCs and
 * frees, and gmshim's own segments, are left out, so that nothing is counted twice. Records are
 * rewritten into the model's own layouts and go through the reducer's paths: sites, epochs,
 * peaks, fragmentation and OOM snapshots come out tensor-level without code of their own.
 * Logs without tensor events never reach this file (model_torch_scan finds none). */
#include "model_int.h"
#include "torch_events.h"

static void add_segment_base(void *arg, uint64_t base)
{
    map_put(&((model_t *)arg)->torch_segbase, base, 1);
}

void model_torch_scan(model_t *m, rd_log_t *lf)
{
    m->torch = torch_events_scan(lf, -1, m->torch_dev, add_segment_base, m);
}

static int is_torch_segment(const model_t *m, uint64_t ptr)
{
    return map_find(&m->torch_segbase, ptr) != NULL;
}

/* Whether the reducer drops a hook record on a tensor device: gmshim's segments (PyTorch's
 * segments stand for them), the ALLOC / FREE of a PyTorch segment (its T_SEGMENT_* count it),
 * and the hooks' OOM (PyTorch's failed segment ask: kept for the T_OOM that follows it, when
 * PyTorch raises; a retry that PyTorch got past after releasing its cache is no failure). */
int model_torch_drops(model_t *m, const rd_rec_t *r)
{
    if (r->type == GMLOG_OOM) {
        if (r->len >= sizeof(gmlog_oom_t)) {
            memcpy(&m->torch_hook_oom, r->p, sizeof m->torch_hook_oom);
            m->torch_hook_oom_seen = 1;
        }
        return 1;
    }
    if (r->type == GMLOG_SEGMENT_ALLOC || r->type == GMLOG_SEGMENT_FREE)
        return 1;
    uint64_t ptr;
    memcpy(&ptr, r->p + 8, 8);
    return is_torch_segment(m, ptr);
}

static rd_rec_t rewritten(const rd_rec_t *r, uint8_t type, uint8_t flags, const void *body, uint32_t len)
{
    rd_rec_t n = *r;
    n.p = body;
    n.type = type;
    n.flags = flags;
    n.len = len;
    return n;
}

static void t_alloc(model_t *m, model_dev_t *d, const rd_rec_t *r, const gmlog_tensor_t *t)
{
    gmlog_alloc_t a;
    memset(&a, 0, sizeof a);
    a.h = t->h;
    a.h.type = GMLOG_ALLOC;
    a.ptr = t->addr;
    a.size = t->size & GMLOG_SIZE_MASK; /* PyTorch rounds to 512 bytes, as gmshim's pool */
    a.site = t->site;
    uint8_t flags = (uint8_t)(GMLOG_KIND_POOL << GMLOG_KIND_SHIFT) | (t->pool ? GMLOG_A_GRAPH : 0);
    rd_rec_t n = rewritten(r, GMLOG_ALLOC, flags, &a, 32);
    uint64_t *old = map_find(&m->torch_pending, t->addr);
    if (old) { /* its FREE_COMPLETED was lost: the block is reused */
        uint64_t b = *old & MODEL_48;
        d->torch_pending -= b <= d->torch_pending ? b : d->torch_pending;
        map_del(&m->torch_pending, t->addr, NULL);
    }
    model_reduce_record(m, &n);
    d->hits--; /* a tensor is no hit of gmshim's cache: PyTorch's cache served it */
    map_put(&m->torch_stream, t->addr, t->stream + 1);
    d->torch_allocs++;
}

static void t_free_requested(model_t *m, model_dev_t *d, const rd_rec_t *r, const gmlog_tensor_t *t)
{
    model_live_t *e = live_find(&m->live, t->addr);
    uint64_t block = e ? model_live_block(e) : 0;
    uint64_t *st = map_find(&m->torch_stream, t->addr);
    if (st && *st != t->stream + 1)
        d->torch_cross_stream++;
    map_del(&m->torch_stream, t->addr, NULL);
    gmlog_free_t f;
    memset(&f, 0, sizeof f);
    f.h = t->h;
    f.h.type = GMLOG_FREE;
    f.ptr = t->addr;
    f.site = t->site;
    rd_rec_t n = rewritten(r, GMLOG_FREE, (uint8_t)(GMLOG_KIND_POOL << GMLOG_KIND_SHIFT), &f, 24);
    model_reduce_record(m, &n);
    if (e && block) { /* pending until FREE_COMPLETED: the tensor is gone, its block not yet reusable */
        map_put(&m->torch_pending, t->addr, block | (uint64_t)r->device << 48);
        d->torch_pending += block;
        d->torch_pending_count++;
        m->torch_just_requested = t->addr; /* pending for real if something comes before its completion */
    }
}

static void t_free_completed(model_t *m, model_dev_t *d, const gmlog_tensor_t *t)
{
    uint64_t block;
    if (!map_del(&m->torch_pending, t->addr, &block))
        return;
    block &= MODEL_48;
    d->torch_pending -= block <= d->torch_pending ? block : d->torch_pending;
    if (d->torch_pending_count)
        d->torch_pending_count--;
}

static void segment_record(model_t *m, const rd_rec_t *r, const gmlog_tensor_t *t, int alloc, uint64_t base,
                           uint64_t size)
{
    gmlog_segment_t s;
    memset(&s, 0, sizeof s);
    s.h = t->h;
    s.base = base;
    s.size = size;
    s.graph = t->pool;
    uint8_t type = alloc ? GMLOG_SEGMENT_ALLOC : GMLOG_SEGMENT_FREE;
    s.h.type = type;
    rd_rec_t n = rewritten(r, type, 0, &s, 32);
    model_reduce_record(m, &n);
}

static void t_segment(model_t *m, const rd_rec_t *r, const gmlog_tensor_t *t, int alloc)
{
    segment_record(m, r, t, alloc, t->addr, t->size);
}

/* Expandable segments: the range's segment grows, shrinks or splits (torch_events.h). A resized
 * segment is its SEGMENT_ALLOC again (the reducer replaces a base it holds), not a new one. */
static void t_mapped(model_t *m, model_dev_t *d, const rd_rec_t *r, const gmlog_tensor_t *t, int map)
{
    torch_change_t ch[4];
    int n = torch_ranges_apply(&m->torch_ranges, r->device, map, t->addr, t->size, ch);
    if (n < 0) {
        m->malformed++;
        return;
    }
    for (int i = 0; i < n; i++) {
        segment_record(m, r, t, ch[i].size != 0, ch[i].base, ch[i].size);
        if (ch[i].size) {
            map_put(&m->torch_segbase, ch[i].base, 1);
            if (ch[i].grown && d->seg_allocs)
                d->seg_allocs--; /* one segment, resized */
        }
    }
    if (map)
        d->torch_maps++;
    else
        d->torch_unmaps++;
}

/* The OOM's pool figures as PyTorch's allocator had them: its segments, live tensors, pending
 * frees, and the free space between them (the hooks' figures were of its segments as blocks). */
static void pool_figures(const model_t *m, const model_dev_t *d, gmlog_oom_t *o)
{
    model_frag_t fr;
    model_frag_now(m, d->id, &fr);
    o->reserved = d->reserved;
    o->allocated = d->allocated;
    o->requested = d->requested;
    o->pending = d->torch_pending;
    uint64_t used = d->allocated + d->torch_pending;
    o->cached = d->reserved > used ? d->reserved - used : 0;
    o->largest_free = fr.largest_free;
    uint64_t pieces = fr.free_gaps + fr.cached_segments;
    o->free_blocks = pieces > UINT32_MAX ? UINT32_MAX : (uint32_t)pieces;
}

void model_torch_step(model_t *m, const rd_rec_t *r)
{
    model_dev_t *d = r->device < MODEL_MAX_DEVICES ? model_get_dev(m, r->device) : NULL;
    if (!d || r->len < 40) {
        m->malformed++;
        return;
    }
    const gmlog_tensor_t *t = (const gmlog_tensor_t *)r->p;
    d->torch = 1;
    if (m->torch_just_requested && !(r->type == GMLOG_T_FREE_COMPLETED && t->addr == m->torch_just_requested)) {
        /* The last free requested was not completed at once: it waited (record_stream's events) */
        if (model_torch_pending_at(m, m->torch_just_requested, NULL))
            d->torch_waited++;
        if (d->torch_pending > d->torch_pending_peak)
            d->torch_pending_peak = d->torch_pending;
    }
    m->torch_just_requested = 0;
    switch (r->type) {
    case GMLOG_T_ALLOC: t_alloc(m, d, r, t); break;
    case GMLOG_T_FREE_REQUESTED: t_free_requested(m, d, r, t); break;
    case GMLOG_T_FREE_COMPLETED: t_free_completed(m, d, t); break;
    case GMLOG_T_SEGMENT_ALLOC: t_segment(m, r, t, 1); break;
    case GMLOG_T_SEGMENT_FREE: t_segment(m, r, t, 0); break;
    case GMLOG_T_SEGMENT_MAP: t_mapped(m, d, r, t, 1); break;
    case GMLOG_T_SEGMENT_UNMAP: t_mapped(m, d, r, t, 0); break;
    case GMLOG_T_OOM: {
        d->torch_ooms++;
        gmlog_oom_t o;
        torch_oom_record(&o, m->torch_hook_oom_seen ? &m->torch_hook_oom : NULL, t);
        pool_figures(m, d, &o);
        o.h.flags = m->torch_hook_oom.h.flags & ~(GMLOG_OOM_RECOVERED | GMLOG_OOM_EXACT);
        if (d->limit_torch && d->limit) /* PyTorch's own cap refused it (its LIMIT came just before) */
            o.h.flags |= GMLOG_OOM_LIMIT;
        rd_rec_t n = rewritten(r, GMLOG_OOM, o.h.flags, &o, sizeof o);
        m->torch_hook_oom_seen = 0;
        memset(&m->torch_hook_oom, 0, sizeof m->torch_hook_oom);
        model_on_oom(m, &n);
        break;
    }
    default: break;
    }
}

int model_torch_pending_at(const model_t *m, uint64_t ptr, uint64_t *block)
{
    const uint64_t *b = map_find(&m->torch_pending, ptr);
    if (b && block)
        *block = *b & MODEL_48;
    return b != NULL;
}

int model_torch_segment_base(const model_t *m, uint64_t ptr)
{
    return is_torch_segment(m, ptr);
}

/* ---- a wrapped log's checkpoint ---------------------------------------------------------- */

/* Another library's cudaMalloc kept at the cut (not one of PyTorch's segments): a block of its
 * own, which PyTorch's figures do not hold, so its bytes are added to them. */
static void cut_other_block(model_t *m, model_dev_t *d, const rd_rec_t *r)
{
    uint64_t ptr;
    memcpy(&ptr, r->p + 8, 8);
    model_cut_block(m, r);
    const model_live_t *e = live_find(&m->live, ptr);
    if (!e || !counts_as_allocated(model_live_kind(e)))
        return;
    d->allocated += model_live_block(e);
    d->requested += model_live_req(e);
    if (d->allocated > d->peak_allocated)
        d->peak_allocated = d->allocated;
    if (d->requested > d->peak_requested)
        d->peak_requested = d->requested;
}

int model_torch_state(model_t *m, const rd_rec_t *r)
{
    model_dev_t *d = model_get_dev(m, r->device);
    if (!d || !d->torch_cut_seen || r->len < 16)
        return 0; /* a checkpoint without PyTorch's state: the hooks' blocks, as before */
    if (r->type == GMLOG_SEGMENT_ALLOC)
        return 1; /* gmshim's segments: PyTorch's stand for them */
    if (r->type == GMLOG_ALLOC) {
        uint64_t ptr;
        memcpy(&ptr, r->p + 8, 8);
        if (!is_torch_segment(m, ptr))
            cut_other_block(m, d, r);
        return 1;
    }
    if (!torch_is_tensor_type(r->type) || r->len < sizeof(gmlog_tensor_t))
        return 0;
    const gmlog_tensor_t *t = (const gmlog_tensor_t *)r->p;
    uint64_t req = t->size & GMLOG_SIZE_MASK, block = ((req ? req : 1) + 511) & ~511ull;
    switch (r->type) {
    case GMLOG_T_SEGMENT_ALLOC:
        map_put(&d->segmap, t->addr, t->size); /* PyTorch's cut counts it */
        map_put(&m->torch_segbase, t->addr, 1);
        break;
    case GMLOG_T_SEGMENT_MAP: { /* a range of an expandable segment: joined with its neighbours */
        torch_change_t ch[4];
        int n = torch_ranges_apply(&m->torch_ranges, r->device, 1, t->addr, t->size, ch);
        for (int i = 0; i < n; i++) {
            if (!ch[i].size) {
                map_del(&d->segmap, ch[i].base, NULL);
                continue;
            }
            map_put(&d->segmap, ch[i].base, ch[i].size);
            map_put(&m->torch_segbase, ch[i].base, 1);
        }
        d->segments = d->segmap.count;
        break;
    }
    case GMLOG_T_ALLOC: {
        gmlog_alloc_t a;
        memset(&a, 0, sizeof a);
        a.h = t->h;
        a.h.type = GMLOG_ALLOC;
        a.ptr = t->addr;
        a.size = req;
        a.site = t->site;
        uint8_t flags = (uint8_t)(GMLOG_KIND_POOL << GMLOG_KIND_SHIFT) | (t->pool ? GMLOG_A_GRAPH : 0);
        rd_rec_t n = rewritten(r, GMLOG_ALLOC, flags, &a, 32);
        model_cut_block(m, &n);
        map_put(&m->torch_stream, t->addr, t->stream + 1);
        break;
    }
    case GMLOG_T_FREE_REQUESTED: /* pending at the cut: its block still taken, its tensor gone */
        map_put(&m->torch_pending, t->addr, block | (uint64_t)r->device << 48);
        d->torch_pending += block;
        d->torch_pending_count++;
        if (d->torch_pending > d->torch_pending_peak)
            d->torch_pending_peak = d->torch_pending;
        break;
    default: break;
    }
    return 1;
}
