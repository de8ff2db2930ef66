/* What every command shares: the output context (stdout or a test's stream, text or JSON,
 * colour), the loop that opens each log, replays it and reports its problems, and the exit
 * status rules. A log that cannot be read is an error message, never a crash. */
#ifndef GM_CLI_H
#define GM_CLI_H

#include "json.h"
#include "model.h"
#include "reader.h"

#include <stdio.h>

#define GMSHIM_CLI_VERSION "0.1.0"

enum {
    CLI_OK = 0,
    CLI_FAIL = 1,              /* usage error, or a log that could not be read at all */
    CLI_PARTIAL = 2,           /* a report printed, but from an incomplete log */
};

typedef struct cli_ctx {
    FILE *out;
    FILE *err;                 /* diagnostics; stderr in the CLI */
    int json;
    json_t j;
    unsigned top;              /* sites listed per report */
    unsigned depth;            /* frames shown per site (0: all) */
    int progress;              /* progress on stderr for large logs */
    const char *command;
    int stop_mark_id;          /* replay only up to this mark (leaks --at) */
    const char *stop_mark_label;
    int nlogs;                 /* logs given */
    int index;                 /* the one being reported, from 0 */
    /* combined over the logs */
    uint64_t c_logs, c_allocs, c_frees, c_peak_req, c_peak_alloc, c_peak_res, c_hits, c_misses;
    uint64_t c_ooms, c_live_bytes, c_partial, c_failed;
} cli_ctx_t;

typedef void (*cli_log_fn)(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg);

void cli_init(cli_ctx_t *c, FILE *out, FILE *err, const char *command);
/* Opens, replays (with MODEL_* flags) and reports each log through fn, between the shared
 * per-log header and the diagnostics; then the combined line when there are several logs.
 * JSON: {"command", "version", "logs": [...], "combined"}. Returns the exit status. */
int cli_run_logs(cli_ctx_t *c, int n, char *const *paths, unsigned flags, cli_log_fn fn, void *arg);
/* The same on bytes in memory (the fuzzer). */
int cli_run_mem(cli_ctx_t *c, const void *data, size_t size, unsigned flags, cli_log_fn fn, void *arg);

/* A description of the header's close state: "closed at exit", "not closed (killed?)"... */
const char *cli_close_state(const rd_log_t *lf, const model_t *m, char *buf, size_t len);
/* "rank 3" or "pid 1234". */
const char *cli_log_name(const rd_log_t *lf, const model_t *m, char *buf, size_t len);

/* Parses a size ("512M", "1.5G", plain bytes); -1 when malformed. */
int cli_parse_size(const char *s, uint64_t *out);
/* Finishes output: flushes stdout and turns a write error into CLI_FAIL. */
int cli_finish(cli_ctx_t *c, int status);

/* A count option (--top N, --depth N): 0, or -1 after saying what is wrong. */
int cli_parse_count(const char *command, const char *option, const char *text, unsigned *out);
/* After a command's own options: -1 when logs follow (the first at argv[optind]), else the exit
 * status of "no log given". */
int cli_need_logs(const cli_ctx_t *c, int argc, const char *usage);

#define CLI_OPT_TOP 1u   /* the command takes --top N (into c->top) */
#define CLI_OPT_DEPTH 2u /* the command takes --depth N (into c->depth) */
/* The options of the commands that take no others: --json, --help and, as `which` says, --top
 * and --depth. Returns -1 to go on with the logs at argv[optind..], or an exit status to return
 * now (help shown, a usage error, no log). */
int cli_parse_common(cli_ctx_t *c, int argc, char **argv, const char *usage, unsigned which);

#endif
