/* `gmshim leaks`: what is still live at the end of the log (or at a mark), grouped by call site,
 * largest first, with the symbolized stack; and the sites whose live bytes grow from epoch to
 * epoch (marks; in an unmarked run the steps of its repeating allocations, else its low-water
 * troughs), each with its one rate (model_site_rate). It reports; it never guesses a
 * site the log did not record. */
#include "leaks.h"
#include "output.h"
#include "sites.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct ranked {
    uint32_t sidx;
    uint64_t key;
} ranked_t;

static int by_key_desc(const void *a, const void *b)
{
    const ranked_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key > y->key ? -1 : 1;
    return x->sidx < y->sidx ? -1 : x->sidx > y->sidx;
}

/* Sites of device `dev` with live bytes, largest first. */
static size_t live_sites(const model_t *m, int dev, ranked_t **out, uint64_t *bytes, uint64_t *count)
{
    size_t n = 0;
    *bytes = *count = 0;
    ranked_t *r = malloc((m->nsst ? m->nsst : 1) * sizeof *r);
    if (!r)
        return 0;
    for (size_t i = 1; i < m->nsst; i++) {
        const model_sstat_t *s = &m->sst[i];
        if (s->dev != dev || !s->live_count)
            continue;
        r[n++] = (ranked_t){(uint32_t)i, s->live_req};
        *bytes += s->live_req;
        *count += s->live_count;
    }
    qsort(r, n, sizeof *r, by_key_desc);
    *out = r;
    return n;
}

/* Sites whose per-epoch low-water bytes grow steadily, most growth first. */
static size_t growing_sites(const model_t *m, int dev, int sys, ranked_t **out)
{
    size_t n = 0;
    ranked_t *r = malloc((m->nsst ? m->nsst : 1) * sizeof *r);
    if (!r)
        return 0;
    for (size_t i = 1; i < m->nsst && sys >= 0; i++) {
        const model_sstat_t *s = &m->sst[i];
        if (s->dev != dev)
            continue;
        model_series_t ser = model_site_series(m, s, sys);
        if (model_site_rate(m, s, sys))
            r[n++] = (ranked_t){(uint32_t)i, ser.last - ser.first};
    }
    qsort(r, n, sizeof *r, by_key_desc);
    *out = r;
    return n;
}

static const char *epoch_word(const model_t *m, int dev, int sys)
{
    if (sys == EPOCH_MARKS || (m->dev[dev] && m->dev[dev]->step.period))
        return model_epoch_noun(m, dev, sys, 0);
    return "iteration (low-water trough)";
}

/* Edit distance of two labels (their first 64 bytes), for the nearest marks to a missing one. */
static unsigned distance(const char *a, const char *b)
{
    size_t n = strlen(a) < 64 ? strlen(a) : 64, k = strlen(b) < 64 ? strlen(b) : 64;
    unsigned row[65];
    for (size_t j = 0; j <= k; j++)
        row[j] = (unsigned)j;
    for (size_t i = 1; i <= n; i++) {
        unsigned diag = row[0];
        row[0] = (unsigned)i;
        for (size_t j = 1; j <= k; j++) {
            unsigned up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[k];
}

#define NEAREST 3

/* The marks nearest to the one asked for: by number when it is one, else by label; in log order. */
static size_t nearest_marks(const model_t *m, const char *asked, size_t out[NEAREST])
{
    char *end;
    long id = strtol(asked, &end, 10);
    int numeric = !*end && *asked;
    size_t n = 0;
    uint64_t key[NEAREST];
    for (size_t i = 0; i < m->nmarks; i++) {
        const model_mark_t *k = &m->marks[i];
        uint64_t d = numeric ? (uint64_t)(k->id > id ? k->id - id : id - k->id)
                             : distance(asked, k->label ? k->label : "");
        size_t at = n;
        while (at > 0 && key[at - 1] > d)
            at--;
        if (at >= NEAREST)
            continue;
        if (n < NEAREST)
            n++;
        for (size_t j = n - 1; j > at; j--)
            key[j] = key[j - 1], out[j] = out[j - 1];
        key[at] = d, out[at] = i;
    }
    for (size_t i = 1; i < n; i++) /* log order */
        for (size_t j = i; j > 0 && out[j] < out[j - 1]; j--) {
            size_t t = out[j];
            out[j] = out[j - 1], out[j - 1] = t;
        }
    return n;
}

/* "the nearest: 12 "iteration 12", 13 "iteration 13"", or "the log has no marks". */
static void nearest_text(const model_t *m, const char *asked, char *buf, size_t len)
{
    size_t near[NEAREST], n = nearest_marks(m, asked, near), o = 0;
    buf[0] = 0;
    if (!n) {
        snprintf(buf, len, "the log has no marks");
        return;
    }
    o += (size_t)snprintf(buf + o, len - o, "the nearest: ");
    for (size_t i = 0; i < n && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%u \"%.64s\"", i ? ", " : "", m->marks[near[i]].id,
                              m->marks[near[i]].label ? m->marks[near[i]].label : "");
}

/* Whether the mark asked for was reached; when not, says so (stderr and the report). */
static int stop_note(cli_ctx_t *c, const model_t *m, const leaks_opts_t *o)
{
    if (!o->at_mark)
        return 1;
    char t[32];
    if (m->stopped && m->nmarks) {
        fprintf(c->out, "at mark %u \"%s\" (%s)\n", m->marks[m->nmarks - 1].id, m->marks[m->nmarks - 1].label,
                rep_time(m->marks[m->nmarks - 1].t, t));
        return 1;
    }
    char near[512];
    nearest_text(m, o->at_label, near, sizeof near);
    fprintf(c->out, "%smark \"%s\" is not in this log (%" PRIu64 " marks; %s)%s\n", rep_yellow(), o->at_label,
            m->marks_total, near, rep_reset());
    return 0;
}

void rep_leaks_text(cli_ctx_t *c, const model_t *m, const leaks_opts_t *o)
{
    FILE *f = c->out;
    char a[32], b[32], lbl[512];
    if (!stop_note(c, m, o))
        return;
    int any = 0;
    for (int dev = 0; dev < m->ndev; dev++) {
        if (!m->dev[dev])
            continue;
        any = 1;
        ranked_t *r = NULL;
        uint64_t bytes, count;
        size_t n = live_sites(m, dev, &r, &bytes, &count);
        if (!n) {
            fprintf(f, "device %d: nothing live %s\n", dev, o->at_mark && m->stopped ? "at the mark" : "at the end");
        } else {
            fprintf(f, "%sdevice %d%s: %s allocations (%s) live %s, from %zu call site%s\n", rep_bold(), dev,
                    rep_reset(), rep_count(count, a), rep_bytes(bytes, b),
                    o->at_mark && m->stopped ? "at the mark" : "at the end", n, n == 1 ? "" : "s");
            size_t shown = o->top && n > o->top ? o->top : n;
            for (size_t i = 0; i < shown; i++) {
                const model_sstat_t *s = &m->sst[r[i].sidx];
                fprintf(f, "  %10s %6s x  %s\n", rep_bytes(s->live_req, a), rep_count(s->live_count, b),
                        site_label(m, s->site, lbl, sizeof lbl));
                site_print(f, m, s->site, "               ", c->depth, !c->frames_all);
            }
            if (shown < n)
                fprintf(f, "  ... %zu more sites (--top 0 lists all)\n", n - shown);
        }
        free(r);
        int sys = model_epoch_system(m, dev, 3);
        const model_dev_t *d = m->dev[dev];
        size_t g = growing_sites(m, dev, sys, &r);
        uint64_t *kept = g ? calloc(m->nsst, sizeof *kept) : NULL;
        if (kept)
            model_kept_by_site(m, dev, sys, kept);
        if (g) {
            fprintf(f, "  %sgrowing%s: live bytes that rise from %s to %s (%u %s)\n", rep_red(), rep_reset(),
                    epoch_word(m, dev, sys), epoch_word(m, dev, sys), d->epoch[sys], model_epoch_noun(m, dev, sys, 1));
            size_t shown = o->top && g > o->top ? o->top : g;
            for (size_t i = 0; i < shown; i++) {
                const model_sstat_t *s = &m->sst[r[i].sidx];
                model_series_t ser = model_site_series(m, s, sys);
                char p[32], k[48] = "";
                uint64_t kb = kept ? kept[r[i].sidx] : 0;
                if (kb) /* what the ended steps left: the leak itself, where the log ends before it is freed */
                    snprintf(k, sizeof k, "; %s live from ended %s", rep_bytes(kb, p), model_epoch_noun(m, dev, sys, 1));
                fprintf(f, "    grows by %s per %s: %s\n", rep_bytes(model_site_rate(m, s, sys), p),
                        epoch_word(m, dev, sys), site_label(m, s->site, lbl, sizeof lbl));
                fprintf(f, "      %s at the first %s, %s at the last; rose at %u of %u steps%s\n", rep_bytes(ser.first, a),
                        epoch_word(m, dev, sys), rep_bytes(ser.last, b), ser.ups, ser.n - 1, k);
                site_print(f, m, s->site, "        ", c->depth, !c->frames_all);
            }
        } else if (sys >= 0 && d->epoch[sys] >= 3) {
            fprintf(f, "  no site grows from %s to %s (%u %s)\n", epoch_word(m, dev, sys), epoch_word(m, dev, sys),
                    d->epoch[sys], model_epoch_noun(m, dev, sys, 1));
        }
        free(kept);
        free(r);
    }
    if (!any)
        fprintf(f, "no device activity in this log\n");
}

static void site_obj(cli_ctx_t *c, const model_t *m, const model_sstat_t *s)
{
    json_u64(&c->j, "bytes", s->live_req);
    json_u64(&c->j, "count", s->live_count);
    json_u64(&c->j, "block_bytes", s->live_blk);
    json_u64(&c->j, "peak_bytes", s->peak_req);
    site_json(&c->j, m, s->site);
}

void rep_leaks_json(cli_ctx_t *c, const model_t *m, const leaks_opts_t *o)
{
    json_t *j = &c->j;
    if (o->at_mark) {
        json_obj(j, "at");
        json_str(j, "requested", o->at_label);
        json_bool(j, "found", m->stopped);
        if (m->stopped && m->nmarks) {
            json_u64(j, "mark", m->marks[m->nmarks - 1].id);
            json_str(j, "label", m->marks[m->nmarks - 1].label);
            json_u64(j, "t", m->marks[m->nmarks - 1].t);
        } else {
            size_t near[NEAREST], n = nearest_marks(m, o->at_label, near);
            json_arr(j, "nearest");
            for (size_t i = 0; i < n; i++) {
                json_obj(j, NULL);
                json_u64(j, "mark", m->marks[near[i]].id);
                json_str(j, "label", m->marks[near[i]].label);
                json_u64(j, "t", m->marks[near[i]].t);
                json_obj_end(j);
            }
            json_arr_end(j);
        }
        json_obj_end(j);
        if (!m->stopped) { /* nothing is reported at a mark that is not there */
            json_arr(j, "leaks");
            json_arr_end(j);
            return;
        }
    }
    json_arr(j, "leaks");
    for (int dev = 0; dev < m->ndev; dev++) {
        if (!m->dev[dev])
            continue;
        json_obj(j, NULL);
        json_u64(j, "device", (uint64_t)dev);
        ranked_t *r = NULL;
        uint64_t bytes, count;
        size_t n = live_sites(m, dev, &r, &bytes, &count);
        json_u64(j, "live_bytes", bytes);
        json_u64(j, "live_count", count);
        json_arr(j, "sites");
        size_t shown = o->top && n > o->top ? o->top : n;
        for (size_t i = 0; i < shown; i++) {
            json_obj(j, NULL);
            site_obj(c, m, &m->sst[r[i].sidx]);
            json_obj_end(j);
        }
        json_arr_end(j);
        json_u64(j, "sites_total", n);
        free(r);
        int sys = model_epoch_system(m, dev, 3);
        json_str(j, "epochs", sys >= 0 ? model_epoch_noun(m, dev, sys, 1) : NULL);
        json_u64(j, "epoch_count", sys >= 0 ? m->dev[dev]->epoch[sys] : 0);
        size_t g = growing_sites(m, dev, sys, &r);
        uint64_t *kept = g ? calloc(m->nsst, sizeof *kept) : NULL;
        if (kept)
            model_kept_by_site(m, dev, sys, kept);
        json_arr(j, "growing");
        shown = o->top && g > o->top ? o->top : g;
        for (size_t i = 0; i < shown; i++) {
            const model_sstat_t *s = &m->sst[r[i].sidx];
            model_series_t ser = model_site_series(m, s, sys);
            json_obj(j, NULL);
            json_u64(j, "bytes_per_epoch", model_site_rate(m, s, sys));
            json_u64(j, "kept_bytes", kept ? kept[r[i].sidx] : 0);
            json_u64(j, "epochs", ser.n);
            json_u64(j, "first", ser.first);
            json_u64(j, "last", ser.last);
            json_u64(j, "rises", ser.ups);
            json_u64(j, "falls", ser.downs);
            site_obj(c, m, s);
            json_obj_end(j);
        }
        json_arr_end(j);
        free(kept);
        free(r);
        json_obj_end(j);
    }
    json_arr_end(j);
}

/* A mark asked for that the log does not have: said on stderr, with the nearest ones. */
static void check_mark(cli_ctx_t *c, const rd_log_t *lf, const model_t *m, leaks_opts_t *o)
{
    if (o->at_mark && !m->stopped) {
        char near[512];
        nearest_text(m, o->at_label, near, sizeof near);
        /* in the form of every exit-2 message: the file, and the offset where reading ended */
        fprintf(c->err, "gmshim: %s: byte %" PRIu64 ": no mark \"%s\" up to the log's end (%" PRIu64 " marks%s%s)\n",
                lf->name, (uint64_t)lf->size, o->at_label, m->marks_total, m->nmarks ? "; " : "", m->nmarks ? near : "");
        o->missing++;
    }
}

void cmd_leaks_text(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg)
{
    leaks_opts_t *o = &((cmd_call_t *)arg)->leaks;
    check_mark(c, lf, m, o);
    rep_leaks_text(c, m, o);
}

void cmd_leaks_json(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg)
{
    leaks_opts_t *o = &((cmd_call_t *)arg)->leaks;
    check_mark(c, lf, m, o);
    rep_leaks_json(c, m, o);
}

/* --at MARK (st: the cmd_call_t); the others are the common ones. */
int cmd_leaks_opt(cli_ctx_t *c, void *st, int key, const char *val)
{
    leaks_opts_t *o = &((cmd_call_t *)st)->leaks;
    if (key != 'a')
        return cli_common_opt(c, NULL, key, val);
    o->at_mark = 1;
    o->at_label = val;
    c->stop_mark_label = val;
    char *end;
    long id = strtol(val, &end, 10);
    if (!*end && id > 0 && id < INT32_MAX)
        c->stop_mark_id = (int)id;
    return 0;
}

int cmd_leaks_after(cmd_call_t *k, int rc)
{
    if (k->leaks.missing && rc == CLI_OK)
        rc = CLI_PARTIAL; /* a mark that is not there is a mistake, not the end's report */
    return rc;
}

const char cmd_leaks_usage[] =
    "usage: gmshim leaks [--at MARK] [--top N] [--depth N] [--frames all] [--json] LOG...\n"
    "\n"
    "Allocations still live at the end of the log, grouped by call site, largest first, with the\n"
    "count, the bytes requested and the stack (Python frames first, then native, symbolized from\n"
    "the programs' files); then the sites whose live bytes grow from mark to mark (without marks,\n"
    "from step to step, the steps found from the allocations each step repeats; else from one\n"
    "low-water trough of allocated memory to the next), with what they keep from ended steps.\n"
    "\n"
    "  -a, --at MARK   stop at a mark: its number (1, 2, ...) or its label; a mark that is not in\n"
    "                  the log is exit 2, with the nearest marks named\n"
    "  -n, --top N     sites listed per device (default 10; 0: all)\n"
    "  -d, --depth N   lines of frames shown per site (default 12; 0: all)\n"
    "      --frames all  under a Python line, show each frame inside PyTorch and CUDA libraries\n"
    "                  (default folded: one line per run of them)\n"
    "  -j, --json      one JSON document\n"
    "  -h, --help      this text\n";
