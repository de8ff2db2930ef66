/* `gmshim summary`: per device, the counts, peaks, cache hit rate, driver calls made against
 * those an unpooled run would have made, the time that saved (from the logged durations),
 * fences, unpooled and foreign allocations, warnings. It needs no per-site state, so it is the
 * fastest report: it must stay a single streaming pass. */
#include "summary.h"
#include "ledger.h"
#include "output.h"

#include <inttypes.h>
#include <string.h>

static const char *const kind_names[8] = {"pool", "pass_through", "managed", "pitched",
                                          "host", "async", "cupti_observed", "foreign"};
static const char *const warn_names[8] = {"other", "foreign_free", "double_free", "interior_free",
                                          "ipc_subblock", "fell_back_to_pass_through", "sticky_error", "vmm"};

/* The time-saved estimate needs this many driver allocations to measure their cost on. */
#define EST_MIN_SEGMENT_ALLOCS 8
/* The GMSHIM_GPU_ORDER hint: fence waits of at least 1/GPU_ORDER_HINT_PART of the run (1 %),
 * in a process that used one device (the mode covers only that case). */
#define GPU_ORDER_HINT_PART 100

/* Driver-call figures of a device, shared by the text and JSON forms. */
typedef struct calls {
    uint64_t pool_allocs, pool_frees;
    uint64_t made;                /* segment allocs + frees (pool), or every pass-through call */
    uint64_t unpooled;            /* one cudaMalloc and one cudaFree per allocation */
    uint64_t mean_driver_alloc;   /* ns, 0 when unknown */
    uint64_t mean_driver_free;
    uint64_t mean_pool_alloc, mean_pool_free;
    int64_t saved_ns;
    int have_estimate;
} calls_t;

static void driver_calls(const model_dev_t *d, calls_t *k)
{
    memset(k, 0, sizeof *k);
    k->pool_allocs = d->allocs_kind[GMLOG_KIND_POOL];
    k->pool_frees = d->frees_kind[GMLOG_KIND_POOL];
    k->made = d->seg_allocs + d->seg_frees + d->allocs_kind[GMLOG_KIND_PASS] + d->frees_kind[GMLOG_KIND_PASS];
    k->unpooled = d->allocs_kind[GMLOG_KIND_POOL] + d->frees_kind[GMLOG_KIND_POOL] +
                  d->allocs_kind[GMLOG_KIND_PASS] + d->frees_kind[GMLOG_KIND_PASS];
    if (d->seg_allocs)
        k->mean_driver_alloc = d->seg_alloc_ns / d->seg_allocs;
    k->mean_driver_free = d->seg_frees ? d->seg_free_ns / d->seg_frees : k->mean_driver_alloc;
    if (k->pool_allocs)
        k->mean_pool_alloc = d->pool_alloc_ns / k->pool_allocs;
    if (k->pool_frees)
        k->mean_pool_free = d->pool_free_ns / k->pool_frees;
    if (d->seg_allocs >= EST_MIN_SEGMENT_ALLOCS && k->pool_allocs) {
        /* Unpooled, each allocation would have paid a driver cudaMalloc (and each free a
         * cudaFree) of the mean cost the pool's own driver calls had here. */
        double would = (double)k->pool_allocs * (double)k->mean_driver_alloc +
                       (double)k->pool_frees * (double)k->mean_driver_free;
        double did = (double)d->pool_alloc_ns + (double)d->pool_free_ns;
        k->saved_ns = (int64_t)(would - did);
        k->have_estimate = 1;
    }
}

static uint64_t run_ns(const model_t *m)
{
    const gmlog_file_header_t *h = &m->lf->hdr;
    return (h->flags & GMLOG_F_CLOSED) && h->end_ns ? h->end_ns : m->last_t;
}

static int devices_used(const model_t *m)
{
    int n = 0;
    for (int i = 0; i < m->ndev; i++)
        n += m->dev[i] && m->dev[i]->allocs;
    return n;
}

/* Why fences were recorded (enum gmlog_fence_why): a JSON key, and the text's words. */
static const struct {
    const char *key, *text;
} fence_whys[GMLOG_FENCE_BY_MAX + 1] = {
    {"unknown", "for reasons the log does not say"},
    {"frees", "after enough frees"},
    {"alloc", "by allocations finding no reusable block"},
    {"need", "for freed memory needed at once"},
    {"trim", "by the trimmer or the cache cap"},
};

/* " (2 400 by allocations ..., 150 after enough frees)": the reasons, largest first, when the log
 * says them (a log from before the reason was recorded says nothing). */
static void fences_by_text(FILE *f, const model_dev_t *d)
{
    if (d->fences_by[GMLOG_FENCE_BY_UNKNOWN] == d->fences)
        return;
    int done[GMLOG_FENCE_BY_MAX + 1] = {0};
    const char *sep = " (";
    for (int n = 0; n <= GMLOG_FENCE_BY_MAX; n++) {
        int best = -1;
        for (int k = 0; k <= GMLOG_FENCE_BY_MAX; k++)
            if (!done[k] && d->fences_by[k] && (best < 0 || d->fences_by[k] > d->fences_by[best]))
                best = k;
        if (best < 0)
            break;
        done[best] = 1;
        char a[32];
        fprintf(f, "%s%s %s", sep, rep_count(d->fences_by[best], a), fence_whys[best].text);
        sep = ", ";
    }
    fputc(')', f);
}

/* Whether the fence waits were worth GMSHIM_GPU_ORDER=1 (see the thresholds above). */
static int gpu_order_hint(const model_t *m, const model_dev_t *d)
{
    uint64_t run = run_ns(m);
    return d->fence_waits && devices_used(m) <= 1 && run &&
           (double)d->fence_wait_ns * GPU_ORDER_HINT_PART >= (double)run;
}

static uint64_t live_bytes(const model_dev_t *d, uint64_t *count)
{
    uint64_t b = 0, n = 0;
    for (int k = 0; k < 8; k++) {
        b += d->live_kind_bytes[k];
        n += d->live_kind_count[k];
    }
    *count = n;
    return b;
}

void rep_summary_device_json(json_t *j, const model_t *m, const model_dev_t *d)
{
    calls_t k;
    driver_calls(d, &k);
    uint64_t live_n, live_b = live_bytes(d, &live_n);
    json_u64(j, "device", (uint64_t)d->id);
    json_str(j, "name", d->name[0] ? d->name : NULL);
    json_u64(j, "total", d->total);
    json_u64(j, "limit", d->limit_max);
    json_u64(j, "allocs", d->allocs);
    json_u64(j, "frees", d->frees);
    json_obj(j, "allocs_by_kind");
    for (int i = 0; i < 8; i++)
        if (d->allocs_kind[i])
            json_u64(j, kind_names[i], d->allocs_kind[i]);
    json_obj_end(j);
    json_u64(j, "live_count", live_n);
    json_u64(j, "live_bytes", live_b);
    json_u64(j, "requested", d->requested);
    json_u64(j, "allocated", d->allocated);
    json_u64(j, "reserved", d->reserved);
    json_u64(j, "peak_requested", d->peak_requested);
    json_u64(j, "peak_allocated", d->peak_allocated);
    json_u64(j, "peak_reserved", d->peak_reserved);
    json_u64(j, "peak_segments", d->peak_segments);
    if (d->torch) { /* PyTorch's tensors (docs/pytorch.md); absent for other logs */
        json_u64(j, "torch_frees_waited", d->torch_waited);
        json_u64(j, "torch_pending_peak", d->torch_pending_peak);
        json_u64(j, "torch_cross_stream_frees", d->torch_cross_stream);
    }
    json_u64(j, "cache_hits", d->hits);
    json_u64(j, "cache_misses", d->misses);
    if (d->hits + d->misses)
        json_dbl(j, "cache_hit_rate", (double)d->hits / (double)(d->hits + d->misses));
    else
        json_null(j, "cache_hit_rate");
    json_u64(j, "segment_allocs", d->seg_allocs);
    json_u64(j, "segment_frees", d->seg_frees);
    json_u64(j, "driver_calls", k.made);
    json_u64(j, "unpooled_driver_calls", k.unpooled);
    json_u64(j, "driver_alloc_mean_ns", k.mean_driver_alloc);
    json_u64(j, "pool_alloc_mean_ns", k.mean_pool_alloc);
    json_u64(j, "pool_free_mean_ns", k.mean_pool_free);
    if (k.have_estimate && !d->torch)
        json_i64(j, "est_time_saved_ns", k.saved_ns);
    else
        json_null(j, "est_time_saved_ns");
    json_u64(j, "est_based_on_segment_allocs", d->seg_allocs);
    json_u64(j, "fences", d->fences);
    json_u64(j, "fence_ns", d->fence_ns);
    json_u64(j, "fence_events", d->fence_events);
    json_obj(j, "fences_by");
    for (int why = 0; why <= GMLOG_FENCE_BY_MAX; why++)
        json_u64(j, fence_whys[why].key, d->fences_by[why]);
    json_obj_end(j);
    json_u64(j, "fence_waits", d->fence_waits);
    json_u64(j, "fence_wait_ns", d->fence_wait_ns);
    json_bool(j, "gpu_order_hint", gpu_order_hint(m, d));
    json_u64(j, "empty_caches", d->empty_caches);
    json_u64(j, "empty_cache_bytes", d->empty_bytes);
    json_u64(j, "ooms", d->ooms);
    json_u64(j, "oom_retries", d->retries);
    uint64_t unpooled = 0;
    for (int i = GMLOG_KIND_MANAGED; i < 8; i++)
        unpooled += d->allocs_kind[i];
    json_u64(j, "unpooled_allocs", unpooled);
    json_u64(j, "pass_through_allocs", d->allocs_kind[GMLOG_KIND_PASS]);
    json_u64(j, "exact_segment_allocs", d->exact_allocs);
    json_u64(j, "foreign_frees", d->warnings[GMLOG_WARN_FOREIGN_FREE]);
    json_u64(j, "unmatched_frees", d->unmatched_frees);
    json_u64(j, "captures", d->captures);
    json_u64(j, "graph_allocs", d->graph_allocs);
    if (d->planned_allocs) { /* only then: the JSON of other logs stays as it was */
        json_u64(j, "planned_allocs", d->planned_allocs);
        json_u64(j, "planned_bytes", d->planned_bytes);
    }
    json_u64(j, "resets", d->resets);
    json_obj(j, "warnings");
    for (int i = 1; i < 7; i++)
        if (d->warnings[i])
            json_u64(j, warn_names[i], d->warnings[i]);
    json_obj_end(j);
    const ledger_set_t *ls = ledger_of(m);
    if (ls && d->id >= 0 && d->id < 255 && ls->peak[d->id].valid)
        ledger_json(j, "ledger_at_peak", &ls->peak[d->id]);
}

void rep_summary_json(cli_ctx_t *c, const model_t *m)
{
    json_t *j = &c->j;
    json_arr(j, "devices");
    for (int i = 0; i < m->ndev; i++) {
        if (!m->dev[i])
            continue;
        json_obj(j, NULL);
        rep_summary_device_json(j, m, m->dev[i]);
        json_obj_end(j);
    }
    json_arr_end(j);
    json_u64(j, "warnings_total", m->warns_total);
    json_u64(j, "unknown_records", m->lf->unknown_records);
}

/* The driver calls made against an unpooled run's, and the time the pool saved. */
static void driver_text(FILE *f, const model_dev_t *d, const calls_t *k)
{
    char a[32], b[32], e[32], g[32], h[32], t2[32];
    if (k->unpooled) {
        fprintf(f, "  driver calls  %s", rep_count(k->made, a));
        if (d->seg_allocs || d->seg_frees)
            fprintf(f, " (%s segment allocs, %s segment frees)", rep_count(d->seg_allocs, b), rep_count(d->seg_frees, e));
        fprintf(f, " where an unpooled run makes %s (a cudaMalloc and a cudaFree per allocation)",
                rep_count(k->unpooled, g));
        if (k->made < k->unpooled)
            fprintf(f, ": %s fewer", rep_pct(k->unpooled - k->made, k->unpooled, h));
        fputc('\n', f);
    }
    if (d->torch) {
        fprintf(f, "  time          not estimated: PyTorch's cache served the tensors, not gmshim's pool\n");
    } else if (k->have_estimate) {
        fprintf(f, "  time          ");
        if (k->saved_ns > 0)
            fprintf(f, "%sest. %s saved%s", rep_green(), rep_dur((uint64_t)k->saved_ns, a), rep_reset());
        else
            fprintf(f, "no time saved (est. %s lost)", rep_dur((uint64_t)-k->saved_ns, a));
        fprintf(f, ": %s allocations and %s frees at the driver's mean cost here (cudaMalloc %s, measured on "
                "%s segment allocations), less gmshim's own (cudaMalloc %s", rep_count(k->pool_allocs, b),
                rep_count(k->pool_frees, e), rep_dur(k->mean_driver_alloc, g), rep_count(d->seg_allocs, h),
                rep_dur(k->mean_pool_alloc, t2));
        if (k->mean_pool_free)
            fprintf(f, ", cudaFree %s", rep_dur(k->mean_pool_free, g));
        fprintf(f, ")\n");
    } else if (d->allocs_kind[GMLOG_KIND_PASS] > d->exact_allocs && !d->seg_allocs) {
        fprintf(f, "  time          the pool was off (GMSHIM_POOL=0): every allocation went to the driver\n");
    } else if (k->pool_allocs) {
        fprintf(f, "  time          not estimated: %s segment allocation%s too few to measure the driver's cost "
                "(%d needed)\n", rep_count(d->seg_allocs, a), d->seg_allocs == 1 ? " is" : "s are",
                EST_MIN_SEGMENT_ALLOCS);
    }
}

static void device_text(cli_ctx_t *c, const model_t *m, const model_dev_t *d)
{
    FILE *f = c->out;
    char a[32], b[32], e[32], g[32], h[32];
    calls_t k;
    driver_calls(d, &k);
    fprintf(f, "%sdevice %d%s: %s", rep_bold(), d->id, rep_reset(), d->name[0] ? d->name : "(no device record)");
    if (d->total)
        fprintf(f, ", %s", rep_bytes(d->total, a));
    if (d->limit_max)
        fprintf(f, ", capped at %s by GMSHIM_DEVICE_LIMIT", rep_bytes(d->limit_max, a));
    fputc('\n', f);
    uint64_t live_n, live_b = live_bytes(d, &live_n);
    fprintf(f, "  allocations   %s allocs, %s frees; %s live at the end (%s)\n", rep_count(d->allocs, a),
            rep_count(d->frees, b), rep_count(live_n, e), rep_bytes(live_b, g));
    if (d->torch)
        fprintf(f, "  tensors       PyTorch's, from its bridge: allocated = live tensors, reserved = its segments; "
                   "%s frees waited for other streams (at most %s pending), %s freed on another stream than "
                   "allocated\n", rep_count(d->torch_waited, e), rep_bytes(d->torch_pending_peak, a),
                rep_count(d->torch_cross_stream, b));
    int kinds = 0;
    for (int i = 1; i < 8; i++)
        kinds += d->allocs_kind[i] != 0;
    if (kinds) {
        fprintf(f, "  by kind      ");
        for (int i = 0; i < 8; i++)
            if (d->allocs_kind[i])
                fprintf(f, " %s %s", kind_names[i], rep_count(d->allocs_kind[i], a));
        fputc('\n', f);
    }
    if (d->exact_allocs)
        fprintf(f, "  segments      %s of PyTorch's cache taken from the driver at their exact size, as without "
                   "gmshim (not from gmshim's pool)\n", rep_count(d->exact_allocs, a));
    fprintf(f, "  peaks         requested %s, allocated %s, reserved %s", rep_bytes(d->peak_requested, a),
            rep_bytes(d->peak_allocated, b), rep_bytes(d->peak_reserved, e));
    if (d->peak_allocated)
        fprintf(f, " (reserved/allocated %.2f)", (double)d->peak_reserved / (double)d->peak_allocated);
    fputc('\n', f);
    if (d->hits + d->misses) {
        fprintf(f, "  cache         hit rate %s (%s hits, %s misses)\n", rep_pct(d->hits, d->hits + d->misses, h),
                rep_count(d->hits, a), rep_count(d->misses, b));
    }
    driver_text(f, d, &k);
    if (d->fences || d->fence_waits) {
        fprintf(f, "  fences        %s recorded", rep_count(d->fences, a));
        fences_by_text(f, d);
        if (d->fence_ns)
            fprintf(f, ", their runtime calls %s (%s of the run)", rep_dur(d->fence_ns, e),
                    rep_pct(d->fence_ns, run_ns(m), h));
        /* A fence's events: the legacy stream's and one per stream it covered, which is what makes
         * a fence dear (PyTorch's pool of 32 streams: 33 or more). */
        if (d->fences && d->fence_events)
            fprintf(f, ", %.1f events a fence", (double)d->fence_events / (double)d->fences);
        fprintf(f, "; %s wait%s", rep_count(d->fence_waits, b), d->fence_waits == 1 ? "" : "s");
        if (d->fence_waits)
            fprintf(f, " (%s in all, %s of the run)", rep_dur(d->fence_wait_ns, e),
                    rep_pct(d->fence_wait_ns, run_ns(m), h));
        fputc('\n', f);
        if (gpu_order_hint(m, d))
            fprintf(f, "  hint          allocations waited for the GPU to finish with freed blocks for 1 %% of the "
                       "run or more: with one device in use per process, GMSHIM_GPU_ORDER=1 makes the streams "
                       "wait on the GPU instead (docs/options.md)\n");
    }
    if (d->empty_caches)
        fprintf(f, "  cache release %s time%s, %s back to the driver\n", rep_count(d->empty_caches, a),
                d->empty_caches == 1 ? "" : "s", rep_bytes(d->empty_bytes, b));
    if (d->ooms || d->retries) {
        fprintf(f, "  OOMs          %s%" PRIu64 " failed%s", d->ooms ? rep_red() : "", d->ooms, d->ooms ? rep_reset() : "");
        if (d->retries)
            fprintf(f, ", %" PRIu64 " recovered by releasing the cache and retrying", d->retries);
        fputc('\n', f);
    }
    uint64_t unpooled = 0;
    for (int i = GMLOG_KIND_MANAGED; i < 8; i++)
        unpooled += d->allocs_kind[i];
    if (unpooled || d->warnings[GMLOG_WARN_FOREIGN_FREE] || d->unmatched_frees)
        fprintf(f, "  unpooled      %s allocations gmshim only counted; %s frees of pointers it never handed "
                "out (foreign), %s frees of pointers the log never saw allocated\n", rep_count(unpooled, a),
                rep_count(d->warnings[GMLOG_WARN_FOREIGN_FREE], b), rep_count(d->unmatched_frees, e));
    if (d->captures || d->graph_allocs)
        fprintf(f, "  graphs        %s captures, %s allocations from graph pools\n", rep_count(d->captures, a),
                rep_count(d->graph_allocs, b));
    if (d->planned_allocs)
        fprintf(f, "  plan          %s allocations (%s asked) served from GMSHIM_PLAN's planned step, %.1f%% of "
                "the pool's\n", rep_count(d->planned_allocs, a), rep_bytes(d->planned_bytes, b),
                100.0 * (double)d->planned_allocs / (double)(d->allocs_kind[GMLOG_KIND_POOL] ? d->allocs_kind[GMLOG_KIND_POOL] : 1));
    if (d->resets)
        fprintf(f, "  resets        %" PRIu64 " cudaDeviceReset\n", d->resets);
    int w = 0;
    for (int i = 2; i < 7; i++)
        w += d->warnings[i] != 0;
    if (w) {
        fprintf(f, "  warnings     ");
        for (int i = 2; i < 7; i++)
            if (d->warnings[i])
                fprintf(f, " %s %s", warn_names[i], rep_count(d->warnings[i], a));
        fputc('\n', f);
    }
    const ledger_set_t *ls = ledger_of(m);
    if (ls && d->id >= 0 && d->id < 255 && ls->peak[d->id].valid) {
        const ledger_t *l = &ls->peak[d->id];
        fprintf(f, "  card          at the peak of this process's use (%s into the run), the device's %s:\n",
                rep_dur(l->t, a), rep_bytes(l->total, b));
        ledger_text(f, l, "    ");
    }
}

void rep_summary_text(cli_ctx_t *c, const model_t *m)
{
    int any = 0;
    for (int i = 0; i < m->ndev; i++) {
        if (!m->dev[i])
            continue;
        device_text(c, m, m->dev[i]);
        any = 1;
    }
    if (!any)
        fprintf(c->out, "no device activity in this log\n");
    if (m->lf->unknown_records)
        fprintf(c->out, "%" PRIu64 " records of types newer than this gmshim were skipped\n", m->lf->unknown_records);
}

void cmd_summary_text(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg)
{
    (void)lf, (void)arg;
    rep_summary_text(c, m);
}

void cmd_summary_json(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg)
{
    (void)lf, (void)arg;
    rep_summary_json(c, m);
}

const char cmd_summary_usage[] =
    "usage: gmshim summary [--json] LOG...\n"
    "\n"
    "Per device: allocation counts, peaks (requested, allocated, reserved), the cache hit rate,\n"
    "driver calls made against an unpooled run and the time saved, fences, unpooled and foreign\n"
    "allocations, warnings. Several logs (one per rank) give a section each and a combined line.\n"
    "\n"
    "  -j, --json     one JSON document\n"
    "  -h, --help     this text\n";
