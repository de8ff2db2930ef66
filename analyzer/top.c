/* `gmshim top`: follows running logs (one, or every rank's of a job directory) and shows, per
 * device, what is allocated and reserved now, the peak so far, the sites holding most and those
 * growing, and steps per second; keys on a terminal. It only opens the logs read-only and never writes to them; every
 * figure is the model's (growth as `leaks` reports it), never computed a second way. */
#include "leakwarn.h"
#include "output.h"
#include "ranks_dir.h"
#include "top.h"
#include "sites.h"
#include "top_pid.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

enum { TOP_OPT_ONCE = 0x400, TOP_OPT_INTERVAL, TOP_OPT_COUNT };
enum { TOP_SORT_BYTES, TOP_SORT_GROWTH };

typedef struct top_opts {
    double interval;          /* seconds between samples */
    unsigned count;           /* samples, then exit (0: until quit) */
    int once;
    int count_set;
} top_opts_t;

/* What the keys pick on a terminal. */
typedef struct top_view {
    int sort;                 /* TOP_SORT_*: which list comes first */
    int dev;                  /* the device shown (-1: all) */
    int rank;                 /* the log shown, by index (-1: all) */
    int ndevs_seen, nlogs_seen;
} top_view_t;

/* One site of a device: its live bytes now, its growth per step (0: not growing steadily). */
typedef struct top_site {
    uint32_t site;
    uint64_t bytes, count, growth;
} top_site_t;

static int top_by_bytes(const void *a, const void *b)
{
    const top_site_t *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return x->site < y->site ? -1 : x->site > y->site;
}

static int top_by_growth(const void *a, const void *b)
{
    const top_site_t *x = a, *y = b;
    if (x->growth != y->growth)
        return x->growth > y->growth ? -1 : 1;
    return top_by_bytes(a, b);
}

/* The device's sites with live bytes or a steady growth (leaks' rule), sorted as `sort` asks. */
static size_t top_sites(const model_t *m, int dev, int sys, int sort, top_site_t **out)
{
    top_site_t *v = calloc(m->nsst ? m->nsst : 1, sizeof *v);
    size_t n = 0;
    for (size_t i = 1; v && i < m->nsst; i++) {
        const model_sstat_t *s = &m->sst[i];
        uint64_t per = 0;
        if (s->dev != dev)
            continue;
        per = model_site_rate(m, s, sys); /* leaks' figure */
        if (!s->live_req && !per)
            continue;
        v[n++] = (top_site_t){s->site, s->live_req, s->live_count, per};
    }
    if (v)
        qsort(v, n, sizeof *v, sort == TOP_SORT_GROWTH ? top_by_growth : top_by_bytes);
    *out = v;
    return n;
}

static const char *top_sys_name(const model_t *m, int dev, int sys)
{
    return sys >= 0 ? model_epoch_noun(m, dev, sys, 1) : NULL;
}

/* Steps per second of log time (0 before the first step). */
static double top_rate(const model_t *m, const model_dev_t *d, int sys)
{
    if (sys < 0 || !m->last_t)
        return 0;
    return (double)d->epoch[sys] / ((double)m->last_t / 1e9);
}

/* The early warning (common/leakwarn.c's rule, the shim's GMSHIM_WARN line) on the device's
 * step lows, at the site growing most; NULL when the steps say no leak. */
static const char *top_warning(const model_t *m, const model_dev_t *d, int sys, char *buf, size_t len)
{
    leakwarn_verdict_t v;
    uint64_t cap = d->limit && (!d->total || d->limit < d->total) ? d->limit : d->total;
    if (sys < 0 || !leakwarn_check(&d->warn[sys], cap, &v))
        return NULL;
    top_site_t *s;
    char label[512] = "";
    size_t n = top_sites(m, d->id, sys, TOP_SORT_GROWTH, &s);
    if (n && s[0].growth)
        site_label(m, s[0].site, label, sizeof label);
    free(s);
    return leakwarn_format(buf, len, d->id, &v, label);
}

/* ---- JSON ------------------------------------------------------------------------------------- */

static void top_sites_json(json_t *j, const char *key, const model_t *m, const top_site_t *v, size_t n,
                           unsigned top, int growing)
{
    char label[512];
    unsigned shown = 0;
    json_arr(j, key);
    for (size_t i = 0; i < n && (!top || shown < top); i++) {
        if (growing ? !v[i].growth : !v[i].bytes)
            continue;
        shown++;
        json_obj(j, NULL);
        json_u64(j, "site", v[i].site);
        json_str(j, "label", site_label(m, v[i].site, label, sizeof label));
        json_u64(j, "bytes", v[i].bytes);
        json_u64(j, "count", v[i].count);
        json_u64(j, "growth_per_step", v[i].growth);
        json_obj_end(j);
    }
    json_arr_end(j);
}

static void top_dev_json(cli_ctx_t *c, const model_t *m, const model_dev_t *d)
{
    json_t *j = &c->j;
    int sys = model_epoch_system(m, d->id, 3);
    json_obj(j, NULL);
    json_i64(j, "id", d->id);
    json_str(j, "name", d->name);
    json_u64(j, "allocated", d->allocated);
    json_u64(j, "reserved", d->reserved);
    json_u64(j, "peak_allocated", d->peak_allocated);
    json_u64(j, "peak_reserved", d->peak_reserved);
    json_u64(j, "total", d->total);
    json_u64(j, "ooms", d->ooms);
    json_obj(j, "steps");
    if (top_sys_name(m, d->id, sys))
        json_str(j, "by", top_sys_name(m, d->id, sys));
    else
        json_null(j, "by");
    json_u64(j, "count", sys >= 0 ? d->epoch[sys] : 0);
    json_dbl(j, "per_second", top_rate(m, d, sys));
    json_obj_end(j);
    char warn[768];
    if (top_warning(m, d, sys, warn, sizeof warn))
        json_str(j, "warning", warn);
    else
        json_null(j, "warning");
    top_site_t *v;
    size_t n = top_sites(m, d->id, sys, TOP_SORT_BYTES, &v);
    top_sites_json(j, "holding", m, v, n, c->top, 0);
    qsort(v, n, sizeof *v, top_by_growth);
    top_sites_json(j, "growing", m, v, n, c->top, 1);
    free(v);
    json_obj_end(j);
}

static void top_log_json(cli_ctx_t *c, const char *path, rd_log_t *lf, const model_t *m)
{
    json_t *j = &c->j;
    json_obj(j, NULL);
    json_str(j, "path", path);
    json_i64(j, "rank", model_rank(m));
    json_u64(j, "pid", lf->hdr.pid);
    json_bool(j, "closed", !!(lf->hdr.flags & GMLOG_F_CLOSED));
    json_bool(j, "partial", lf->partial);
    json_bool(j, "wrapped", lf->wrapped);
    json_u64(j, "time_ns", m->last_t);
    json_arr(j, "devices");
    for (int i = 0; i < m->ndev; i++)
        if (m->dev[i])
            top_dev_json(c, m, m->dev[i]);
    json_arr_end(j);
    json_obj_end(j);
}

/* ---- text ------------------------------------------------------------------------------------- */

static void top_sites_text(cli_ctx_t *c, const model_t *m, const top_site_t *v, size_t n, int growing,
                           const char *per)
{
    char label[512], b[32];
    unsigned shown = 0;
    for (size_t i = 0; i < n && (!c->top || shown < c->top); i++) {
        if (growing ? !v[i].growth : !v[i].bytes)
            continue;
        if (!shown++)
            fprintf(c->out, "    %s%s%s\n", rep_bold(), growing ? "growing" : "holding most", growing ? per : "");
        char plus[40];
        if (growing)
            snprintf(plus, sizeof plus, "+%s", rep_bytes(v[i].growth, b));
        if (growing)
            fprintf(c->out, "      %s%11s%s  %s\n", rep_red(), plus, rep_reset(),
                    site_label(m, v[i].site, label, sizeof label));
        else
            fprintf(c->out, "      %11s  %s\n", rep_bytes(v[i].bytes, b), site_label(m, v[i].site, label, sizeof label));
    }
}

static void top_dev_text(cli_ctx_t *c, const model_t *m, const model_dev_t *d, int sort)
{
    char a[32], r[32], pa[32], pr[32];
    int sys = model_epoch_system(m, d->id, 3);
    fprintf(c->out, "  %sdevice %d%s %s: allocated %s  reserved %s  peak %s allocated, %s reserved\n", rep_bold(),
            d->id, rep_reset(), d->name, rep_bytes(d->allocated, a), rep_bytes(d->reserved, r),
            rep_bytes(d->peak_allocated, pa), rep_bytes(d->peak_reserved, pr));
    if (sys >= 0)
        fprintf(c->out, "    steps: %" PRIu32 " %s, %.2f per second\n", d->epoch[sys], top_sys_name(m, d->id, sys),
                top_rate(m, d, sys));
    else
        fprintf(c->out, "    steps: none yet (no marks, no low-water troughs)\n");
    char warn[768];
    if (top_warning(m, d, sys, warn, sizeof warn))
        fprintf(c->out, "    %s%s%s\n", rep_red(), warn, rep_reset());
    top_site_t *v;
    size_t n = top_sites(m, d->id, sys, TOP_SORT_BYTES, &v);
    const char *per = sys == EPOCH_MARKS ? " (per mark)" : d->step.period ? " (per step)" : " (per low-water trough)";
    if (sort == TOP_SORT_GROWTH) {
        qsort(v, n, sizeof *v, top_by_growth);
        top_sites_text(c, m, v, n, 1, per);
        qsort(v, n, sizeof *v, top_by_bytes);
        top_sites_text(c, m, v, n, 0, per);
    } else {
        top_sites_text(c, m, v, n, 0, per);
        qsort(v, n, sizeof *v, top_by_growth);
        top_sites_text(c, m, v, n, 1, per);
    }
    free(v);
}

static void top_log_text(cli_ctx_t *c, const char *path, rd_log_t *lf, const model_t *m, const top_view_t *w)
{
    char name[64], t[32];
    int closed = !!(lf->hdr.flags & GMLOG_F_CLOSED);
    fprintf(c->out, "%s%s%s  %s  at %s  %s%s%s\n", rep_bold(), cli_log_name(lf, m, name, sizeof name), rep_reset(),
            path, rep_time(m->last_t, t), closed ? rep_dim() : rep_green(), closed ? "closed" : "running",
            rep_reset());
    int shown = 0;
    for (int i = 0; i < m->ndev; i++)
        if (m->dev[i] && (w->dev < 0 || w->dev == i)) {
            top_dev_text(c, m, m->dev[i], w->sort);
            shown++;
        }
    if (!shown)
        fprintf(c->out, "  no device %s\n", w->dev >= 0 ? "of that number" : "yet");
}

/* ---- one sample ------------------------------------------------------------------------------- */

/* Reads every log named by the operands (directories expanded again each time: ranks that start
 * late appear) and prints one sample. Returns the worst status of the logs. */
static int top_sample(cli_ctx_t *c, unsigned sample, top_view_t *w)
{
    char **paths;
    int np, rc = CLI_OK;
    if (ranks_expand_args(c->nargs, c->args, &paths, &np))
        return CLI_FAIL;
    w->nlogs_seen = np;
    if (c->json) {
        json_obj(&c->j, NULL);
        json_str(&c->j, "command", "top");
        json_str(&c->j, "version", GMSHIM_VERSION_STRING);
        json_u64(&c->j, "sample", sample);
        json_arr(&c->j, "logs");
    }
    for (int i = 0; i < np; i++) {
        if (!c->json && w->rank >= 0 && w->rank != i % np)
            continue;
        rd_log_t lf;
        if (rd_open_path(&lf, paths[i]) != 0) {
            fprintf(c->err, "gmshim: %s: byte %" PRIu64 ": %s\n", paths[i], lf.diags[0].offset, lf.diags[0].msg);
            rd_close(&lf);
            rc = CLI_FAIL;
            continue;
        }
        model_t *m = calloc(1, sizeof *m);
        if (!m) {
            rd_close(&lf);
            rc = CLI_FAIL;
            continue;
        }
        model_build(m, &lf, MODEL_SITES | MODEL_EPOCHS);
        if (m->ndev > w->ndevs_seen)
            w->ndevs_seen = m->ndev;
        if (lf.partial && rc == CLI_OK)
            rc = CLI_PARTIAL;
        if (lf.partial && sample <= 1)
            cli_print_diags(c, &lf); /* once, not at every refresh */
        if (c->json)
            top_log_json(c, paths[i], &lf, m);
        else
            top_log_text(c, paths[i], &lf, m, w);
        model_free(m);
        free(m);
        rd_close(&lf);
    }
    if (c->json) {
        json_arr_end(&c->j);
        json_obj_end(&c->j);
        json_line_end(&c->j);
    }
    ranks_args_free(paths, np);
    fflush(c->out);
    return rc;
}

/* The keys and what they show now, after the head line on a terminal. */
static const char *top_keys_line(const top_view_t *w)
{
    static char buf[160];
    char dev[16] = "all", rank[16] = "all";
    if (w->dev >= 0)
        snprintf(dev, sizeof dev, "%d", w->dev);
    if (w->rank >= 0)
        snprintf(rank, sizeof rank, "%d", w->rank + 1);
    snprintf(buf, sizeof buf, "  (q quit, s sort: %s, d device: %s, r log: %s)",
             w->sort == TOP_SORT_GROWTH ? "growth" : "bytes", dev, rank);
    return buf;
}

/* ---- the command ------------------------------------------------------------------------------ */

static const char top_usage[] =
    "usage: gmshim top [--once] [--interval S] [--count N] [--top N] [--json] LOG|DIR|PID...\n"
    "\n"
    "Follows logs while their jobs run (a log, a job directory: every rank's *.gmlog in it, or a\n"
    "running process by its PID: the log it has open) and shows, every S seconds, per device:\n"
    "allocated and reserved now, the peaks so far, the steps (marks, else low-water troughs) and\n"
    "steps per second of log time, the call sites holding the most bytes and the sites growing from\n"
    "step to step (`gmshim leaks`' growth, per step). When the steps' low-water marks rise steadily\n"
    "(GMSHIM_WARN's rule) a line says \"leak suspected\": the growth per step, the site growing\n"
    "most, and when the device is full at that rate. The logs are only read, never written: the\n"
    "jobs go on undisturbed. Each sample reads the logs again from the start.\n"
    "\n"
    "On a terminal the view is redrawn in place; otherwise (a pipe, a file) each sample is printed\n"
    "after the last, separated by a blank line (one JSON object a line with --json). Keys on a\n"
    "terminal: q quit, s sort by bytes or by growth, d next device, r next log (rank).\n"
    "\n"
    "      --once      one sample, then exit\n"
    "      --interval S  seconds between samples (default 2; fractions allowed)\n"
    "      --count N   N samples, then exit\n"
    "  -n, --top N     sites listed per list (default 5; 0: all)\n"
    "  -j, --json      one JSON object per sample, one a line\n"
    "  -h, --help      this text\n"
    "\n"
    "Exit status: 0, 1 when a log cannot be read or a bad option, 2 when a log is damaged (partial) or\n"
    "a process named by its PID has no log open.\n";

static int top_opt(cli_ctx_t *c, void *st, int key, const char *val)
{
    top_opts_t *o = st;
    char *end;
    switch (key) {
    case TOP_OPT_ONCE:
        o->once = 1;
        return 0;
    case TOP_OPT_INTERVAL:
        errno = 0;
        o->interval = strtod(val, &end);
        if (end == val || *end || errno || !isfinite(o->interval) || o->interval <= 0 || o->interval > 86400) {
            fprintf(stderr, "gmshim top: --interval: '%s' is not a number of seconds above 0\n", val);
            return CLI_FAIL;
        }
        return 0;
    case TOP_OPT_COUNT:
        if (cli_parse_count("top", "--count", val, &o->count))
            return CLI_FAIL;
        if (!o->count) {
            fprintf(stderr, "gmshim top: --count: at least 1 sample\n");
            return CLI_FAIL;
        }
        o->count_set = 1;
        return 0;
    default:
        return cli_common_opt(c, st, key, val);
    }
}

/* ---- the terminal ------------------------------------------------------------------------------ */

static volatile sig_atomic_t top_stop;
static struct termios top_saved;
static int top_raw;                   /* stdin is in raw mode: restore it on the way out */

static void top_on_signal(int sig)
{
    (void)sig;
    top_stop = 1;
}

static void top_restore(void)
{
    if (top_raw) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &top_saved);
        top_raw = 0;
    }
}

/* Keys are read one at a time without echo; signals still come (ISIG stays on). */
static void top_raw_on(void)
{
    struct termios t;
    if (tcgetattr(STDIN_FILENO, &top_saved) != 0)
        return;
    t = top_saved;
    t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    t.c_cc[VMIN] = 0;
    t.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &t) == 0) {
        top_raw = 1;
        atexit(top_restore);
    }
}

/* Acts on one key; 1 when the view changed (redraw now). */
static int top_key(int key, top_view_t *w)
{
    switch (key) {
    case 'q':
        top_stop = 1;
        return 0;
    case 's':
        w->sort = w->sort == TOP_SORT_BYTES ? TOP_SORT_GROWTH : TOP_SORT_BYTES;
        return 1;
    case 'd': /* all, then each device, then all again */
        w->dev = w->dev + 1 >= w->ndevs_seen ? -1 : w->dev + 1;
        return 1;
    case 'r':
        w->rank = w->rank + 1 >= w->nlogs_seen ? -1 : w->rank + 1;
        return 1;
    default:
        return 0;
    }
}

static double top_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits `secs`, or until a key changes the view or a signal or `q` asks to stop. */
static void top_wait(double secs, top_view_t *w)
{
    double end = top_now() + secs;
    for (double left = secs; !top_stop && left > 0; left = end - top_now()) {
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        int n = poll(top_raw ? &p : NULL, top_raw ? 1 : 0, (int)ceil(left * 1000));
        if (n <= 0)
            continue; /* the time is up, or a signal (top_stop says which) */
        char key;
        if (read(STDIN_FILENO, &key, 1) == 1 && top_key(key, w))
            return;
    }
}

static int top_follow(cli_ctx_t *c, const top_opts_t *op);

int cmd_top(int argc, char **argv)
{
    static const cli_opt_t opts[] = {
        {"once", TOP_OPT_ONCE, 0}, {"interval", TOP_OPT_INTERVAL, 1}, {"count", TOP_OPT_COUNT, 1},
        {"top", 'n', 1}, {NULL, 0, 0},
    };
    cli_ctx_t c;
    cli_init(&c, stdout, stderr, "top");
    c.top = 5;
    c.json = cli_global.json;
    top_opts_t o = {.interval = 2};
    int rc = cli_parse_args(&c, argc, argv, opts, top_opt, &o, top_usage, CLI_ARGS_LOGS | CLI_ARGS_RUNS);
    if (rc >= 0)
        return rc;
    char **found = calloc((size_t)c.nargs + 1, sizeof *found); /* PIDs' logs, freed at the end */
    for (int i = 0; found && i < c.nargs; i++) {
        int r = top_pid_resolve(c.args[i], &found[i]);
        if (r < 0) {
            for (int k = 0; k < i; k++)
                free(found[k]);
            free(found);
            return cli_finish(&c, CLI_PARTIAL);
        }
        if (r > 0)
            c.args[i] = found[i];
    }
    rc = top_follow(&c, &o);
    for (int i = 0; found && i < c.nargs; i++)
        free(found[i]);
    free(found);
    return rc;
}

/* Samples until --count, --once, q or a signal says stop. */
static int top_follow(cli_ctx_t *c, const top_opts_t *op)
{
    top_opts_t o = *op;
    int rc = CLI_OK;
    if (o.once && o.count_set && o.count != 1) {
        fprintf(stderr, "gmshim top: --once and --count %u ask for different numbers of samples\n", o.count);
        return cli_finish(c, CLI_FAIL);
    }
    unsigned count = o.once ? 1 : o.count;
    int term = !c->json && isatty(STDOUT_FILENO);
    struct sigaction sa = {.sa_handler = top_on_signal};
    sigemptyset(&sa.sa_mask);
    if (count != 1) {
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        if (term && isatty(STDIN_FILENO))
            top_raw_on();
    }
    top_view_t w = {.sort = TOP_SORT_BYTES, .dev = -1, .rank = -1};
    for (unsigned s = 1; !top_stop; s++) {
        if (term && count != 1) /* --once prints in place, as any report */
            fputs("\033[H\033[2J", c->out);
        else if (s > 1 && !c->json)
            fputc('\n', c->out);
        if (!c->json && count != 1)
            fprintf(c->out, "%sgmshim top%s  sample %u, every %g s%s\n", rep_bold(), rep_reset(), s, o.interval,
                    top_raw ? top_keys_line(&w) : "");
        rc = top_sample(c, s, &w);
        if (ferror(c->out) || (count && s >= count))
            break;
        top_wait(o.interval, &w);
    }
    top_restore();
    return cli_finish(c, rc);
}
