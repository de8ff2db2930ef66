/* The one decoder: a log record becomes an event once — which block or segment it makes or
 * ends, on which device — with PyTorch's view applied on a device whose log holds its tensor
 * events. The model's reducer, the counterfactual replay's loader and the exports' replay are
 * its handlers: none of them reads a block or segment record's layout, or PyTorch's rules, itself.
 * It keeps only what the view needs (PyTorch's segment bases, its live tensors and pending
 * frees, its expandable ranges), never a handler's figures, and never trusts a size or count. */
#ifndef GM_EVENTS_H
#define GM_EVENTS_H

#include "reader.h"
#include "table.h"
#include "torch_events.h"

#include <stdint.h>

enum ev_type {
    EV_NONE = 0,                 /* nothing for a handler: a record PyTorch's own events stand for,
                                  * or a tensor record too short to read (malformed set) */
    EV_ALLOC,                    /* a block made at ptr */
    EV_FREE,                     /* a block's free; a tensor's free requested (its block then pending) */
    EV_FREE_COMPLETED,           /* a tensor's free completed: its block reusable */
    EV_SEGMENT_ALLOC,            /* a segment at ptr of size bytes (grown: one there before, resized) */
    EV_SEGMENT_FREE,             /* the segment at ptr gone */
    EV_OOM,                      /* oom: the record, or the one PyTorch's OutOfMemoryError stands for */
};

#define EV_MAX 4                 /* events of one record: an expandable segment's map or unmap */

typedef struct ev {
    uint8_t type;                /* EV_* */
    uint8_t kind;                /* ALLOC, FREE: GMLOG_KIND_* */
    uint8_t flags;               /* ALLOC, FREE: the hook record's flags (a tensor's: its kind and
                                  * GMLOG_A_GRAPH for a private pool's) */
    uint8_t tensor;              /* from PyTorch's events */
    uint8_t pending;             /* tensor FREE: its block is now pending; FREE_COMPLETED: it was;
                                  * ALLOC: a pending block at ptr ended (its completion lost) */
    uint8_t cross_stream;        /* tensor FREE: requested on another stream than its allocation's */
    uint8_t grown;               /* SEGMENT_ALLOC: the segment at this base was there, resized */
    uint8_t mapped;              /* SEGMENT_*: a change of an expandable segment's mapped ranges */
    uint8_t malformed;           /* a size the record could not give, or a tensor record too short */
    uint8_t dev;                 /* the record's device */
    uint32_t site;               /* the call site of the allocation or free */
    uint32_t dur_ns;             /* time spent in the hook or the driver call */
    uint32_t graph;              /* SEGMENT_*, a tensor's: the private pool (capture id) it serves, else 0 */
    uint64_t ptr;                /* the block's address, the segment's base; a tensor's OOM: the bytes
                                  * the driver had free then (the record's addr) */
    uint64_t req;                /* ALLOC: bytes asked */
    uint64_t size;               /* ALLOC: the block's bytes; tensor FREE (pending), FREE_COMPLETED:
                                  * its block's; SEGMENT_*: the segment's (the record's) */
    uint64_t old;                /* ALLOC with pending: the bytes of the pending block that ended */
    uint64_t stream;             /* a tensor's or PyTorch segment's stream; cudaMallocAsync's */
    uint64_t aux;                /* ALLOC of 40 bytes: the record's block field (a library's name);
                                  * a tensor's OOM: 1 when the hooks' failed cudaMalloc preceded it */
    const gmlog_oom_t *oom;      /* OOM: the record (a tensor's: made by the decoder); NONE on a tensor
                                  * device: the hooks' failed cudaMalloc it keeps for the next T_OOM */
} ev_t;

/* A live tensor, or a block whose free is pending, keyed by its address. */
typedef struct ev_tensor {
    uint64_t ptr;
    uint64_t info;               /* 0..47 its block; 48..55 its device; 63 pending */
    uint64_t stream;             /* its stream + 1 */
} ev_tensor_t;

#define EV_PENDING (1ull << 63)

typedef struct ev_dec {
    int tensors;                 /* some device's blocks are PyTorch's tensors */
    uint8_t devs[256];           /* which devices */
    table_map_t segbase;         /* PyTorch's segment bases: the hooks' calls for them are left out */
    ev_tensor_t *ts;             /* live tensors and pending blocks (table.h) */
    size_t tcap, tcount, npending;
    unsigned tshift;
    torch_ranges_t ranges;       /* expandable segments: their mapped ranges, as whole segments */
    gmlog_oom_t hook_oom;        /* the hooks' last failed cudaMalloc, for the next T_OOM */
    int hook_oom_seen;
    gmlog_oom_t oom;             /* the OOM a T_OOM stands for (EV_OOM's oom) */
} ev_dec_t;

/* Finds the devices with tensor events (dev, or every device when dev < 0) and PyTorch's
 * segment bases, by one pass over a log that kept PyTorch's cache (no pass for another log).
 * Returns x->tensors. */
int ev_dec_scan(ev_dec_t *x, rd_log_t *lf, int dev);
/* x starts with what `from` found (its devices and segment bases): a second reader of a log
 * already decoded needs no pass of its own. -1 when out of memory. */
int ev_dec_seed(ev_dec_t *x, const ev_dec_t *from);
void ev_dec_free(ev_dec_t *x);

static inline int ev_tensor_dev(const ev_dec_t *x, unsigned dev)
{
    return x->tensors && dev < 256 && x->devs[dev];
}

/* A record of a tensor device (ev_decode's slow path). */
int ev_decode_torch(ev_dec_t *x, const rd_rec_t *r, ev_t out[EV_MAX]);

static inline void ev_alloc_of(const rd_rec_t *r, ev_t *e)
{
    const gmlog_alloc_t *a = (const gmlog_alloc_t *)r->p;
    unsigned kind = (r->flags & GMLOG_KIND_MASK) >> GMLOG_KIND_SHIFT;
    uint64_t req = a->size & GMLOG_SIZE_MASK, extra = a->size >> GMLOG_SIZE_BITS, block = req;
    uint64_t aux = r->len >= 40 ? a->block : 0;
    int malformed = 0;
    if (kind == GMLOG_KIND_POOL) {
        uint64_t rounded = ((req ? req : 1) + 511) & ~511ull;
        if (__builtin_expect(extra == 0xffff, 0)) {
            malformed = r->len < 40;
            block = malformed ? rounded : a->block;
        } else {
            block = rounded + extra * 512;
        }
        if (__builtin_expect(block & ~GMLOG_SIZE_MASK, 0)) /* more than 256 TiB: not a real block */
            block = rounded;
    }
    *e = (ev_t){.type = EV_ALLOC, .kind = (uint8_t)kind, .flags = r->flags, .malformed = (uint8_t)malformed,
                .dev = r->device, .site = a->site, .dur_ns = a->dur_ns, .ptr = a->ptr, .req = req, .size = block,
                .stream = kind == GMLOG_KIND_ASYNC ? aux : 0, .aux = aux};
}

static inline void ev_free_of(const rd_rec_t *r, ev_t *e)
{
    const gmlog_free_t *f = (const gmlog_free_t *)r->p;
    *e = (ev_t){.type = EV_FREE, .kind = (uint8_t)((r->flags & GMLOG_KIND_MASK) >> GMLOG_KIND_SHIFT),
                .flags = r->flags, .dev = r->device, .site = f->site, .dur_ns = f->dur_ns, .ptr = f->ptr};
}

static inline void ev_segment_of(const rd_rec_t *r, ev_t *e)
{
    const gmlog_segment_t *s = (const gmlog_segment_t *)r->p;
    *e = (ev_t){.type = r->type == GMLOG_SEGMENT_ALLOC ? EV_SEGMENT_ALLOC : EV_SEGMENT_FREE, .flags = r->flags,
                .dev = r->device, .dur_ns = s->dur_ns, .graph = s->graph, .ptr = s->base, .size = s->size};
}

/* The event of a record as the hooks wrote it (no PyTorch view): 1, or 0 when the record makes
 * or ends no block or segment and is no OOM. */
static inline int ev_decode_hook(const rd_rec_t *r, ev_t *out)
{
    switch (r->type) {
    case GMLOG_ALLOC: ev_alloc_of(r, out); return 1;
    case GMLOG_FREE: ev_free_of(r, out); return 1;
    case GMLOG_SEGMENT_ALLOC:
    case GMLOG_SEGMENT_FREE: ev_segment_of(r, out); return 1;
    case GMLOG_OOM:
        *out = (ev_t){.type = EV_OOM, .flags = r->flags, .dev = r->device, .oom = (const gmlog_oom_t *)r->p};
        return 1;
    default: return 0;
    }
}

/* The events of one record in out[0..n): n, 0 when the record makes or ends no block or
 * segment and is no OOM (the handler's own switch), -1 when out of memory. A record of a
 * tensor device gives at least one event (EV_NONE when it is left out). A log without tensor
 * events (x->tensors 0) gives at most one: ev_decode_hook's. */
static inline int ev_decode(ev_dec_t *x, const rd_rec_t *r, ev_t out[EV_MAX])
{
    if (__builtin_expect(x->tensors, 0) && ev_tensor_dev(x, r->device)) {
        int n = ev_decode_torch(x, r, out);
        if (n)
            return n;
    }
    return ev_decode_hook(r, out);
}

/* Whether ptr is one of PyTorch's segment bases. */
static inline int ev_segment_base(const ev_dec_t *x, uint64_t ptr)
{
    return table_map_find(&x->segbase, ptr) != NULL;
}

/* Whether the block at ptr is pending (its free requested, not completed); its bytes in *block. */
int ev_pending_at(const ev_dec_t *x, uint64_t ptr, uint64_t *block);

/* The live tensors and pending blocks, in no order: slot i's, or NULL. */
static inline const ev_tensor_t *ev_tensor_at(const ev_dec_t *x, size_t i)
{
    return x->ts[i].ptr ? &x->ts[i] : NULL;
}

#endif
