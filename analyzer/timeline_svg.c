/* `gmshim timeline`: allocated and reserved bytes over time for each device of each log, with
 * the memory outside the pool, the card's ledger (the CUDA context and other processes stacked
 * on top, its terms on hover), the device total, the marks and the OOMs, as one self-contained
 * SVG, or an HTML page to explore: zoom and pan, the top live call sites under the mouse, the
 * OOMs' causes on hover and click, the live bytes by call site at the peak and at each OOM as a
 * flame graph. The output must open with no network (no external fonts, scripts or styles)
 * and every string from the log is escaped. This file writes the SVG and runs the command; the
 * data is timeline.c's, the page timeline_html.c's. */
#include "timeline_svg.h"
#include "timeline_html.h"
#include "oom_classify.h"
#include "outfile.h"
#include "output.h"
#include "sites.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the SVG ------------------------------------------------------------------------------ */

#define W 960
#define H 300
#define ML 78
#define MR 24
#define MT 52                     /* the title's line, then the legend's, then the plot */
#define MB 42

typedef struct svg_frame {
    double x0, pw, ph;
    int y0;
    uint64_t tmax, vtop;
} svg_frame_t;

static double sx(const svg_frame_t *g, uint64_t t)
{
    return g->x0 + g->pw * ((double)t / (double)g->tmax);
}

static double sy(const svg_frame_t *g, uint64_t v)
{
    return g->y0 + MT + g->ph * (1.0 - (double)v / (double)g->vtop);
}

static void svg_area(FILE *f, const svg_frame_t *g, const uint64_t *v, const char *cls, int closed)
{
    fprintf(f, "<path class=\"%s\" d=\"M%.1f %.1f", cls, sx(g, 0), closed ? sy(g, 0) : sy(g, v[0]));
    for (size_t i = 0; i < TL_BUCKETS; i++) {
        uint64_t t0 = g->tmax * i / TL_BUCKETS, t1 = g->tmax * (i + 1) / TL_BUCKETS;
        fprintf(f, " L%.1f %.1f L%.1f %.1f", sx(g, t0), sy(g, v[i]), sx(g, t1), sy(g, v[i]));
    }
    if (closed)
        fprintf(f, " L%.1f %.1f Z", sx(g, g->tmax), sy(g, 0));
    fputs("\"/>\n", f);
}

/* The card's ledger: the CUDA context and other processes stacked on reserved + outside the pool,
 * the last sample's terms as its title. */
static void svg_card(FILE *f, const svg_frame_t *g, const tl_dev_t *d)
{
    char a[32], t[32], label[160];
    const ledger_t *last = NULL;
    for (size_t i = 0; i < TL_BUCKETS; i++)
        if (d->card[i])
            last = d->card[i];
    if (!last)
        return;
    fputs("<g class=\"card\"><title>", f);
    fprintf(f, "the card's ledger at %s (%s):", rep_time(last->t, t), rep_bytes(last->total, a));
    for (unsigned i = 0; i < last->nterms; i++) {
        const ledger_term_t *tm = &last->term[i];
        if (!tm->bytes && tm->kind != LK_TENSORS && tm->kind != LK_FREE)
            continue;
        fprintf(f, "\n%s ", rep_bytes(tm->bytes, a));
        tl_xml(f, ledger_term_label(tm, last->torch, label, sizeof label));
        fputs(tm->measured ? "" : " (inferred)", f);
    }
    fputs("</title><path d=\"", f);
    for (size_t i = 0; i < TL_BUCKETS; i++) {
        uint64_t t0 = g->tmax * i / TL_BUCKETS, t1 = g->tmax * (i + 1) / TL_BUCKETS;
        uint64_t hi = d->rmax[i] + d->omax[i] + d->kmax[i];
        fprintf(f, "%s%.1f %.1f L%.1f %.1f", i ? " L" : "M", sx(g, t0), sy(g, hi), sx(g, t1), sy(g, hi));
    }
    for (size_t i = TL_BUCKETS; i-- > 0;) {
        uint64_t t0 = g->tmax * i / TL_BUCKETS, t1 = g->tmax * (i + 1) / TL_BUCKETS;
        uint64_t lo = d->rmax[i] + d->omax[i];
        fprintf(f, " L%.1f %.1f L%.1f %.1f", sx(g, t1), sy(g, lo), sx(g, t0), sy(g, lo));
    }
    fputs(" Z\"/></g>\n", f);
}

static void svg_axes(FILE *f, const svg_frame_t *g)
{
    char a[32];
    for (int i = 0; i <= 4; i++) {
        uint64_t v = g->vtop / 4 * (uint64_t)i;
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", ML, W - MR, sy(g, v), sy(g, v));
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"ytick\">%s</text>\n", ML - 6, sy(g, v) + 4, rep_bytes(v, a));
    }
    for (int i = 0; i <= 6; i++) {
        uint64_t t = g->tmax / 6 * (uint64_t)i;
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" class=\"grid\"/>", sx(g, t), sx(g, t),
                g->y0 + MT, g->y0 + H - MB);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"xtick\">%s</text>\n", sx(g, t), g->y0 + H - MB + 16,
                rep_time(t, a));
    }
}

/* Marks: a dashed line each while they are few enough to tell apart, labelled when very few;
 * past that a band along the top whose darkness is their density. */
static void svg_marks(FILE *f, const svg_frame_t *g, const model_t *m)
{
    char t[32];
    if (m->nmarks > 300) {
        unsigned cols = (unsigned)g->pw / 2, *count = calloc(cols + 1, sizeof *count), most = 1;
        if (!count)
            return;
        for (size_t i = 0; i < m->nmarks; i++) {
            unsigned c = (unsigned)((sx(g, m->marks[i].t) - g->x0) / 2);
            if (c <= cols && ++count[c] > most)
                most = count[c];
        }
        fprintf(f, "<g class=\"markband\"><title>%" PRIu64 " marks (darker: more of them)</title>", m->marks_total);
        for (unsigned c = 0; c <= cols; c++)
            if (count[c])
                fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"2\" height=\"8\" fill-opacity=\"%.2f\"/>",
                        g->x0 + 2.0 * c, g->y0 + MT, 0.25 + 0.75 * count[c] / most);
        fputs("</g>\n", f);
        free(count);
        return;
    }
    for (size_t i = 0; i < m->nmarks; i++) {
        const model_mark_t *k = &m->marks[i];
        double x = sx(g, k->t);
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" class=\"mark\"><title>mark %u ", x, x, g->y0 + MT,
                g->y0 + H - MB, k->id);
        tl_xml(f, k->label);
        fprintf(f, " at %s</title></line>\n", rep_time(k->t, t));
        if (m->nmarks <= 24) {
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"mlabel\" transform=\"rotate(-90 %.1f %d)\">", x - 3,
                    g->y0 + MT + 4, x - 3, g->y0 + MT + 4);
            tl_xml(f, k->label);
            fputs("</text>\n", f);
        }
    }
}

static void svg_legend(FILE *f, const svg_frame_t *g, const tl_dev_t *d, uint64_t cap, const model_dev_t *md)
{
    static const char *const cls[] = {"res", "alloc", "outside", "cardkey", "cap", "mark", "oomdot"};
    const char *names[] = {"reserved", "allocated", "outside the pool", "CUDA context and other processes",
                           md && md->limit_max ? "GMSHIM_DEVICE_LIMIT" : "device total", "mark", "OOM"};
    int x = ML, y = g->y0 + 32;
    for (int i = 0; i < 7; i++) {
        if ((i == 2 && !d->peak_outside) || (i == 3 && !d->ncard) || (i == 4 && !cap))
            continue;
        if (i < 4)
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"10\" class=\"%s\"/>", x, y - 9, cls[i]);
        else if (i < 6)
            fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" class=\"%s\"/>", x, x + 12, y - 4, y - 4, cls[i]);
        else
            fprintf(f, "<circle cx=\"%d\" cy=\"%d\" r=\"4\" class=\"%s\"/>", x + 6, y - 4, cls[i]);
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"legend\">%s</text>", x + 16, y, names[i]);
        x += 16 + 7 * (int)strlen(names[i]) + 18;
    }
    fputs("\n", f);
}

static void svg_panel(FILE *f, const tl_log_t *t, const tl_dev_t *d, int y0, int id)
{
    const model_t *m = t->m;
    const model_dev_t *md = m->dev[d->id];
    char a[32], b[32], title[256];
    uint64_t cap;
    svg_frame_t g = {ML, W - ML - MR, H - MT - MB, y0, t->tmax, 0};
    g.vtop = tl_vtop(d, md, &cap);
    fprintf(f, "<g class=\"panel\" id=\"p%d\">\n<text x=\"%d\" y=\"%d\" class=\"title\">", id, ML, y0 + 16);
    tl_xml(f, xr_log_title(t->lf, m, title, sizeof title));
    fprintf(f, ", device %d", d->id);
    if (md && md->name[0]) {
        fputs(" (", f);
        tl_xml(f, md->name);
        fputs(")", f);
    }
    fprintf(f, ": peak allocated %s, peak reserved %s</text>\n", rep_bytes(d->peak_allocated, a),
            rep_bytes(d->peak_reserved, b));
    svg_legend(f, &g, d, cap, md);
    svg_axes(f, &g);
    svg_area(f, &g, d->rmax, "res", 1);
    svg_area(f, &g, d->amax, "alloc", 1);
    if (d->ncard)
        svg_card(f, &g, d);
    if (d->peak_outside)
        svg_area(f, &g, d->omax, "outside", 0);
    if (cap && cap <= g.vtop)
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"cap\"><title>%s %s</title></line>\n", ML,
                W - MR, sy(&g, cap), sy(&g, cap), md && md->limit_max ? "GMSHIM_DEVICE_LIMIT" : "device total",
                rep_bytes(cap, a));
    svg_marks(f, &g, m);
    for (size_t i = 0; i < m->nooms; i++) {
        const model_oom_t *o = &m->ooms[i];
        if (o->dev != d->id)
            continue;
        oom_verdict_t v;
        oom_classify(m, o, &v);
        double x = sx(&g, o->t);
        fprintf(f, "<g class=\"oom\"><title>OOM at %s: %s requested, cause: %s. ", rep_time(o->t, a),
                rep_bytes(o->rec.request, b), oom_cause_name(v.cause));
        tl_xml(f, v.why);
        fprintf(f, "</title><line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/><circle cx=\"%.1f\" cy=\"%d\" r=\"5\"/></g>\n",
                x, x, y0 + MT, y0 + H - MB, x, y0 + MT);
    }
    fputs("</g>\n", f);
}

static const char svg_style[] =
    "text{font-family:sans-serif;font-size:11px;fill:#333}"
    ".title{font-size:13px;font-weight:bold}"
    ".ytick{text-anchor:end}.xtick{text-anchor:middle}"
    ".grid{stroke:#e4e4e4;stroke-width:1}"
    ".res{fill:#cfe3f7;stroke:#4a90d9;stroke-width:1}"
    ".alloc{fill:#f6c28b;stroke:#e07b00;stroke-width:1;fill-opacity:.85}"
    ".outside{fill:#b9e3b5;stroke:#2e9e44;stroke-width:1.5;fill-opacity:.6}"
    ".card path,.cardkey{fill:#e0d4ee;stroke:#8a63b5;stroke-width:1;fill-opacity:.7}"
    ".mark{stroke:#666;stroke-width:1;stroke-dasharray:3 3}"
    ".markband rect{fill:#555}"
    ".mlabel{font-size:9px;fill:#555;text-anchor:end}"
    ".cap{stroke:#c00;stroke-width:1;stroke-dasharray:6 3}"
    ".oom line{stroke:#d00;stroke-width:2}.oom circle,.oomdot{fill:#d00}";

/* Every device's chart of one log, from y0 on; returns how many. */
static int svg_panels(FILE *f, const tl_log_t *t, int y0, int first_id)
{
    int n = 0;
    for (int i = 0; i < 256; i++)
        if (t->dev[i])
            svg_panel(f, t, t->dev[i], y0 + n * H, first_id + n), n++;
    return n;
}

static void svg_document(FILE *f, const char *panels, size_t len, int npanels)
{
    int h = npanels ? npanels * H : H;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n"
               "<style>%s</style>\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            W, h, W, h, svg_style);
    if (len)
        fwrite(panels, 1, len, f);
    if (!npanels)
        fprintf(f, "<text x=\"%d\" y=\"%d\">no device activity in the log</text>\n", ML, H / 2);
    fputs("</svg>\n", f);
}

/* ---- the command ------------------------------------------------------------------------- */

typedef struct tl_state {
    FILE *panels;                 /* SVG fragments, concatenated */
    char *buf;
    size_t len;
    FILE *data;                   /* HTML: the page's JSON, one object per log */
    char *dbuf;
    size_t dlen;
    int npanels, nlogs;
    int html;
    int failed;
    int python_frames;            /* SITE_PY_* */
} tl_state_t;

static void timeline_one(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg)
{
    (void)c;
    tl_state_t *st = arg;
    tl_log_t *t = calloc(1, sizeof *t);
    xr_t *x = calloc(1, sizeof *x);
    if (!t || !x || tl_collect(t, lf, m, x)) {
        fputs("gmshim timeline: out of memory\n", stderr);
        st->failed = 1;
    } else {
        t->python_frames = st->python_frames;
        if (st->html)
            tl_html_log(st->data, t, st->nlogs == 0);
        st->npanels += svg_panels(st->panels, t, st->npanels * H, st->npanels);
    }
    st->nlogs++;
    if (t)
        tl_log_free(t);
    if (x)
        xr_free(x);
    free(t);
    free(x);
}

/* The document around the panels, HTML or SVG. */
static void document(FILE *f, const tl_state_t *st, char *const *paths, int npaths)
{
    if (!st->html) {
        svg_document(f, st->buf, st->len, st->npanels);
        return;
    }
    tl_html_head(f, paths, npaths);
    svg_document(f, st->buf, st->len, st->npanels); /* what shows without a script */
    tl_html_tail(f, st->dbuf ? st->dbuf : "", st->dlen);
}

/* The two memory streams the panels and the page's data are written to. */
static int open_state(tl_state_t *st, int html)
{
    memset(st, 0, sizeof *st);
    st->html = html;
    st->panels = open_memstream(&st->buf, &st->len);
    st->data = open_memstream(&st->dbuf, &st->dlen);
    if (st->panels && st->data)
        return 0;
    if (st->panels)
        fclose(st->panels);
    if (st->data)
        fclose(st->data);
    free(st->buf);
    free(st->dbuf);
    return -1;
}

static void close_state(tl_state_t *st)
{
    fclose(st->panels);
    fclose(st->data);
    st->panels = st->data = NULL;
}

int rep_timeline_write(FILE *f, const rd_log_t *lf, const model_t *m, int html)
{
    tl_state_t st;
    if (open_state(&st, html))
        return -1;
    cli_ctx_t c;
    cli_init(&c, f, stderr, "timeline");
    timeline_one(&c, (rd_log_t *)lf, (model_t *)m, &st);
    close_state(&st);
    char *paths[] = {(char *)lf->name};
    document(f, &st, paths, 1);
    free(st.buf);
    free(st.dbuf);
    return st.failed ? -1 : 0;
}

/* --json: the series as numbers. */
static void timeline_json_one(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg)
{
    (void)arg;
    json_t *j = &c->j;
    tl_log_t *t = calloc(1, sizeof *t);
    xr_t *x = calloc(1, sizeof *x);
    int ok = t && x && !tl_collect(t, lf, m, x);
    json_u64(j, "bucket_ns", (t ? t->tmax : 1) / TL_BUCKETS + 1);
    json_arr(j, "devices");
    for (int i = 0; ok && i < 256; i++) {
        const tl_dev_t *d = t->dev[i];
        if (!d)
            continue;
        json_obj(j, NULL);
        json_u64(j, "device", (uint64_t)i);
        json_u64(j, "peak_allocated", d->peak_allocated);
        json_u64(j, "peak_reserved", d->peak_reserved);
        json_u64(j, "peak_outside_pool", d->peak_outside);
        json_arr(j, "points"); /* [bucket start ns, allocated max, reserved max, outside the pool max] */
        for (size_t k = 0; k < TL_BUCKETS; k++) {
            json_arr(j, NULL);
            json_u64(j, NULL, t->tmax * k / TL_BUCKETS);
            json_u64(j, NULL, d->amax[k]);
            json_u64(j, NULL, d->rmax[k]);
            json_u64(j, NULL, d->omax[k]);
            json_arr_end(j);
        }
        json_arr_end(j);
        json_arr(j, "card"); /* the card's ledger at each bucket's last sample */
        for (size_t k = 0; k < TL_BUCKETS; k++)
            if (d->card[k])
                ledger_json(j, NULL, d->card[k]);
        json_arr_end(j);
        json_obj_end(j);
    }
    json_arr_end(j);
    json_arr(j, "marks");
    for (size_t i = 0; i < m->nmarks; i++) {
        json_obj(j, NULL);
        json_u64(j, "id", m->marks[i].id);
        json_u64(j, "t", m->marks[i].t);
        json_str(j, "label", m->marks[i].label);
        json_obj_end(j);
    }
    json_arr_end(j);
    json_arr(j, "ooms");
    for (size_t i = 0; i < m->nooms; i++) {
        oom_verdict_t v;
        oom_classify(m, &m->ooms[i], &v);
        json_obj(j, NULL);
        json_u64(j, "device", m->ooms[i].dev);
        json_u64(j, "t", m->ooms[i].t);
        json_u64(j, "requested", m->ooms[i].rec.request);
        json_str(j, "cause", oom_cause_name(v.cause));
        json_obj_end(j);
    }
    json_arr_end(j);
    if (t)
        tl_log_free(t);
    if (x)
        xr_free(x);
    free(t);
    free(x);
}

static const char usage[] =
    "usage: gmshim timeline (--svg FILE | --html FILE | --json) [--python-frames first|only] LOG...\n"
    "\n"
    "Draws allocated and reserved bytes over time, one chart per device of each log, with the\n"
    "memory outside the pool, the device total (or GMSHIM_DEVICE_LIMIT), the marks (dashed lines;\n"
    "a band when they are too many to tell apart) and the OOMs (red); where the log has the card's\n"
    "ledger (docs/ledger.md), the CUDA context and other processes as a band on top of reserved and\n"
    "outside the pool. Both are self-contained (no network). The HTML page is a tool to explore:\n"
    "the wheel or its buttons zoom, a drag pans, a double click shows the whole run; hovering\n"
    "names the top live call sites at that moment and the card's terms at the last sample;\n"
    "hovering or clicking an OOM shows its cause, request and evidence; under each chart a flame\n"
    "graph shows the live bytes by call site at the peak and at each OOM. '-' as FILE writes to\n"
    "stdout. --json writes the series instead: per device, points of [bucket start ns, allocated\n"
    "max, reserved max, outside the pool max] and the card's ledger at each bucket's last sample\n"
    "(card), with the marks and OOMs.\n"
    "\n"
    "  -s, --svg FILE   write an SVG image\n"
    "  -H, --html FILE  write an HTML page\n"
    "  -j, --json       the series as JSON on stdout\n"
    "  -P, --python-frames first|only  the flame graph's stacks: Python frames first (as by\n"
    "                   default), or only those (a site without any keeps its native frames)\n"
    "  -h, --help       this text\n";

typedef struct tl_opts {
    const char *file;
    int html;                     /* -1: no file output */
    int python_frames;            /* SITE_PY_* */
} tl_opts_t;

static int timeline_opt(cli_ctx_t *c, void *st, int key, const char *val)
{
    (void)c;
    tl_opts_t *o = st;
    if (key == 'P') {
        o->python_frames = site_parse_python_frames("gmshim timeline", val);
        return o->python_frames < 0 ? CLI_FAIL : 0;
    }
    if (o->file && (key == 's' || key == 'H')) {
        fprintf(stderr, "gmshim timeline: --%s %s and --%s %s: one output at a time (run it twice for both)\n",
                o->html ? "html" : "svg", o->file, key == 'H' ? "html" : "svg", val);
        return CLI_FAIL;
    }
    o->file = val;
    o->html = key == 'H';
    return 0;
}

static int write_file(const char *file, const tl_state_t *st, char *const *paths, int npaths)
{
    outfile_t out;
    FILE *f = outfile_open(&out, file, "w", "gmshim timeline");
    if (!f)
        return CLI_FAIL;
    document(f, st, paths, npaths);
    int to_stdout = f == stdout;
    if (outfile_commit(&out, "gmshim timeline"))
        return CLI_FAIL;
    if (!to_stdout)
        fprintf(stderr, "gmshim: wrote %s (%d chart%s)\n", file, st->npanels, st->npanels == 1 ? "" : "s");
    return CLI_OK;
}

int cmd_timeline(int argc, char **argv)
{
    static const cli_opt_t opts[] = {{"svg", 's', 1}, {"html", 'H', 1}, {"python-frames", 'P', 1}, {NULL, 0, 0}};
    tl_opts_t o = {NULL, -1, SITE_PY_RECORDED};
    cli_ctx_t c0;
    cli_init(&c0, stdout, stderr, "timeline");
    c0.json = cli_global.json;
    int rc = cli_parse_args(&c0, argc, argv, opts, timeline_opt, &o, usage, CLI_ARGS_LOGS);
    if (rc >= 0)
        return rc;
    if (c0.json && o.file) {
        fprintf(stderr, "gmshim timeline: --json and --%s %s: one output at a time\n", o.html ? "html" : "svg", o.file);
        return CLI_FAIL;
    }
    if (c0.json) {
        cli_ctx_t c;
        cli_init(&c, stdout, stderr, "timeline");
        c.json = 1;
        c.progress = isatty(2);
        rc = cli_run_logs(&c, c0.nargs, c0.args, MODEL_EPOCHS | MODEL_SITES, timeline_json_one, NULL);
        return cli_finish(&c, rc);
    }
    if (!o.file) {
        fprintf(stderr, "gmshim timeline: --svg FILE, --html FILE or --json is needed\n%s", usage);
        return CLI_FAIL;
    }
    FILE *devnull = fopen("/dev/null", "w");
    tl_state_t st;
    if (!devnull || open_state(&st, o.html)) {
        if (devnull)
            fclose(devnull);
        return CLI_FAIL;
    }
    st.python_frames = o.python_frames;
    cli_ctx_t c;
    cli_init(&c, devnull, stderr, "timeline");
    c.progress = isatty(2);
    rc = cli_run_logs(&c, c0.nargs, c0.args, MODEL_EPOCHS | MODEL_SITES, timeline_one, &st);
    fclose(devnull);
    close_state(&st);
    int wrc = rc == CLI_FAIL && !st.nlogs ? CLI_FAIL : write_file(o.file, &st, c0.args, c0.nargs);
    free(st.buf);
    free(st.dbuf);
    return wrc != CLI_OK ? wrc : st.failed ? CLI_FAIL : rc;
}
