/* The gmshim command-line analyzer: one table of commands, one dispatcher, the global options
 * (--help, --version, --json, --color). Each command parses its own options. Only this file
 * has main(); it must stay free of report logic so that the tests and the fuzzer link the rest. */
#include "commands.h"
#include "output.h"
#include "symbolize.h"

#include <getopt.h>
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
    {"help", NULL, "help on gmshim or on one command"},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: gmshim [--json] [--color=WHEN] [--no-symbols] [--symbol-path DIRS] COMMAND [ARGS]\n"
               "       gmshim --help | --version | help COMMAND\n\n"
               "Reads the event logs that libgmshim.so writes (GMSHIM_LOG) and reports on them.\n\n"
               "commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nglobal options:\n"
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
               "(partial) log; 'gmshim run' exits with the command's status.\n"
               "Environment: GMSHIM_ANALYZER_THREADS=N threads read a large log (64 MiB or more) in\n"
               "parallel, 0 = one thread in order (default: up to 8 for summary, 4 for report, leaks, oom,\n"
               "which also make their call-site figures in two more).\n");
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

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"color", required_argument, NULL, 'c'},
        {"colour", required_argument, NULL, 'c'},
        {"no-symbols", no_argument, NULL, 'S'},
        {"symbol-path", required_argument, NULL, 'P'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *color = "auto";
    const char *symbol_path = getenv("GMSHIM_SYMBOL_PATH");
    int opt;
    while ((opt = getopt_long(argc, argv, "+jVh", opts, NULL)) != -1) {
        switch (opt) {
        case 'j': cli_global.json = 1; break;
        case 'c': color = optarg; break;
        case 'S': cli_global.no_symbols = 1; break;
        case 'P': symbol_path = optarg; break;
        case 'V': printf("gmshim %s (log format %d)\n", GMSHIM_CLI_VERSION, GMLOG_VERSION); return finish(0);
        case 'h': usage(stdout); return finish(0);
        default: usage(stderr); return 1;
        }
    }
    if (!strcmp(color, "always")) {
        rep_color = 1;
    } else if (!strcmp(color, "never")) {
        rep_color = 0;
    } else if (!strcmp(color, "auto")) {
        const char *term = getenv("TERM");
        rep_color = isatty(1) && !getenv("NO_COLOR") && term && strcmp(term, "dumb") != 0;
    } else {
        fprintf(stderr, "gmshim: --color=%s: use auto, always or never\n", color);
        return 1;
    }
    if (cli_global.json)
        rep_color = 0;
    sym_set_enabled(!cli_global.no_symbols);
    sym_set_search_path(symbol_path);
    if (optind >= argc) {
        usage(stderr);
        return 1;
    }
    const char *name = argv[optind];
    if (!strcmp(name, "help")) {
        if (optind + 1 >= argc) {
            usage(stdout);
            return finish(0);
        }
        const command_t *c = find(argv[optind + 1]);
        if (!c || !c->fn) {
            if (c) {
                usage(stdout);
                return finish(0);
            }
            fprintf(stderr, "gmshim: no command '%s'; 'gmshim --help' lists them\n", argv[optind + 1]);
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
    int rc = c->fn(argc - optind, argv + optind);
    sym_reset();
    sym_set_search_path(NULL);
    return finish(rc);
}
