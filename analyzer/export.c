/* `gmshim export FORMAT`: a log in the format of a viewer people already use — perfetto (the
 * Chrome trace-event JSON that ui.perfetto.dev and chrome://tracing open) or memory-viz
 * (PyTorch's memory snapshot pickle, for pytorch.org/memory_viz and torch.cuda._memory_viz).
 * This file is the command: its subcommands, options and help; the writers are in
 * export_perfetto.c and export_memviz.c. */
#include "export.h"
#include "export_memviz.h"
#include "export_perfetto.h"
#include "sites.h"

#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: gmshim export perfetto [--resolution TIME] -o FILE LOG...\n"
    "       gmshim export memory-viz [--from MARK] [--to MARK] [--device N] [--min-size SIZE]\n"
    "                                [--python-frames first|only] -o FILE LOG\n"
    "\n"
    "Writes logs in the formats of the viewers people already use ('-' as FILE: stdout).\n"
    "\n"
    "perfetto    Chrome trace-event JSON for ui.perfetto.dev and chrome://tracing: one process per\n"
    "            log (rank, host, pid) on the wall clock, so that ranks line up; per device the\n"
    "            counters requested, allocated, reserved, cached, pending, the device total and the\n"
    "            memory outside the pool by library; OOMs (cause, request and evidence in their\n"
    "            args), cache releases and marks as instants; the epoch between two marks as a slice.\n"
    "  -r, --resolution TIME  counter bucket (ns, us, ms, s): each sample is the maximum over its\n"
    "                   bucket; 0 = every change; default auto: every change up to 100 000\n"
    "                   changes, else about 20 000 buckets a run (stated on stderr and in the trace)\n"
    "\n"
    "memory-viz  PyTorch's memory snapshot (a pickle: segments with blocks, device_traces, frames)\n"
    "            for pytorch.org/memory_viz and python -m torch.cuda._memory_viz: every block with\n"
    "            its Python and native frames, memory outside the pool as segments of its own with\n"
    "            the library as category, marks as annotations. Its x axis is the event index.\n"
    "  -f, --from MARK  trace events after this mark only (its number or label)\n"
    "  -t, --to MARK    stop after this mark: the segments are the state there\n"
    "  -d, --device N   only device N\n"
    "  -m, --min-size SIZE  leave out blocks smaller than SIZE (512K, 1M...): fewer events for the\n"
    "                   viewer, which slows past some 600 000; their bytes show as free space\n"
    "  -P, --python-frames first|only  each stack opens with its Python frames (first), or has\n"
    "                   only those (only; a site without any keeps its native frames); default:\n"
    "                   as PyTorch orders them, native frames innermost first, then Python's\n"
    "\n"
    "  -o, --output FILE  where to write (needed)\n"
    "  -h, --help       this text\n";

typedef struct ex_args {
    export_opts_t o;
    const char *perfetto_opt;     /* an option only perfetto takes, if given */
    const char *memviz_opt;       /* one only memory-viz takes */
} ex_args_t;

/* "1ms", "250us", "2s", "0", "1500" (ns). */
static int parse_time(const char *s, uint64_t *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return -1;
    double mul = 1;
    if (!strcmp(end, "s"))
        mul = 1e9;
    else if (!strcmp(end, "ms"))
        mul = 1e6;
    else if (!strcmp(end, "us"))
        mul = 1e3;
    else if (*end && strcmp(end, "ns"))
        return -1;
    if (v * mul > 1e18)
        return -1;
    *out = (uint64_t)(v * mul + 0.5);
    return 0;
}

static int export_opt(cli_ctx_t *c, void *st, int key, const char *val)
{
    (void)c;
    ex_args_t *a = st;
    static const char *const names[] = {['r'] = "--resolution", ['f'] = "--from", ['t'] = "--to",
                                        ['d'] = "--device", ['m'] = "--min-size", ['P'] = "--python-frames"};
    if (key == 'r')
        a->perfetto_opt = names[key];
    else if (key != 'o')
        a->memviz_opt = names[key];
    char *end;
    switch (key) {
    case 'o': a->o.out = val; return 0;
    case 'r':
        if (parse_time(val, &a->o.resolution_ns)) {
            fprintf(stderr, "gmshim export: --resolution %s: a time such as 1ms, 250us or 0\n", val);
            return CLI_FAIL;
        }
        return 0;
    case 'f': a->o.from = val; return 0;
    case 'P':
        a->o.python_frames = site_parse_python_frames("gmshim export", val);
        return a->o.python_frames < 0 ? CLI_FAIL : 0;
    case 't': a->o.to = val; return 0;
    case 'd': {
        long d = strtol(val, &end, 10);
        if (*end || !*val || d < 0 || d > 254) {
            fprintf(stderr, "gmshim export: --device %s: a device number, 0 to 254\n", val);
            return CLI_FAIL;
        }
        a->o.device = (int)d;
        return 0;
    }
    case 'm':
        if (cli_parse_size(val, &a->o.min_size)) {
            fprintf(stderr, "gmshim export: --min-size %s: a size such as 512K, 1M or 4096\n", val);
            return CLI_FAIL;
        }
        return 0;
    default: return 0;
    }
}

int cmd_export(int argc, char **argv)
{
    static const cli_opt_t opts[] = {{"output", 'o', 1}, {"resolution", 'r', 1}, {"from", 'f', 1},
                                     {"to", 't', 1},     {"device", 'd', 1},     {"min-size", 'm', 1},
                                     {"python-frames", 'P', 1}, {NULL, 0, 0}};
    ex_args_t a = {.o = {NULL, UINT64_MAX, NULL, NULL, -1, 0}};
    cli_ctx_t c;
    cli_init(&c, stdout, stderr, "export");
    int rc = cli_parse_args(&c, argc, argv, opts, export_opt, &a, usage, 0);
    if (rc >= 0)
        return rc;
    /* the first operand is the format */
    const char *fmt = c.nargs ? c.args[0] : NULL;
    int format = 0;
    if (fmt && !strcmp(fmt, "perfetto"))
        format = 'p';
    else if (fmt && (!strcmp(fmt, "memory-viz") || !strcmp(fmt, "memviz")))
        format = 'v';
    if (!format) {
        if (fmt)
            fprintf(stderr, "gmshim export: no format '%s': perfetto or memory-viz\n%s", fmt, usage);
        else
            fprintf(stderr, "gmshim export: a format is needed: perfetto or memory-viz\n%s", usage);
        return CLI_FAIL;
    }
    const char *wrong = format == 'p' ? a.memviz_opt : a.perfetto_opt;
    if (wrong) {
        fprintf(stderr, "gmshim export %s: %s is an option of export %s; 'gmshim export --help' lists them\n", fmt,
                wrong, format == 'p' ? "memory-viz" : "perfetto");
        return CLI_FAIL;
    }
    int nlogs = c.nargs - 1;
    char **logs = c.args + 1;
    if (nlogs >= 1 && cli_expand_dirs(nlogs, logs, &logs, &nlogs))
        return CLI_FAIL;
    if (nlogs < 1) {
        fprintf(stderr, "gmshim export %s: no log given\n%s", fmt, usage);
        return CLI_FAIL;
    }
    if (!a.o.out) {
        fprintf(stderr, "gmshim export %s: -o FILE is needed ('-' for stdout)\n", fmt);
        return CLI_FAIL;
    }
    if (format == 'p')
        return export_perfetto(nlogs, logs, &a.o);
    if (nlogs > 1) {
        fprintf(stderr, "gmshim export memory-viz: one log at a time (a snapshot is one process's)\n");
        return CLI_FAIL;
    }
    return export_memviz(logs[0], &a.o);
}
