/* `gmshim timeline`: allocated and reserved bytes over time for each device of each log, with
 * the marks and OOMs, as one self-contained SVG, or an HTML page that adds hover read-outs and
 * tables. The output must open in a browser with no network: no external fonts, scripts or
 * styles, and every string from the log is XML-escaped. */
#include "commands.h"
#include "output.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define W 960
#define H 280
#define ML 78
#define MR 24
#define MT 34
#define MB 42

static void xml(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default:
            if ((unsigned char)*s >= 0x20)
                fputc(*s, f);
            break;
        }
    }
}

static uint64_t nice_max(uint64_t v)
{
    if (v < 1024)
        return 1024;
    uint64_t p = 1;
    while (p <= v / 2)
        p *= 2;
    /* p <= v < 2p: pick the first of p, 1.25p, 1.5p, 1.75p, 2p above v */
    for (int q = 5; q <= 8; q++)
        if (p / 4 * (uint64_t)q >= v)
            return p / 4 * (uint64_t)q;
    return 2 * p;
}

typedef struct series {
    size_t n;
    uint64_t shift;
    uint64_t amax[MODEL_TL_BUCKETS], amin[MODEL_TL_BUCKETS], rmax[MODEL_TL_BUCKETS];
} series_t;

static void fill_series(const model_t *m, const model_dev_t *d, series_t *s)
{
    s->shift = m->tl_shift;
    uint64_t last = m->last_t >> m->tl_shift;
    s->n = last + 1 < MODEL_TL_BUCKETS ? (size_t)last + 1 : MODEL_TL_BUCKETS;
    uint64_t a = 0, r = 0;
    for (size_t i = 0; i < s->n; i++) {
        const model_bucket_t *b = &d->tl[i];
        if (b->used) {
            s->amax[i] = b->amax, s->amin[i] = b->amin, s->rmax[i] = b->rmax;
            a = b->alast, r = b->rlast;
        } else {
            s->amax[i] = s->amin[i] = a, s->rmax[i] = r;
        }
    }
}

/* One device's chart, at vertical offset y0 (SVG units). */
static void panel(FILE *f, const rd_log_t *lf, const model_t *m, const model_dev_t *d, int y0, int id)
{
    char a[32], b[32], t[32], name[96];
    series_t *s = calloc(1, sizeof *s);
    if (!s)
        return;
    fill_series(m, d, s);
    uint64_t tmax = m->last_t ? m->last_t : 1;
    uint64_t vtop = d->peak_reserved > d->peak_allocated ? d->peak_reserved : d->peak_allocated;
    uint64_t cap = d->limit_max ? d->limit_max : d->total;
    if (cap && cap <= vtop * 2)
        vtop = cap > vtop ? cap : vtop;
    vtop = nice_max(vtop);
    double pw = W - ML - MR, ph = H - MT - MB;
#define X(tt) (ML + pw * ((double)(tt) / (double)tmax))
#define Y(vv) (y0 + MT + ph * (1.0 - (double)(vv) / (double)vtop))
    fprintf(f, "<g class=\"panel\" id=\"p%d\">\n", id);
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"title\">", ML, y0 + 20);
    xml(f, cli_log_name(lf, m, name, sizeof name));
    fprintf(f, ", device %d", d->id);
    if (d->name[0]) {
        fputs(" (", f);
        xml(f, d->name);
        fputs(")", f);
    }
    fprintf(f, ": peak allocated %s, peak reserved %s</text>\n", rep_bytes(d->peak_allocated, a),
            rep_bytes(d->peak_reserved, b));
    /* grid and axes */
    for (int i = 0; i <= 4; i++) {
        uint64_t v = vtop / 4 * (uint64_t)i;
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", ML, W - MR, Y(v), Y(v));
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"ytick\">%s</text>\n", ML - 6, Y(v) + 4, rep_bytes(v, a));
    }
    for (int i = 0; i <= 6; i++) {
        uint64_t tt = tmax / 6 * (uint64_t)i;
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" class=\"grid\"/>", X(tt), X(tt), y0 + MT,
                y0 + H - MB);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"xtick\">%s</text>\n", X(tt), y0 + H - MB + 16, rep_time(tt, t));
    }
    /* reserved, then allocated (max per bucket), as step areas */
    for (int pass = 0; pass < 2; pass++) {
        const uint64_t *v = pass ? s->amax : s->rmax;
        fprintf(f, "<path class=\"%s\" d=\"M%.1f %.1f", pass ? "alloc" : "res", X(0), Y(0));
        for (size_t i = 0; i < s->n; i++) {
            uint64_t t0 = (uint64_t)i << s->shift, t1 = (uint64_t)(i + 1) << s->shift;
            if (t1 > tmax)
                t1 = tmax;
            fprintf(f, " L%.1f %.1f L%.1f %.1f", X(t0), Y(v[i]), X(t1), Y(v[i]));
        }
        fprintf(f, " L%.1f %.1f Z\"/>\n", X(tmax), Y(0));
    }
    if (cap && cap <= vtop) {
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"cap\"><title>%s %s</title></line>\n", ML,
                W - MR, Y(cap), Y(cap), d->limit_max ? "GMSHIM_DEVICE_LIMIT" : "device memory", rep_bytes(cap, a));
    }
    /* marks (labels only when few) */
    size_t shown_labels = 0;
    size_t every = m->nmarks > 1000 ? (m->nmarks + 999) / 1000 : 1; /* at most ~1000 lines */
    for (size_t i = 0; i < m->nmarks; i += every) {
        const model_mark_t *k = &m->marks[i];
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" class=\"mark\"><title>mark %u ", X(k->t), X(k->t),
                y0 + MT, y0 + H - MB, k->id);
        xml(f, k->label);
        fprintf(f, " at %s</title></line>\n", rep_time(k->t, t));
        if (m->nmarks <= 24 && shown_labels++ < 24) {
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"mlabel\" transform=\"rotate(-90 %.1f %d)\">", X(k->t) - 3,
                    y0 + MT + 4, X(k->t) - 3, y0 + MT + 4);
            xml(f, k->label);
            fputs("</text>\n", f);
        }
    }
    /* OOMs */
    for (size_t i = 0; i < m->nooms; i++) {
        const model_oom_t *o = &m->ooms[i];
        if (o->dev != d->id)
            continue;
        oom_verdict_t v;
        oom_classify(m, o, &v);
        fprintf(f, "<g class=\"oom\"><title>OOM at %s: %s requested, cause: %s</title>"
                   "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/><circle cx=\"%.1f\" cy=\"%d\" r=\"5\"/></g>\n",
                rep_time(o->t, t), rep_bytes(o->rec.request, a), oom_cause_name(v.cause), X(o->t), X(o->t), y0 + MT,
                y0 + H - MB, X(o->t), y0 + MT);
    }
    /* legend */
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"10\" class=\"res\"/><text x=\"%d\" y=\"%d\" class=\"legend\">reserved</text>"
               "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"10\" class=\"alloc\"/><text x=\"%d\" y=\"%d\" class=\"legend\">allocated</text>"
               "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" class=\"mark\"/><text x=\"%d\" y=\"%d\" class=\"legend\">mark</text>"
               "<circle cx=\"%d\" cy=\"%d\" r=\"4\" class=\"oomdot\"/><text x=\"%d\" y=\"%d\" class=\"legend\">OOM</text>\n",
            W - MR - 330, y0 + 12, W - MR - 314, y0 + 21, W - MR - 240, y0 + 12, W - MR - 224, y0 + 21,
            W - MR - 150, W - MR - 138, y0 + 17, y0 + 17, W - MR - 132, y0 + 21, W - MR - 70, y0 + 17, W - MR - 62,
            y0 + 21);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" class=\"hover\" data-panel=\"%d\"/>\n", ML,
            y0 + MT, pw, ph, id);
    fputs("</g>\n", f);
#undef X
#undef Y
    free(s);
}

static const char style[] =
    "text{font-family:sans-serif;font-size:11px;fill:#333}"
    ".title{font-size:13px;font-weight:bold}"
    ".ytick{text-anchor:end}.xtick{text-anchor:middle}"
    ".grid{stroke:#e4e4e4;stroke-width:1}"
    ".res{fill:#cfe3f7;stroke:#4a90d9;stroke-width:1}"
    ".alloc{fill:#f6c28b;stroke:#e07b00;stroke-width:1;fill-opacity:.85}"
    ".mark{stroke:#666;stroke-width:1;stroke-dasharray:3 3}"
    ".mlabel{font-size:9px;fill:#555;text-anchor:end}"
    ".cap{stroke:#c00;stroke-width:1;stroke-dasharray:6 3}"
    ".oom line{stroke:#d00;stroke-width:2}.oom circle,.oomdot{fill:#d00}"
    ".hover{fill:transparent}";

typedef struct tl_state {
    FILE *panels;              /* SVG fragments, concatenated */
    char *buf;
    size_t len;
    FILE *data;                /* HTML: per-panel JSON series */
    char *dbuf;
    size_t dlen;
    FILE *tab;                 /* HTML: tables of marks and OOMs */
    char *tbuf;
    size_t tlen;
    int npanels;
    int html;
} tl_state_t;

static void data_json(FILE *f, const model_t *m, const model_dev_t *d, int id)
{
    series_t *s = calloc(1, sizeof *s);
    if (!s)
        return;
    fill_series(m, d, s);
    fprintf(f, "%s\"%d\":{\"tmax\":%" PRIu64 ",\"shift\":%" PRIu64 ",\"a\":[", id ? "," : "", id,
            m->last_t ? m->last_t : 1, s->shift);
    for (size_t i = 0; i < s->n; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", s->amax[i]);
    fputs("],\"r\":[", f);
    for (size_t i = 0; i < s->n; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", s->rmax[i]);
    fputs("]}", f);
    free(s);
}

static void html_tables(FILE *f, const rd_log_t *lf, const model_t *m)
{
    char name[96], a[32], t[32];
    fputs("<h2>", f);
    xml(f, cli_log_name(lf, m, name, sizeof name));
    fputs(": ", f);
    xml(f, lf->name);
    fputs("</h2>\n", f);
    if (m->nooms) {
        fputs("<table border=\"1\" cellpadding=\"3\" style=\"border-collapse:collapse\"><tr><th>OOM</th><th>time</th>"
              "<th>device</th><th>requested</th><th>cause</th><th>evidence</th></tr>\n", f);
        for (size_t i = 0; i < m->nooms; i++) {
            oom_verdict_t v;
            oom_classify(m, &m->ooms[i], &v);
            fprintf(f, "<tr><td>%zu</td><td>%s</td><td>%u</td><td>%s</td><td><b>%s</b></td><td>", i + 1,
                    rep_time(m->ooms[i].t, t), m->ooms[i].dev, rep_bytes(m->ooms[i].rec.request, a),
                    oom_cause_name(v.cause));
            xml(f, v.why);
            fputs("</td></tr>\n", f);
        }
        fputs("</table>\n", f);
    }
    if (m->nmarks && m->nmarks <= 200) {
        fputs("<p>marks: ", f);
        for (size_t i = 0; i < m->nmarks; i++) {
            fprintf(f, "%s%u <i>", i ? ", " : "", m->marks[i].id);
            xml(f, m->marks[i].label);
            fprintf(f, "</i> (%s)", rep_time(m->marks[i].t, t));
        }
        fputs("</p>\n", f);
    } else if (m->nmarks) {
        fprintf(f, "<p>%" PRIu64 " marks</p>\n", m->marks_total);
    }
}

static void timeline_one(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg)
{
    (void)c;
    tl_state_t *st = arg;
    for (int i = 0; i < m->ndev; i++) {
        if (!m->dev[i])
            continue;
        panel(st->panels, lf, m, m->dev[i], st->npanels * H, st->npanels);
        if (st->html)
            data_json(st->data, m, m->dev[i], st->npanels);
        st->npanels++;
    }
    if (st->html && st->tab)
        html_tables(st->tab, lf, m);
}

/* --json: the same series as numbers. */
static void timeline_json_one(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg)
{
    (void)lf;
    (void)arg;
    json_t *j = &c->j;
    json_u64(j, "bucket_ns", (uint64_t)1 << m->tl_shift);
    json_arr(j, "devices");
    for (int i = 0; i < m->ndev; i++) {
        const model_dev_t *d = m->dev[i];
        if (!d)
            continue;
        series_t *s = calloc(1, sizeof *s);
        if (!s)
            break;
        fill_series(m, d, s);
        json_obj(j, NULL);
        json_u64(j, "device", (uint64_t)i);
        json_u64(j, "peak_allocated", d->peak_allocated);
        json_u64(j, "peak_reserved", d->peak_reserved);
        json_arr(j, "points"); /* [start of the bucket (ns), allocated max, allocated min, reserved max] */
        for (size_t k = 0; k < s->n; k++) {
            json_arr(j, NULL);
            json_u64(j, NULL, (uint64_t)k << s->shift);
            json_u64(j, NULL, s->amax[k]);
            json_u64(j, NULL, s->amin[k]);
            json_u64(j, NULL, s->rmax[k]);
            json_arr_end(j);
        }
        json_arr_end(j);
        json_obj_end(j);
        free(s);
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
}

static const char script[] =
    "(function(){var D=JSON.parse(document.getElementById('gmdata').textContent);"
    "var tip=document.getElementById('tip');"
    "function fmt(b){var u=['B','KiB','MiB','GiB','TiB'],i=0;while(b>=1024&&i<4){b/=1024;i++;}"
    "return (i?b.toFixed(2):b)+' '+u[i];}"
    "document.querySelectorAll('.hover').forEach(function(r){"
    "r.addEventListener('mousemove',function(e){var d=D[r.dataset.panel];var bb=r.getBoundingClientRect();"
    "var f=(e.clientX-bb.left)/bb.width;var t=f*d.tmax;var i=Math.min(d.a.length-1,Math.floor(t/Math.pow(2,d.shift)));"
    "if(i<0)return;tip.style.display='block';tip.style.left=(e.pageX+12)+'px';tip.style.top=(e.pageY+12)+'px';"
    "tip.textContent=(t/1e9).toFixed(3)+' s  allocated '+fmt(d.a[i])+'  reserved '+fmt(d.r[i]);});"
    "r.addEventListener('mouseleave',function(){tip.style.display='none';});});})();";

int rep_timeline_write(FILE *f, const rd_log_t *lf, const model_t *m, int html)
{
    tl_state_t st = {0};
    st.html = html;
    st.panels = open_memstream(&st.buf, &st.len);
    st.data = open_memstream(&st.dbuf, &st.dlen);
    if (!st.panels || !st.data) {
        if (st.panels)
            fclose(st.panels);
        if (st.data)
            fclose(st.data);
        free(st.buf);
        free(st.dbuf);
        return -1;
    }
    cli_ctx_t c;
    cli_init(&c, f, stderr, "timeline");
    timeline_one(&c, (rd_log_t *)lf, (model_t *)m, &st);
    fclose(st.panels);
    fclose(st.data);
    int h = st.npanels ? st.npanels * H : H;
    if (html)
        fprintf(f, "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>gmshim timeline</title></head><body>");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\"><style>%s</style>"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>%s</svg>\n",
            W, h, W, h, style, st.buf ? st.buf : "");
    if (html)
        fprintf(f, "</body></html>\n");
    free(st.buf);
    free(st.dbuf);
    return 0;
}

static const char usage[] =
    "usage: gmshim timeline (--svg FILE | --html FILE | --json) LOG...\n"
    "\n"
    "Draws allocated and reserved bytes over time, one chart per device of each log, with marks\n"
    "(dashed lines, labelled when there are few), OOMs (red) and the device cap. The SVG and the\n"
    "HTML page are self-contained (no network); the HTML page adds a read-out under the mouse.\n"
    "'-' as FILE writes to stdout. --json writes the series instead: per device, points of\n"
    "[bucket start ns, allocated max, allocated min, reserved max], with the marks and OOMs.\n"
    "\n"
    "  -s, --svg FILE   write an SVG image\n"
    "  -H, --html FILE  write an HTML page\n"
    "  -j, --json       the series as JSON on stdout\n"
    "  -h, --help       this text\n";

typedef struct tl_opts {
    const char *file;
    int html;       /* -1: no file output */
} tl_opts_t;

static int timeline_opt(cli_ctx_t *c, void *st, int key, const char *val)
{
    (void)c;
    tl_opts_t *o = st;
    if (o->file && (key == 's' || key == 'H')) {
        fprintf(stderr, "gmshim timeline: --%s %s and --%s %s: one output at a time (run it twice for both)\n",
                o->html ? "html" : "svg", o->file, key == 'H' ? "html" : "svg", val);
        return CLI_FAIL;
    }
    o->file = val;
    o->html = key == 'H';
    return 0;
}

int cmd_timeline(int argc, char **argv)
{
    static const cli_opt_t opts[] = {{"svg", 's', 1}, {"html", 'H', 1}, {NULL, 0, 0}};
    tl_opts_t o = {NULL, -1};
    cli_ctx_t c0;
    cli_init(&c0, stdout, stderr, "timeline");
    c0.json = cli_global.json;
    int rc = cli_parse_args(&c0, argc, argv, opts, timeline_opt, &o, usage, CLI_ARGS_LOGS);
    if (rc >= 0)
        return rc;
    const char *file = o.file;
    int html = o.html;
    if (c0.json && file) {
        fprintf(stderr, "gmshim timeline: --json and --%s %s: one output at a time\n", html ? "html" : "svg", file);
        return CLI_FAIL;
    }
    if (c0.json) {
        cli_ctx_t c;
        cli_init(&c, stdout, stderr, "timeline");
        c.json = 1;
        c.progress = isatty(2);
        rc = cli_run_logs(&c, c0.nargs, c0.args, MODEL_EPOCHS | MODEL_SITES | MODEL_TIMELINE, timeline_json_one, NULL);
        return cli_finish(&c, rc);
    }
    if (!file) {
        fprintf(stderr, "gmshim timeline: --svg FILE, --html FILE or --json is needed\n%s", usage);
        return CLI_FAIL;
    }
    FILE *devnull = fopen("/dev/null", "w");
    if (!devnull)
        return CLI_FAIL;
    tl_state_t st = {0};
    st.html = html;
    st.panels = open_memstream(&st.buf, &st.len);
    st.data = open_memstream(&st.dbuf, &st.dlen);
    st.tab = open_memstream(&st.tbuf, &st.tlen);
    if (!st.panels || !st.data || !st.tab) {
        fclose(devnull);
        return CLI_FAIL;
    }
    cli_ctx_t c;
    cli_init(&c, devnull, stderr, "timeline");
    c.progress = isatty(2);
    rc = cli_run_logs(&c, c0.nargs, c0.args, MODEL_EPOCHS | MODEL_SITES | MODEL_TIMELINE, timeline_one, &st);
    fclose(devnull);
    fclose(st.panels);
    fclose(st.data);
    fclose(st.tab);
    if (rc == CLI_FAIL && !st.npanels) {
        free(st.buf);
        free(st.dbuf);
        free(st.tbuf);
        return rc;
    }
    FILE *f = strcmp(file, "-") ? fopen(file, "w") : stdout;
    if (!f) {
        fprintf(stderr, "gmshim timeline: cannot write %s: %s\n", file, strerror(errno));
        free(st.buf);
        free(st.dbuf);
        free(st.tbuf);
        return CLI_FAIL;
    }
    int h = st.npanels ? st.npanels * H : H;
    if (html) {
        fprintf(f, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>gmshim timeline</title>"
                   "<style>body{font-family:sans-serif;margin:20px}#tip{position:absolute;display:none;background:#fff;"
                   "border:1px solid #999;padding:3px 6px;font-size:12px;pointer-events:none}</style></head><body>\n"
                   "<h1>gmshim timeline</h1><p>");
        for (int i = 0; i < c0.nargs; i++) {
            xml(f, c0.args[i]);
            fputs(i + 1 < c0.nargs ? ", " : "", f);
        }
        fputs("</p>\n", f);
    }
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n"
               "<style>%s</style>\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            W, h, W, h, style);
    if (st.len)
        fwrite(st.buf, 1, st.len, f);
    if (!st.npanels)
        fprintf(f, "<text x=\"%d\" y=\"%d\">no device activity in the log</text>\n", ML, H / 2);
    fputs("</svg>\n", f);
    if (html) {
        if (st.tlen)
            fwrite(st.tbuf, 1, st.tlen, f);
        fprintf(f, "<div id=\"tip\"></div>\n<script type=\"application/json\" id=\"gmdata\">{");
        if (st.dlen)
            fwrite(st.dbuf, 1, st.dlen, f);
        fprintf(f, "}</script>\n<script>%s</script>\n</body></html>\n", script);
    }
    free(st.buf);
    free(st.dbuf);
    free(st.tbuf);
    int bad = ferror(f) != 0;
    if (f != stdout)
        bad |= fclose(f) != 0;
    else
        bad |= fflush(f) != 0;
    if (bad) {
        fprintf(stderr, "gmshim timeline: error writing %s\n", file);
        return CLI_FAIL;
    }
    if (f != stdout)
        fprintf(stderr, "gmshim: wrote %s (%d chart%s)\n", file, st.npanels, st.npanels == 1 ? "" : "s");
    return rc;
}
