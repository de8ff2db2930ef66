/* `gmshim export memory-viz`: a log as PyTorch's memory snapshot, a pickle (protocol 4, the
 * opcodes PyTorch's own snapshots use and MemoryViz.js reads) of {device_traces, segments,
 * external_annotations, allocator_settings}. Written here in C, streaming: each site's frames
 * once (memoized), referenced by every event of it. The end state (segments) must agree with the
 * trace, or the viewer's backward replay breaks: every block live at the end lies in a segment,
 * and each segment's blocks tile it exactly. */
#include "export_memviz.h"
#include "vec.h"
#include "outfile.h"
#include "output.h"
#include "sites.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the pickle writer ------------------------------------------------------------------- */

enum {
    K_ACTION, K_ADDR, K_SIZE, K_STREAM, K_TIME_US, K_FRAMES, K_FILENAME, K_LINE, K_NAME, K_COMPILE_CONTEXT,
    K_USER_METADATA, K_CATEGORY, K_DEVICE_FREE, K_DEVICE, K_ADDRESS, K_TOTAL_SIZE, K_ALLOCATED_SIZE,
    K_ACTIVE_SIZE, K_REQUESTED_SIZE, K_SEGMENT_TYPE, K_SEGMENT_POOL_ID, K_IS_EXPANDABLE, K_BLOCKS, K_STATE,
    K_STAGE, V_ALLOC, V_FREE_REQUESTED, V_FREE_COMPLETED, V_SEGMENT_ALLOC, V_SEGMENT_FREE, V_OOM, V_SNAPSHOT,
    V_ACTIVE_ALLOCATED, V_ACTIVE_PENDING_FREE, V_INACTIVE, V_LARGE, V_SMALL, V_NA, V_EMPTY, V_START, V_END, V_POOL, V_UNKNOWN, V_SEGMENT_MAP,
    V_SEGMENT_UNMAP, NKEYS
};

static const char *const key_text[NKEYS] = {
    "action", "addr", "size", "stream", "time_us", "frames", "filename", "line", "name", "compile_context",
    "user_metadata", "category", "device_free", "device", "address", "total_size", "allocated_size",
    "active_size", "requested_size", "segment_type", "segment_pool_id", "is_expandable", "blocks", "state",
    "stage", "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom", "snapshot",
    "active_allocated", "active_pending_free", "inactive", "large", "small", "N/A", "", "START", "END", "gmshim pool", "unknown",
    "segment_map", "segment_unmap"};

#define PK_BATCH 1000   /* items per APPENDS / SETITEMS, as Python's pickler (and JS spread limits) */
#define PK_DEPTH 16

typedef struct pk {
    FILE *f;
    uint32_t memo;                /* next memo index */
    uint32_t key[NKEYS];          /* memo index + 1 of each interned string */
    uint32_t count[PK_DEPTH];     /* items of each open list since its last APPENDS */
    int depth;
} pk_t;

static void pk_byte(pk_t *p, int c)
{
    fputc(c, p->f);
}

static void pk_u32(pk_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        pk_byte(p, (int)(v >> (8 * i)) & 0xff);
}

static uint32_t pk_memoize(pk_t *p)
{
    pk_byte(p, 0x94);
    return p->memo++;
}

static void pk_get(pk_t *p, uint32_t idx)
{
    if (idx < 256) {
        pk_byte(p, 'h');
        pk_byte(p, (int)idx);
    } else {
        pk_byte(p, 'j');
        pk_u32(p, idx);
    }
}

static void pk_int(pk_t *p, uint64_t v)
{
    if (v < 256) {
        pk_byte(p, 'K');
        pk_byte(p, (int)v);
    } else if (v < 65536) {
        pk_byte(p, 'M');
        pk_byte(p, (int)(v & 0xff));
        pk_byte(p, (int)(v >> 8));
    } else if (v < 0x80000000u) {
        pk_byte(p, 'J');
        pk_u32(p, (uint32_t)v);
    } else { /* LONG1: little-endian two's complement, a zero byte when the top bit is set */
        uint8_t b[9];
        int n = 0;
        for (uint64_t x = v; x; x >>= 8)
            b[n++] = (uint8_t)(x & 0xff);
        if (b[n - 1] & 0x80)
            b[n++] = 0;
        pk_byte(p, 0x8a);
        pk_byte(p, n);
        fwrite(b, 1, (size_t)n, p->f);
    }
}

/* A str: the log's bytes as valid UTF-8 (a bad byte becomes U+FFFD), whatever they were. */
static void pk_str(pk_t *p, const char *s)
{
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)u), out = 0;
    for (size_t i = 0; i < n;) {
        int k = xr_utf8_len(u + i, n - i);
        out += k ? (size_t)k : 3;
        i += k ? (size_t)k : 1;
    }
    if (out < 256) {
        pk_byte(p, 0x8c);
        pk_byte(p, (int)out);
    } else {
        pk_byte(p, 'X');
        pk_u32(p, (uint32_t)out);
    }
    for (size_t i = 0; i < n;) {
        int k = xr_utf8_len(u + i, n - i);
        if (k)
            fwrite(u + i, 1, (size_t)k, p->f);
        else
            fwrite("\xef\xbf\xbd", 1, 3, p->f);
        i += k ? (size_t)k : 1;
    }
}

/* One of the strings every event repeats: written once, then fetched from the memo. */
static void pk_key(pk_t *p, int k)
{
    if (p->key[k]) {
        pk_get(p, p->key[k] - 1);
        return;
    }
    pk_str(p, key_text[k]);
    p->key[k] = pk_memoize(p) + 1;
}

static void pk_dict(pk_t *p)
{
    pk_byte(p, '}');
    pk_byte(p, '(');
}

static void pk_dict_end(pk_t *p)
{
    pk_byte(p, 'u');
}

/* A list; with `memo`, its memo index (memoized before the MARK, where the unpickler's stack
 * top is the list) is stored there. */
static void pk_list_memo(pk_t *p, uint32_t *memo)
{
    pk_byte(p, ']');
    if (memo)
        *memo = pk_memoize(p) + 1;
    if (p->depth < PK_DEPTH)
        p->count[p->depth] = 0;
    p->depth++;
    pk_byte(p, '(');
}

/* Before each item of the innermost open list. */
static void pk_item(pk_t *p)
{
    int d = p->depth - 1;
    if (d >= 0 && d < PK_DEPTH && p->count[d]++ == PK_BATCH) {
        pk_byte(p, 'e');
        pk_byte(p, '(');
        p->count[d] = 1;
    }
}

static void pk_list(pk_t *p)
{
    pk_list_memo(p, NULL);
}

static void pk_list_end(pk_t *p)
{
    pk_byte(p, 'e');
    p->depth--;
}

/* ---- the snapshot ------------------------------------------------------------------------- */

typedef struct mv_mark {
    uint64_t t;
    char *label;
} mv_mark_t;

typedef struct mv {
    pk_t pk;
    const export_opts_t *o;
    const rd_log_t *lf;
    const model_t *m;
    int dev;                      /* the device of this pass */
    int in_window;                /* past --from */
    int categories;               /* the log has memory outside the pool: name each block's owner */
    uint32_t *site_memo;          /* by site index in the model: memo index + 1 of its frames */
    uint32_t empty_frames;        /* memo index + 1 of [] */
    uint64_t entries;
    int seg_waiting;              /* a segment_alloc waits for the allocation that asked for it */
    xr_segment_t seg;
    mv_mark_t *marks;             /* in the window (first pass) */
    size_t nmarks, capmarks;
    int collect_marks, from_seen, to_seen;
} mv_t;

static uint64_t time_us(const mv_t *v, uint64_t t)
{
    return (v->lf->hdr.start_realtime_ns + t) / 1000;
}

/* A native frame: the function, its source file (or the module), its line. */
static void frame_dict(mv_t *v, const site_frame_t *fr)
{
    pk_t *p = &v->pk;
    pk_item(p);
    pk_dict(p);
    char name[SITE_NAME_MAX * 4];
    pk_key(p, K_NAME);
    pk_str(p, site_frame_name(fr, name, sizeof name));
    pk_key(p, K_FILENAME);
    pk_str(p, fr->file ? fr->file : fr->module ? fr->module : "??");
    pk_key(p, K_LINE);
    pk_int(p, fr->line);
    pk_dict_end(p);
}

/* A site's frames, innermost first: the native ones (the allocation is made in native code),
 * then the Python ones that called it; with --python-frames, the Python ones first or alone.
 * Written once; later a memo fetch. */
static void frames(mv_t *v, uint32_t site)
{
    pk_t *p = &v->pk;
    const model_sitedef_t *s = site ? model_site(v->m, site) : NULL;
    size_t idx = s ? (size_t)(s - v->m->sites) : 0;
    uint32_t *memo = s ? &v->site_memo[idx] : &v->empty_frames;
    if (*memo) {
        pk_get(p, *memo - 1);
        return;
    }
    site_frame_t *fr = malloc(SITE_MAX_FRAMES * sizeof *fr);
    size_t n = fr && s ? site_frames(v->m, site, fr, SITE_MAX_FRAMES) : 0;
    size_t npy = s && s->npy < n ? s->npy : n;
    int order = v->o->python_frames;
    pk_list_memo(p, memo);
    for (size_t i = 0; order != SITE_PY_RECORDED && i < npy; i++)
        frame_dict(v, &fr[i]);
    for (size_t i = npy; i < n && !(order == SITE_PY_ONLY && npy); i++)
        frame_dict(v, &fr[i]);
    for (size_t i = 0; order == SITE_PY_RECORDED && i < npy; i++)
        frame_dict(v, &fr[i]);
    pk_list_end(p);
    free(fr);
}

static void entry_begin(mv_t *v, int action, uint64_t t)
{
    pk_t *p = &v->pk;
    pk_item(p);
    pk_dict(p);
    pk_key(p, K_ACTION);
    pk_key(p, action);
    pk_key(p, K_TIME_US);
    pk_int(p, time_us(v, t));
    pk_key(p, K_COMPILE_CONTEXT);
    pk_key(p, V_NA);
    pk_key(p, K_USER_METADATA);
    pk_key(p, V_EMPTY);
    v->entries++;
}

static void entry_end(mv_t *v, uint64_t stream, uint32_t site)
{
    pk_t *p = &v->pk;
    pk_key(p, K_STREAM);
    pk_int(p, stream);
    pk_key(p, K_FRAMES);
    frames(v, site);
    pk_dict_end(p);
}

static void category(mv_t *v, const xr_t *x, const xr_block_t *b)
{
    if (!v->categories)
        return;
    pk_key(&v->pk, K_CATEGORY);
    if (b->kind == GMLOG_KIND_POOL)
        pk_key(&v->pk, V_POOL);
    else
        pk_str(&v->pk, x->dev[b->dev].lib[b->lib]);
}

static void block_entry(mv_t *v, const xr_t *x, int action, const xr_block_t *b, uint64_t t, uint32_t site)
{
    entry_begin(v, action, t);
    pk_key(&v->pk, K_ADDR);
    pk_int(&v->pk, b->ptr);
    pk_key(&v->pk, K_SIZE);
    pk_int(&v->pk, b->size);
    category(v, x, b);
    entry_end(v, b->stream, site);
}

static void segment_entry(mv_t *v, int action, uint64_t base, uint64_t size, uint64_t t, uint32_t site)
{
    entry_begin(v, action, t);
    pk_key(&v->pk, K_ADDR);
    pk_int(&v->pk, base);
    pk_key(&v->pk, K_SIZE);
    pk_int(&v->pk, size);
    entry_end(v, 0, site);
}

/* The segment that waited, with the frames of the allocation that asked for it (or none). */
static void flush_segment(mv_t *v, const xr_block_t *asker)
{
    if (!v->seg_waiting)
        return;
    int asked = asker && asker->ptr >= v->seg.base && asker->ptr < v->seg.base + v->seg.size;
    segment_entry(v, V_SEGMENT_ALLOC, v->seg.base, v->seg.size, v->seg.t, asked ? asker->site : v->seg.site);
    v->seg_waiting = 0;
}

static void on_block(mv_t *v, const xr_t *x, const xr_event_t *e)
{
    const xr_block_t *b = e->blk;
    if (!xr_kind_on_device(b->kind) || b->size < v->o->min_size || b->writer)
        return; /* writer: freed already, when its segment went */
    int pool = b->kind == GMLOG_KIND_POOL, own = !pool || b->stray; /* own: a segment of its own */
    if (e->type == XR_ALLOC) {
        flush_segment(v, own ? NULL : b);
        if (own)
            segment_entry(v, V_SEGMENT_ALLOC, b->ptr, b->size, e->rec->t, b->site);
        block_entry(v, x, V_ALLOC, b, e->rec->t, b->site);
        return;
    }
    flush_segment(v, NULL);
    uint32_t site = e->free_site ? e->free_site : b->site;
    uint64_t t = e->rec ? e->rec->t : x->last_t;
    /* a tensor's free is requested, then completed when its streams are done (PyTorch's two
     * events); any other free is both at once */
    if (e->type == XR_FREE)
        block_entry(v, x, V_FREE_REQUESTED, b, t, site);
    if (e->type == XR_FREE && b->pending)
        return;
    block_entry(v, x, V_FREE_COMPLETED, b, t, site);
    if (own)
        segment_entry(v, V_SEGMENT_FREE, b->ptr, b->size, t, site);
}

/* A segment that goes with live blocks in it (only a damaged log does that): the blocks end
 * there too, or the viewer would find blocks in no segment. */
static void orphan_blocks(mv_t *v, xr_t *x, const xr_event_t *e, int emit)
{
    const xr_segment_t *g = e->seg;
    for (size_t i = 0; i < x->capblk; i++) {
        xr_block_t *b = &x->blk[i];
        if (!b->ptr || b->dev != g->dev || b->kind != GMLOG_KIND_POOL || b->stray || b->writer ||
            b->ptr < g->base || b->ptr >= g->base + g->size)
            continue;
        if (emit && b->size >= v->o->min_size) {
            if (!b->pending)
                block_entry(v, x, V_FREE_REQUESTED, b, e->rec->t, b->site);
            block_entry(v, x, V_FREE_COMPLETED, b, e->rec->t, b->site);
        }
        b->writer = 1;
    }
}

static void on_oom(mv_t *v, const xr_event_t *e)
{
    const gmlog_oom_t *r = (const gmlog_oom_t *)e->rec->p;
    flush_segment(v, NULL);
    entry_begin(v, V_OOM, e->rec->t);
    pk_key(&v->pk, K_SIZE);
    pk_int(&v->pk, r->request);
    pk_key(&v->pk, K_DEVICE_FREE);
    pk_int(&v->pk, r->driver_free);
    entry_end(v, 0, r->site);
}

static void on_mark(mv_t *v, const xr_event_t *e)
{
    if (v->o->to && xr_mark_matches(v->o->to, e->mark_id, e->label))
        v->to_seen = 1;
    if (v->in_window && v->collect_marks) {
        mv_mark_t *n = vec_grow(v->marks, &v->capmarks, v->nmarks + 1, sizeof *n, 16);
        if (n) {
            v->marks = n;
            v->marks[v->nmarks].t = e->rec->t;
            v->marks[v->nmarks].label = strdup(e->label);
            v->nmarks++;
        }
    }
    if (!v->in_window && xr_mark_matches(v->o->from, e->mark_id, e->label))
        v->in_window = v->from_seen = 1;
}

static void each_event(xr_t *x, const xr_event_t *e, void *arg)
{
    mv_t *v = arg;
    if (e->type == XR_MARK) {
        on_mark(v, e);
        return;
    }
    if ((int)e->dev != v->dev)
        return;
    int emit = v->in_window && !e->state;
    if (e->type == XR_SEGMENT_FREE) {
        if (emit)
            flush_segment(v, NULL);
        orphan_blocks(v, x, e, emit);
    }
    if (!emit)
        return;
    switch (e->type) {
    case XR_ALLOC:
    case XR_FREE:
    case XR_FREE_COMPLETED: on_block(v, x, e); break;
    case XR_SEGMENT_ALLOC:
        flush_segment(v, NULL);
        v->seg = *e->seg;
        v->seg_waiting = 1;
        break;
    case XR_SEGMENT_FREE:
        flush_segment(v, NULL);
        segment_entry(v, V_SEGMENT_FREE, e->seg->base, e->seg->size, e->rec->t, 0);
        break;
    case XR_SEGMENT_MAP: /* as PyTorch's own trace has them: the pages, not the segment */
    case XR_SEGMENT_UNMAP: {
        const gmlog_tensor_t *t = (const gmlog_tensor_t *)e->rec->p;
        flush_segment(v, NULL);
        segment_entry(v, e->type == XR_SEGMENT_MAP ? V_SEGMENT_MAP : V_SEGMENT_UNMAP, t->addr, t->size, e->rec->t, 0);
        break;
    }
    case XR_OOM: on_oom(v, e); break;
    default: break;
    }
}

/* ---- the end state: segments tiled by their blocks ---------------------------------------- */

static int by_base(const void *a, const void *b)
{
    uint64_t x = (*(const xr_segment_t *const *)a)->base, y = (*(const xr_segment_t *const *)b)->base;
    return x < y ? -1 : x > y;
}

static int by_ptr(const void *a, const void *b)
{
    uint64_t x = (*(const xr_block_t *const *)a)->ptr, y = (*(const xr_block_t *const *)b)->ptr;
    return x < y ? -1 : x > y;
}

/* A block's state in PyTorch's words: V_ACTIVE_ALLOCATED, V_ACTIVE_PENDING_FREE or V_INACTIVE. */
static void block_dict(mv_t *v, uint64_t addr, uint64_t size, uint64_t req, int state, uint32_t site)
{
    pk_t *p = &v->pk;
    pk_item(p);
    pk_dict(p);
    pk_key(p, K_ADDRESS);
    pk_int(p, addr);
    pk_key(p, K_SIZE);
    pk_int(p, size);
    pk_key(p, K_REQUESTED_SIZE);
    pk_int(p, req);
    pk_key(p, K_STATE);
    pk_key(p, state);
    pk_key(p, K_FRAMES);
    frames(v, state != V_INACTIVE ? site : 0);
    pk_dict_end(p);
}

typedef struct mv_seg {
    int dev;
    uint64_t base, size, stream;
    uint32_t graph, site;
    const xr_block_t **blk;       /* its live blocks, by address, inside it */
    size_t n;
    int expandable;
    const xr_block_t *carried;    /* a block from the segment before that goes on into this one
                                   * (across the 2 MiB pages of GMSHIM_SEGMENTS=vmm), or NULL */
} mv_seg_t;

/* The part of block b inside [at, end): its bytes, and of them the requested ones. */
static uint64_t block_part(const xr_block_t *b, uint64_t at, uint64_t end, uint64_t *req)
{
    uint64_t from = b->ptr > at ? b->ptr : at, bend = b->ptr + b->size, to = bend < end ? bend : end;
    uint64_t size = to > from ? to - from : 0, before = from - b->ptr;
    *req = b->req > before ? (b->req - before < size ? b->req - before : size) : 0;
    return size;
}

static void segment_dict(mv_t *v, const mv_seg_t *s)
{
    pk_t *p = &v->pk;
    uint64_t end = s->base + s->size, used = 0, pending = 0, req = 0, at = s->base;
    for (size_t i = 0; i <= s->n; i++) {
        const xr_block_t *b = i < s->n ? s->blk[i] : s->carried;
        if (!b)
            continue;
        uint64_t r, bytes = block_part(b, s->base, end, &r);
        if (b->pending) {
            pending += bytes; /* active, no longer allocated: PyTorch's pending free */
        } else {
            used += bytes;
            req += r;
        }
    }
    pk_item(p);
    pk_dict(p);
    pk_key(p, K_DEVICE);
    pk_int(p, (uint64_t)s->dev);
    pk_key(p, K_ADDRESS);
    pk_int(p, s->base);
    pk_key(p, K_TOTAL_SIZE);
    pk_int(p, s->size);
    pk_key(p, K_ALLOCATED_SIZE);
    pk_int(p, used);
    pk_key(p, K_ACTIVE_SIZE);
    pk_int(p, used + pending);
    pk_key(p, K_REQUESTED_SIZE);
    pk_int(p, req);
    pk_key(p, K_STREAM);
    pk_int(p, s->stream);
    pk_key(p, K_SEGMENT_TYPE);
    pk_key(p, s->size <= (2u << 20) ? V_SMALL : V_LARGE);
    pk_key(p, K_SEGMENT_POOL_ID);
    pk_int(p, 0);
    pk_int(p, s->graph);
    pk_byte(p, 0x86);
    pk_key(p, K_IS_EXPANDABLE);
    pk_byte(p, s->expandable ? 0x88 : 0x89);
    pk_key(p, K_FRAMES);
    frames(v, s->site);
    pk_key(p, K_BLOCKS);
    pk_list(p);
    if (s->carried) { /* the rest of a block that began in a page before */
        uint64_t r, size = block_part(s->carried, at, end, &r);
        block_dict(v, at, size, r, s->carried->pending ? V_ACTIVE_PENDING_FREE : V_ACTIVE_ALLOCATED, s->carried->site);
        at += size;
    }
    for (size_t i = 0; i < s->n; i++) { /* blocks tile the segment: gaps are inactive blocks */
        const xr_block_t *b = s->blk[i];
        if (b->ptr < at)
            continue; /* overlaps the one before: the log is inconsistent, keep the tiling */
        if (b->ptr > at)
            block_dict(v, at, b->ptr - at, 0, V_INACTIVE, 0);
        uint64_t r, size = block_part(b, at, end, &r);
        block_dict(v, b->ptr, size, r, b->pending ? V_ACTIVE_PENDING_FREE : V_ACTIVE_ALLOCATED, b->site);
        at = b->ptr + size;
    }
    if (at < end)
        block_dict(v, at, end - at, 0, V_INACTIVE, 0);
    pk_list_end(p);
    pk_dict_end(p);
}

/* One device's segments: the pool's with their blocks; a pool block outside every segment, and
 * each allocation outside the pool, as a segment of its own. */
static int device_segments(mv_t *v, const xr_t *x, int dev)
{
    const xr_segment_t **seg = malloc((x->nseg + 1) * sizeof *seg);
    const xr_block_t **blk = malloc((x->nblk + 1) * sizeof *blk);
    if (!seg || !blk) {
        free(seg);
        free(blk);
        return -1;
    }
    size_t ns = 0, nb = 0;
    for (size_t i = 0; i < x->capseg; i++)
        if (xr_segment_at(x, i) && x->seg[i].dev == dev)
            seg[ns++] = &x->seg[i];
    for (size_t i = 0; i < x->capblk; i++) {
        const xr_block_t *b = xr_block_at(x, i);
        if (b && b->dev == dev && xr_kind_on_device(b->kind) && b->size >= v->o->min_size && !b->writer)
            blk[nb++] = b;
    }
    qsort(seg, ns, sizeof *seg, by_base);
    qsort(blk, nb, sizeof *blk, by_ptr);
    size_t j = 0;
    const xr_block_t *carried = NULL; /* the last block of the segment before, if it went on past it */
    for (size_t i = 0; i <= ns; i++) {
        uint64_t base = i < ns ? seg[i]->base : UINT64_MAX;
        for (; j < nb && blk[j]->ptr < base; j++) { /* before this segment: outside, or stray */
            const xr_block_t *b = blk[j];
            mv_seg_t one = {dev, b->ptr, b->size, b->stream, 0, b->site, &blk[j], 1, 0, NULL};
            segment_dict(v, &one);
        }
        if (i == ns)
            break;
        if (carried && carried->ptr + carried->size <= base)
            carried = NULL;
        size_t k = j;
        while (k < nb && blk[k]->ptr < base + seg[i]->size && blk[k]->kind == GMLOG_KIND_POOL && !blk[k]->stray)
            k++;
        mv_seg_t s = {dev, base, seg[i]->size, seg[i]->stream, seg[i]->graph, seg[i]->site, &blk[j], k - j,
                      seg[i]->expandable, carried};
        segment_dict(v, &s);
        if (k > j)
            carried = blk[k - 1];
        if (carried && carried->ptr + carried->size <= base + seg[i]->size)
            carried = NULL;
        j = k;
    }
    free(seg);
    free(blk);
    return 0;
}

/* ---- the file ---------------------------------------------------------------------------- */

static void annotations(mv_t *v, uint64_t end_t, int dev)
{
    pk_t *p = &v->pk;
    pk_list(p);
    for (size_t i = 0; i < v->nmarks; i++) {
        for (int stage = 0; stage < 2; stage++) { /* a mark opens an annotation the next one ends */
            uint64_t t = stage ? (i + 1 < v->nmarks ? v->marks[i + 1].t : end_t) : v->marks[i].t;
            pk_item(p);
            pk_dict(p);
            pk_key(p, K_STAGE);
            pk_key(p, stage ? V_END : V_START);
            pk_key(p, K_NAME);
            pk_str(p, v->marks[i].label);
            pk_key(p, K_DEVICE);
            pk_int(p, (uint64_t)dev);
            pk_key(p, K_TIME_US);
            pk_int(p, time_us(v, t));
            pk_dict_end(p);
        }
    }
    pk_list_end(p);
}

static void settings(mv_t *v)
{
    pk_t *p = &v->pk;
    pk_dict(p);
    pk_str(p, "PYTORCH_CUDA_ALLOC_CONF");
    pk_key(p, V_EMPTY);
    pk_str(p, "expandable_segments");
    pk_byte(p, 0x89);
    pk_str(p, "written_by");
    pk_str(p, "gmshim " GMSHIM_VERSION_STRING);
    pk_str(p, "gmshim_log");
    pk_str(p, v->lf->name);
    pk_dict_end(p);
}

/* One pass over the log for device d: its trace. The last pass's replay is kept (*keep) for
 * the segments. */
static int device_trace(mv_t *v, rd_log_t *lf, int d, xr_t **keep)
{
    xr_t *x = calloc(1, sizeof *x);
    if (!x)
        return -1;
    if (v->o->to) {
        x->stop_mark_label = v->o->to;
        char *end;
        long id = strtol(v->o->to, &end, 10);
        if (!*end && id > 0 && id < INT32_MAX)
            x->stop_mark_id = (int)id;
    }
    v->dev = d;
    v->in_window = !v->o->from;
    v->seg_waiting = 0;
    pk_item(&v->pk);
    pk_list(&v->pk);
    int rc = xr_run(x, lf, v->m, each_event, v);
    flush_segment(v, NULL);
    if (v->categories && v->entries) { /* MemoryViz.js needs "unknown" among the categories */
        entry_begin(v, V_SNAPSHOT, x->last_t);
        pk_key(&v->pk, K_SIZE);
        pk_int(&v->pk, 0);
        pk_key(&v->pk, K_CATEGORY);
        pk_key(&v->pk, V_UNKNOWN);
        entry_end(v, 0, 0);
    }
    pk_list_end(&v->pk);
    v->collect_marks = 0;
    if (*keep) {
        xr_free(*keep);
        free(*keep);
    }
    *keep = x;
    return rc;
}

static int outside_memory(const model_t *m)
{
    for (int i = 0; i < m->ndev; i++)
        for (int k = 1; k < 8 && m->dev[i]; k++)
            if (k != GMLOG_KIND_HOST && m->dev[i]->allocs_kind[k])
                return 1;
    return 0;
}

static int snapshot(mv_t *v, rd_log_t *lf)
{
    pk_t *p = &v->pk;
    const model_t *m = v->m;
    int ndev = m->ndev > 0 ? m->ndev : 1, first = -1;
    xr_t *x = NULL;
    pk_byte(p, 0x80);
    pk_byte(p, 4);
    pk_dict(p);
    pk_str(p, "device_traces");
    pk_list(p);
    v->collect_marks = 1;
    for (int d = 0; d < ndev; d++) {
        int wanted = m->dev[d] && (v->o->device < 0 || v->o->device == d);
        if (wanted && first < 0)
            first = d;
        if (!wanted) {
            pk_item(p);
            pk_list(p);
            pk_list_end(p);
        } else if (device_trace(v, lf, d, &x)) {
            return -1;
        }
    }
    pk_list_end(p);
    if (!x) { /* no device (or not the one asked for): the state is still a replay's */
        v->dev = -1;
        x = calloc(1, sizeof *x);
        if (!x || xr_run(x, lf, m, each_event, v))
            return -1;
    }
    pk_str(p, "segments");
    pk_list(p);
    for (int d = 0; d < ndev; d++)
        if (m->dev[d] && (v->o->device < 0 || v->o->device == d) && device_segments(v, x, d))
            return -1;
    pk_list_end(p);
    pk_str(p, "external_annotations");
    annotations(v, x->last_t, first < 0 ? 0 : first);
    pk_str(p, "allocator_settings");
    settings(v);
    pk_dict_end(p);
    pk_byte(p, '.');
    xr_free(x);
    free(x);
    return 0;
}

typedef struct mv_run {
    const export_opts_t *o;
    FILE *f;
    int rc;
    outfile_t out;
} mv_run_t;

static int mark_known(const model_t *m, const char *want)
{
    for (size_t i = 0; i < m->nmarks; i++)
        if (xr_mark_matches(want, m->marks[i].id, m->marks[i].label))
            return 1;
    return 0;
}

static void memviz_one(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg)
{
    (void)c;
    mv_run_t *r = arg;
    const char *missing = r->o->from && !mark_known(m, r->o->from) ? r->o->from
                          : r->o->to && !mark_known(m, r->o->to)   ? r->o->to
                                                                   : NULL;
    if (missing) {
        fprintf(stderr, "gmshim export: %s: mark \"%s\" is not in this log (%" PRIu64 " marks)\n", lf->name, missing,
                m->marks_total);
        r->rc = CLI_PARTIAL;
        return;
    }
    if (r->o->device >= 0 && (r->o->device >= m->ndev || !m->dev[r->o->device]))
        fprintf(stderr, "gmshim export: %s: no device %d in this log: the snapshot is empty\n", lf->name, r->o->device);
    r->f = outfile_open(&r->out, r->o->out, "wb", "gmshim export");
    if (!r->f) {
        r->rc = CLI_FAIL;
        return;
    }
    mv_t *v = calloc(1, sizeof *v);
    uint32_t *memo = calloc(m->nsites + 1, sizeof *memo);
    if (!v || !memo || (v->pk.f = r->f, v->o = r->o, v->lf = lf, v->m = m, v->site_memo = memo,
                        v->categories = outside_memory(m), snapshot(v, lf))) {
        fputs("gmshim export: out of memory\n", stderr);
        r->rc = CLI_FAIL;
    }
    if (v) {
        char n[32];
        fprintf(stderr, "gmshim export: %s: %s trace entries%s\n", lf->name, rep_count(v->entries, n),
                v->entries > 600000 ? "; memory_viz slows down past some 600 000: --from/--to MARK or "
                                      "--min-size SIZE make fewer" : "");
        for (size_t i = 0; i < v->nmarks; i++)
            free(v->marks[i].label);
        free(v->marks);
    }
    free(v);
    free(memo);
}

int export_memviz(const char *log, const export_opts_t *o)
{
    FILE *devnull = fopen("/dev/null", "w");
    if (!devnull)
        return CLI_FAIL;
    mv_run_t r = {o, NULL, CLI_OK, {0}};
    cli_ctx_t c;
    cli_init(&c, devnull, stderr, "export");
    c.progress = isatty(2);
    char *logs[] = {(char *)log};
    int rc = cli_run_logs(&c, 1, logs, MODEL_SITES, memviz_one, &r);
    fclose(devnull);
    if (r.f && (r.rc == CLI_FAIL || rc == CLI_FAIL)) {
        outfile_discard(&r.out); /* a failed export leaves no file behind */
    } else if (r.f && outfile_commit(&r.out, "gmshim export")) {
        return CLI_FAIL;
    }
    return r.rc != CLI_OK ? r.rc : rc;
}
