/* The decoder's PyTorch view (events.h): which hook records PyTorch's own events stand for, and
 * what each tensor event makes or ends — a tensor's block live from T_ALLOC, pending from
 * T_FREE_REQUESTED to T_FREE_COMPLETED, PyTorch's segments whole or as mapped ranges. */
#include "events.h"

#include <stdlib.h>
#include <string.h>

static void add_base(ev_dec_t *x, uint64_t base, int *oom)
{
    if (table_map_put(&x->segbase, base, 1))
        *oom = 1;
}

int ev_dec_scan(ev_dec_t *x, rd_log_t *lf, int dev)
{
    const char *mode = rd_meta_keyed(lf, GMLOG_META_OPTION, "GMSHIM_TORCH");
    if (!mode || strcmp(mode, "keep"))
        return 0; /* the bridge writes only with PyTorch's cache kept: other logs cost no pass */
    rd_log_t scan;
    memset(&scan, 0, sizeof scan);
    if (rd_clone(lf, &scan))
        return 0;
    rd_rewind(&scan);
    int oom = 0;
    rd_rec_t r;
    while (rd_next(&scan, &r)) {
        if (!torch_is_tensor_type(r.type) || r.len < sizeof(gmlog_tensor_t) || r.device == GMLOG_NO_DEVICE)
            continue;
        if (dev >= 0 && r.device != dev)
            continue;
        x->devs[r.device] = 1;
        x->tensors = 1;
        const gmlog_tensor_t *t = (const gmlog_tensor_t *)r.p;
        if ((r.type == GMLOG_T_SEGMENT_ALLOC || r.type == GMLOG_T_SEGMENT_MAP) && t->addr)
            add_base(x, t->addr, &oom); /* a base missed for want of memory: its cudaMalloc is counted */
    }
    rd_close(&scan);
    return x->tensors;
}

int ev_dec_seed(ev_dec_t *x, const ev_dec_t *from)
{
    x->tensors = from->tensors;
    memcpy(x->devs, from->devs, sizeof x->devs);
    for (size_t i = 0; i < from->segbase.cap; i++)
        if (from->segbase.slots[i].key && table_map_put(&x->segbase, from->segbase.slots[i].key, 1))
            return -1;
    return 0;
}

void ev_dec_free(ev_dec_t *x)
{
    table_map_free(&x->segbase);
    free(x->ts);
    torch_ranges_free(&x->ranges);
    memset(x, 0, sizeof *x);
}

/* ---- the tensors (table.h) ---------------------------------------------------------------- */

static ev_tensor_t *tensor_find(const ev_dec_t *x, uint64_t ptr)
{
    if (!x->tcap || !ptr)
        return NULL;
    return table_find(x->ts, x->tcap, x->tshift, sizeof *x->ts, ptr);
}

/* The entry of ptr (never 0), made when absent (*found says which); NULL when out of memory. */
static ev_tensor_t *tensor_upsert(ev_dec_t *x, uint64_t ptr, int *found)
{
    if ((x->tcount + 1) * 4 > x->tcap * 3) {
        void *s = x->ts;
        if (table_grow(&s, &x->tcap, &x->tshift, sizeof *x->ts))
            return NULL;
        x->ts = s;
    }
    ev_tensor_t *e = table_probe(x->ts, x->tcap, x->tshift, sizeof *x->ts, ptr, found);
    if (!*found) {
        x->tcount++;
        *e = (ev_tensor_t){ptr, 0, 0};
    }
    return e;
}

static void tensor_remove(ev_dec_t *x, ev_tensor_t *e)
{
    if (e->info & EV_PENDING)
        x->npending--;
    table_remove_at(x->ts, x->tcap, x->tshift, sizeof *x->ts, (size_t)(e - x->ts));
    x->tcount--;
}

int ev_pending_at(const ev_dec_t *x, uint64_t ptr, uint64_t *block)
{
    const ev_tensor_t *e = tensor_find(x, ptr);
    if (!e || !(e->info & EV_PENDING))
        return 0;
    if (block)
        *block = e->info & ((1ull << 48) - 1);
    return 1;
}

/* ---- a record of a tensor device ------------------------------------------------------------ */

#define BLOCK_OF(info) ((info) & ((1ull << 48) - 1))

/* PyTorch rounds every block to 512 bytes, as gmshim's pool does. */
static uint64_t tensor_block(const gmlog_tensor_t *t)
{
    uint64_t req = t->size & GMLOG_SIZE_MASK;
    return ((req ? req : 1) + 511) & ~511ull;
}

/* A hook record that PyTorch's own events stand for: gmshim's segments, the cudaMalloc and
 * cudaFree of PyTorch's segments, and the hooks' failed cudaMalloc (kept for the T_OOM that
 * follows when PyTorch raises; a retry PyTorch got past after releasing its cache is no failure). */
static int hook_record(ev_dec_t *x, const rd_rec_t *r, ev_t *out)
{
    uint64_t ptr;
    switch (r->type) {
    case GMLOG_SEGMENT_ALLOC:
    case GMLOG_SEGMENT_FREE: break;
    case GMLOG_OOM:
        if (r->len < 16)
            return 0;
        memset(&x->hook_oom, 0, sizeof x->hook_oom);
        memcpy(&x->hook_oom, r->p, r->len < sizeof x->hook_oom ? r->len : sizeof x->hook_oom);
        x->hook_oom_seen = 1;
        *out = (ev_t){.type = EV_NONE, .dev = r->device, .oom = &x->hook_oom};
        return 1;
    case GMLOG_ALLOC:
    case GMLOG_FREE:
        if (r->len < 16)
            return 0;
        memcpy(&ptr, r->p + 8, 8);
        if (!ev_segment_base(x, ptr))
            return 0;
        break;
    default: return 0;
    }
    *out = (ev_t){.type = EV_NONE, .dev = r->device};
    return 1;
}

static int t_alloc(ev_dec_t *x, const rd_rec_t *r, const gmlog_tensor_t *t, ev_t *e)
{
    e->type = EV_ALLOC;
    e->flags = (uint8_t)(GMLOG_KIND_POOL << GMLOG_KIND_SHIFT) | (t->pool ? GMLOG_A_GRAPH : 0);
    e->req = t->size & GMLOG_SIZE_MASK;
    e->size = tensor_block(t);
    if (!t->addr)
        return 1;
    int found;
    ev_tensor_t *n = tensor_upsert(x, t->addr, &found);
    if (!n)
        return -1;
    if (found && (n->info & EV_PENDING)) { /* its FREE_COMPLETED was lost: the block is reused */
        e->pending = 1;
        e->old = BLOCK_OF(n->info);
        x->npending--;
    }
    n->info = e->size | (uint64_t)r->device << 48;
    n->stream = t->stream + 1;
    return 1;
}

/* The tensor is gone, its block not reusable until the free completes (PyTorch waits for the
 * streams record_stream named). At a wrapped log's cut a pending block comes without its tensor. */
static int t_free_requested(ev_dec_t *x, const rd_rec_t *r, const gmlog_tensor_t *t, ev_t *e)
{
    e->type = EV_FREE;
    e->flags = (uint8_t)(GMLOG_KIND_POOL << GMLOG_KIND_SHIFT);
    e->req = t->size & GMLOG_SIZE_MASK;
    ev_tensor_t *n = tensor_find(x, t->addr);
    if (!n && r->ckpt == RD_CKPT_STATE && t->addr) {
        int found;
        if (!(n = tensor_upsert(x, t->addr, &found)))
            return -1;
        n->info = tensor_block(t);
        n->stream = t->stream + 1;
    }
    if (!n || (n->info & EV_PENDING))
        return 1;
    e->cross_stream = n->stream != t->stream + 1;
    e->pending = 1;
    e->size = BLOCK_OF(n->info);
    n->info = e->size | (uint64_t)r->device << 48 | EV_PENDING;
    x->npending++;
    return 1;
}

static int t_free_completed(ev_dec_t *x, const gmlog_tensor_t *t, ev_t *e)
{
    ev_tensor_t *n = tensor_find(x, t->addr);
    if (!n)
        return 1; /* EV_NONE: no block of PyTorch's there */
    e->type = EV_FREE_COMPLETED;
    e->size = BLOCK_OF(n->info);
    if (n->info & EV_PENDING) {
        e->pending = 1;
        tensor_remove(x, n);
    }
    return 1;
}

/* Expandable segments: the range's segment grows, shrinks or splits (torch_events.h). A resized
 * segment is a SEGMENT_ALLOC at its base again, flagged grown. */
static int t_mapped(ev_dec_t *x, const rd_rec_t *r, const gmlog_tensor_t *t, int map, ev_t *out)
{
    torch_change_t ch[4];
    int n = torch_ranges_apply(&x->ranges, r->device, map, t->addr, t->size, ch);
    if (n < 0)
        return -1;
    if (!n)
        return 1; /* EV_NONE: an unmap of nothing mapped */
    ev_t base = out[0];
    for (int i = 0; i < n; i++) {
        out[i] = base;
        out[i].type = ch[i].size ? EV_SEGMENT_ALLOC : EV_SEGMENT_FREE;
        out[i].ptr = ch[i].base;
        out[i].size = ch[i].size;
        out[i].grown = (uint8_t)ch[i].grown;
        out[i].mapped = 1;
        if (ch[i].size && table_map_put(&x->segbase, ch[i].base, 1))
            return -1;
    }
    return n;
}

static void t_oom(ev_dec_t *x, const gmlog_tensor_t *t, ev_t *e)
{
    torch_oom_record(&x->oom, x->hook_oom_seen ? &x->hook_oom : NULL, t);
    x->oom.h.flags = x->hook_oom.h.flags & ~(GMLOG_OOM_RECOVERED | GMLOG_OOM_EXACT); /* a tensor's request */
    e->type = EV_OOM;
    e->flags = x->oom.h.flags;
    e->oom = &x->oom;
    e->aux = (uint64_t)x->hook_oom_seen;
    x->hook_oom_seen = 0;
    memset(&x->hook_oom, 0, sizeof x->hook_oom);
}

int ev_decode_torch(ev_dec_t *x, const rd_rec_t *r, ev_t out[EV_MAX])
{
    if (!torch_is_tensor_type(r->type))
        return hook_record(x, r, out);
    out[0] = (ev_t){.type = EV_NONE, .tensor = 1, .dev = r->device};
    if (r->len < sizeof(gmlog_tensor_t)) {
        out[0].malformed = 1;
        return 1;
    }
    const gmlog_tensor_t *t = (const gmlog_tensor_t *)r->p;
    out[0].kind = GMLOG_KIND_POOL;
    out[0].site = t->site;
    out[0].stream = t->stream;
    out[0].ptr = t->addr;
    out[0].graph = t->pool;
    switch (r->type) {
    case GMLOG_T_ALLOC: return t_alloc(x, r, t, out);
    case GMLOG_T_FREE_REQUESTED: return t_free_requested(x, r, t, out);
    case GMLOG_T_FREE_COMPLETED: return t_free_completed(x, t, out);
    case GMLOG_T_SEGMENT_ALLOC:
        if (t->addr && table_map_put(&x->segbase, t->addr, 1))
            return -1;
        /* fall through */
    case GMLOG_T_SEGMENT_FREE:
        out[0].type = r->type == GMLOG_T_SEGMENT_ALLOC ? EV_SEGMENT_ALLOC : EV_SEGMENT_FREE;
        out[0].size = t->size;
        return 1;
    case GMLOG_T_SEGMENT_MAP:
    case GMLOG_T_SEGMENT_UNMAP:
        return t_mapped(x, r, t, r->type == GMLOG_T_SEGMENT_MAP, out);
    case GMLOG_T_OOM: t_oom(x, t, out); return 1;
    default: return 1;
    }
}
