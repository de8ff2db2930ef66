/* `gmshim frag`: fragmentation of each device's pool over time, at the peak and at each OOM:
 * reserved against allocated, free bytes split into internal (rounding: block - requested),
 * external (free gaps inside segments that hold live blocks) and cached (wholly free segments), the
 * largest free block and the number of segments. Figures only: causes are `gmshim oom`'s. */
#include "frag.h"
#include "output.h"

#include <inttypes.h>

static void frag_line(FILE *f, const model_frag_t *x, const char *indent)
{
    char a[32], b[32], c[32], d[32], e[32], g[32];
    uint64_t free_b = x->reserved > x->allocated ? x->reserved - x->allocated : 0;
    fprintf(f, "%sreserved %s, allocated %s (requested %s); free in the pool %s\n", indent,
            rep_bytes(x->reserved, a), rep_bytes(x->allocated, b), rep_bytes(x->requested, c), rep_bytes(free_b, d));
    fprintf(f, "%sinternal %s (rounding); external %s in %" PRIu64 " gap%s inside segments that hold live blocks",
            indent, rep_bytes(x->internal, e), rep_bytes(x->external, g), x->free_gaps, x->free_gaps == 1 ? "" : "s");
    if (x->cached_segments)
        fprintf(f, "; cached %s in %" PRIu64 " wholly free segment%s (not fragmentation)",
                rep_bytes(x->cached_whole, c), x->cached_segments, x->cached_segments == 1 ? "" : "s");
    fprintf(f, "; largest free block %s; %" PRIu64 " segment%s\n", rep_bytes(x->largest_free, a), x->segments,
            x->segments == 1 ? "" : "s");
}

static void frag_json(json_t *j, const char *key, const model_frag_t *x)
{
    json_obj(j, key);
    json_u64(j, "t", x->t);
    json_u64(j, "reserved", x->reserved);
    json_u64(j, "allocated", x->allocated);
    json_u64(j, "requested", x->requested);
    json_u64(j, "free", x->reserved > x->allocated ? x->reserved - x->allocated : 0);
    json_u64(j, "internal", x->internal);
    json_u64(j, "external", x->external);
    json_u64(j, "cached_whole", x->cached_whole);
    json_u64(j, "cached_segments", x->cached_segments);
    json_u64(j, "largest_free", x->largest_free);
    json_u64(j, "free_gaps", x->free_gaps);
    json_u64(j, "segments", x->segments);
    if (x->stray_blocks)
        json_u64(j, "blocks_outside_segments", x->stray_blocks);
    json_obj_end(j);
}

/* Inside PyTorch's segments at an OOM (pytorch/pytorch#29554): its free blocks between tensors
 * (inactive split blocks), and the segments with the most free space, from its tensor events. */
static void torch_segments_text(FILE *f, const model_oom_t *o)
{
    char a[32], b[32], c[32], d[32];
    fprintf(f, "    inside PyTorch's segments: %" PRIu64 " inactive split block%s (%s free between tensors), "
               "%s in pending frees, largest free block %s\n", o->frag.free_gaps, o->frag.free_gaps == 1 ? "" : "s",
            rep_bytes(o->frag.external, a), rep_bytes(o->frag.pending, b), rep_bytes(o->frag.largest_free, c));
    unsigned shown = 0;
    for (unsigned i = 0; i < o->nseg; i++) {
        const model_segfrag_t *g = &o->seg[i];
        if (!g->free)
            break; /* most free first: the rest have none */
        if (!shown++) {
            fprintf(f, "    its segments with free space, most first (of %" PRIu64 " segment%s):\n", o->seg_total,
                    o->seg_total == 1 ? "" : "s");
            fprintf(f, "      %18s %10s %10s %8s %10s %8s\n", "segment", "size", "free", "pieces", "largest", "blocks");
        }
        fprintf(f, "      %#18" PRIx64 " %10s %10s %8" PRIu64 " %10s %8" PRIu64 "\n", g->base, rep_bytes(g->size, a),
                rep_bytes(g->free, b), g->free_blocks, rep_bytes(g->largest_free, d), g->blocks);
    }
    if (!shown)
        fprintf(f, "      no free space in any of its %" PRIu64 " segment%s\n", o->seg_total, o->seg_total == 1 ? "" : "s");
}

static void torch_segments_json(json_t *j, const model_oom_t *o)
{
    json_u64(j, "inactive_split_blocks", o->frag.free_gaps);
    json_u64(j, "inactive_split_bytes", o->frag.external);
    json_u64(j, "pending", o->frag.pending);
    json_u64(j, "segments_total", o->seg_total);
    json_arr(j, "segments");
    for (unsigned i = 0; i < o->nseg; i++) {
        const model_segfrag_t *g = &o->seg[i];
        json_obj(j, NULL);
        json_u64(j, "base", g->base);
        json_u64(j, "size", g->size);
        json_u64(j, "free", g->free);
        json_u64(j, "free_blocks", g->free_blocks);
        json_u64(j, "largest_free", g->largest_free);
        json_u64(j, "blocks", g->blocks);
        json_obj_end(j);
    }
    json_arr_end(j);
}

void rep_frag_text(cli_ctx_t *c, const model_t *m, int over_time)
{
    FILE *f = c->out;
    char t[32], a[32], b[32], d[32], e[32], g[32];
    for (int dev = 0; dev < m->ndev; dev++) {
        const model_dev_t *dv = m->dev[dev];
        if (!dv)
            continue;
        model_frag_t peak;
        if (model_frag_at_peak(m, dev, &peak) != 0) {
            fprintf(f, "%sdevice %d%s: the pool reserved nothing\n", rep_bold(), dev, rep_reset());
            continue;
        }
        if (dv->peak_at_cut) /* a wrapped log's peak, in the part its checkpoint summarised */
            fprintf(f, "%sdevice %d%s: reserved memory peaked before %s, in the part of the log its checkpoint "
                    "summarised; the pool at the checkpoint instead\n", rep_bold(), dev, rep_reset(), rep_time(peak.t, t));
        else
            fprintf(f, "%sdevice %d%s: at the peak of reserved memory (%s)\n", rep_bold(), dev, rep_reset(),
                    rep_time(peak.t, t));
        frag_line(f, &peak, "  ");
        if (dv->allocs_kind[GMLOG_KIND_PASS] > dv->exact_allocs && !dv->seg_allocs)
            fprintf(f, "  (the pool was off: every block is its own driver allocation, nothing to fragment)\n");
        if (over_time) {
            fprintf(f, "  %10s %10s %10s %10s %10s %10s %10s %8s\n", "time", "reserved", "allocated", "internal",
                    "external", "cached", "largest", "segments");
            for (size_t i = 0; i < m->nfsnap; i++) {
                const model_frag_t *x = &m->fsnap[i];
                if (x->dev != dev)
                    continue;
                char ch[32];
                fprintf(f, "  %10s %10s %10s %10s %10s %10s %10s %8" PRIu64 "\n", rep_time(x->t, t),
                        rep_bytes(x->reserved, a), rep_bytes(x->allocated, b), rep_bytes(x->internal, d),
                        rep_bytes(x->external, e), rep_bytes(x->cached_whole, ch), rep_bytes(x->largest_free, g),
                        x->segments);
            }
        }
        unsigned k = 0;
        for (size_t i = 0; i < m->nooms; i++) {
            const model_oom_t *o = &m->ooms[i];
            if (o->dev != dev)
                continue;
            fprintf(f, "  at OOM %u (%s, a request of %s):\n", ++k, rep_time(o->t, t), rep_bytes(o->rec.request, a));
            frag_line(f, &o->frag, "    ");
            if (dv->torch)
                torch_segments_text(f, o);
            else
                fprintf(f, "    the pool itself said: largest free block %s in %u free blocks, %s cached, %s pending\n",
                        rep_bytes(o->rec.largest_free, a), o->rec.free_blocks, rep_bytes(o->rec.cached, b),
                        rep_bytes(o->rec.pending, d));
        }
    }
}

void rep_frag_json(cli_ctx_t *c, const model_t *m, int over_time)
{
    json_t *j = &c->j;
    json_arr(j, "fragmentation");
    for (int dev = 0; dev < m->ndev; dev++) {
        if (!m->dev[dev])
            continue;
        json_obj(j, NULL);
        json_u64(j, "device", (uint64_t)dev);
        model_frag_t peak;
        if (model_frag_at_peak(m, dev, &peak) == 0)
            frag_json(j, "peak", &peak);
        else
            json_null(j, "peak");
        if (over_time) {
            json_arr(j, "samples");
            for (size_t i = 0; i < m->nfsnap; i++)
                if (m->fsnap[i].dev == dev)
                    frag_json(j, NULL, &m->fsnap[i]);
            json_arr_end(j);
        }
        json_arr(j, "ooms");
        for (size_t i = 0; i < m->nooms; i++) {
            const model_oom_t *o = &m->ooms[i];
            if (o->dev != dev)
                continue;
            json_obj(j, NULL);
            json_u64(j, "t", o->t);
            json_u64(j, "requested", o->rec.request);
            frag_json(j, "model", &o->frag);
            json_u64(j, "pool_largest_free", o->rec.largest_free);
            json_u64(j, "pool_free_blocks", o->rec.free_blocks);
            json_u64(j, "pool_cached", o->rec.cached);
            json_u64(j, "pool_pending", o->rec.pending);
            if (m->dev[dev]->torch)
                torch_segments_json(j, o);
            json_obj_end(j);
        }
        json_arr_end(j);
        json_obj_end(j);
    }
    json_arr_end(j);
}

void cmd_frag_text(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg)
{
    (void)lf, (void)arg;
    rep_frag_text(c, m, 1);
}

void cmd_frag_json(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg)
{
    (void)lf, (void)arg;
    rep_frag_json(c, m, 1);
}

const char cmd_frag_usage[] =
    "usage: gmshim frag [--json] LOG...\n"
    "\n"
    "Fragmentation of each device's pool: at the peak of reserved memory, at evenly spaced times\n"
    "over the run, and at each OOM. Free bytes are split into internal (the rounding of each block\n"
    "above what was requested), external (free gaps inside segments that hold live blocks, from the\n"
    "segment records and the live blocks) and cached (segments with no live block: the pool's cache,\n"
    "not fragmentation); the largest free block says what could still be served without a new\n"
    "segment.\n"
    "\n"
    "  -j, --json     one JSON document\n"
    "  -h, --help     this text\n";
