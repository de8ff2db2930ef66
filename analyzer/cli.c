/* The per-log loop of every report: open, replay, report, then the diagnostics (with byte
 * offsets) on stderr and the exit status: 0 clean, 2 partial, 1 unreadable. An unclosed log
 * (a killed process) is normal input and says so in the report, not as an error. */
#include "cli.h"

#include "output.h"
#include "ranks_dir.h"
#include "symbolize.h"

#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

cli_global_t cli_global;

void cli_init(cli_ctx_t *c, FILE *out, FILE *err, const char *command)
{
    memset(c, 0, sizeof *c);
    c->out = out;
    c->err = err;
    c->top = 10;
    c->depth = 12;
    c->command = command;
    json_init(&c->j, out);
}

const char *cli_close_state(const rd_log_t *lf, const model_t *m, char *buf, size_t len)
{
    const gmlog_file_header_t *h = &lf->hdr;
    if (lf->no_header) {
        snprintf(buf, len, "not closed: the process ended before writing its header");
        return buf;
    }
    if (!(h->flags & GMLOG_F_CLOSED)) {
        if (lf->changed)
            snprintf(buf, len, "not closed: still being written (the log changed while it was read: its newest "
                     "records may be missing)");
        else
            snprintf(buf, len, "not closed: the process was killed or is still running%s",
                     m && m->end_seen ? " (an end record was written)" : "");
        return buf;
    }
    unsigned reason = h->close_reason & 0xff, sig = (h->close_reason >> 8) & 0xff;
    switch (reason) {
    case GMLOG_CLOSE_EXIT: snprintf(buf, len, "closed at exit"); break;
    case GMLOG_CLOSE_SIGNAL: snprintf(buf, len, "closed by signal %u", sig); break;
    case GMLOG_CLOSE_DISK: snprintf(buf, len, "stopped early: the disk was full or unwritable"); break;
    default: snprintf(buf, len, "closed (reason %u)", h->close_reason); break;
    }
    return buf;
}

const char *cli_log_name(const rd_log_t *lf, const model_t *m, char *buf, size_t len)
{
    int rank = m ? model_rank(m) : -1;
    if (lf->no_header)
        snprintf(buf, len, "pid unknown");
    else if (rank >= 0)
        snprintf(buf, len, "rank %d (pid %u)", rank, lf->hdr.pid);
    else
        snprintf(buf, len, "pid %u", lf->hdr.pid);
    return buf;
}

void cli_print_diags(cli_ctx_t *c, const rd_log_t *lf)
{
    size_t shown = lf->ndiags < RD_MAX_DIAGS ? lf->ndiags : RD_MAX_DIAGS;
    for (size_t i = 0; i < shown; i++)
        fprintf(c->err, "gmshim: %s: byte %" PRIu64 ": %s\n", lf->name, lf->diags[i].offset, lf->diags[i].msg);
    if (lf->ndiags > shown)
        fprintf(c->err, "gmshim: %s: %zu more problems not shown\n", lf->name, lf->ndiags - shown);
}

static void json_diags(cli_ctx_t *c, const rd_log_t *lf)
{
    size_t shown = lf->ndiags < RD_MAX_DIAGS ? lf->ndiags : RD_MAX_DIAGS;
    json_arr(&c->j, "errors");
    for (size_t i = 0; i < shown; i++) {
        json_obj(&c->j, NULL);
        json_u64(&c->j, "offset", lf->diags[i].offset);
        json_str(&c->j, "message", lf->diags[i].msg);
        json_obj_end(&c->j);
    }
    json_arr_end(&c->j);
}

static void log_header_json(cli_ctx_t *c, const rd_log_t *lf, const model_t *m)
{
    json_t *j = &c->j;
    char buf[160];
    json_str(j, "path", lf->name);
    json_u64(j, "pid", lf->hdr.pid);
    int rank = model_rank(m);
    if (rank >= 0)
        json_i64(j, "rank", rank);
    else
        json_null(j, "rank");
    json_str(j, "host", rd_meta_get(lf, GMLOG_META_HOST));
    json_str(j, "program", rd_meta_get(lf, GMLOG_META_PROGRAM));
    json_str(j, "gmshim_version", rd_meta_get(lf, GMLOG_META_VERSION));
    json_u64(j, "format_version", lf->hdr.version);
    json_u64(j, "start_realtime_ns", lf->hdr.start_realtime_ns);
    json_u64(j, "duration_ns", (lf->hdr.flags & GMLOG_F_CLOSED) && lf->hdr.end_ns ? lf->hdr.end_ns : m->last_t);
    json_bool(j, "closed", (lf->hdr.flags & GMLOG_F_CLOSED) != 0);
    json_str(j, "close_state", cli_close_state(lf, m, buf, sizeof buf));
    json_u64(j, "records", m->records);
    json_u64(j, "threads", lf->nstreams);
    json_u64(j, "marks", m->marks_total);
    if (lf->no_header)
        json_bool(j, "no_header", 1);
    if (!m->records && !lf->partial)
        json_str(j, "note", RD_NO_RECORDS);
    if (lf->swapped)
        json_bool(j, "byte_swapped", 1);
    json_bool(j, "wrapped", lf->wrapped);
    if (lf->ckpt.seq) {
        json_u64(j, "checkpoint", lf->ckpt.seq);
        json_u64(j, "summarised_before_ns", lf->ckpt.at_ns);
        json_u64(j, "detail_from_ns", lf->ckpt.detail_from_ns);
        json_obj(j, "dropped");
        json_u64(j, "allocs", lf->ckpt.allocs);
        json_u64(j, "frees", lf->ckpt.frees);
        json_obj_end(j);
    }
}

static void log_header_text(cli_ctx_t *c, const rd_log_t *lf, const model_t *m)
{
    FILE *f = c->out;
    char name[96], state[160], t[32];
    const char *prog = rd_meta_get(lf, GMLOG_META_PROGRAM);
    rep_heading(f, "== %s: %s%s%s ==", cli_log_name(lf, m, name, sizeof name), lf->name,
                prog ? " — " : "", prog ? prog : "");
    time_t start = (time_t)(lf->hdr.start_realtime_ns / 1000000000u);
    struct tm tm;
    char when[64] = "?";
    if (localtime_r(&start, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    const char *host = rd_meta_get(lf, GMLOG_META_HOST);
    uint64_t dur = (lf->hdr.flags & GMLOG_F_CLOSED) && lf->hdr.end_ns ? lf->hdr.end_ns : m->last_t;
    if (lf->no_header)
        fprintf(f, "%s\n", cli_close_state(lf, m, state, sizeof state));
    else
        fprintf(f, "started %s%s%s, ran %s, %s; %" PRIu64 " records from %zu thread%s\n", when,
                host ? " on " : "", host ? host : "", rep_time(dur, t),
                cli_close_state(lf, m, state, sizeof state), m->records, lf->nstreams, lf->nstreams == 1 ? "" : "s");
    if (!m->records && !lf->partial)
        fprintf(f, "%s\n", RD_NO_RECORDS);
    if (lf->ckpt.seq) {
        char a[32], b[32], t2[32];
        fprintf(f, "%sthe log reached its size limit (GMSHIM_LOG_LIMIT): events before %s were summarised in a "
                "checkpoint (%s allocations, %s frees); per-event detail starts at %s%s\n", rep_yellow(),
                rep_time(lf->ckpt.at_ns, t), rep_count(lf->ckpt.allocs, a), rep_count(lf->ckpt.frees, b),
                rep_time(lf->ckpt.detail_from_ns, t2), rep_reset());
    }
}

/* Replays one opened log into a new model (NULL only when host memory ran out). */
static model_t *build_model(const cli_ctx_t *c, rd_log_t *lf, unsigned flags, int progress)
{
    model_t *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->progress = progress && lf->size > (256u << 20);
    model_build_until(m, lf, flags, UINT64_MAX, c->stop_mark_id, c->stop_mark_label);
    return m;
}

/* A log that could not be opened: its message, and its entry in the JSON list. */
static void report_unreadable(cli_ctx_t *c, const rd_log_t *lf, int *status)
{
    c->c_failed++;
    const rd_diag_t *d = &lf->diags[0];
    fprintf(c->err, "gmshim: %s: byte %" PRIu64 ": %s\n", lf->name, d->offset, d->msg);
    if (c->json) {
        json_obj(&c->j, NULL);
        json_str(&c->j, "path", lf->name);
        json_str(&c->j, "error", d->msg);
        json_u64(&c->j, "offset", d->offset);
        json_obj_end(&c->j);
    }
    *status = CLI_FAIL;
}

/* One log's section: the shared header, the command's report, the diagnostics; its figures
 * added to the combined ones. Frees the model. */
static void report_log(cli_ctx_t *c, rd_log_t *lf, model_t *m, cli_log_fn fn, void *arg, int *status)
{
    if (c->json) {
        json_obj(&c->j, NULL);
        log_header_json(c, lf, m);
    } else {
        if (c->index)
            fputc('\n', c->out);
        log_header_text(c, lf, m);
    }
    fn(c, lf, m, arg);
    /* the combined figures */
    c->c_logs++;
    for (int i = 0; i < m->ndev; i++) {
        const model_dev_t *d = m->dev[i];
        if (!d)
            continue;
        c->c_allocs += d->allocs;
        c->c_frees += d->frees;
        c->c_peak_req += d->peak_requested;
        c->c_peak_alloc += d->peak_allocated;
        c->c_peak_res += d->peak_reserved;
        c->c_hits += d->hits;
        c->c_misses += d->misses;
        c->c_ooms += d->ooms;
        c->c_live_bytes += d->allocated;
    }
    if (lf->partial)
        c->c_partial++;
    if (c->json) {
        json_bool(&c->j, "partial", lf->partial);
        json_diags(c, lf);
        json_obj_end(&c->j);
    } else if (lf->partial) {
        fprintf(c->out, "%spartial: parts of this log could not be read (see the messages on stderr)%s\n",
                rep_yellow(), rep_reset());
    }
    cli_print_diags(c, lf);
    if (lf->partial && *status == CLI_OK)
        *status = CLI_PARTIAL;
    model_free(m);
    free(m);
}

static void one_log(cli_ctx_t *c, rd_log_t *lf, int opened, model_t *m, cli_log_fn fn, void *arg, int *status)
{
    if (!opened) {
        report_unreadable(c, lf, status);
        return;
    }
    if (!m) {
        fputs("gmshim: out of memory\n", c->err);
        exit(CLI_FAIL);
    }
    report_log(c, lf, m, fn, arg, status);
}

static void begin(cli_ctx_t *c)
{
    if (c->json) {
        json_obj(&c->j, NULL);
        json_str(&c->j, "command", c->command);
        json_str(&c->j, "version", GMSHIM_VERSION_STRING);
    }
    if (c->prologue)
        c->prologue(c, c->prologue_arg);
    if (c->json)
        json_arr(&c->j, "logs");
}

static void end(cli_ctx_t *c)
{
    char a[32], b[32], d[32], e[32], r[32];
    if (c->json) {
        json_arr_end(&c->j);
        if (c->nlogs > 1) {
            json_obj(&c->j, "combined");
            json_u64(&c->j, "logs", c->c_logs);
            json_u64(&c->j, "unreadable", c->c_failed);
            json_u64(&c->j, "partial", c->c_partial);
            json_u64(&c->j, "allocs", c->c_allocs);
            json_u64(&c->j, "frees", c->c_frees);
            json_u64(&c->j, "peak_requested", c->c_peak_req);
            json_u64(&c->j, "peak_allocated", c->c_peak_alloc);
            json_u64(&c->j, "peak_reserved", c->c_peak_res);
            json_u64(&c->j, "cache_hits", c->c_hits);
            json_u64(&c->j, "cache_misses", c->c_misses);
            json_u64(&c->j, "ooms", c->c_ooms);
            json_u64(&c->j, "live_at_end", c->c_live_bytes);
            json_obj_end(&c->j);
        }
        json_obj_end(&c->j);
        json_line_end(&c->j);
    } else if (c->nlogs > 1) {
        fprintf(c->out, "\n%scombined%s: %" PRIu64 " logs", rep_bold(), rep_reset(), c->c_logs);
        if (c->c_failed)
            fprintf(c->out, " (+%" PRIu64 " unreadable)", c->c_failed);
        fprintf(c->out, ", %s allocs, %s frees, peaks summed over ranks: requested %s, allocated %s, "
                "reserved %s, %" PRIu64 " OOMs\n", rep_count(c->c_allocs, a), rep_count(c->c_frees, b),
                rep_bytes(c->c_peak_req, d), rep_bytes(c->c_peak_alloc, e), rep_bytes(c->c_peak_res, r),
                c->c_ooms);
    }
}

/* ---- many logs: read and replayed in parallel, reported in order ---------------------------
 * Workers open and replay logs into a window of CLI_WINDOW_MAX slots at most (the number of
 * CPUs, or GMSHIM_ANALYZER_THREADS): log i + window is started only once log i has been
 * reported, so at most `window` models are held at once, whatever the number of logs. The
 * calling thread prints each section in the order given, so the output is the sequential one. */
#define CLI_WINDOW_MAX 64

typedef struct log_slot {
    rd_log_t *lf;
    model_t *m;
    int opened;
    int done;
} log_slot_t;

typedef struct log_window {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    const cli_ctx_t *c;
    char *const *paths;
    unsigned flags;
    int n, next, reported, width;
    log_slot_t slot[CLI_WINDOW_MAX];
} log_window_t;

static unsigned window_width(int n)
{
    const char *env = getenv("GMSHIM_ANALYZER_THREADS");
    long want = env && *env ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    if (want < 1)
        want = 1;
    if (want > CLI_WINDOW_MAX)
        want = CLI_WINDOW_MAX;
    return want > n ? (unsigned)n : (unsigned)want;
}

static void *window_worker(void *arg)
{
    log_window_t *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (w->next < w->n && w->next >= w->reported + w->width)
            pthread_cond_wait(&w->cond, &w->lock);
        if (w->next >= w->n)
            break;
        int i = w->next++;
        pthread_mutex_unlock(&w->lock);
        log_slot_t *s = &w->slot[i % w->width];
        rd_log_t *lf = calloc(1, sizeof *lf);
        int opened = lf && rd_open_path(lf, w->paths[i]) == 0;
        model_t *m = opened ? build_model(w->c, lf, w->flags, 0) : NULL;
        pthread_mutex_lock(&w->lock);
        s->lf = lf;
        s->m = m;
        s->opened = opened;
        s->done = 1;
        pthread_cond_broadcast(&w->cond);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* Returns 0 when no worker thread could be started (nothing reported then). */
static int run_window(cli_ctx_t *c, int n, char *const *paths, unsigned flags, cli_log_fn fn, void *arg,
                      unsigned width, int *status)
{
    log_window_t w = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, .c = c,
                      .paths = paths, .flags = flags, .n = n, .width = (int)width};
    pthread_t th[CLI_WINDOW_MAX];
    unsigned started = 0;
    for (unsigned k = 0; k < width; k++)
        if (pthread_create(&th[started], NULL, window_worker, &w) == 0)
            started++;
    if (!started)
        return 0;
    for (int i = 0; i < n; i++) {
        log_slot_t *s = &w.slot[i % w.width];
        pthread_mutex_lock(&w.lock);
        while (!s->done)
            pthread_cond_wait(&w.cond, &w.lock);
        pthread_mutex_unlock(&w.lock);
        if (!s->lf) {
            fputs("gmshim: out of memory\n", c->err);
            exit(CLI_FAIL);
        }
        c->index = i;
        one_log(c, s->lf, s->opened, s->m, fn, arg, status);
        rd_close(s->lf);
        free(s->lf);
        pthread_mutex_lock(&w.lock);
        *s = (log_slot_t){0};
        w.reported = i + 1;
        pthread_cond_broadcast(&w.cond);
        pthread_mutex_unlock(&w.lock);
    }
    for (unsigned k = 0; k < started; k++)
        pthread_join(th[k], NULL);
    return 1;
}

static void run_sequential(cli_ctx_t *c, int n, char *const *paths, unsigned flags, cli_log_fn fn, void *arg,
                           int *status)
{
    for (int i = 0; i < n; i++) {
        rd_log_t *lf = calloc(1, sizeof *lf);
        if (!lf) {
            fputs("gmshim: out of memory\n", c->err);
            exit(CLI_FAIL);
        }
        int ok = rd_open_path(lf, paths[i]) == 0;
        c->index = i;
        one_log(c, lf, ok, ok ? build_model(c, lf, flags, c->progress) : NULL, fn, arg, status);
        rd_close(lf);
        free(lf);
    }
}

int cli_run_logs(cli_ctx_t *c, int n, char *const *paths, unsigned flags, cli_log_fn fn, void *arg)
{
    int status = CLI_OK;
    c->nlogs = n;
    begin(c);
    unsigned width = n > 1 ? window_width(n) : 1;
    if (width < 2 || !run_window(c, n, paths, flags, fn, arg, width, &status))
        run_sequential(c, n, paths, flags, fn, arg, &status);
    end(c);
    return status;
}

int cli_run_mem(cli_ctx_t *c, const void *data, size_t size, unsigned flags, cli_log_fn fn, void *arg)
{
    int status = CLI_OK;
    c->nlogs = 1;
    begin(c);
    rd_log_t *lf = calloc(1, sizeof *lf);
    if (!lf) {
        fputs("gmshim: out of memory\n", c->err);
        return CLI_FAIL;
    }
    int ok = rd_open_mem(lf, data, size, "<memory>") == 0;
    one_log(c, lf, ok, ok ? build_model(c, lf, flags, c->progress) : NULL, fn, arg, &status);
    rd_close(lf);
    free(lf);
    end(c);
    return status;
}

int cli_parse_size(const char *s, uint64_t *out)
{
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0 || !isfinite(v))
        return -1;
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (mul > 1 && *end == 'i')
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end || v * mul > 1.8e19)
        return -1;
    *out = (uint64_t)(v * mul);
    return 0;
}

int cli_text_width(void)
{
    struct winsize ws;
    if (isatty(1) && ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
        return ws.ws_col;
    return 100;
}

int cli_finish(cli_ctx_t *c, int status)
{
    if (c->wrap) {
        int bad = ferror(c->wrap) != 0;
        bad |= fclose(c->wrap) != 0;
        c->wrap = NULL;
        c->out = stdout;
        if (bad && !ferror(stdout))
            errno = EIO;
        if (bad) {
            fprintf(c->err, "gmshim: error writing the output: %s\n", strerror(errno ? errno : EIO));
            return CLI_FAIL;
        }
    }
    if (fflush(c->out) != 0 || ferror(c->out)) {
        fprintf(c->err, "gmshim: error writing the output: %s\n", strerror(errno ? errno : EIO));
        return CLI_FAIL;
    }
    return status;
}

int cli_parse_count(const char *command, const char *option, const char *text, unsigned *out)
{
    char *end;
    unsigned long v = strtoul(text, &end, 10);
    if (*end || !*text || v > UINT32_MAX) {
        fprintf(stderr, "gmshim %s: %s %s: not a number\n", command, option, text);
        return -1;
    }
    *out = (unsigned)v;
    return 0;
}

enum {
    G_JSON = 'j',
    G_HELP = 'h',
    G_COLOR = 0x1001,
    G_NO_SYMBOLS,
    G_SYMBOL_PATH,
};

static const cli_opt_t global_opts[] = {
    {"json", G_JSON, 0},
    {"help", G_HELP, 0},
    {"color", G_COLOR, CLI_ARG_OPTIONAL},
    {"colour", G_COLOR, CLI_ARG_OPTIONAL},
    {"no-symbols", G_NO_SYMBOLS, 0},
    {"symbol-path", G_SYMBOL_PATH, 1},
    {NULL, 0, 0},
};

int cli_set_color(const char *when)
{
    if (!when || !strcmp(when, "always")) { /* a bare --color, as git and ls take it */
        rep_color = 1;
    } else if (!strcmp(when, "never")) {
        rep_color = 0;
    } else if (!strcmp(when, "auto")) {
        const char *term = getenv("TERM");
        const char *no = getenv("NO_COLOR"); /* no-color.org: only a non-empty value turns it off */
        rep_color = isatty(1) && !(no && *no) && term && strcmp(term, "dumb") != 0;
    } else {
        fprintf(stderr, "gmshim: --color=%s: use auto, always or never\n", when);
        return -1;
    }
    return 0;
}

static const char *cmd_name(const cli_ctx_t *c)
{
    return c->command && *c->command ? c->command : NULL;
}

static int usage_error(const cli_ctx_t *c, const char *fmt, const char *a, const char *b)
{
    const char *cmd = cmd_name(c);
    fprintf(stderr, "gmshim%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "; 'gmshim %s%s--help' lists the options\n", cmd ? cmd : "", cmd ? " " : "");
    return CLI_FAIL;
}

/* The option named by a long name (or an unambiguous prefix of one) in the command's table
 * (slots 0..63) or the global one (64..); its slot in *slot. NULL after saying why. */
static const cli_opt_t *find_long(const cli_ctx_t *c, const cli_opt_t *opts, const char *arg, size_t *slot)
{
    const char *name = arg + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const cli_opt_t *tables[2] = {opts, global_opts}, *hit = NULL;
    int hits = 0;
    for (int t = 0; t < 2; t++)
        for (const cli_opt_t *o = tables[t]; o && o->name; o++) {
            if (!len || strncmp(o->name, name, len))
                continue;
            if (strlen(o->name) == len) {
                *slot = (size_t)(o - tables[t]) + (t ? 64 : 0);
                return o;
            }
            if (!hit || hit->key != o->key)
                hits++;
            hit = o;
            *slot = (size_t)(o - tables[t]) + (t ? 64 : 0);
        }
    if (hits == 1)
        return hit;
    char shown[64];
    snprintf(shown, sizeof shown, "%.*s", (int)(len < 48 ? len : 48), name);
    usage_error(c, hits ? "--%s is ambiguous%s" : "unknown option '--%s'%s", shown, "");
    return NULL;
}

static const cli_opt_t *find_short(const cli_opt_t *opts, int ch, size_t *slot)
{
    const cli_opt_t *tables[2] = {opts, global_opts};
    for (int t = 0; t < 2; t++)
        for (const cli_opt_t *o = tables[t]; o && o->name; o++)
            if (o->key == ch && ch < 256) {
                *slot = (size_t)(o - tables[t]) + (t ? 64 : 0);
                return o;
            }
    return NULL;
}

/* One option found: a global one is handled here, a command's goes to fn. -1 to go on, else
 * the exit status. */
static int apply(cli_ctx_t *c, const cli_opt_t *o, size_t slot, const char *val, cli_opt_fn fn, void *st,
                 const char *usage, unsigned char *seen)
{
    /* a value given twice is a mistake (which one was meant?), not a silent override */
    if (o->arg && slot < 96) {
        if (seen[slot])
            return usage_error(c, "--%s is given twice%s", o->name, "");
        seen[slot] = 1;
    }
    if (slot < 64) {
        int rc = fn ? fn(c, st, o->key, val) : 0;
        return rc ? rc : -1;
    }
    switch (o->key) {
    case G_JSON: c->json = 1; cli_global.json = 1; rep_color = 0; return -1;
    case G_HELP: fputs(usage, stdout); return cli_finish(c, CLI_OK);
    case G_COLOR: return cli_set_color(val) ? CLI_FAIL : -1;
    case G_NO_SYMBOLS: cli_global.no_symbols = 1; sym_set_enabled(0); return -1;
    case G_SYMBOL_PATH: sym_set_search_path(val); return -1;
    default: return -1;
    }
}

/* The expanded operand lists, kept to the end of the process (the commands hold c->args). */
static char **expanded[4];
static int nexpanded[4], expansions;

static void cli_free_expanded(void)
{
    for (int i = 0; i < expansions; i++)
        ranks_args_free(expanded[i], nexpanded[i]);
    expansions = 0;
}

int cli_expand_dirs(int n, char **args, char ***out, int *nout)
{
    *out = args;
    *nout = n;
    int dirs = 0;
    for (int i = 0; i < n && !dirs; i++) {
        struct stat st;
        dirs = stat(args[i], &st) == 0 && S_ISDIR(st.st_mode);
    }
    if (!dirs)
        return 0;
    if (expansions == (int)(sizeof expanded / sizeof expanded[0])) {
        fputs("gmshim: too many directories of logs\n", stderr);
        return -1;
    }
    if (ranks_expand_args(n, args, &expanded[expansions], &nexpanded[expansions]))
        return -1;
    if (!expansions)
        atexit(cli_free_expanded);
    *out = expanded[expansions];
    *nout = nexpanded[expansions++];
    return 0;
}

int cli_parse_args(cli_ctx_t *c, int argc, char **argv, const cli_opt_t *opts, cli_opt_fn fn, void *st,
                   const char *usage, unsigned flags)
{
    unsigned char seen[96] = {0};
    int k = 0, i = 1, rc;
    for (; i < argc; i++) {
        char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-' || !a[1]) { /* an operand ("-" included) */
            argv[1 + k++] = a;      /* in place: k + 1 <= i, already read */
            if (flags & CLI_ARGS_STOP) {
                i++;
                break;
            }
            continue;
        }
        if (a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t slot;
            const cli_opt_t *o = find_long(c, opts, a, &slot);
            if (!o)
                return CLI_FAIL;
            const char *val = NULL;
            if (o->arg) {
                if (eq)
                    val = eq + 1;
                else if (o->arg == CLI_ARG_OPTIONAL)
                    val = NULL; /* the next word is an operand, never this option's value */
                else if (i + 1 < argc)
                    val = argv[++i];
                else
                    return usage_error(c, "--%s needs a value%s", o->name, "");
            } else if (eq) {
                return usage_error(c, "--%s takes no value%s", o->name, "");
            }
            if ((rc = apply(c, o, slot, val, fn, st, usage, seen)) >= 0)
                return rc;
            continue;
        }
        for (const char *p = a + 1; *p; p++) { /* -jh, -n5, -n 5 */
            size_t slot;
            const cli_opt_t *o = find_short(opts, (unsigned char)*p, &slot);
            if (!o) {
                char opt[3] = {'-', *p, 0};
                return usage_error(c, "unknown option '%s'%s", opt, "");
            }
            const char *val = NULL;
            if (o->arg) {
                if (p[1])
                    val = p + 1;
                else if (i + 1 < argc)
                    val = argv[++i];
                else
                    return usage_error(c, "--%s needs a value%s", o->name, "");
            }
            if ((rc = apply(c, o, slot, val, fn, st, usage, seen)) >= 0)
                return rc;
            if (val)
                break;
        }
    }
    for (; i < argc; i++)
        argv[1 + k++] = argv[i];
    argv[1 + k] = NULL; /* execvp's list (run); argv[argc] is NULL already */
    c->args = argv + 1;
    c->nargs = k;
    if (c->json)
        rep_color = 0;
    if ((flags & CLI_ARGS_LOGS) && !k) {
        fprintf(stderr, "gmshim %s: no log given\n%s", c->command, usage);
        return CLI_FAIL;
    }
    /* a directory stands for its *.gmlog files, for every command as for report */
    if ((flags & CLI_ARGS_LOGS) && !(flags & CLI_ARGS_RUNS) && cli_expand_dirs(c->nargs, c->args, &c->args, &c->nargs))
        return CLI_FAIL;
    if ((flags & CLI_ARGS_WRAP) && !c->json && c->out == stdout && !c->wrap) {
        c->wrap = rep_wrap_open(stdout, cli_text_width());
        if (c->wrap)
            c->out = c->wrap;
    }
    return -1;
}

int cli_common_opt(cli_ctx_t *c, void *st, int key, const char *val)
{
    (void)st;
    switch (key) {
    case 'n': return cli_parse_count(c->command, "--top", val, &c->top) ? CLI_FAIL : 0;
    case 'd': return cli_parse_count(c->command, "--depth", val, &c->depth) ? CLI_FAIL : 0;
    case 'F':
        if (!strcmp(val, "all") || !strcmp(val, "folded")) {
            c->frames_all = !strcmp(val, "all");
            return 0;
        }
        fprintf(stderr, "gmshim %s: --frames %s: use all or folded\n", c->command, val);
        return CLI_FAIL;
    default: return 0;
    }
}

int cli_parse_common(cli_ctx_t *c, int argc, char **argv, const char *usage, unsigned which)
{
    cli_opt_t opts[4];
    int n = 0;
    if (which & CLI_OPT_TOP)
        opts[n++] = (cli_opt_t){"top", 'n', 1};
    if (which & CLI_OPT_DEPTH)
        opts[n++] = (cli_opt_t){"depth", 'd', 1};
    if (which & CLI_OPT_FRAMES)
        opts[n++] = (cli_opt_t){"frames", 'F', 1};
    opts[n] = (cli_opt_t){NULL, 0, 0};
    /* dump's lines are records, one a line: never wrapped */
    unsigned flags = CLI_ARGS_LOGS | (strcmp(c->command, "dump") ? CLI_ARGS_WRAP : 0);
    return cli_parse_args(c, argc, argv, opts, cli_common_opt, NULL, usage, flags);
}
