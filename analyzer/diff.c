/* `gmshim diff A B`: two runs (two logs, or two job directories, paired by rank) compared device by
 * device — peaks, the floor, fragmentation, OOMs — and call site by call site, largest change
 * first; `--fail-above` turns it into a CI gate. Exit 1 means only "a gated figure rose too much";
 * input it cannot compare is 2, so a gate never passes on a log it did not read. */
#include "diff.h"
#include "diff_side.h"
#include "output.h"
#include "ranks_dir.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { DIFF_SAME = 0, DIFF_ABOVE = 1, DIFF_BAD = 2 };
enum { DIFF_OPT_FAIL = 0x300 }; /* --fail-above: a key without a letter */

/* The figures compared, in the order printed; `gate` names them in --fail-above. */
enum { FIG_ALLOCATED, FIG_RESERVED, FIG_FLOOR, FIG_LOW_WATER, FIG_FRAG, FIG_OOMS, FIG_N };
static const struct {
    const char *gate, *json, *text;
    int bytes;
} diff_figs[FIG_N] = {
    [FIG_ALLOCATED] = {"allocated", "peak_allocated", "peak allocated", 1},
    [FIG_RESERVED] = {"reserved", "peak_reserved", "peak reserved", 1},
    [FIG_FLOOR] = {"floor", "floor", "floor (live at the peak)", 1},
    [FIG_LOW_WATER] = {"lowwater", "low_water", "low-water, last step", 1},
    [FIG_FRAG] = {"frag", "fragmentation", "fragmentation at the peak", 1},
    [FIG_OOMS] = {"ooms", "ooms", "OOMs", 0},
};

#define DIFF_MAX_CHECKS 8

/* One --fail-above term: a figure may rise by at most `pct` percent or `bytes` bytes. */
typedef struct diff_check {
    int fig;
    int is_pct;
    double pct;
    uint64_t bytes;
    char text[48];            /* the term as given */
    const char *amount;       /* its amount, in text */
} diff_check_t;

typedef struct diff_opts {
    diff_check_t check[DIFF_MAX_CHECKS];
    int nchecks;
} diff_opts_t;

/* One site of one device, A against B. */
typedef struct diff_row {
    const diff_site_t *a, *b;
    uint64_t pa, pb, ga, gb;     /* bytes at the peak, growth per step */
} diff_row_t;

/* One log of A against one of B (either may be missing: a rank in one job only). */
typedef struct diff_pair {
    const diff_side_t *a, *b;
    int rank;
} diff_pair_t;

/* ---- --fail-above --------------------------------------------------------------------------- */

static int diff_parse_term(const char *term, diff_check_t *k)
{
    memset(k, 0, sizeof *k);
    if (strlen(term) >= sizeof k->text)
        return -1;
    snprintf(k->text, sizeof k->text, "%s", term);
    const char *colon = strchr(term, ':'), *amount = term;
    k->fig = FIG_ALLOCATED;
    if (colon) {
        k->fig = -1;
        for (int i = 0; i < FIG_N; i++)
            if (strlen(diff_figs[i].gate) == (size_t)(colon - term) && !strncmp(term, diff_figs[i].gate, (size_t)(colon - term)))
                k->fig = i;
        if (k->fig < 0)
            return -1;
        amount = colon + 1;
    }
    k->amount = k->text + (amount - term);
    size_t len = strlen(amount);
    if (len > 1 && amount[len - 1] == '%') {
        char *end;
        errno = 0;
        k->pct = strtod(amount, &end);
        k->is_pct = 1;
        return end == amount + len - 1 && !errno && isfinite(k->pct) && k->pct >= 0 ? 0 : -1;
    }
    if (!diff_figs[k->fig].bytes) { /* a count: a plain number */
        char *end;
        errno = 0;
        unsigned long long v = strtoull(amount, &end, 10);
        k->bytes = v;
        return *amount >= '0' && *amount <= '9' && !*end && !errno ? 0 : -1;
    }
    return cli_parse_size(amount, &k->bytes);
}

static int diff_opt(cli_ctx_t *c, void *st, int key, const char *val)
{
    diff_opts_t *o = st;
    if (key != DIFF_OPT_FAIL)
        return cli_common_opt(c, st, key, val);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", val);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->nchecks == DIFF_MAX_CHECKS || diff_parse_term(t, &o->check[o->nchecks]) != 0) {
            fprintf(stderr, "gmshim diff: --fail-above: '%s' is not [FIGURE:]AMOUNT (FIGURE: allocated, reserved, "
                    "floor, lowwater, frag, ooms; AMOUNT: a percentage such as 10%% or bytes such as 512M)\n", t);
            return DIFF_BAD;
        }
        o->nchecks++;
    }
    if (!o->nchecks) {
        fprintf(stderr, "gmshim diff: --fail-above needs [FIGURE:]AMOUNT\n");
        return DIFF_BAD;
    }
    return 0;
}

/* ---- the figures ------------------------------------------------------------------------------ */

static uint64_t diff_fig(const diff_dev_t *d, int fig)
{
    if (!d)
        return 0;
    switch (fig) {
    case FIG_ALLOCATED: return d->peak_allocated;
    case FIG_RESERVED: return d->peak_reserved;
    case FIG_FLOOR: return d->floor;
    case FIG_LOW_WATER: return d->low_water;
    case FIG_FRAG: return d->frag;
    default: return d->ooms;
    }
}

static int diff_exceeds(const diff_check_t *k, uint64_t a, uint64_t b)
{
    if (b <= a)
        return 0;
    if (!k->is_pct)
        return b - a > k->bytes;
    return (double)(b - a) * 100.0 > k->pct * (double)a;
}

/* "+160 MiB", "-3", "=" */
static const char *diff_change(uint64_t a, uint64_t b, int bytes, char buf[40])
{
    char t[32];
    if (a == b)
        return strcpy(buf, "=");
    uint64_t d = b > a ? b - a : a - b;
    if (bytes)
        snprintf(buf, 40, "%c%s", b > a ? '+' : '-', rep_bytes(d, t));
    else
        snprintf(buf, 40, "%c%" PRIu64, b > a ? '+' : '-', d);
    return buf;
}

/* " (+12.5%)", " (new)", "" */
static const char *diff_pct(uint64_t a, uint64_t b, char buf[24])
{
    buf[0] = 0;
    if (a == b)
        return buf;
    if (!a)
        snprintf(buf, 24, " (new)");
    else
        snprintf(buf, 24, " (%+.1f%%)", ((double)b - (double)a) * 100.0 / (double)a);
    return buf;
}

static uint64_t diff_absdiff(uint64_t a, uint64_t b)
{
    return a > b ? a - b : b - a;
}

/* ---- sites --------------------------------------------------------------------------------- */

static int diff_by_change(const void *x, const void *y)
{
    const diff_row_t *a = x, *b = y;
    uint64_t pa = diff_absdiff(a->pa, a->pb), pb = diff_absdiff(b->pa, b->pb);
    if (pa != pb)
        return pa > pb ? -1 : 1;
    uint64_t ga = diff_absdiff(a->ga, a->gb), gb = diff_absdiff(b->ga, b->gb);
    if (ga != gb)
        return ga > gb ? -1 : 1;
    return strcmp(a->a ? a->a->key : a->b->key, b->a ? b->a->key : b->b->key);
}

/* The sites of two devices matched by key (both lists are sorted), the changed ones largest change
 * first in *out; returns how many changed, *compared the sites in either. */
static size_t diff_sites(const diff_dev_t *a, const diff_dev_t *b, diff_row_t **out, size_t *compared)
{
    size_t na = a ? a->nsites : 0, nb = b ? b->nsites : 0, i = 0, k = 0, n = 0;
    diff_row_t *r = calloc(na + nb + 1, sizeof *r);
    if (!r) {
        fputs("gmshim: out of memory\n", stderr);
        exit(DIFF_BAD);
    }
    *compared = 0;
    while (i < na || k < nb) {
        int cmp = i == na ? 1 : k == nb ? -1 : strcmp(a->sites[i].key, b->sites[k].key);
        diff_row_t x = {0};
        if (cmp <= 0)
            x.a = &a->sites[i++], x.pa = x.a->peak_bytes, x.ga = x.a->growth;
        if (cmp >= 0)
            x.b = &b->sites[k++], x.pb = x.b->peak_bytes, x.gb = x.b->growth;
        ++*compared;
        if (x.pa != x.pb || x.ga != x.gb)
            r[n++] = x;
    }
    qsort(r, n, sizeof *r, diff_by_change);
    *out = r;
    return n;
}

/* ---- pairing logs ------------------------------------------------------------------------------- */

static int diff_by_rank(const void *x, const void *y)
{
    const diff_pair_t *a = x, *b = y;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

/* By rank when every log of both runs has one, else in the order given (a directory's by name). */
static int diff_pairs(const diff_side_t *a, int na, const diff_side_t *b, int nb, diff_pair_t *out)
{
    int by_rank = na + nb > 2;
    for (int i = 0; i < na; i++)
        by_rank &= a[i].rank >= 0;
    for (int i = 0; i < nb; i++)
        by_rank &= b[i].rank >= 0;
    int n = 0;
    if (!by_rank) {
        for (int i = 0; i < na || i < nb; i++)
            out[n++] = (diff_pair_t){i < na ? &a[i] : NULL, i < nb ? &b[i] : NULL, -1};
        return n;
    }
    char *used = calloc((size_t)nb + 1, 1);
    if (!used)
        exit(DIFF_BAD);
    for (int i = 0; i < na; i++) {
        diff_pair_t p = {&a[i], NULL, a[i].rank};
        for (int k = 0; k < nb && !p.b; k++)
            if (!used[k] && b[k].rank == a[i].rank)
                p.b = &b[k], used[k] = 1;
        out[n++] = p;
    }
    for (int k = 0; k < nb; k++)
        if (!used[k])
            out[n++] = (diff_pair_t){NULL, &b[k], b[k].rank};
    free(used);
    qsort(out, (size_t)n, sizeof *out, diff_by_rank);
    return n;
}

/* The device ids of either side, ascending, into ids; returns how many. */
static int diff_dev_ids(const diff_pair_t *p, int *ids)
{
    int n = 0;
    for (int id = 0; id < MODEL_MAX_DEVICES; id++)
        if ((p->a && diff_side_dev(p->a, id)) || (p->b && diff_side_dev(p->b, id)))
            ids[n++] = id;
    return n;
}

/* ---- the gate ------------------------------------------------------------------------------------ */

/* How many (device, term) pairs exceed a --fail-above term; each said on f when f is not NULL. */
static int diff_gate(FILE *f, const diff_opts_t *o, const diff_pair_t *p, int np)
{
    int ids[MODEL_MAX_DEVICES], hits = 0;
    for (int i = 0; i < np; i++) {
        int nd = diff_dev_ids(&p[i], ids);
        for (int d = 0; d < nd; d++) {
            const diff_dev_t *a = p[i].a ? diff_side_dev(p[i].a, ids[d]) : NULL;
            const diff_dev_t *b = p[i].b ? diff_side_dev(p[i].b, ids[d]) : NULL;
            for (int k = 0; k < o->nchecks; k++) {
                const diff_check_t *q = &o->check[k];
                uint64_t va = diff_fig(a, q->fig), vb = diff_fig(b, q->fig);
                if (!diff_exceeds(q, va, vb))
                    continue;
                hits++;
                if (!f)
                    continue;
                char z[40], pc[24], where[32] = "";
                if (p[i].rank >= 0)
                    snprintf(where, sizeof where, "rank %d ", p[i].rank);
                fprintf(f, "%sfail%s: %sdevice %d: %s rose by %s%s, more than %s\n", rep_red(), rep_reset(), where,
                        ids[d], diff_figs[q->fig].text, diff_change(va, vb, diff_figs[q->fig].bytes, z),
                        diff_pct(va, vb, pc), q->amount);
            }
        }
    }
    if (f && !hits)
        fprintf(f, "%spass%s: no figure rose by more than --fail-above allows\n", rep_green(), rep_reset());
    return hits;
}

/* ---- text ---------------------------------------------------------------------------------------- */

static const char *diff_steps_text(const diff_dev_t *d, char buf[48])
{
    if (!d || d->epochs < 0)
        return strcpy(buf, "none");
    snprintf(buf, 48, "%u %s%s", d->steps, d->epochs == EPOCH_MARKS ? "mark" : d->by_steps ? "step" : "trough",
             d->steps == 1 ? "" : "s");
    return buf;
}

static const char *diff_per(const diff_dev_t *a, const diff_dev_t *b)
{
    int ea = a ? a->epochs : -1, eb = b ? b->epochs : -1;
    if (ea < 0 && eb < 0)
        return "no growth: neither run has steps";
    const diff_dev_t *one = eb < 0 || (ea == eb && a) ? a : b;
    if (ea == eb || eb < 0 || ea < 0)
        return one->epochs == EPOCH_MARKS ? "growth per mark"
               : one->by_steps            ? "growth per step (found from the repeating allocations)"
                                          : "growth per step (low-water trough)";
    return "growth per step: marks in one run, low-water troughs in the other";
}

static void diff_sites_text(cli_ctx_t *c, const diff_dev_t *a, const diff_dev_t *b, int *changed)
{
    FILE *f = c->out;
    diff_row_t *r;
    size_t compared, n = diff_sites(a, b, &r, &compared);
    char x[32], y[32], z[40], u[32], v[32];
    if (!n) {
        fprintf(f, "  call sites: no change (%zu compared)\n", compared);
        free(r);
        return;
    }
    *changed = 1;
    fprintf(f, "  call sites, largest change first (bytes live at the peak of reserved; %s):\n",
            diff_per(a, b));
    fprintf(f, "  %10s %10s %10s %10s %10s  %s\n", "peak A", "peak B", "change", "growth A", "growth B", "site");
    size_t shown = c->top && n > c->top ? c->top : n;
    for (size_t i = 0; i < shown; i++) {
        const diff_row_t *w = &r[i];
        const char *col = w->pb > w->pa || w->gb > w->ga ? rep_red() : rep_green();
        fprintf(f, "  %10s %10s %s%10s%s %10s %10s  %s\n", rep_bytes(w->pa, x), rep_bytes(w->pb, y), col,
                diff_change(w->pa, w->pb, 1, z), rep_reset(), rep_bytes(w->ga, u), rep_bytes(w->gb, v),
                (w->b ? w->b : w->a)->key);
    }
    if (shown < n)
        fprintf(f, "  ... %zu more sites changed (--top 0 lists all)\n", n - shown);
    fprintf(f, "  %zu of %zu call sites changed\n", n, compared);
    free(r);
}

static void diff_dev_text(cli_ctx_t *c, const diff_dev_t *a, const diff_dev_t *b, int id, int *changed)
{
    FILE *f = c->out;
    const char *name = b ? b->name : a->name;
    fprintf(f, "%sdevice %d%s%s%s%s\n", rep_bold(), id, name[0] ? " (" : "", name, name[0] ? ")" : "", rep_reset());
    if (!a || !b)
        fprintf(f, "  %sonly in %s%s\n", rep_yellow(), a ? "A" : "B", rep_reset());
    fprintf(f, "  %-26s %12s %12s  %s\n", "", "A", "B", "change");
    for (int i = 0; i < FIG_N; i++) {
        uint64_t va = diff_fig(a, i), vb = diff_fig(b, i);
        char x[32], y[32], z[40], p[24];
        if (diff_figs[i].bytes)
            rep_bytes(va, x), rep_bytes(vb, y);
        else
            snprintf(x, sizeof x, "%" PRIu64, va), snprintf(y, sizeof y, "%" PRIu64, vb);
        *changed |= va != vb;
        fprintf(f, "  %-26s %12s %12s  %s%s%s%s\n", diff_figs[i].text, x, y, va == vb ? "" : vb > va ? rep_red() : rep_green(),
                diff_change(va, vb, diff_figs[i].bytes, z), diff_pct(va, vb, p), va == vb ? "" : rep_reset());
    }
    const char *ca = a && a->first_cause[0] ? a->first_cause : "-", *cb = b && b->first_cause[0] ? b->first_cause : "-";
    if (strcmp(ca, "-") || strcmp(cb, "-"))
        fprintf(f, "  %-26s %12s %12s  %s\n", "first OOM's cause", ca, cb, strcmp(ca, cb) ? "changed" : "=");
    *changed |= strcmp(ca, cb) != 0;
    char sa[48], sb[48];
    fprintf(f, "  %-26s %12s %12s\n", "steps", diff_steps_text(a, sa), diff_steps_text(b, sb));
    diff_sites_text(c, a, b, changed);
}

static void diff_pair_text(cli_ctx_t *c, const diff_pair_t *p, int several, int *changed)
{
    FILE *f = c->out;
    if (several && p->rank >= 0)
        rep_heading(f, "== rank %d ==", p->rank);
    else if (several)
        rep_heading(f, "== %s ==", p->a ? p->a->path : p->b->path);
    fprintf(f, "A %s\nB %s\n", p->a ? p->a->path : "(no log)", p->b ? p->b->path : "(no log)");
    if (!p->a || !p->b)
        *changed = 1;
    int ids[MODEL_MAX_DEVICES], nd = diff_dev_ids(p, ids);
    if (!nd)
        fprintf(f, "no device activity in either log\n");
    for (int d = 0; d < nd; d++)
        diff_dev_text(c, p->a ? diff_side_dev(p->a, ids[d]) : NULL, p->b ? diff_side_dev(p->b, ids[d]) : NULL,
                      ids[d], changed);
}

/* ---- JSON ---------------------------------------------------------------------------------------- */

static void diff_pair_json_fig(json_t *j, const char *key, uint64_t a, uint64_t b)
{
    json_obj(j, key);
    json_u64(j, "a", a);
    json_u64(j, "b", b);
    json_i64(j, "change", (int64_t)(b - a));
    if (a)
        json_dbl(j, "percent", ((double)b - (double)a) * 100.0 / (double)a);
    else
        json_null(j, "percent");
    json_obj_end(j);
}

static void diff_steps_json(json_t *j, const char *key, const diff_dev_t *d)
{
    json_obj(j, key);
    if (!d || d->epochs < 0)
        json_null(j, "per");
    else
        json_str(j, "per", d->epochs == EPOCH_MARKS ? "mark" : d->by_steps ? "step" : "trough");
    json_u64(j, "count", d && d->epochs >= 0 ? d->steps : 0);
    json_obj_end(j);
}

static void diff_sites_json(cli_ctx_t *c, const diff_dev_t *a, const diff_dev_t *b, int *changed)
{
    json_t *j = &c->j;
    diff_row_t *r;
    size_t compared, n = diff_sites(a, b, &r, &compared);
    *changed |= n > 0;
    json_u64(j, "sites_compared", compared);
    json_u64(j, "sites_changed", n);
    json_arr(j, "sites");
    size_t shown = c->top && n > c->top ? c->top : n;
    for (size_t i = 0; i < shown; i++) {
        const diff_site_t *s = r[i].b ? r[i].b : r[i].a;
        json_obj(j, NULL);
        json_str(j, "site", s->key);
        json_str(j, "function", s->function);
        json_str(j, "file", s->file);
        if (s->file)
            json_u64(j, "line", s->line);
        else
            json_null(j, "line");
        json_str(j, "in", r[i].a && r[i].b ? "both" : r[i].a ? "a" : "b");
        diff_pair_json_fig(j, "peak_bytes", r[i].pa, r[i].pb);
        diff_pair_json_fig(j, "growth_per_step", r[i].ga, r[i].gb);
        json_obj_end(j);
    }
    json_arr_end(j);
    free(r);
}

static void diff_side_json(json_t *j, const char *key, const diff_side_t *s)
{
    if (!s) {
        json_null(j, key);
        return;
    }
    json_obj(j, key);
    json_str(j, "path", s->path);
    json_obj_end(j);
}

static void diff_pair_json(cli_ctx_t *c, const diff_opts_t *o, const diff_pair_t *p, int *changed)
{
    json_t *j = &c->j;
    json_obj(j, NULL);
    if (p->rank >= 0)
        json_i64(j, "rank", p->rank);
    else
        json_null(j, "rank");
    diff_side_json(j, "a", p->a);
    diff_side_json(j, "b", p->b);
    if (!p->a || !p->b)
        *changed = 1;
    json_arr(j, "devices");
    int ids[MODEL_MAX_DEVICES], nd = diff_dev_ids(p, ids);
    for (int d = 0; d < nd; d++) {
        const diff_dev_t *a = p->a ? diff_side_dev(p->a, ids[d]) : NULL;
        const diff_dev_t *b = p->b ? diff_side_dev(p->b, ids[d]) : NULL;
        json_obj(j, NULL);
        json_u64(j, "device", (uint64_t)ids[d]);
        json_str(j, "name", b ? b->name : a->name);
        json_str(j, "in", a && b ? "both" : a ? "a" : "b");
        json_obj(j, "figures");
        for (int i = 0; i < FIG_N; i++) {
            *changed |= diff_fig(a, i) != diff_fig(b, i);
            diff_pair_json_fig(j, diff_figs[i].json, diff_fig(a, i), diff_fig(b, i));
        }
        json_obj_end(j);
        json_obj(j, "first_oom_cause");
        json_str(j, "a", a && a->first_cause[0] ? a->first_cause : NULL);
        json_str(j, "b", b && b->first_cause[0] ? b->first_cause : NULL);
        json_obj_end(j);
        json_obj(j, "steps");
        diff_steps_json(j, "a", a);
        diff_steps_json(j, "b", b);
        json_obj_end(j);
        diff_sites_json(c, a, b, changed);
        json_arr(j, "exceeded");
        for (int k = 0; k < o->nchecks; k++)
            if (diff_exceeds(&o->check[k], diff_fig(a, o->check[k].fig), diff_fig(b, o->check[k].fig)))
                json_str(j, NULL, o->check[k].text);
        json_arr_end(j);
        json_obj_end(j);
    }
    json_arr_end(j);
    json_obj_end(j);
}

/* ---- the command ----------------------------------------------------------------------------- */

static const char diff_usage[] =
    "usage: gmshim diff [--fail-above [FIGURE:]AMOUNT[,...]] [--top N] [--json] A B\n"
    "\n"
    "Compares two runs, A (the reference) and B: two logs, or two job directories (their *.gmlog\n"
    "files, paired by rank when every log has one, else by name order). Per device: peak allocated,\n"
    "peak reserved, the floor (bytes live when reserved peaked), the low-water of the last step (the\n"
    "fewest bytes live in it: what stays from step to step), fragmentation at the peak (free gaps\n"
    "inside segments that hold live blocks), OOMs and the first one's cause; then the call sites\n"
    "whose bytes live at the peak of reserved or whose growth per step changed, largest change\n"
    "first. Growth per step is `gmshim leaks`' figure: per mark when the log has marks, else per\n"
    "low-water trough. Sites are matched by the innermost Python frame, else the innermost frame\n"
    "with a source line (function and file:line, the file by its base name), never by address, so\n"
    "two builds of a program compare.\n"
    "\n"
    "      --fail-above SPEC  a CI gate: exit 1 when a figure of B exceeds A's by more than AMOUNT,\n"
    "                  on any device. AMOUNT is a percentage of A's (10%, 2.5%) or bytes (512M, 1G);\n"
    "                  FIGURE is allocated (the default), reserved, floor, lowwater, frag, or ooms\n"
    "                  (a count);\n"
    "                  several terms separated by commas: allocated:5%,reserved:1G\n"
    "  -n, --top N     changed sites listed per device (default 10; 0: all)\n"
    "  -j, --json      one JSON document\n"
    "  -h, --help      this text\n"
    "\n"
    "Exit status: 0 compared (and no --fail-above term exceeded), 1 a --fail-above term exceeded,\n"
    "2 bad input: not two runs, a log that cannot be read or is damaged (partial), a bad option.\n";

/* Each operand's logs (a directory stands for its *.gmlog files) read into *out. */
static int diff_read_run(const char *arg, diff_side_t **out, int *n)
{
    char *one[] = {(char *)arg}, **paths;
    int np;
    if (ranks_expand_args(1, one, &paths, &np))
        return DIFF_BAD;
    diff_side_t *s = calloc((size_t)np, sizeof *s);
    if (!s) {
        ranks_args_free(paths, np);
        return DIFF_BAD;
    }
    int rc = DIFF_SAME;
    for (int i = 0; i < np; i++) {
        int r = diff_side_read(&s[i], paths[i], stderr);
        if (r < 0)
            rc = DIFF_BAD;
        else if (r > 0) {
            fprintf(stderr, "gmshim diff: %s: damaged: parts of it could not be read, its figures are "
                    "incomplete\n", paths[i]);
            rc = DIFF_BAD;
        }
    }
    ranks_args_free(paths, np);
    *out = s;
    *n = np;
    return rc;
}

static void diff_free_run(diff_side_t *s, int n)
{
    for (int i = 0; s && i < n; i++)
        diff_side_free(&s[i]);
    free(s);
}

/* The report and the status: DIFF_SAME, or DIFF_ABOVE when a gate term is exceeded. */
static int diff_report(cli_ctx_t *c, const diff_opts_t *o, const diff_pair_t *p, int np)
{
    int changed = 0, above = diff_gate(NULL, o, p, np) > 0;
    if (c->json) {
        json_t *j = &c->j;
        json_obj(j, NULL);
        json_str(j, "command", "diff");
        json_str(j, "version", GMSHIM_VERSION_STRING);
        json_arr(j, "pairs");
        for (int i = 0; i < np; i++)
            diff_pair_json(c, o, &p[i], &changed);
        json_arr_end(j);
        json_bool(j, "changed", changed);
        json_arr(j, "fail_above");
        for (int k = 0; k < o->nchecks; k++)
            json_str(j, NULL, o->check[k].text);
        json_arr_end(j);
        json_bool(j, "exceeded", above);
        json_obj_end(j);
        json_line_end(j);
    } else {
        for (int i = 0; i < np; i++) {
            if (i)
                fputc('\n', c->out);
            diff_pair_text(c, &p[i], np > 1, &changed);
        }
        if (!changed)
            fprintf(c->out, "no change between A and B\n");
        if (o->nchecks)
            diff_gate(c->out, o, p, np);
    }
    return above ? DIFF_ABOVE : DIFF_SAME;
}

int cmd_diff(int argc, char **argv)
{
    static const cli_opt_t opts[] = {{"fail-above", DIFF_OPT_FAIL, 1}, {"top", 'n', 1}, {NULL, 0, 0}};
    cli_ctx_t c;
    cli_init(&c, stdout, stderr, "diff");
    c.json = cli_global.json;
    diff_opts_t o = {0};
    int rc = cli_parse_args(&c, argc, argv, opts, diff_opt, &o, diff_usage, CLI_ARGS_LOGS | CLI_ARGS_WRAP | CLI_ARGS_RUNS);
    if (rc >= 0)
        return rc == CLI_OK ? CLI_OK : DIFF_BAD;
    if (c.nargs != 2) {
        fprintf(stderr, "gmshim diff: two runs to compare, A and B (%d given)\n", c.nargs);
        cli_finish(&c, DIFF_BAD);
        return DIFF_BAD;
    }
    diff_side_t *a = NULL, *b = NULL;
    int na = 0, nb = 0;
    rc = diff_read_run(c.args[0], &a, &na);
    if (diff_read_run(c.args[1], &b, &nb) != DIFF_SAME) /* both read: every problem said at once */
        rc = DIFF_BAD;
    if (rc == DIFF_SAME) {
        diff_pair_t *p = calloc((size_t)(na + nb), sizeof *p);
        if (!p)
            exit(DIFF_BAD);
        int np = diff_pairs(a, na, b, nb, p);
        rc = diff_report(&c, &o, p, np);
        free(p);
    }
    diff_free_run(a, na);
    diff_free_run(b, nb);
    return cli_finish(&c, rc) != rc ? DIFF_BAD : rc; /* a write error: the report is not whole */
}
