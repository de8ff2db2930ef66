/* The floor of the decoder's PyTorch view (events.c): what a tensor event is, an expandable
 * segment's mapped ranges kept as whole segments, and the OOM that stands for a T_OOM. */
#ifndef GM_TORCH_EVENTS_H
#define GM_TORCH_EVENTS_H

#include "reader.h"

#include <string.h>

static inline int torch_is_tensor_type(unsigned type)
{
    return type >= GMLOG_T_ALLOC && type <= GMLOG_T_OOM;
}

/* PyTorch's expandable segments: T_SEGMENT_MAP / T_SEGMENT_UNMAP are page ranges of a segment that
 * grows and shrinks (one per stream and pool, reserved once, mapped by 2 or 20 MiB pieces). The
 * readers keep whole segments: a range mapped next to one grows it (joining two it touches), an
 * unmap shrinks it or splits it in two. A change says what the record did to the segments. */
typedef struct torch_range {
    uint64_t base, size;
    uint8_t dev;
} torch_range_t;

typedef struct torch_ranges {
    torch_range_t *r;            /* by device, then address */
    size_t n, cap;
} torch_ranges_t;

typedef struct torch_change {
    uint64_t base, size;         /* size 0: the segment at base is gone; else it is now [base, base + size) */
    int grown;                   /* 1: a segment that was there before at this base, resized */
} torch_change_t;

/* Applies one map (map = 1) or unmap of [addr, addr + size) on device dev; fills up to 4 changes
 * in order (old segments gone first) and returns their number, or -1 when out of memory. An unmap
 * of nothing mapped changes nothing. */
int torch_ranges_apply(torch_ranges_t *x, unsigned dev, int map, uint64_t addr, uint64_t size, torch_change_t out[4]);
/* Whether [base, ...) on dev is a segment made of mapped ranges. */
int torch_ranges_has(const torch_ranges_t *x, unsigned dev, uint64_t base);
void torch_ranges_free(torch_ranges_t *x);

/* The OOM record for PyTorch's OutOfMemoryError (T_OOM): the request is the tensor's, the pool's
 * figures those of the hooks' last failed cudaMalloc (PyTorch's segment ask) when there was one. */
static inline void torch_oom_record(gmlog_oom_t *out, const gmlog_oom_t *hook, const gmlog_tensor_t *t)
{
    memset(out, 0, sizeof *out);
    if (hook) {
        *out = *hook;
        out->segment = hook->request;
    }
    out->h = t->h;
    out->h.type = GMLOG_OOM;
    out->request = t->size;
    out->site = t->site;
}

#endif
