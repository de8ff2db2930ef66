/* Fuzz target of the analyzer: the reader and every report (text and JSON, dump, timeline) on
 * arbitrary bytes held in memory, output to /dev/null; the commands that take a path (report,
 * whatif, both exports, the HTML timeline) on the same bytes through a memory file. Built with libFuzzer when clang can link it,
 * else with tests/fuzz/standalone.c; either way a crash or sanitizer report is a bug. */
#include "commands.h"
#include "symbolize.h"

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

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

/* The input as a file at *path (a memory file), for the commands that open their logs. */
static int as_file(const uint8_t *data, size_t size, char *path, size_t cap)
{
    static int fd = -1;
    if (fd < 0)
        fd = memfd_create("gmshim-fuzz", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
        return -1;
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return 0;
}

static void path_commands(const uint8_t *data, size_t size)
{
    char path[64];
    if (as_file(data, size, path, sizeof path))
        return;
    char *whatif[] = {"whatif", path, NULL};
    char *whatif_json[] = {"whatif", "--json", path, NULL};
    char *perfetto[] = {"export", "perfetto", "-o", "/dev/null", path, NULL};
    char *memviz[] = {"export", "memory-viz", "-o", "/dev/null", path, NULL};
    char *html[] = {"timeline", "--html", "/dev/null", path, NULL};
    char *report[] = {"report", path, NULL};
    char *report_json[] = {"report", "--json", path, NULL};
    char **const runs[] = {perfetto, memviz, html, report, report_json, whatif, whatif_json};
    /* whatif replays the log twenty times and more: one input in eight, picked by its bytes */
    size_t nruns = size && (data[size / 3] & 7) == 0 ? 7 : 5;
    for (size_t i = 0; i < nruns; i++) {
        int argc = 0;
        while (runs[i][argc])
            argc++;
        const cmd_t *cmd = cmd_find(runs[i][0]);
        cli_global.json = 0; /* --json sets it for the process */
        if (cmd)
            cmd_main(cmd, argc, runs[i]);
    }
    cli_global.json = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!sink) {
        sink = fopen("/dev/null", "w");
        /* the path commands print on stdout: to /dev/null too */
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            fflush(stdout);
            dup2(null, STDOUT_FILENO);
            close(null);
        }
    }
    if (!sink)
        return 0;
    path_commands(data, size);
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
