/* `gmshim report`: one page per log with the summary, the top leaks, fragmentation at the peak
 * and every OOM with its cause and remedies; the sections are the other reports' own. It adds
 * no figures of its own, so it cannot disagree with them. */
#include "frag.h"
#include "leaks.h"
#include "oom.h"
#include "output.h"
#include "planrep.h"
#include "ranks.h"
#include "ranks_dir.h"
#include "report.h"
#include "summary.h"

#include <stdlib.h>

typedef struct verdict {
    ranks_log_t *r;
    int n;
} verdict_t;

static void report_verdict(cli_ctx_t *c, void *arg)
{
    verdict_t *v = arg;
    ranks_report(c, v->r, v->n);
}

void cmd_report_json(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg)
{
    (void)lf;
    cmd_call_t *o = arg;
    rep_summary_json(c, m);
    rep_leaks_json(c, m, &o->leaks);
    rep_frag_json(c, m, 0);
    rep_plan_json(c, m);
    rep_oom_json(c, m);
}

void cmd_report_text(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg)
{
    (void)lf;
    cmd_call_t *o = arg;
    FILE *f = c->out;
    fputc('\n', f);
    rep_heading(f, "Summary");
    rep_summary_text(c, m);
    fputc('\n', f);
    rep_heading(f, "Live at the end (top %u sites)", o->leaks.top);
    rep_leaks_text(c, m, &o->leaks);
    fputc('\n', f);
    rep_heading(f, "Fragmentation at the peak");
    rep_frag_text(c, m, 0);
    fputc('\n', f);
    rep_heading(f, "Floor and plan at the peak");
    rep_plan_text(c, m);
    fputc('\n', f);
    rep_heading(f, "Out of memory");
    rep_oom_text(c, m);
}

/* The logs: a directory stands for its *.gmlog files; a job's open with the cross-rank verdict. */
int cmd_report_before(cmd_call_t *k)
{
    if (ranks_expand_args(k->c.nargs, k->c.args, &k->logs, &k->nlogs))
        return CLI_FAIL;
    verdict_t *v = calloc(1, sizeof *v);
    if (v && ranks_wanted(k->nlogs, k->logs) && (v->r = calloc((size_t)k->nlogs, sizeof *v->r))) {
        v->n = k->nlogs;
        ranks_collect(k->nlogs, k->logs, v->r);
        k->c.prologue = report_verdict;
        k->c.prologue_arg = v;
    }
    k->priv = v;
    return -1;
}

int cmd_report_after(cmd_call_t *k, int rc)
{
    verdict_t *v = k->priv;
    if (v)
        free(v->r);
    free(v);
    ranks_args_free(k->logs, k->nlogs);
    return rc;
}

const char cmd_report_usage[] =
    "usage: gmshim report [--top N] [--depth N] [--frames all] [--json] LOG...\n"
    "\n"
    "Everything on one page, per log: the summary, the call sites still live at the end and those\n"
    "that grow, fragmentation at the peak, and every OOM with its cause and remedies. Several logs\n"
    "(one per rank) give a section each and a combined line.\n"
    "\n"
    "The logs of a job (several logs, a directory given for its *.gmlog files, or a log with a rank)\n"
    "open with a verdict, one per run when the logs hold several (told apart by their torchrun and\n"
    "Slurm variables, ranks and times): the first failure in wall-clock order (rank, host, device,\n"
    "time; an OOM with its cause and site, a fatal signal), how each other rank ended and how long\n"
    "after, the ranks of WORLD_SIZE without a log, and a table of peaks per rank with the outlier\n"
    "named. A log never closed (killed) has no known end, only its last sign of life: it is never\n"
    "first on the strength of it, and the order is said uncertain, with the reason, where it could\n"
    "be otherwise. Across hosts, clocks are assumed NTP-synchronised (within 100 ms).\n"
    "\n"
    "  -n, --top N     sites listed per device (default 5; 0: all)\n"
    "  -d, --depth N   lines of frames shown per site (default 8; 0: all)\n"
    "      --frames all  under a Python line, show each frame inside PyTorch and CUDA libraries\n"
    "                  (default folded: one line per run of them)\n"
    "  -j, --json      one JSON document (the summary, leaks, fragmentation and oom fields)\n"
    "  -h, --help      this text\n";
