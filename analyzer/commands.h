/* The commands of the gmshim CLI and the report sections they share. The command table
 * (commands.c, bpftool's descriptors) holds each command's name, help, options and per-log text
 * and JSON functions, run by one frame; each rep_* writes one section for one log to the
 * context's stream, as text or into the open JSON log object. */
#ifndef GM_COMMANDS_H
#define GM_COMMANDS_H

#include "cli.h"

typedef struct leaks_opts {
    int at_mark;              /* the report is at a mark, not at the end */
    int missing;              /* logs that lack the mark asked for (exit 2) */
    const char *at_label;
    unsigned top;
} leaks_opts_t;

/* ---- the command table ---- */
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
};

extern const cmd_t cmd_table[];
extern const size_t cmd_count;
/* The command of that name, or NULL. */
const cmd_t *cmd_find(const char *name);
/* Runs a command (argv[0] its name); returns the exit status. */
int cmd_main(const cmd_t *cmd, int argc, char **argv);

/* The commands' parts that the table names. */
extern const char cmd_report_usage[], cmd_summary_usage[], cmd_leaks_usage[], cmd_frag_usage[];
extern const char cmd_dump_usage[], cmd_run_usage[];
void cmd_report_text(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg);
void cmd_report_json(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg);
int cmd_report_before(cmd_call_t *k);
int cmd_report_after(cmd_call_t *k, int rc);
void cmd_summary_text(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg);
void cmd_summary_json(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg);
int cmd_leaks_opt(cli_ctx_t *c, void *st, int key, const char *val);
void cmd_leaks_text(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg);
void cmd_leaks_json(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg);
int cmd_leaks_after(cmd_call_t *k, int rc);
void cmd_frag_text(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg);
void cmd_frag_json(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg);
enum { CMD_RUN_NO_REPORT = 0x200 };  /* run's --no-report, a key without a letter */
int cmd_run_opt(cli_ctx_t *c, void *st, int key, const char *val);
int cmd_run_go(cmd_call_t *k);
/* Frames of their own (their files' owners may move them onto descriptors). */
int cmd_oom(int argc, char **argv);
int cmd_timeline(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_whatif(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_top(int argc, char **argv);

/* Sections. */
void rep_summary_text(cli_ctx_t *c, const model_t *m);
void rep_summary_json(cli_ctx_t *c, const model_t *m);   /* "devices": [...] */
void rep_summary_device_json(json_t *j, const model_t *m, const model_dev_t *d);

void rep_leaks_text(cli_ctx_t *c, const model_t *m, const leaks_opts_t *o);
void rep_leaks_json(cli_ctx_t *c, const model_t *m, const leaks_opts_t *o); /* "leaks": [...] */

void rep_frag_text(cli_ctx_t *c, const model_t *m, int over_time);
void rep_frag_json(cli_ctx_t *c, const model_t *m, int over_time);         /* "fragmentation": [...] */

void rep_oom_text(cli_ctx_t *c, const model_t *m);
void rep_oom_json(cli_ctx_t *c, const model_t *m);                        /* "ooms", "retries" */

/* The OOM causes (docs/cli.md has the rules). */
typedef enum oom_cause {
    OOM_CAPACITY,
    OOM_TRANSIENT,
    OOM_LEAK,
    OOM_FRAGMENTATION,
    OOM_OUTSIDE,
} oom_cause_t;

typedef struct oom_verdict {
    oom_cause_t cause;
    uint64_t request;         /* bytes asked for, rounded to the pool's 512 */
    uint64_t available;       /* what the device gives this process */
    uint64_t outside;         /* device memory the pool does not hold */
    uint64_t pool_free;       /* reserved - allocated at the failure */
    uint64_t growth;          /* leak: low-water growth over the epochs */
    uint64_t growth_per_epoch;
    int under_limit;          /* GMSHIM_DEVICE_LIMIT refused it, or PyTorch's memory fraction: */
    int torch_limit;          /* the cap is PyTorch's (available = fraction x total) */
    uint64_t total;           /* the device */
    char why[512];            /* one sentence of evidence */
} oom_verdict_t;
const char *oom_cause_name(oom_cause_t c);
void oom_classify(const model_t *m, const model_oom_t *o, oom_verdict_t *v);

/* Writes the timeline of a log as a self-contained SVG or HTML page. */
int rep_timeline_write(FILE *f, const rd_log_t *lf, const model_t *m, int html);

/* Dumps every record (text, or one JSON object per line); returns the exit status. */
int rep_dump(cli_ctx_t *c, rd_log_t *lf);

#endif
