/* `gmshim export memory-viz`: a log as PyTorch's memory snapshot, a pickle (protocol 4, the
 * opcodes PyTorch's own snapshots use and MemoryViz.js reads) of {device_traces, segments,
 * external_annotations, allocator_settings}, and gmshim_ledger: the card's ledger (ledger.h) at
 * each device's last sample, a key the viewer does not read. Written in C, streaming: each site's frames
 * once (memoized), referenced by every event of it. The end state (segments) must agree with the
 * trace, or the viewer's backward replay breaks: every block live at the end lies in a segment,
 * and each segment's blocks tile it exactly. */
#include "export_memviz.h"
#include "ledger.h"
#include "pickle.h"
#include "vec.h"
#include "outfile.h"
#include "output.h"
#include "sites.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the snapshot ------------------------------------------------------------------------- */

typedef struct mv_mark {
    uint64_t t;
    char *label;
} mv_mark_t;

typedef struct mv {
    pickle_t pk;
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
    ledger_t *card[256];          /* each device's ledger at its last sample (up to --to) */
} mv_t;

static uint64_t time_us(const mv_t *v, uint64_t t)
{
    return (v->lf->hdr.start_realtime_ns + t) / 1000;
}

/* A native frame: the function, its source file (or the module), its line. */
static void frame_dict(mv_t *v, const site_frame_t *fr)
{
    pickle_t *p = &v->pk;
    pickle_item(p);
    pickle_dict(p);
    char name[SITE_NAME_MAX * 4];
    pickle_key(p, K_NAME);
    pickle_str(p, site_frame_name(fr, name, sizeof name));
    pickle_key(p, K_FILENAME);
    pickle_str(p, fr->file ? fr->file : fr->module ? fr->module : "??");
    pickle_key(p, K_LINE);
    pickle_int(p, fr->line);
    pickle_dict_end(p);
}

/* A site's frames, innermost first: the native ones (the allocation is made in native code),
 * then the Python ones that called it; with --python-frames, the Python ones first or alone.
 * Written once; later a memo fetch. */
static void frames(mv_t *v, uint32_t site)
{
    pickle_t *p = &v->pk;
    const model_sitedef_t *s = site ? model_site(v->m, site) : NULL;
    size_t idx = s ? (size_t)(s - v->m->sites) : 0;
    uint32_t *memo = s ? &v->site_memo[idx] : &v->empty_frames;
    if (*memo) {
        pickle_get(p, *memo - 1);
        return;
    }
    site_frame_t *fr = malloc(SITE_MAX_FRAMES * sizeof *fr);
    size_t n = fr && s ? site_frames(v->m, site, fr, SITE_MAX_FRAMES) : 0;
    size_t npy = s && s->npy < n ? s->npy : n;
    int order = v->o->python_frames;
    pickle_list_memo(p, memo);
    for (size_t i = 0; order != SITE_PY_RECORDED && i < npy; i++)
        frame_dict(v, &fr[i]);
    for (size_t i = npy; i < n && !(order == SITE_PY_ONLY && npy); i++)
        frame_dict(v, &fr[i]);
    for (size_t i = 0; order == SITE_PY_RECORDED && i < npy; i++)
        frame_dict(v, &fr[i]);
    pickle_list_end(p);
    free(fr);
}

static void entry_begin(mv_t *v, int action, uint64_t t)
{
    pickle_t *p = &v->pk;
    pickle_item(p);
    pickle_dict(p);
    pickle_key(p, K_ACTION);
    pickle_key(p, action);
    pickle_key(p, K_TIME_US);
    pickle_int(p, time_us(v, t));
    pickle_key(p, K_COMPILE_CONTEXT);
    pickle_key(p, V_NA);
    pickle_key(p, K_USER_METADATA);
    pickle_key(p, V_EMPTY);
    v->entries++;
}

static void entry_end(mv_t *v, uint64_t stream, uint32_t site)
{
    pickle_t *p = &v->pk;
    pickle_key(p, K_STREAM);
    pickle_int(p, stream);
    pickle_key(p, K_FRAMES);
    frames(v, site);
    pickle_dict_end(p);
}

static void category(mv_t *v, const xr_t *x, const xr_block_t *b)
{
    if (!v->categories)
        return;
    pickle_key(&v->pk, K_CATEGORY);
    if (b->kind == GMLOG_KIND_POOL)
        pickle_key(&v->pk, V_POOL);
    else
        pickle_str(&v->pk, x->dev[b->dev].lib[b->lib]);
}

static void block_entry(mv_t *v, const xr_t *x, int action, const xr_block_t *b, uint64_t t, uint32_t site)
{
    entry_begin(v, action, t);
    pickle_key(&v->pk, K_ADDR);
    pickle_int(&v->pk, b->ptr);
    pickle_key(&v->pk, K_SIZE);
    pickle_int(&v->pk, b->size);
    category(v, x, b);
    entry_end(v, b->stream, site);
}

static void segment_entry(mv_t *v, int action, uint64_t base, uint64_t size, uint64_t t, uint32_t site)
{
    entry_begin(v, action, t);
    pickle_key(&v->pk, K_ADDR);
    pickle_int(&v->pk, base);
    pickle_key(&v->pk, K_SIZE);
    pickle_int(&v->pk, size);
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
    pickle_key(&v->pk, K_SIZE);
    pickle_int(&v->pk, r->request);
    pickle_key(&v->pk, K_DEVICE_FREE);
    pickle_int(&v->pk, r->driver_free);
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
    if (e->type == XR_LEDGER && e->dev < 256) { /* the state at a sample, window or not */
        if (!v->card[e->dev])
            v->card[e->dev] = malloc(sizeof *v->card[e->dev]);
        if (v->card[e->dev] && ledger_now(x, v->m, e->dev, e->rec, v->card[e->dev]))
            v->card[e->dev]->valid = 0;
        return;
    }
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
    pickle_t *p = &v->pk;
    pickle_item(p);
    pickle_dict(p);
    pickle_key(p, K_ADDRESS);
    pickle_int(p, addr);
    pickle_key(p, K_SIZE);
    pickle_int(p, size);
    pickle_key(p, K_REQUESTED_SIZE);
    pickle_int(p, req);
    pickle_key(p, K_STATE);
    pickle_key(p, state);
    pickle_key(p, K_FRAMES);
    frames(v, state != V_INACTIVE ? site : 0);
    pickle_dict_end(p);
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
    pickle_t *p = &v->pk;
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
    pickle_item(p);
    pickle_dict(p);
    pickle_key(p, K_DEVICE);
    pickle_int(p, (uint64_t)s->dev);
    pickle_key(p, K_ADDRESS);
    pickle_int(p, s->base);
    pickle_key(p, K_TOTAL_SIZE);
    pickle_int(p, s->size);
    pickle_key(p, K_ALLOCATED_SIZE);
    pickle_int(p, used);
    pickle_key(p, K_ACTIVE_SIZE);
    pickle_int(p, used + pending);
    pickle_key(p, K_REQUESTED_SIZE);
    pickle_int(p, req);
    pickle_key(p, K_STREAM);
    pickle_int(p, s->stream);
    pickle_key(p, K_SEGMENT_TYPE);
    pickle_key(p, s->size <= (2u << 20) ? V_SMALL : V_LARGE);
    pickle_key(p, K_SEGMENT_POOL_ID);
    pickle_int(p, 0);
    pickle_int(p, s->graph);
    pickle_byte(p, 0x86);
    pickle_key(p, K_IS_EXPANDABLE);
    pickle_byte(p, s->expandable ? 0x88 : 0x89);
    pickle_key(p, K_FRAMES);
    frames(v, s->site);
    pickle_key(p, K_BLOCKS);
    pickle_list(p);
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
    pickle_list_end(p);
    pickle_dict_end(p);
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
    pickle_t *p = &v->pk;
    pickle_list(p);
    for (size_t i = 0; i < v->nmarks; i++) {
        for (int stage = 0; stage < 2; stage++) { /* a mark opens an annotation the next one ends */
            uint64_t t = stage ? (i + 1 < v->nmarks ? v->marks[i + 1].t : end_t) : v->marks[i].t;
            pickle_item(p);
            pickle_dict(p);
            pickle_key(p, K_STAGE);
            pickle_key(p, stage ? V_END : V_START);
            pickle_key(p, K_NAME);
            pickle_str(p, v->marks[i].label);
            pickle_key(p, K_DEVICE);
            pickle_int(p, (uint64_t)dev);
            pickle_key(p, K_TIME_US);
            pickle_int(p, time_us(v, t));
            pickle_dict_end(p);
        }
    }
    pickle_list_end(p);
}

static void settings(mv_t *v)
{
    pickle_t *p = &v->pk;
    pickle_dict(p);
    pickle_str(p, "PYTORCH_CUDA_ALLOC_CONF");
    pickle_key(p, V_EMPTY);
    pickle_str(p, "expandable_segments");
    pickle_byte(p, 0x89);
    pickle_str(p, "written_by");
    pickle_str(p, "gmshim " GMSHIM_VERSION_STRING);
    pickle_str(p, "gmshim_log");
    pickle_str(p, v->lf->name);
    pickle_dict_end(p);
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
    pickle_item(&v->pk);
    pickle_list(&v->pk);
    int rc = xr_run(x, lf, v->m, each_event, v);
    flush_segment(v, NULL);
    if (v->categories && v->entries) { /* MemoryViz.js needs "unknown" among the categories */
        entry_begin(v, V_SNAPSHOT, x->last_t);
        pickle_key(&v->pk, K_SIZE);
        pickle_int(&v->pk, 0);
        pickle_key(&v->pk, K_CATEGORY);
        pickle_key(&v->pk, V_UNKNOWN);
        entry_end(v, 0, 0);
    }
    pickle_list_end(&v->pk);
    v->collect_marks = 0;
    if (*keep) {
        xr_free(*keep);
        free(*keep);
    }
    *keep = x;
    return rc;
}

/* The ledgers as [{device, time_us, total, terms: [{term, bytes, measured, name | pid, command}]}]:
 * only the pool's memory and the libraries' can be segments; the context and other processes
 * are not this process's blocks, so they are named here beside them. */
static void ledgers(mv_t *v)
{
    pickle_t *p = &v->pk;
    pickle_list(p);
    for (int d = 0; d < 256; d++) {
        const ledger_t *l = v->card[d];
        if (!l || !l->valid)
            continue;
        pickle_item(p);
        pickle_dict(p);
        pickle_key(p, K_DEVICE);
        pickle_int(p, (uint64_t)d);
        pickle_key(p, K_TIME_US);
        pickle_int(p, time_us(v, l->t));
        pickle_str(p, "total");
        pickle_int(p, l->total);
        pickle_str(p, "terms");
        pickle_list(p);
        char label[160];
        for (unsigned i = 0; i < l->nterms; i++) {
            const ledger_term_t *t = &l->term[i];
            pickle_item(p);
            pickle_dict(p);
            pickle_str(p, "term");
            pickle_str(p, ledger_term_key(t));
            pickle_str(p, "label");
            pickle_str(p, ledger_term_label(t, l->torch, label, sizeof label));
            if (t->kind == LK_PROCESS) {
                pickle_str(p, "pid");
                pickle_int(p, t->pid);
            }
            pickle_key(p, K_SIZE);
            pickle_int(p, t->bytes);
            pickle_str(p, "measured");
            pickle_byte(p, t->measured ? 0x88 : 0x89);
            pickle_dict_end(p);
        }
        pickle_list_end(p);
        pickle_dict_end(p);
    }
    pickle_list_end(p);
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
    pickle_t *p = &v->pk;
    const model_t *m = v->m;
    int ndev = m->ndev > 0 ? m->ndev : 1, first = -1;
    xr_t *x = NULL;
    pickle_byte(p, 0x80);
    pickle_byte(p, 4);
    pickle_dict(p);
    pickle_str(p, "device_traces");
    pickle_list(p);
    v->collect_marks = 1;
    for (int d = 0; d < ndev; d++) {
        int wanted = m->dev[d] && (v->o->device < 0 || v->o->device == d);
        if (wanted && first < 0)
            first = d;
        if (!wanted) {
            pickle_item(p);
            pickle_list(p);
            pickle_list_end(p);
        } else if (device_trace(v, lf, d, &x)) {
            return -1;
        }
    }
    pickle_list_end(p);
    if (!x) { /* no device (or not the one asked for): the state is still a replay's */
        v->dev = -1;
        x = calloc(1, sizeof *x);
        if (!x || xr_run(x, lf, m, each_event, v))
            return -1;
    }
    pickle_str(p, "segments");
    pickle_list(p);
    for (int d = 0; d < ndev; d++)
        if (m->dev[d] && (v->o->device < 0 || v->o->device == d) && device_segments(v, x, d))
            return -1;
    pickle_list_end(p);
    pickle_str(p, "external_annotations");
    annotations(v, x->last_t, first < 0 ? 0 : first);
    pickle_str(p, "allocator_settings");
    settings(v);
    pickle_str(p, "gmshim_ledger");
    ledgers(v);
    pickle_dict_end(p);
    pickle_byte(p, '.');
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
        for (int d = 0; d < 256; d++)
            free(v->card[d]);
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
