/* The gmshim command-line analyzer: the global options (--help, --version, --json, --color),
 * parsed by cli_parse_args like every command's own, then the command from the table
 * (commands.c). Only this file has main(); it must stay free of report logic so that the tests
 * and the fuzzer link the rest. */
#include "commands.h"
#include "output.h"
#include "symbolize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    for (size_t i = 0; i < cmd_count; i++)
        fprintf(f, "  %-10s %s\n", cmd_table[i].name, cmd_table[i].summary);
    fprintf(f, "\nglobal options (before or after the command; options and logs in any order, '--' ends\n"
               "the options):\n"
               "  -j, --json            JSON output (every report)\n"
               "      --color[=WHEN]    colour the text: auto (a terminal, the default), always (a bare\n"
               "                        --color), never; a non-empty NO_COLOR turns auto off\n"
               "      --no-symbols      do not read the programs' files to name native frames\n"
               "      --symbol-path DIRS  colon-separated directories searched (by file name and build id)\n"
               "                        for modules whose recorded path is missing or changed;\n"
               "                        default $GMSHIM_SYMBOL_PATH\n"
               "  -V, --version         the version\n"
               "  -h, --help            this text\n\n"
               "'gmshim help COMMAND' or 'gmshim COMMAND --help' describes a command; docs/cli.md has it all.\n"
               "Exit status: 0 success, 1 error (bad usage, an unreadable log), 2 a report from a damaged\n"
               "(partial) log, or a mark that is not in the log; 3 'gmshim whatif': no setting tried\n"
               "gets the recording past its OOM; 'gmshim run' exits with the command's status (2 when\n"
               "it cannot start it: no writable log directory); 'gmshim diff', as diff(1) does: 1 a\n"
               "--fail-above gate exceeded, 2 bad usage or an unreadable or damaged log.\n"
               "Text wraps at the terminal's width (100 columns when stdout is not a terminal).\n"
               "Environment: GMSHIM_ANALYZER_THREADS=N threads read a large log (64 MiB or more) in\n"
               "parallel, 0 = one thread in order (default: up to 8 for summary, 4 for report, leaks, oom,\n"
               "which also make their call-site figures in two more).\n");
    fclose(f);
    return usage_text;
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
        const cmd_t *c = what ? cmd_find(what) : NULL;
        if (!what || (c && !c->main && !c->usage)) {
            fputs(usage(), stdout);
            return finish(0);
        }
        if (!c) {
            fprintf(stderr, "gmshim: no command '%s'; 'gmshim --help' lists them\n", what);
            return 1;
        }
        char *hargv[] = {(char *)c->name, "--help", NULL};
        return finish(cmd_main(c, 2, hargv));
    }
    const cmd_t *c = cmd_find(name);
    if (!c || (!c->main && !c->usage)) {
        fprintf(stderr, "gmshim: no command '%s'; 'gmshim --help' lists them\n", name);
        return 1;
    }
    rc = cmd_main(c, cargc, cargv);
    sym_reset();
    sym_set_search_path(NULL);
    return finish(rc);
}
