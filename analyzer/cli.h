/* What every command shares: the output context (stdout or a test's stream, text or JSON,
 * colour), the loop that opens each log, replays it and reports its problems, and the exit
 * status rules. A log that cannot be read is an error message, never a crash. */
#ifndef GM_CLI_H
#define GM_CLI_H

#include "json.h"
#include "model.h"
#include "reader.h"
#include "version.h"

#include <stdio.h>


enum {
    CLI_OK = 0,
    CLI_FAIL = 1,              /* usage error, or a log that could not be read at all */
    CLI_PARTIAL = 2,           /* a report printed, but from an incomplete log */
};

/* Settings main() parsed before the command name. */
typedef struct cli_global {
    int json;
    int no_symbols;
} cli_global_t;
extern cli_global_t cli_global;

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
    char **args;               /* the operands after the options (logs; run: the command) */
    int nargs;
    int frames_all;            /* --frames all: no folding of library frames */
    FILE *wrap;                /* the line-wrapping stream over stdout, when out is it */
    int nlogs;                 /* logs given */
    int index;                 /* the one being reported, from 0 */
    /* combined over the logs */
    uint64_t c_logs, c_allocs, c_frees, c_peak_req, c_peak_alloc, c_peak_res, c_hits, c_misses;
    uint64_t c_ooms, c_live_bytes, c_partial, c_failed;
    /* what opens the output, before the first log (report's cross-rank verdict); JSON: members
     * of the top object before "logs" */
    void (*prologue)(struct cli_ctx *c, void *arg);
    void *prologue_arg;
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
/* The operands with each directory replaced by its *.gmlog files, sorted by name (as report
 * takes a job's directory); args itself when none is a directory. The list lives to the end
 * of the process. -1 after saying why (a directory without logs, one that cannot be read). */
int cli_expand_dirs(int n, char **args, char ***out, int *nout);
/* Finishes output: flushes stdout and turns a write error into CLI_FAIL. */
int cli_finish(cli_ctx_t *c, int status);
/* A log's problems on stderr, one `gmshim: PATH: byte N: ...` line each (at most RD_MAX_DIAGS). */
void cli_print_diags(cli_ctx_t *c, const rd_log_t *lf);

/* A count option (--top N, --depth N): 0, or -1 after saying what is wrong. */
int cli_parse_count(const char *command, const char *option, const char *text, unsigned *out);

/* One option of a command: its long name, its short letter (or a key above 255 when it has
 * none), whether it takes a value: 0 none, 1 one (`--name value` or `--name=value`),
 * CLI_ARG_OPTIONAL one only as `--name=value` (bare, the handler gets NULL). */
#define CLI_ARG_OPTIONAL 2
typedef struct cli_opt {
    const char *name;
    int key;
    int arg;
} cli_opt_t;
/* Called for each of a command's own options; 0 to go on, else the exit status (after saying
 * what is wrong on stderr). */
typedef int (*cli_opt_fn)(cli_ctx_t *c, void *st, int key, const char *val);

#define CLI_ARGS_LOGS 1u        /* the operands are logs: at least one is needed */
#define CLI_ARGS_STOP 2u        /* the first operand ends the options (run: the command follows) */
#define CLI_ARGS_WRAP 4u        /* a text report on stdout: wrap it at cli_text_width() */
#define CLI_ARGS_RUNS 8u        /* each operand is one run, a log or a directory: kept as given */
/* The one option parser of every command (and of main's global options): GNU style, options
 * and operands in any order, `--name=value`, `--name value`, `-xVALUE`, `-x value`, unambiguous
 * prefixes of long names, `--` ends the options. Besides `opts`, every command takes the global
 * options (--json, --color=WHEN, --no-symbols, --symbol-path DIRS, --help). An option with a
 * value given twice is an error. The operands, in order, go to c->args / c->nargs (argv is
 * reordered in place). Returns -1 to go on, or an exit status to return now (help shown, a
 * usage error, no log). */
int cli_parse_args(cli_ctx_t *c, int argc, char **argv, const cli_opt_t *opts, cli_opt_fn fn, void *st,
                   const char *usage, unsigned flags);
/* --color=WHEN: sets rep_color; -1 after a message when WHEN is not auto, always or never. */
int cli_set_color(const char *when);

/* The handler of --top N (key 'n', into c->top), --depth N ('d', c->depth) and --frames
 * all|folded ('F', c->frames_all); other keys are ignored. */
int cli_common_opt(cli_ctx_t *c, void *st, int key, const char *val);

#define CLI_OPT_TOP 1u    /* the command takes --top N (into c->top) */
#define CLI_OPT_DEPTH 2u  /* the command takes --depth N (into c->depth) */
#define CLI_OPT_FRAMES 4u /* the command takes --frames all|folded (into c->frames_all) */
/* The options of the commands that take no others: the global ones and, as `which` says, --top,
 * --depth and --frames. Returns -1 to go on with the logs in c->args, or an exit status to
 * return now (help shown, a usage error, no log). */
int cli_parse_common(cli_ctx_t *c, int argc, char **argv, const char *usage, unsigned which);

/* The width text reports wrap at: the terminal's, or 100 columns when stdout is not one. */
int cli_text_width(void);

#endif
