/* What the exports (Perfetto, memory_viz) and the HTML timeline share: a replay of one log's
 * records that keeps every live block and segment, so that a free knows its size and a snapshot
 * can be drawn at any record, and hands each event to the writer. It reads the log again after
 * the model: the model gives the definitions (sites, strings, OOM verdicts), this the events.
 * On a device whose log holds PyTorch's tensor events the blocks are its tensors and the
 * segments its segments, as in the model (model_torch.c). */
#ifndef GM_EXPORT_REPLAY_H
#define GM_EXPORT_REPLAY_H

#include "cli.h"
#include "events.h"

#include <stdint.h>
#include <stdio.h>

#define XR_MAX_LIBS 32            /* labels of memory outside the pool per device; the rest are "other" */

/* A live allocation of any kind. */
typedef struct xr_block {
    uint64_t ptr, size, req;      /* size: the block (pool: rounded; others: as asked) */
    uint64_t t;                   /* ns since the log's start */
    uint64_t stream;              /* cudaMallocAsync's stream, else 0 */
    uint32_t site;
    uint8_t dev, kind;            /* GMLOG_KIND_* */
    uint8_t lib;                  /* outside the pool: index of its label (xr_dev_t.lib) */
    uint8_t stray;                /* a pool block in no segment the log described (a damaged log) */
    uint8_t writer;               /* the writer's own mark */
    uint8_t pending;              /* a tensor whose free was requested, not yet completed */
} xr_block_t;                     /* ptr first: the table's key (0: an empty slot) */

typedef struct xr_segment {
    uint64_t base, size, t;
    uint64_t stream;              /* PyTorch's segments: the stream they serve, else 0 */
    uint32_t site;                /* PyTorch's segments: where the tensor that needed it was asked for */
    uint32_t graph;
    uint8_t dev;
    uint8_t expandable;           /* PyTorch's expandable segment: mapped ranges, grown and shrunk */
} xr_segment_t;                   /* base first: the table's key (0: an empty slot) */

typedef struct xr_dev {
    int present;
    uint64_t total;               /* device memory (DEVICE record) */
    uint64_t requested, allocated, reserved, pending;
    uint64_t lib_bytes[XR_MAX_LIBS];
    char lib[XR_MAX_LIBS][64];    /* "libcublas.so.13", "cudaMallocManaged", ... */
    unsigned nlibs;
} xr_dev_t;

enum {
    XR_ALLOC = 1,                 /* after it is counted; blk is the new block */
    XR_FREE,                      /* before it is taken away; blk is the block freed; a tensor
                                   * (blk->pending set) stays, pending, until XR_FREE_COMPLETED */
    XR_FREE_COMPLETED,            /* a pending tensor's block, before it is taken away */
    XR_SEGMENT_ALLOC,             /* seg is the segment */
    XR_SEGMENT_FREE,              /* seg is the segment, before it goes */
    XR_OOM,
    XR_MARK,
    XR_EMPTY_CACHE,
    XR_DEVICE,
    XR_FENCE,                     /* pending bytes changed */
    XR_CHANGED,                   /* after a record that changed the device's figures */
    XR_SEGMENT_MAP,               /* an expandable segment grew (seg: it, as it is now; rec: the
                                   * T_SEGMENT_MAP, with the pages) */
    XR_SEGMENT_UNMAP,             /* it shrank or split (seg: NULL; rec: the T_SEGMENT_UNMAP) */
    XR_LEDGER,                    /* the card sampled (rec: the LEDGER record) */
    XR_RESIZING,                  /* an expandable segment's ranges are about to change (rec: the
                                   * T_SEGMENT_MAP or _UNMAP); only with want_resizing */
};

typedef struct xr_event {
    int type;
    const rd_rec_t *rec;
    const xr_block_t *blk;
    const xr_segment_t *seg;
    unsigned dev;                 /* GMLOG_NO_DEVICE for marks */
    int state;                    /* 1: a wrapped log's checkpoint state, not an event of then */
    uint32_t free_site;           /* XR_FREE: the site of the free (0: none) */
    const char *label;            /* XR_MARK: its label (NUL-terminated copy) */
    uint32_t mark_id;
} xr_event_t;

typedef struct xr xr_t;
typedef void (*xr_fn)(xr_t *x, const xr_event_t *e, void *arg);

struct xr {
    rd_log_t *lf;
    const model_t *m;
    xr_dev_t dev[256];
    int ndev;                     /* highest device seen + 1 */
    xr_block_t *blk;              /* the table (table.h) by ptr */
    size_t nblk, capblk;
    unsigned shblk;
    xr_segment_t *seg;            /* the table by base */
    size_t nseg, capseg;
    unsigned shseg;
    uint64_t *bases;              /* the live segments' bases, sorted (a block's segment) */
    size_t nbases, capbases;
    uint64_t last_t;
    uint64_t events;              /* records handed to fn */
    int stop_mark_id;             /* stop after this mark (0: never) */
    const char *stop_mark_label;
    int stopped;
    uint64_t stop_events;         /* stop once this many records were handed on (0: never) */
    int want_resizing;            /* hand on XR_RESIZING: every change of a device's figures has
                                   * an event before it (a handler may keep the state it ends) */
    char label[1024];
    ev_dec_t ev;                  /* the decoder (events.h), seeded with the model's PyTorch devices */
};

/* Replays lf (rewinding it) with its model's definitions, calling fn for each event. Returns 0,
 * or -1 when out of memory. */
int xr_run(xr_t *x, rd_log_t *lf, const model_t *m, xr_fn fn, void *arg);
void xr_free(xr_t *x);
/* The live segment of device dev that holds ptr, or NULL. */
const xr_segment_t *xr_segment_of(const xr_t *x, unsigned dev, uint64_t ptr);
/* The sorted segment bases (x->bases): the first index whose base is above `base`; the segment
 * that may hold an address is at that index less one. */
size_t xr_bases_upper(const xr_t *x, uint64_t base);
/* Whether a mark matches "--from/--to MARK": its number or its label. */
int xr_mark_matches(const char *want, uint32_t id, const char *label);
/* The live blocks and segments, in no order: iterate with these. */
static inline const xr_block_t *xr_block_at(const xr_t *x, size_t i) { return x->blk[i].ptr ? &x->blk[i] : NULL; }
static inline const xr_segment_t *xr_segment_at(const xr_t *x, size_t i) { return x->seg[i].base ? &x->seg[i] : NULL; }
/* The length of the valid UTF-8 sequence at s (1 to 4 bytes), or 0: the exports write a bad
 * byte as U+FFFD, so that every viewer can read what they write. */
int xr_utf8_len(const unsigned char *s, size_t left);
/* Device memory a kind stands for: 0 for pinned host memory. */
int xr_kind_on_device(unsigned kind);
/* Counted in the pool's allocated figure (as the model counts it). */
int xr_kind_allocated(unsigned kind);

/* The model's analysis of the OOM at record `seq`, or NULL (beyond MODEL_MAX_OOMS). */
const model_oom_t *xr_model_oom(const model_t *m, uint64_t seq);
/* "rank 3 (pid 12) on host" for a log. */
const char *xr_log_title(const rd_log_t *lf, const model_t *m, char *buf, size_t len);

/* What `gmshim export` asks of a writer (export_perfetto.h, export_memviz.h). */
typedef struct export_opts {
    const char *out;              /* -o FILE, "-" = stdout */
    uint64_t resolution_ns;       /* perfetto: counter bucket; 0 = every change; UINT64_MAX = auto */
    const char *from, *to;        /* memory-viz: marks */
    int device;                   /* memory-viz: -1 = all */
    uint64_t min_size;            /* memory-viz: smaller blocks are left out */
    int python_frames;            /* memory-viz: SITE_PY_* (sites.h) */
} export_opts_t;

#endif
