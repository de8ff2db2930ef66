/* P7, the PyTorch bridge's entry point: what gmshim_torch_event costs per event (shim/torchev.c,
 * linked in, into a real log file), with the live-tensor table a bounded log keeps for its
 * checkpoints (GMSHIM_LOG_LIMIT, default 4G) and without it (GMSHIM_LOG_LIMIT=0). Each round is
 * an allocation, its free requested and completed, over LIVE tensors kept live (the table's
 * size). Prints ns per event for each, the median of 5 runs each. No CUDA needed.
 *   p7_torchev --out LOG --events 3000000 --live 100000 [--stack-depth N] */
#include "common.h"
#include "evlog.h"
#include "options.h"
#include "stacks.h"
#include "torchev.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void event(int action, unsigned long long addr, unsigned long long bytes)
{
    gmshim_torch_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.size = sizeof ev;
    ev.action = action;
    ev.addr = addr;
    ev.bytes = bytes;
    gmshim_torch_event(&ev);
}

/* ns per event of one run with the given limit. */
static double run(const char *out, const char *limit, unsigned long events, unsigned long live)
{
    setenv("GMSHIM_LOG", out, 1);
    setenv("GMSHIM_LOG_LIMIT", limit, 1);
    options_reset();
    torchev_forget();
    evlog_open();
    stacks_init();
    const unsigned long long base = 0x7f0000000000ull;
    for (unsigned long i = 0; i < live; i++)
        event(GMSHIM_TORCH_ALLOC, base + i * 4096, 4096);
    double t0 = now_s();
    unsigned long rounds = events / 3;
    for (unsigned long i = 0; i < rounds; i++) {
        unsigned long long a = base + (live + (i & 1023)) * 4096;
        event(GMSHIM_TORCH_ALLOC, a, 4096);
        event(GMSHIM_TORCH_FREE_REQUESTED, a, 4096);
        event(GMSHIM_TORCH_FREE_COMPLETED, a, 4096);
    }
    double dt = now_s() - t0;
    evlog_close(GMLOG_CLOSE_EXIT);
    remove(out);
    return dt * 1e9 / (double)(rounds * 3);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *out = "p7.gmlog", *depth = "16";
    unsigned long events = 3000000, live = 100000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--out"))
            out = argv[i + 1];
        else if (!strcmp(argv[i], "--events"))
            events = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--live"))
            live = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--stack-depth"))
            depth = argv[i + 1];
    }
    setenv("GMSHIM_STACK_DEPTH", depth, 1);
    double bounded[5], unbounded[5];
    for (int r = 0; r < 5; r++) { /* alternating, so that a slow moment hits both */
        bounded[r] = run(out, "4G", events, live);
        unbounded[r] = run(out, "0", events, live);
    }
    qsort(bounded, 5, sizeof *bounded, by_value);
    qsort(unbounded, 5, sizeof *unbounded, by_value);
    printf("events %lu live %lu stack_depth %s: bounded (table) %.1f ns/event, unbounded %.1f ns/event, "
           "table %+.1f ns/event (medians of 5)\n", events, live, depth, bounded[2], unbounded[2],
           bounded[2] - unbounded[2]);
    return 0;
}
