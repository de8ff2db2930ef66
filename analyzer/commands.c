/* The command table (bpftool's descriptors): adding a command is one entry here; it holds no
 * report and no frame of its own (frame.c runs a command). */
#include "commands.h"

#include <stdlib.h>
#include <string.h>

static const cli_opt_t report_opts[] = {{"top", 'n', 1}, {"depth", 'd', 1}, {"frames", 'F', 1}, {NULL, 0, 0}};
static const cli_opt_t leaks_opts[] = {
    {"at", 'a', 1}, {"top", 'n', 1}, {"depth", 'd', 1}, {"frames", 'F', 1}, {NULL, 0, 0},
};
static const cli_opt_t run_opts[] = {{"output", 'o', 1}, {"no-report", CMD_RUN_NO_REPORT, 0}, {NULL, 0, 0}};

#define WRAPPED_LOGS (CLI_ARGS_LOGS | CLI_ARGS_WRAP)

const cmd_t cmd_table[] = {
    {.name = "report",
     .summary = "everything on one page: summary, leaks, fragmentation at the peak, OOM causes",
     .usage = cmd_report_usage, .opts = report_opts, .args = WRAPPED_LOGS, .progress = 1, .top = 5, .depth = 8,
     .model = MODEL_SITES | MODEL_EPOCHS, .text = cmd_report_text, .json = cmd_report_json,
     .before = cmd_report_before, .after = cmd_report_after},
    {.name = "summary",
     .summary = "per device: counts, peaks, cache hit rate, driver calls and time saved",
     .usage = cmd_summary_usage, .args = WRAPPED_LOGS, .progress = 1, .model = 0,
     .text = cmd_summary_text, .json = cmd_summary_json},
    {.name = "leaks",
     .summary = "allocations live at the end (or at a mark) by call site; sites that grow",
     .usage = cmd_leaks_usage, .opts = leaks_opts, .opt = cmd_leaks_opt, .args = WRAPPED_LOGS, .progress = 1,
     .top = 10, .depth = 12, .model = MODEL_SITES | MODEL_EPOCHS, .text = cmd_leaks_text,
     .json = cmd_leaks_json, .after = cmd_leaks_after},
    {.name = "frag",
     .summary = "fragmentation over time, at the peak and at each OOM",
     .usage = cmd_frag_usage, .args = WRAPPED_LOGS, .progress = 1,
     .model = MODEL_FRAG | MODEL_EPOCHS | MODEL_SITES, .text = cmd_frag_text, .json = cmd_frag_json},
    {.name = "oom",
     .summary = "each out-of-memory failure: what was asked, what there was, the cause, remedies",
     .main = cmd_oom},
    {.name = "whatif",
     .summary = "replay a log under other settings: smallest device, a tested recommendation",
     .main = cmd_whatif},
    {.name = "diff",
     .summary = "two runs (logs or job directories) compared: peaks, sites, a CI gate (--fail-above)",
     .main = cmd_diff},
    {.name = "top",
     .summary = "follow running logs (or a PID's): figures, peaks, sites, steps/s, leak warning",
     .main = cmd_top},
    {.name = "timeline",
     .summary = "allocated and reserved over time as an SVG or HTML page",
     .main = cmd_timeline},
    {.name = "dump",
     .summary = "every record as text or JSON lines, with the header and metadata",
     .usage = cmd_dump_usage, .args = CLI_ARGS_LOGS, .progress = 1,
     .raw = rep_dump}, /* one record a line: never wrapped */
    {.name = "export",
     .summary = "a log for Perfetto (trace JSON) or PyTorch's memory_viz (snapshot pickle)",
     .main = cmd_export},
    {.name = "run",
     .summary = "run a command under gmshim, then report on the logs it wrote",
     .usage = cmd_run_usage, .opts = run_opts, .opt = cmd_run_opt, .args = CLI_ARGS_STOP, .go = cmd_run_go,
     .then = &cmd_table[0]}, /* report */
    {.name = "help", .summary = "help on gmshim or on one command"}, /* main.c answers it */
};

const size_t cmd_count = sizeof cmd_table / sizeof cmd_table[0];

const cmd_t *cmd_find(const char *name)
{
    for (size_t i = 0; i < cmd_count; i++)
        if (!strcmp(cmd_table[i].name, name))
            return &cmd_table[i];
    return NULL;
}
