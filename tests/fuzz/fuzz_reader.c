/* Fuzz target of the analyzer: the reader and every report (text and JSON, dump, timeline) on
 * arbitrary bytes held in memory, output to /dev/null. Built with libFuzzer when clang can link
 * it, else with tests/fuzz/standalone.c; either way a crash or sanitizer report is a bug. */
#include "commands.h"
#include "symbolize.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static FILE *sink;

static void each_report(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg)
{
    (void)arg;
    static const leaks_opts_t lo = {.top = 5};
    if (c->json) {
        rep_summary_json(c, m);
        rep_leaks_json(c, m, &lo);
        rep_frag_json(c, m, 1);
        rep_oom_json(c, m);
    } else {
        rep_summary_text(c, m);
        rep_leaks_text(c, m, &lo);
        rep_frag_text(c, m, 1);
        rep_oom_text(c, m);
        rep_timeline_write(c->out, lf, m, 0);
        rep_timeline_write(c->out, lf, m, 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!sink)
        sink = fopen("/dev/null", "w");
    if (!sink)
        return 0;
    for (int json = 0; json < 2; json++) {
        cli_ctx_t c;
        cli_init(&c, sink, sink, "fuzz");
        c.json = json;
        cli_run_mem(&c, data, size, MODEL_ALL, each_report, NULL);
        rd_log_t lf;
        if (rd_open_mem(&lf, data, size, "<fuzz>") == 0)
            rep_dump(&c, &lf);
        rd_close(&lf);
    }
    /* The summary's parallel replay (windows stitched), forced onto small inputs. */
    setenv("GMSHIM_ANALYZER_THREADS", "3", 1);
    {
        cli_ctx_t c;
        cli_init(&c, sink, sink, "fuzz");
        cli_run_mem(&c, data, size, 0, each_report, NULL);
    }
    unsetenv("GMSHIM_ANALYZER_THREADS");
    /* A mark that stops the replay early, as `leaks --at` does. */
    cli_ctx_t c;
    cli_init(&c, sink, sink, "fuzz");
    c.stop_mark_id = 2;
    c.stop_mark_label = "2";
    cli_run_mem(&c, data, size, MODEL_SITES | MODEL_EPOCHS | MODEL_TIMELINE, each_report, NULL);
    return 0;
}
