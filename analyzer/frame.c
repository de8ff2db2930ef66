/* The one frame that runs a command from its descriptor (frame.h): options, then each log
 * opened, replayed and reported between the shared header and the diagnostics. */
#include "frame.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const cli_opt_t no_opts[] = {{NULL, 0, 0}};

static void one_log(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg)
{
    const cmd_call_t *k = arg;
    (c->json ? k->cmd->json : k->cmd->text)(c, lf, m, arg);
}

/* Each log without a model: the exit status is the worst of theirs, 1 for one that cannot be
 * opened. */
static int raw_logs(cmd_call_t *k)
{
    int status = CLI_OK;
    for (int i = 0; i < k->c.nargs; i++) {
        rd_log_t *lf = calloc(1, sizeof *lf);
        if (!lf) {
            fputs("gmshim: out of memory\n", stderr);
            return CLI_FAIL;
        }
        if (rd_open_path(lf, k->c.args[i]) != 0) {
            fprintf(stderr, "gmshim: %s: byte %" PRIu64 ": %s\n", k->c.args[i], lf->diags[0].offset, lf->diags[0].msg);
            status = CLI_FAIL;
        } else {
            int rc = k->cmd->raw(&k->c, lf);
            if (rc > status && status != CLI_FAIL)
                status = rc;
        }
        rd_close(lf);
        free(lf);
    }
    return status;
}

int cmd_main(const cmd_t *cmd, int argc, char **argv)
{
    if (cmd->main)
        return cmd->main(argc, argv);
    cmd_call_t *k = calloc(1, sizeof *k);
    if (!k) {
        fputs("gmshim: out of memory\n", stderr);
        return CLI_FAIL;
    }
    k->cmd = cmd;
    cli_init(&k->c, stdout, stderr, cmd->name);
    k->c.json = cli_global.json;
    k->c.progress = cmd->progress && isatty(2);
    if (cmd->top)
        k->c.top = cmd->top;
    if (cmd->depth)
        k->c.depth = cmd->depth;
    int rc = cli_parse_args(&k->c, argc, argv, cmd->opts ? cmd->opts : no_opts, cmd->opt ? cmd->opt : cli_common_opt,
                            k, cmd->usage, cmd->args);
    if (rc < 0) {
        k->leaks.top = k->c.top;
        k->logs = k->c.args;
        k->nlogs = k->c.nargs;
        if (cmd->go) {
            rc = cmd->go(k);
        } else if (cmd->raw) {
            rc = cli_finish(&k->c, raw_logs(k));
        } else if ((rc = cmd->before ? cmd->before(k) : -1) < 0) {
            rc = cli_run_logs(&k->c, k->nlogs, k->logs, cmd->model, one_log, k);
            if (cmd->after)
                rc = cmd->after(k, rc);
            rc = cli_finish(&k->c, rc);
        } else {
            rc = cli_finish(&k->c, rc);
        }
    }
    free(k);
    return rc;
}
