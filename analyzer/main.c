/* The gmshim command-line analyzer: one table of commands, one dispatcher, the global options
 * (--help, --version, --json, --color), parsed by cli_parse_args like every command's own. Only this file
 * has main(); it must stay free of report logic so that the tests and the fuzzer link the rest. */
#include "commands.h"
#include "output.h"
#include "symbolize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} command_t;

static const command_t commands[] = {
    {"report", cmd_report, "everything on one page: summary, leaks, fragmentation at the peak, OOM causes"},
    {"summary", cmd_summary, "per device: counts, peaks, cache hit rate, driver calls and time saved"},
    {"leaks", cmd_leaks, "allocations live at the end (or at a mark) by call site; sites that grow"},
    {"frag", cmd_frag, "fragmentation over time, at the peak and at each OOM"},
    {"oom", cmd_oom, "each out-of-memory failure: what was asked, what there was, the cause, remedies"},
    {"timeline", cmd_timeline, "allocated and reserved over time as an SVG or HTML page"},
    {"dump", cmd_dump, "every record as text or JSON lines, with the header and metadata"},
    {"run", cmd_run, "run a command under gmshim, then report on the logs it wrote"},
    {"whatif", cmd_whatif, "replay a log under other settings: smallest device, a tested recommendation"},
    {"help", NULL, "help on gmshim or on one command"},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

static char usage_text[4096];

static const char *usage(void)
{
    if (usage_text[0])
        return usage_text;
    FILE *f = fmemopen(usage_text, sizeof usage_text - 1, "w");
    if (!f)
        return "usage: gmshim [--json] [--color=WHEN] [--no-symbols] [--symbol-path DIRS] COMMAND [ARGS]\n";
    fprintf(f, "usage: gmshim [--json] [--color=WHEN] [--no-symbols] [--symbol-path DIRS] COMMAND [ARGS]\n"
               "       gmshim --help | --version | help COMMAND | COMMAND --help\n\n"
               "Reads the event logs that libgmshim.so writes (GMSHIM_LOG) and reports on them.\n\n"
               "commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nglobal options (before or after the command; options and logs in any order, '--' ends\n"
               "the options):\n"
               "  -j, --json            JSON output (every report)\n"
               "      --color=WHEN      colour the text: auto (a terminal, the default), always, never\n"
               "      --no-symbols      do not read the programs' files to name native frames\n"
               "      --symbol-path DIRS  colon-separated directories searched (by file name and build id)\n"
               "                        for modules whose recorded path is missing or changed;\n"
               "                        default $GMSHIM_SYMBOL_PATH\n"
               "  -V, --version         the version\n"
               "  -h, --help            this text\n\n"
               "'gmshim help COMMAND' or 'gmshim COMMAND --help' describes a command; docs/cli.md has it all.\n"
               "Exit status: 0 success, 1 error (bad usage, an unreadable log), 2 a report from a damaged\n"
               "(partial) log, or a mark that is not in the log; 'gmshim run' exits with the command's\n"
               "status (2 when it cannot start it: no writable log directory).\n"
               "Text wraps at the terminal's width (100 columns when stdout is not a terminal).\n"
               "Environment: GMSHIM_ANALYZER_THREADS=N threads read a large log (64 MiB or more) in\n"
               "parallel, 0 = one thread in order (default: up to 8 for summary, 4 for report, leaks, oom,\n"
               "which also make their call-site figures in two more).\n");
    fclose(f);
    return usage_text;
}

static const command_t *find(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(commands[i].name, name))
            return &commands[i];
    return NULL;
}

static int finish(int rc)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("gmshim: error writing the output");
        return 1;
    }
    return rc;
}

static int main_opt(cli_ctx_t *c, void *st, int key, const char *val)
{
    (void)c, (void)val;
    if (key == 'V')
        *(int *)st = 1;
    return 0;
}

int main(int argc, char **argv)
{
    static const cli_opt_t opts[] = {{"version", 'V', 0}, {NULL, 0, 0}};
    cli_ctx_t g;
    cli_init(&g, stdout, stderr, NULL);
    if (cli_set_color("auto"))
        return 1;
    sym_set_search_path(getenv("GMSHIM_SYMBOL_PATH"));
    int version = 0;
    int rc = cli_parse_args(&g, argc, argv, opts, main_opt, &version, usage(), CLI_ARGS_STOP);
    if (rc >= 0)
        return rc;
    if (version) {
        printf("gmshim %s (log format %d)\n", GMSHIM_VERSION_STRING, GMLOG_VERSION);
        return finish(0);
    }
    if (!g.nargs) {
        fputs(usage(), stderr);
        return 1;
    }
    /* the command's own arguments: its name, then everything after it */
    int cargc = g.nargs;
    char **cargv = g.args;
    const char *name = cargv[0];
    if (!strcmp(name, "help")) {
        /* `help`, `help help`, `help --help`, `help CMD` */
        const char *what = NULL;
        for (int i = 1; i < cargc && !what; i++)
            if (strcmp(cargv[i], "--help") && strcmp(cargv[i], "-h") && strcmp(cargv[i], "--"))
                what = cargv[i];
        const command_t *c = what ? find(what) : NULL;
        if (!what || (c && !c->fn)) {
            fputs(usage(), stdout);
            return finish(0);
        }
        if (!c) {
            fprintf(stderr, "gmshim: no command '%s'; 'gmshim --help' lists them\n", what);
            return 1;
        }
        char *hargv[] = {(char *)c->name, "--help", NULL};
        return finish(c->fn(2, hargv));
    }
    const command_t *c = find(name);
    if (!c || !c->fn) {
        fprintf(stderr, "gmshim: no command '%s'; 'gmshim --help' lists them\n", name);
        return 1;
    }
    rc = c->fn(cargc, cargv);
    sym_reset();
    sym_set_search_path(NULL);
    return finish(rc);
}
