/* `gmshim dump`: the header, the metadata and every record in time order, as text or one JSON
 * object per line. It shows what is in the file, not what it means: no replay, no model, and
 * it must print every readable record of a damaged log before reporting the damage. */
#include "dump.h"
#include "output.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct out {
    FILE *f;
    json_t *j;                  /* NULL: text */
} out_t;

static void f_u64(out_t *o, const char *k, uint64_t v)
{
    if (o->j)
        json_u64(o->j, k, v);
    else
        fprintf(o->f, " %s=%" PRIu64, k, v);
}

static void f_hex(out_t *o, const char *k, uint64_t v)
{
    if (o->j)
        json_u64(o->j, k, v);
    else
        fprintf(o->f, " %s=0x%" PRIx64, k, v);
}

static void f_str(out_t *o, const char *k, const char *s, size_t n)
{
    if (o->j) {
        json_strn(o->j, k, s, n);
        return;
    }
    fprintf(o->f, " %s=\"", k);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\')
            fprintf(o->f, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f)
            fprintf(o->f, "\\x%02x", ch);
        else
            fputc(ch, o->f);
    }
    fputc('"', o->f);
}

static void f_name(out_t *o, const char *k, const char *v)
{
    if (o->j)
        json_str(o->j, k, v);
    else
        fprintf(o->f, " %s=%s", k, v);
}

static void f_bool(out_t *o, const char *k, int v)
{
    if (o->j)
        json_bool(o->j, k, v);
    else if (v)
        fprintf(o->f, " %s", k);
}

static const char *const kinds[8] = {"pool", "pass", "managed", "pitched", "host", "async", "observed", "foreign"};
static const char *const fence_whys[GMLOG_FENCE_BY_MAX + 1] = {"?", "frees", "alloc", "need", "trim"};
static const char *const empty_reasons[8] = {"?", "oom", "api", "periodic", "idle", "cache_limit", "device_limit", "exit"};
static const char *const captures[5] = {"?", "begin", "end", "invalid", "released"};
static const char *const meta_tags[9] = {"end", "host", "program", "cmdline", "option", "rank", "version", "mode", "env"};
static const char *const warn_kinds[8] = {"?", "foreign_free", "double_free", "interior_free", "ipc_subblock",
                                          "pass_through", "sticky", "vmm"};

/* The fields of allocations, frees and segments. */
static void memory_fields(out_t *o, const rd_rec_t *r)
{
    const uint8_t *p = r->p;
    switch (r->type) {
    case GMLOG_ALLOC: {
        const gmlog_alloc_t *a = (const gmlog_alloc_t *)p;
        unsigned kind = (r->flags & GMLOG_KIND_MASK) >> GMLOG_KIND_SHIFT;
        uint64_t req = a->size & GMLOG_SIZE_MASK, extra = a->size >> GMLOG_SIZE_BITS;
        f_hex(o, "ptr", a->ptr);
        f_u64(o, "requested", req);
        f_name(o, "kind", kinds[kind]);
        if (kind == GMLOG_KIND_POOL) {
            uint64_t rounded = (req ? req + 511 : 512) / 512 * 512;
            f_u64(o, "block", extra == 0xffff && r->len >= 40 ? a->block : rounded + extra * 512);
        } else if (r->len >= 40) {
            f_u64(o, kind == GMLOG_KIND_ASYNC ? "stream" : "library", a->block);
        }
        f_bool(o, "miss", r->flags & GMLOG_A_MISS);
        f_bool(o, "graph", r->flags & GMLOG_A_GRAPH);
        if (r->flags & GMLOG_A_EXACT)
            f_bool(o, "exact", 1);
        if (r->flags & GMLOG_A_CACHED)
            f_bool(o, "cached", 1);
        if (r->flags & GMLOG_A_PLANNED)
            f_bool(o, "planned", 1);
        f_u64(o, "site", a->site);
        f_u64(o, "dur_ns", a->dur_ns);
        break;
    }
    case GMLOG_FREE: {
        const gmlog_free_t *x = (const gmlog_free_t *)p;
        f_hex(o, "ptr", x->ptr);
        f_name(o, "kind", kinds[(r->flags & GMLOG_KIND_MASK) >> GMLOG_KIND_SHIFT]);
        f_bool(o, "deferred", r->flags & GMLOG_F_DEFERRED);
        f_bool(o, "graph", r->flags & GMLOG_F_GRAPH);
        if (r->flags & GMLOG_F_CACHED)
            f_bool(o, "cached", 1);
        if (r->flags & GMLOG_F_RETURNED)
            f_bool(o, "returned", 1);
        f_u64(o, "site", x->site);
        f_u64(o, "dur_ns", x->dur_ns);
        break;
    }
    case GMLOG_SEGMENT_ALLOC:
    case GMLOG_SEGMENT_FREE: {
        const gmlog_segment_t *x = (const gmlog_segment_t *)p;
        f_hex(o, "base", x->base);
        f_u64(o, "size", x->size);
        f_u64(o, "dur_ns", x->dur_ns);
        f_u64(o, "graph", x->graph);
        break;
    }
    default:
        break;
    }
}

/* The fields of the pool: fences, cache releases, OOMs, stats. */
static void pool_fields(out_t *o, const rd_rec_t *r)
{
    const uint8_t *p = r->p;
    switch (r->type) {
    case GMLOG_FENCE: {
        const gmlog_fence_t *x = (const gmlog_fence_t *)p;
        f_u64(o, "seq", x->seq);
        f_name(o, "why", fence_whys[r->flags <= GMLOG_FENCE_BY_MAX ? r->flags : 0]);
        f_u64(o, "pending_bytes", x->pending_bytes);
        f_u64(o, "events", x->events);
        f_u64(o, "dur_ns", x->dur_ns);
        break;
    }
    case GMLOG_FENCE_WAIT: {
        const gmlog_fence_wait_t *x = (const gmlog_fence_wait_t *)p;
        f_u64(o, "seq", x->seq);
        f_u64(o, "dur_ns", x->dur_ns);
        break;
    }
    case GMLOG_FENCE_REUSABLE: {
        const gmlog_fence_wait_t *x = (const gmlog_fence_wait_t *)p;
        f_u64(o, "seq", x->seq);
        f_name(o, "by", r->flags & GMLOG_REUSABLE_ORDERED  ? "ordered"
                        : r->flags & GMLOG_REUSABLE_WAITED ? "waited"
                                                           : "completed");
        f_u64(o, "dur_ns", x->dur_ns);
        break;
    }
    case GMLOG_EMPTY_CACHE: {
        const gmlog_empty_cache_t *x = (const gmlog_empty_cache_t *)p;
        f_name(o, "reason", empty_reasons[r->flags & 7]);
        f_u64(o, "bytes", x->bytes);
        f_u64(o, "segments", x->segments);
        f_u64(o, "dur_ns", x->dur_ns);
        break;
    }
    case GMLOG_OOM: {
        const gmlog_oom_t *x = (const gmlog_oom_t *)p;
        f_bool(o, "released", r->flags & GMLOG_OOM_RELEASED);
        f_bool(o, "retried", r->flags & GMLOG_OOM_RETRIED);
        f_bool(o, "waited", r->flags & GMLOG_OOM_WAITED);
        f_bool(o, "limit", r->flags & GMLOG_OOM_LIMIT);
        f_bool(o, "capture", r->flags & GMLOG_OOM_CAPTURE);
        f_bool(o, "recovered", r->flags & GMLOG_OOM_RECOVERED);
        if (r->flags & GMLOG_OOM_ASYNC)
            f_bool(o, "async", 1);
        f_u64(o, "request", x->request);
        f_u64(o, "segment", x->segment);
        f_u64(o, "driver_free", x->driver_free);
        f_u64(o, "driver_total", x->driver_total);
        f_u64(o, "reserved", x->reserved);
        f_u64(o, "allocated", x->allocated);
        f_u64(o, "requested", x->requested);
        f_u64(o, "cached", x->cached);
        f_u64(o, "pending", x->pending);
        f_u64(o, "largest_free", x->largest_free);
        f_u64(o, "free_blocks", x->free_blocks);
        f_u64(o, "site", x->site);
        break;
    }
    case GMLOG_STATS: {
        const gmlog_stats_t *x = (const gmlog_stats_t *)p;
        f_u64(o, "requested", x->requested);
        f_u64(o, "allocated", x->allocated);
        f_u64(o, "reserved", x->reserved);
        f_u64(o, "cached", x->cached);
        f_u64(o, "pending", x->pending);
        f_u64(o, "hits", x->hits);
        f_u64(o, "misses", x->misses);
        break;
    }
    default:
        break;
    }
}

/* The fields of marks and the definitions (modules, sites, strings), their tails checked. */
static void definition_fields(out_t *o, const rd_rec_t *r)
{
    const uint8_t *p = r->p;
    switch (r->type) {
    case GMLOG_MARK: {
        const gmlog_mark_t *x = (const gmlog_mark_t *)p;
        const char *label;
        f_u64(o, "id", x->id);
        if (rd_tail_bytes(r, sizeof *x, x->len, &label) == 0)
            f_str(o, "label", label, x->len);
        else
            f_bool(o, "malformed", 1);
        if (r->flags & GMLOG_MARK_END)
            f_bool(o, "phase_end", 1);
        break;
    }
    case GMLOG_MODULE: {
        const gmlog_module_t *x = (const gmlog_module_t *)p;
        const char *tail;
        f_u64(o, "id", x->id);
        f_hex(o, "base", x->base);
        f_hex(o, "start", x->start);
        f_hex(o, "end", x->end);
        if (rd_tail_bytes(r, sizeof *x, (size_t)x->build_id_len + x->path_len, &tail) == 0) {
            char hex[520];
            size_t n = 0;
            for (unsigned i = 0; i < x->build_id_len && n + 3 < sizeof hex; i++)
                n += (size_t)snprintf(hex + n, sizeof hex - n, "%02x", (unsigned char)tail[i]);
            hex[n] = 0;
            f_name(o, "build_id", hex);
            f_str(o, "path", tail + x->build_id_len, x->path_len);
        } else {
            f_bool(o, "malformed", 1);
        }
        break;
    }
    case GMLOG_SITE: {
        const gmlog_site_t *x = (const gmlog_site_t *)p;
        const uint64_t *nat;
        const gmlog_pyframe_t *py;
        unsigned nn, np;
        f_u64(o, "id", x->id);
        if (rd_site_frames(r, &nat, &nn, &py, &np)) {
            f_bool(o, "malformed", 1);
            break;
        }
        if (o->j) {
            json_arr(o->j, "native");
            for (unsigned i = 0; i < nn; i++) {
                json_obj(o->j, NULL);
                json_u64(o->j, "module", GMLOG_FRAME_MODULE(nat[i]));
                json_u64(o->j, "offset", GMLOG_FRAME_OFFSET(nat[i]));
                json_obj_end(o->j);
            }
            json_arr_end(o->j);
            json_arr(o->j, "python");
            for (unsigned i = 0; i < np; i++) {
                json_obj(o->j, NULL);
                json_u64(o->j, "file", py[i].file);
                json_u64(o->j, "function", py[i].function);
                json_u64(o->j, "line", py[i].line);
                json_obj_end(o->j);
            }
            json_arr_end(o->j);
        } else {
            fprintf(o->f, " native=[");
            for (unsigned i = 0; i < nn; i++)
                fprintf(o->f, "%s%u+0x%" PRIx64, i ? " " : "", (unsigned)GMLOG_FRAME_MODULE(nat[i]),
                        (uint64_t)GMLOG_FRAME_OFFSET(nat[i]));
            fprintf(o->f, "] python=[");
            for (unsigned i = 0; i < np; i++)
                fprintf(o->f, "%s%u:%u:%u", i ? " " : "", py[i].file, py[i].function, py[i].line);
            fprintf(o->f, "]");
        }
        break;
    }
    case GMLOG_STRING: {
        const gmlog_string_t *x = (const gmlog_string_t *)p;
        const char *s;
        f_u64(o, "id", x->id);
        if (rd_tail_bytes(r, sizeof *x, x->len, &s) == 0)
            f_str(o, "value", s, x->len);
        else
            f_bool(o, "malformed", 1);
        break;
    }
    default:
        break;
    }
}

/* The fields of warnings, devices, the clock, the end, captures, resets, limits. */
static void process_fields(out_t *o, const rd_rec_t *r)
{
    const uint8_t *p = r->p;
    switch (r->type) {
    case GMLOG_WARNING: {
        const gmlog_warning_t *x = (const gmlog_warning_t *)p;
        f_name(o, "kind", r->flags < 8 ? warn_kinds[r->flags] : "?");
        f_hex(o, "ptr", x->ptr);
        f_u64(o, "site", x->site);
        f_u64(o, "aux", x->aux);
        break;
    }
    case GMLOG_DEVICE: {
        const gmlog_device_t *x = (const gmlog_device_t *)p;
        const char *s;
        f_u64(o, "total", x->total);
        f_u64(o, "free_at_start", x->free_at_start);
        if (rd_tail_bytes(r, sizeof *x, x->name_len, &s) == 0)
            f_str(o, "name", s, x->name_len);
        break;
    }
    case GMLOG_CLOCK:
        f_u64(o, "base_ns", ((const gmlog_clock_t *)p)->base_ns);
        break;
    case GMLOG_END:
        f_u64(o, "reason", ((const gmlog_end_t *)p)->reason);
        break;
    case GMLOG_CAPTURE: {
        const gmlog_capture_t *x = (const gmlog_capture_t *)p;
        f_name(o, "event", r->flags < 5 ? captures[r->flags] : "?");
        f_hex(o, "stream", x->stream);
        f_hex(o, "graph", x->graph);
        f_u64(o, "id", x->id);
        f_u64(o, "mode", x->mode);
        break;
    }
    case GMLOG_RESET: {
        const gmlog_reset_t *x = (const gmlog_reset_t *)p;
        f_u64(o, "reserved_bytes", x->reserved_bytes);
        f_u64(o, "live_bytes", x->live_bytes);
        break;
    }
    case GMLOG_LIMIT:
        f_u64(o, "bytes", ((const gmlog_limit_t *)p)->bytes);
        break;
    default:
        break;
    }
}

/* The fields of a bounded log's checkpoints. */
static void checkpoint_fields(out_t *o, const rd_rec_t *r)
{
    const uint8_t *p = r->p;
    switch (r->type) {
    case GMLOG_CHECKPOINT: {
        const gmlog_checkpoint_t *x = (const gmlog_checkpoint_t *)p;
        f_name(o, "event", r->flags == GMLOG_CKPT_BEGIN ? "begin" : r->flags == GMLOG_CKPT_END ? "end" : "?");
        f_u64(o, "seq", x->seq);
        f_u64(o, "at_ns", x->at_ns);
        if (r->flags == GMLOG_CKPT_END) {
            f_u64(o, "records", x->records);
            f_u64(o, "dropped_before_ns", x->dropped_before_ns);
        }
        break;
    }
    case GMLOG_CUT: {
        const gmlog_cut_t *x = (const gmlog_cut_t *)p;
        if (r->flags & GMLOG_CUT_TORCH)
            f_name(o, "of", "pytorch"); /* PyTorch's allocator's state, not gmshim's pool's */
        f_u64(o, "cut_ns", x->cut_ns);
        f_u64(o, "requested", x->requested);
        f_u64(o, "allocated", x->allocated);
        f_u64(o, "reserved", x->reserved);
        f_u64(o, "cached", x->cached);
        f_u64(o, "pending", x->pending);
        f_u64(o, "peak_requested", x->peak_requested);
        f_u64(o, "peak_allocated", x->peak_allocated);
        f_u64(o, "peak_reserved", x->peak_reserved);
        f_u64(o, "allocs", x->allocs);
        f_u64(o, "frees", x->frees);
        f_u64(o, "hits", x->hits);
        f_u64(o, "misses", x->misses);
        f_u64(o, "ooms", x->ooms);
        f_u64(o, "segments", x->segments);
        f_u64(o, "blocks", x->blocks);
        break;
    }
    case GMLOG_AT:
        f_u64(o, "at_ns", ((const gmlog_at_t *)p)->at_ns);
        break;
    default:
        break;
    }
}

/* PyTorch's allocator events (GMLOG_T_*): one layout. */
static void tensor_fields(out_t *o, const rd_rec_t *r)
{
    const gmlog_tensor_t *t = (const gmlog_tensor_t *)r->p;
    f_hex(o, r->type == GMLOG_T_OOM ? "device_free" : "addr", t->addr);
    f_u64(o, "size", t->size);
    f_hex(o, "stream", t->stream);
    f_u64(o, "site", t->site);
    f_u64(o, "pool", t->pool);
}

/* The card's ledger sample: the driver's and NVML's figures, then each other process. */
static void ledger_fields(out_t *o, const rd_rec_t *r)
{
    static const char *const whys[] = {"?", "start", "oom", "mark", "periodic", "exit"};
    const gmlog_ledger_t *x = (const gmlog_ledger_t *)r->p;
    f_name(o, "why", r->flags < 6 ? whys[r->flags] : "?");
    f_u64(o, "total", x->total);
    f_u64(o, "driver_free", x->driver_free);
    f_u64(o, "context", x->context);
    f_u64(o, "self_used", x->self_used);
    f_u64(o, "others", x->others);
    f_u64(o, "status", x->status);
    const gmlog_ledger_proc_t *p;
    unsigned n = rd_ledger_procs(r, &p);
    f_u64(o, "processes", n);
    for (unsigned i = 0; i < n; i++) {
        char key[32];
        snprintf(key, sizeof key, "pid%u", i);
        f_u64(o, key, p[i].pid);
        snprintf(key, sizeof key, "command%u", i);
        f_u64(o, key, p[i].command);
        snprintf(key, sizeof key, "used%u", i);
        f_u64(o, key, p[i].used);
    }
}

/* A record's fields after its time, thread, type and device. */
static void fields(out_t *o, const rd_rec_t *r)
{
    if (r->type >= GMLOG_T_ALLOC && r->type <= GMLOG_T_OOM && r->len >= sizeof(gmlog_tensor_t)) {
        tensor_fields(o, r);
        return;
    }
    switch (r->type) {
    case GMLOG_ALLOC:
    case GMLOG_FREE:
    case GMLOG_SEGMENT_ALLOC:
    case GMLOG_SEGMENT_FREE:
        memory_fields(o, r);
        break;
    case GMLOG_FENCE:
    case GMLOG_FENCE_WAIT:
    case GMLOG_FENCE_REUSABLE:
    case GMLOG_EMPTY_CACHE:
    case GMLOG_OOM:
    case GMLOG_STATS:
        pool_fields(o, r);
        break;
    case GMLOG_MARK:
    case GMLOG_MODULE:
    case GMLOG_SITE:
    case GMLOG_STRING:
        definition_fields(o, r);
        break;
    case GMLOG_WARNING:
    case GMLOG_DEVICE:
    case GMLOG_CLOCK:
    case GMLOG_END:
    case GMLOG_CAPTURE:
    case GMLOG_RESET:
    case GMLOG_LIMIT:
        process_fields(o, r);
        break;
    case GMLOG_CHECKPOINT:
    case GMLOG_CUT:
    case GMLOG_AT:
        checkpoint_fields(o, r);
        break;
    case GMLOG_LEDGER:
        ledger_fields(o, r);
        break;
    default:
        f_u64(o, "len", r->len);
        break;
    }
}

static void header(cli_ctx_t *c, const rd_log_t *lf, out_t *o)
{
    const gmlog_file_header_t *h = &lf->hdr;
    char state[160];
    if (c->json) {
        json_obj(o->j, NULL);
        json_str(o->j, "record", "header");
        json_str(o->j, "path", lf->name);
    } else {
        fprintf(o->f, "%s%s%s:", rep_bold(), lf->name, rep_reset());
    }
    if (lf->no_header) { /* nothing else is known */
        const char *st = cli_close_state(lf, NULL, state, sizeof state);
        f_bool(o, "no_header", 1);
        f_str(o, "state", st, strlen(st));
        if (c->json) {
            json_obj_end(o->j);
            json_line_end(o->j);
        } else {
            fputc('\n', o->f);
        }
        return;
    }
    f_u64(o, "version", h->version);
    f_name(o, "byte_order", lf->swapped ? "swapped" : "native");
    f_u64(o, "header_size", h->header_size);
    f_u64(o, "chunk_size", h->chunk_size);
    f_u64(o, "pid", h->pid);
    f_u64(o, "start_realtime_ns", h->start_realtime_ns);
    f_u64(o, "start_mono_ns", h->start_mono_ns);
    f_u64(o, "flags", h->flags);
    f_u64(o, "end_ns", h->end_ns);
    f_u64(o, "close_reason", h->close_reason);
    const char *st = cli_close_state(lf, NULL, state, sizeof state);
    f_str(o, "state", st, strlen(st));
    f_u64(o, "chunks", lf->nchunks);
    f_u64(o, "chunk_slots", lf->nslots);
    f_u64(o, "threads", lf->nstreams);
    if (lf->wrapped) {
        f_bool(o, "wrapped", 1);
        f_u64(o, "checkpoint", lf->ckpt.seq); /* the one the reports read from; 0: none complete */
        if (lf->ckpt.seq)
            f_u64(o, "detail_from_ns", lf->ckpt.detail_from_ns);
    }
    if (c->json) {
        json_obj_end(o->j);
        json_line_end(o->j);
    } else {
        fputc('\n', o->f);
    }
    for (size_t i = 0; i < lf->nmeta; i++) {
        const rd_meta_t *me = &lf->meta[i];
        const char *tag = me->tag < 9 ? meta_tags[me->tag] : "unknown";
        if (c->json) {
            json_obj(o->j, NULL);
            json_str(o->j, "record", "meta");
            json_str(o->j, "tag", tag);
            json_strn(o->j, "value", me->value, me->len);
            json_obj_end(o->j);
            json_line_end(o->j);
        } else {
            /* argv is NUL-separated: show it with spaces */
            fprintf(o->f, "meta %-8s ", tag);
            for (uint32_t k = 0; k < me->len; k++)
                fputc(me->value[k] ? (unsigned char)me->value[k] >= 0x20 ? me->value[k] : '?' : ' ', o->f);
            fputc('\n', o->f);
        }
    }
}

static double dump_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* How far the dump is, on a terminal's stderr (c->progress), at most four times a second, for
 * a log large enough to take a while (a second or more: some 16 MiB). */
static void dump_progress(const cli_ctx_t *c, const rd_log_t *lf, double *last, int *shown)
{
    double now = dump_now();
    if (now - *last < 0.25)
        return;
    fprintf(c->err, "\rgmshim: dump %s: %3.0f%%", lf->name, 100.0 * rd_progress(lf));
    fflush(c->err);
    *last = now;
    *shown = 1;
}

int rep_dump(cli_ctx_t *c, rd_log_t *lf)
{
    out_t o = {c->out, c->json ? &c->j : NULL};
    header(c, lf, &o);
    rd_rec_t r;
    lf->raw = 1; /* every record as it is: checkpoints' records marked, a wrapped log's old ones too */
    rd_rewind(lf);
    uint64_t records = 0, planned = 0, planned_bytes = 0;
    int progress = c->progress && lf->size >= (16u << 20), bar = 0;
    double last = dump_now();
    while (rd_next(lf, &r)) {
        if ((++records & 0xffff) == 0 && progress)
            dump_progress(c, lf, &last, &bar);
        const char *name = rd_type_name(r.type);
        char unk[32];
        if (!name) {
            snprintf(unk, sizeof unk, "type_%u", r.type);
            name = unk;
        }
        if (c->json) {
            json_obj(o.j, NULL);
            json_u64(o.j, "t", r.t);
            json_str(o.j, "type", name);
            json_u64(o.j, "tid", r.tid);
            if (r.device != GMLOG_NO_DEVICE)
                json_u64(o.j, "device", r.device);
            json_u64(o.j, "flags", r.flags);
            json_u64(o.j, "offset", r.off);
        } else {
            fprintf(o.f, "%12.6f %7u %-13s ", (double)r.t / 1e9, r.tid, name);
            if (r.device != GMLOG_NO_DEVICE)
                fprintf(o.f, "dev=%u", r.device);
            else
                fprintf(o.f, "     ");
        }
        if (r.ckpt == RD_CKPT_SPAN)
            f_bool(&o, "in_checkpoint", 1);
        rd_check_tail(lf, &r); /* what the reports reject makes the dump partial too */
        if (r.type == GMLOG_ALLOC && (r.flags & GMLOG_A_PLANNED) && r.ckpt != RD_CKPT_SPAN) {
            planned++;
            planned_bytes += ((const gmlog_alloc_t *)r.p)->size & GMLOG_SIZE_MASK;
        }
        fields(&o, &r);
        if (c->json) {
            json_obj_end(o.j);
            json_line_end(o.j);
        } else {
            fputc('\n', o.f);
        }
    }
    if (bar)
        fprintf(c->err, "\r\033[K");
    if (planned && c->json) { /* what GMSHIM_PLAN served: only where it served something */
        json_obj(o.j, NULL);
        json_str(o.j, "record", "planned");
        json_u64(o.j, "allocs", planned);
        json_u64(o.j, "bytes", planned_bytes);
        json_obj_end(o.j);
        json_line_end(o.j);
    } else if (planned) {
        char a[32];
        fprintf(o.f, "planned: %" PRIu64 " ALLOC records flagged planned (GMSHIM_PLAN's step), %s asked\n", planned,
                rep_bytes(planned_bytes, a));
    }
    if (!records && !lf->partial && !c->json)
        fprintf(o.f, "%s\n", RD_NO_RECORDS);
    size_t shown = lf->ndiags < RD_MAX_DIAGS ? lf->ndiags : RD_MAX_DIAGS;
    for (size_t i = 0; i < shown; i++)
        fprintf(c->err, "gmshim: %s: byte %" PRIu64 ": %s\n", lf->name, lf->diags[i].offset, lf->diags[i].msg);
    if (lf->ndiags > shown)
        fprintf(c->err, "gmshim: %s: %zu more problems not shown\n", lf->name, lf->ndiags - shown);
    return lf->partial ? CLI_PARTIAL : CLI_OK;
}

const char cmd_dump_usage[] =
    "usage: gmshim dump [--json] LOG...\n"
    "\n"
    "The header, the metadata and every record in time order (threads merged), one a line:\n"
    "time in seconds, thread id, type, device, fields. --json writes one JSON object per line:\n"
    "{\"record\":\"header\",...}, {\"record\":\"meta\",...}, then {\"t\",\"type\",\"tid\",\"device\",\"flags\",\n"
    "\"offset\", fields...} for each record. A log with allocations GMSHIM_PLAN served ends with their\n"
    "count and bytes asked ({\"record\":\"planned\",\"allocs\",\"bytes\"}).\n"
    "\n"
    "  -j, --json     one JSON object per line\n"
    "  -h, --help     this text\n";
