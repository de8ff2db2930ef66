/* The HTML timeline (timeline.c collects its data): one page, no network, its data as JSON in
 * the page and its script in timeline_page.h. The JSON is written by the analyzer's own writer
 * (valid, escaped whatever the log holds), with "</" escaped so that no string can end the
 * script element. */
#include "timeline_html.h"
#include "oom_classify.h"
#include "vec.h"
#include "output.h"
#include "sites.h"
#include "timeline_page.h"

#include <stdlib.h>
#include <string.h>

static const char *base_name(const char *path)
{
    const char *s = path ? strrchr(path, '/') : NULL;
    return s ? s + 1 : path ? path : "?";
}

/* ---- the flame graphs: live bytes by call site, as a tree of frames from the outermost --- */

typedef struct fl_node {
    char *name;
    uint64_t v;
    int child, sib;               /* first child, next sibling: -1 none */
} fl_node_t;

typedef struct fl_tree {
    fl_node_t *n;
    size_t len, cap;
    int failed;
} fl_tree_t;

#define FL_DEPTH 40

static int fl_child(fl_tree_t *t, int parent, const char *name)
{
    int *link = &t->n[parent].child;
    for (int c = *link; c >= 0; c = t->n[c].sib)
        if (!strcmp(t->n[c].name, name))
            return c;
    fl_node_t *n = vec_grow(t->n, &t->cap, t->len + 1, sizeof *n, 64);
    if (!n) {
        t->failed = 1;
        return -1;
    }
    t->n = n;
    int id = (int)t->len++;
    t->n[id] = (fl_node_t){strdup(name), 0, -1, t->n[parent].child};
    t->n[parent].child = id;
    if (!t->n[id].name)
        t->failed = 1;
    return t->n[id].name ? id : -1;
}

/* A site's path, outermost first: its Python frames, then its native frames (none with
 * --python-frames only, where it has Python frames), a run of native frames in one library
 * under a Python frame being one node. */
static size_t site_path(const model_t *m, uint32_t site, int python_only, char (*out)[160], size_t max)
{
    site_frame_t *fr = malloc(SITE_MAX_FRAMES * sizeof *fr);
    const model_sitedef_t *s = model_site(m, site);
    size_t n = fr && s ? site_frames(m, site, fr, SITE_MAX_FRAMES) : 0, k = 0, npy = s && s->npy < n ? s->npy : n;
    char name[160];
    for (size_t i = npy; i-- > 0 && k < max;)
        snprintf(out[k++], 160, "%s (%s:%u)", fr[i].function, base_name(fr[i].file), fr[i].line);
    for (size_t i = n; i-- > npy && k < max && !(python_only && npy);) {
        size_t j = i;
        if (npy && fr[i].module)
            while (j > npy && fr[j - 1].module && !strcmp(fr[j - 1].module, fr[i].module))
                j--;
        if (j < i)
            snprintf(out[k++], 160, "%s: %zu frames", base_name(fr[i].module), i - j + 1);
        else
            snprintf(out[k++], 160, "%s%s%s%s", site_frame_name(&fr[i], name, sizeof name), fr[i].module ? " (" : "",
                     fr[i].module ? base_name(fr[i].module) : "", fr[i].module ? ")" : "");
        i = j;
    }
    if (!k)
        snprintf(out[k++], 160, "%s", site ? "site without frames" : "unknown site (no stack recorded)");
    free(fr);
    return k;
}

/* The tree as a flat list, parents first: [parent index, name, bytes] (the JSON writer's depth
 * is bounded; a stack's is not). */
static void fl_json(json_t *j, const fl_tree_t *t, int node, int parent, int *next)
{
    int me = (*next)++;
    json_arr(j, NULL);
    json_i64(j, NULL, parent);
    json_str(j, NULL, t->n[node].name);
    json_u64(j, NULL, t->n[node].v);
    json_arr_end(j);
    for (int c = t->n[node].child; c >= 0; c = t->n[c].sib)
        fl_json(j, t, c, me, next);
}

static void flame(json_t *j, const tl_log_t *t, const tl_snap_t *s)
{
    fl_tree_t tr = {0};
    char (*path)[160] = malloc(FL_DEPTH * sizeof *path);
    tr.n = malloc(64 * sizeof *tr.n);
    if (!path || !tr.n) {
        free(path);
        free(tr.n);
        return;
    }
    tr.cap = 64;
    tr.len = 1;
    tr.n[0] = (fl_node_t){strdup("all live bytes"), 0, -1, -1};
    for (size_t i = 0; i < s->n && !tr.failed; i++) {
        uint32_t site = s->slot[i] ? t->m->sites[s->slot[i] - 1].id : 0;
        size_t k = site_path(t->m, site, t->python_frames == SITE_PY_ONLY, path, FL_DEPTH);
        int at = 0;
        tr.n[0].v += s->bytes[i];
        for (size_t d = 0; d < k && at >= 0; d++)
            if ((at = fl_child(&tr, at, path[d])) >= 0)
                tr.n[at].v += s->bytes[i];
    }
    json_obj(j, NULL);
    json_str(j, "label", s->label);
    json_u64(j, "t", s->t);
    json_arr(j, "nodes");
    int next = 0;
    if (!tr.failed && tr.n[0].name)
        fl_json(j, &tr, 0, -1, &next);
    json_arr_end(j);
    json_obj_end(j);
    for (size_t i = 0; i < tr.len; i++)
        free(tr.n[i].name);
    free(tr.n);
    free(path);
}

/* ---- the page's data ---------------------------------------------------------------------- */

static void series(json_t *j, const char *key, const uint64_t *v)
{
    json_arr(j, key);
    for (size_t i = 0; i < TL_BUCKETS; i++)
        json_u64(j, NULL, v[i]);
    json_arr_end(j);
}

static void panel_ooms(json_t *j, const tl_log_t *t, const tl_dev_t *d)
{
    const model_t *m = t->m;
    json_arr(j, "ooms");
    for (size_t i = 0; i < m->nooms; i++) {
        const model_oom_t *o = &m->ooms[i];
        if (o->dev != d->id)
            continue;
        oom_verdict_t v;
        oom_classify(m, o, &v);
        json_obj(j, NULL);
        json_u64(j, "t", o->t);
        json_u64(j, "request", o->rec.request);
        json_str(j, "cause", oom_cause_name(v.cause));
        json_str(j, "why", v.why);
        json_bool(j, "recovered", (o->rec.h.flags & GMLOG_OOM_RECOVERED) != 0);
        json_u64(j, "allocated", o->rec.allocated);
        json_u64(j, "reserved", o->rec.reserved);
        json_u64(j, "driver_free", o->rec.driver_free);
        json_obj_end(j);
    }
    json_arr_end(j);
}

/* The card's ledger at each bucket's last sample: [bucket, t, total, label, bytes, label, bytes...]. */
static void panel_card(json_t *j, const tl_dev_t *d)
{
    char label[160], words[180];
    json_arr(j, "card");
    for (size_t b = 0; b < TL_BUCKETS; b++) {
        const ledger_t *l = d->card[b];
        if (!l)
            continue;
        json_arr(j, NULL);
        json_u64(j, NULL, b);
        json_u64(j, NULL, l->t);
        json_u64(j, NULL, l->total);
        for (unsigned i = 0; i < l->nterms; i++) {
            const ledger_term_t *tm = &l->term[i];
            if (!tm->bytes && tm->kind != LK_TENSORS && tm->kind != LK_FREE)
                continue;
            snprintf(words, sizeof words, "%s%s", ledger_term_label(tm, l->torch, label, sizeof label),
                     tm->measured ? "" : " (inferred)");
            json_str(j, NULL, words);
            json_u64(j, NULL, tm->bytes);
        }
        json_arr_end(j);
    }
    json_arr_end(j);
}

static void panel_json(json_t *j, const tl_log_t *t, const tl_dev_t *d, uint8_t *slot_used)
{
    const model_dev_t *md = t->m->dev[d->id];
    const xr_dev_t *xd = &t->x->dev[d->id];
    uint64_t cap;
    json_obj(j, NULL);
    json_i64(j, "device", d->id);
    json_str(j, "name", md ? md->name : "");
    json_u64(j, "tmax", t->tmax);
    json_u64(j, "vtop", tl_vtop(d, md, &cap));
    json_u64(j, "cap", cap);
    json_str(j, "cap_name", md && md->limit_max ? "GMSHIM_DEVICE_LIMIT" : "device total");
    json_u64(j, "peak_allocated", d->peak_allocated);
    json_u64(j, "peak_reserved", d->peak_reserved);
    series(j, "a", d->amax);
    series(j, "r", d->rmax);
    if (d->peak_outside)
        series(j, "o", d->omax);
    if (d->ncard) {
        series(j, "k", d->kmax);
        panel_card(j, d);
    }
    json_arr(j, "libs");
    for (unsigned i = 0; i < xd->nlibs; i++)
        json_str(j, NULL, xd->lib[i]);
    json_arr_end(j);
    json_arr(j, "top"); /* [bucket, slot, bytes, slot, bytes...] where the top changed */
    for (size_t b = 0; b < TL_BUCKETS; b++) {
        if (!d->top_set[b])
            continue;
        json_arr(j, NULL);
        json_u64(j, NULL, b);
        for (unsigned k = 0; k < d->ntop[b]; k++) {
            json_u64(j, NULL, d->top_slot[b][k]);
            json_u64(j, NULL, d->top_bytes[b][k]);
            slot_used[d->top_slot[b][k]] = 1;
        }
        json_arr_end(j);
    }
    json_arr_end(j);
    panel_ooms(j, t, d);
    json_arr(j, "flames");
    for (unsigned k = 0; k < d->nsnap; k++)
        flame(j, t, &d->snap[k]);
    json_arr_end(j);
    json_obj_end(j);
}

void tl_html_log(FILE *f, const tl_log_t *t, int first)
{
    const model_t *m = t->m;
    char title[256];
    json_t j;
    json_init(&j, f);
    if (!first)
        fputc(',', f);
    json_obj(&j, NULL);
    json_str(&j, "title", xr_log_title(t->lf, m, title, sizeof title));
    json_str(&j, "path", t->lf->name);
    uint8_t *used = calloc(t->nslots, 1);
    json_arr(&j, "panels");
    for (int i = 0; i < 256; i++)
        if (t->dev[i] && used)
            panel_json(&j, t, t->dev[i], used);
    json_arr_end(&j);
    json_obj(&j, "sites"); /* the labels of the sites the hover names */
    for (size_t s = 0; used && s < t->nslots; s++) {
        if (!used[s])
            continue;
        char key[24], label[256];
        snprintf(key, sizeof key, "%zu", s);
        json_str(&j, key, site_label(m, s ? m->sites[s - 1].id : 0, label, sizeof label));
    }
    json_obj_end(&j);
    free(used);
    json_u64(&j, "marks_total", m->marks_total);
    json_arr(&j, "marks"); /* [time, label], evenly thinned past TL_MARKS_SHOWN */
    size_t every = m->nmarks > TL_MARKS_SHOWN ? (m->nmarks + TL_MARKS_SHOWN - 1) / TL_MARKS_SHOWN : 1;
    for (size_t i = 0; i < m->nmarks; i += every) {
        json_arr(&j, NULL);
        json_u64(&j, NULL, m->marks[i].t);
        json_str(&j, NULL, m->marks[i].label);
        json_arr_end(&j);
    }
    json_arr_end(&j);
    json_obj_end(&j);
}

/* Copies JSON into the page, "</" made "<\/" (the same string to JSON, no end of script). */
static void script_safe(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '<' && i + 1 < n && s[i + 1] == '/')
            fputs("<\\", f);
        else
            fputc(s[i], f);
    }
}

void tl_html_head(FILE *f, char *const *paths, int npaths)
{
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>gmshim timeline</title>\n<style>", f);
    fputs(tl_page_style, f);
    fputs("</style></head><body>\n<h1>gmshim timeline</h1><p class=\"paths\">", f);
    for (int i = 0; i < npaths; i++) {
        tl_xml(f, paths[i]);
        fputs(i + 1 < npaths ? ", " : "", f);
    }
    fputs("</p>\n<p class=\"help\">Wheel or the buttons: zoom; drag: pan; double click: the whole run. "
          "Hover the chart for the top live call sites; hover or click an OOM (red) for its cause.</p>\n"
          "<div id=\"charts\"></div>\n<div id=\"tip\"></div>\n<div id=\"static\">\n", f);
}

void tl_html_tail(FILE *f, const char *json, size_t len)
{
    fputs("</div>\n<script type=\"application/json\" id=\"gmdata\">{\"logs\":[", f);
    script_safe(f, json, len);
    fputs("]}</script>\n<script>", f);
    fputs(tl_page_script, f);
    fputs("</script>\n</body></html>\n", f);
}
