/* The commands of the gmshim CLI and the report sections they share. Each cmd_* parses its own
 * options (getopt_long) and returns an exit status; each rep_* writes one section for one log
 * to the context's stream, as text or into the open JSON log object. */
#ifndef GM_COMMANDS_H
#define GM_COMMANDS_H

#include "cli.h"

/* Settings main() parsed before the command name. */
typedef struct cli_global {
    int json;
    int no_symbols;
} cli_global_t;
extern cli_global_t cli_global;

int cmd_report(int argc, char **argv);
int cmd_summary(int argc, char **argv);
int cmd_leaks(int argc, char **argv);
int cmd_frag(int argc, char **argv);
int cmd_oom(int argc, char **argv);
int cmd_timeline(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_whatif(int argc, char **argv);

/* Sections. */
void rep_summary_text(cli_ctx_t *c, const model_t *m);
void rep_summary_json(cli_ctx_t *c, const model_t *m);   /* "devices": [...] */
void rep_summary_device_json(json_t *j, const model_t *m, const model_dev_t *d);

typedef struct leaks_opts {
    int at_mark;              /* the report is at a mark, not at the end */
    int missing;              /* logs that lack the mark asked for (exit 2) */
    const char *at_label;
    unsigned top;
} leaks_opts_t;
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
    int under_limit;          /* GMSHIM_DEVICE_LIMIT refused it */
    char why[512];            /* one sentence of evidence */
} oom_verdict_t;
const char *oom_cause_name(oom_cause_t c);
void oom_classify(const model_t *m, const model_oom_t *o, oom_verdict_t *v);

/* Writes the timeline of a log as a self-contained SVG or HTML page. */
int rep_timeline_write(FILE *f, const rd_log_t *lf, const model_t *m, int html);

/* Dumps every record (text, or one JSON object per line); returns the exit status. */
int rep_dump(cli_ctx_t *c, rd_log_t *lf);

#endif
