/* What a command of the gmshim CLI is (bpftool's descriptors) and the one frame that runs one:
 * its options parsed, then each log opened, replayed and reported between the shared header
 * and the diagnostics. It names no command: the table (commands.c) does, from above. */
#ifndef GM_FRAME_H
#define GM_FRAME_H

#include "cli.h"

typedef struct leaks_opts {
    int at_mark;              /* the report is at a mark, not at the end */
    int missing;              /* logs that lack the mark asked for (exit 2) */
    const char *at_label;
    unsigned top;
} leaks_opts_t;

typedef struct cmd cmd_t;

/* One run of a command through the shared frame: its context and what its options set. */
typedef struct cmd_call {
    const cmd_t *cmd;
    cli_ctx_t c;
    leaks_opts_t leaks;       /* leaks, report: --at, --top (the site reports' options) */
    const char *output;       /* run: -o LOG */
    int no_report;            /* run: --no-report */
    char **logs;              /* the logs to read: c.args, or what `before` made of them */
    int nlogs;
    void *priv;               /* what a command's `before` keeps for its `after` */
} cmd_call_t;

/* A command (bpftool's descriptors): adding one is one entry in cmd_table. Either `main`, a
 * frame of its own, or the shared one: options parsed (the global ones come with every
 * command), then `go`, or each log read — `raw` without a model, else replayed with `model`
 * flags and reported by `text` or `json` (arg: the cmd_call_t) between the shared header and
 * the diagnostics. */
struct cmd {
    const char *name;
    const char *summary;      /* its line in `gmshim --help` */
    int (*main)(int argc, char **argv);
    const char *usage;        /* `gmshim NAME --help` */
    const cli_opt_t *opts;    /* its own options, {NULL} ended; NULL: none */
    cli_opt_fn opt;           /* st: the cmd_call_t; NULL: cli_common_opt (--top, --depth, --frames) */
    unsigned args;            /* CLI_ARGS_* */
    int progress;             /* progress on stderr for a large log when stderr is a terminal */
    unsigned top, depth;      /* defaults of --top and --depth; 0: cli_init's */
    unsigned model;           /* MODEL_* */
    cli_log_fn text, json;
    int (*before)(cmd_call_t *k);          /* after the options: -1 to go on, or the exit status */
    int (*after)(cmd_call_t *k, int rc);   /* the exit status, from the logs' */
    int (*raw)(cli_ctx_t *c, rd_log_t *lf);
    int (*go)(cmd_call_t *k);
    const cmd_t *then;        /* run: the command it runs on the logs after the job (report) */
};

/* Runs a command (argv[0] its name); returns the exit status. */
int cmd_main(const cmd_t *cmd, int argc, char **argv);

#endif
