/* Replays a recorded allocation trace (../shared/traces format: "a t_ns tid ptr bytes" and
 * "f t_ns tid ptr" lines) through cudaMalloc/cudaFree in the recorded order, and prints one JSON
 * object: peak bytes requested (live, as recorded), peak bytes the driver held, driver calls,
 * gmshim's fences with their runtime calls' time and the elapsed time; under the fake runtime also the event records, event and
 * stream queries and stream waits made (what a fence policy costs in calls). Run it with and
 * without LD_PRELOAD=libgmshim.so, against the fake runtime or a GPU. `-` reads the trace from
 * stdin (xz -dc trace.txt.xz | replay -). */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../shim/gmshim.h"
#include "../tests/fakecuda.h"

typedef struct entry {
    unsigned long long key;   /* recorded pointer */
    void *ptr;                /* what the replay got */
    size_t size;
} entry_t;

static entry_t *table;
static size_t cap;

static entry_t *slot(unsigned long long key)
{
    size_t i = (key * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
    while (table[i].key && table[i].key != key)
        i = (i + 1) & (cap - 1);
    return &table[i];
}

static void erase(entry_t *e)
{
    /* Backward-shift deletion keeps probe chains intact. */
    size_t i = (size_t)(e - table);
    for (;;) {
        table[i].key = 0;
        size_t j = i;
        for (;;) {
            j = (j + 1) & (cap - 1);
            if (!table[j].key)
                return;
            size_t home = (table[j].key * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
            if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j))
                break;
        }
        table[i] = table[j];
        i = j;
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int paced = 0, argi = 1, nstreams = 0;
    for (; argi < argc; argi++) {
        if (!strcmp(argv[argi], "--paced"))
            paced = 1;
        else if (!strcmp(argv[argi], "--streams") && argi + 1 < argc)
            nstreams = atoi(argv[++argi]);
        else
            break;
    }
    if (argi >= argc || !strcmp(argv[argi], "--help")) {
        fprintf(stderr, "usage: replay [--paced] [--streams N] TRACE|-   (plain-text trace; xz -dc file.xz | replay -)\n"
                        "  --paced      issue each call at its recorded time (as fast as possible otherwise)\n"
                        "  --streams N  create N non-blocking streams first, as PyTorch's pool of streams\n");
        return argi >= argc ? 2 : 0;
    }
    for (int i = 0; i < nstreams; i++) {
        cudaStream_t s;
        if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
            fprintf(stderr, "replay: cannot create stream %d\n", i);
            return 2;
        }
    }
    const char *name = argv[argi];
    FILE *in = strcmp(name, "-") ? fopen(name, "r") : stdin;
    if (!in) {
        perror(name);
        return 2;
    }
    cap = 1 << 20;
    table = calloc(cap, sizeof *table);
    char line[256];
    unsigned long long allocs = 0, frees = 0, unknown = 0, failed = 0, lineno = 0;
    size_t live = 0, peak = 0;
    double t0 = now_s();
    while (fgets(line, sizeof line, in)) {
        lineno++;
        char op;
        unsigned long long t, tid, key, bytes = 0;
        int n = sscanf(line, " %c %llu %llu %llx %llu", &op, &t, &tid, &key, &bytes);
        if (n < 4 || (op == 'a' && n < 5) || (op != 'a' && op != 'f')) {
            fprintf(stderr, "replay: line %llu: cannot parse '%.60s'\n", lineno, line);
            return 2;
        }
        if (paced) {
            double due = t0 + t * 1e-9;
            while (now_s() < due)
                ;
        }
        if (op == 'a') {
            entry_t *e = slot(key);
            void *p;
            cudaError_t err = cudaMalloc(&p, bytes);
            if (err != cudaSuccess) {
                failed++;
                cudaGetLastError();
                continue;
            }
            e->key = key;
            e->ptr = p;
            e->size = bytes;
            live += bytes;
            if (live > peak)
                peak = live;
            allocs++;
        } else {
            entry_t *e = slot(key);
            if (!e->key) {
                unknown++;
                continue;
            }
            cudaFree(e->ptr);
            live -= e->size;
            erase(e);
            frees++;
        }
    }
    double elapsed = now_s() - t0;
    struct fakecuda_stats fs;
    memset(&fs, 0, sizeof fs);
    void (*fake_stats)(int, struct fakecuda_stats *) =
        (void (*)(int, struct fakecuda_stats *))dlsym(RTLD_DEFAULT, "fakecuda_get_stats");
    if (fake_stats)
        fake_stats(0, &fs);
    gmshim_stats_t gs;
    memset(&gs, 0, sizeof gs);
    gs.size = sizeof gs;
    int (*get)(int, gmshim_stats_t *) = (int (*)(int, gmshim_stats_t *))dlsym(RTLD_DEFAULT, "gmshim_get_stats");
    int have_gm = get && get(0, &gs) == 0;
    if (get && !have_gm) { /* a library from before version 2 of the struct */
        gs.size = GMSHIM_STATS_V1_SIZE;
        have_gm = get(0, &gs) == 0;
        gs.fence_ns = 0;
    }
    unsigned long long peak_reserved = have_gm ? gs.reserved.peak : fs.peak_bytes;
    printf("{\"trace\":\"%s\",\"paced\":%s,\"allocs\":%llu,\"frees\":%llu,\"failed\":%llu,\"unmatched_frees\":%llu,"
           "\"peak_requested\":%zu,\"peak_reserved\":%llu,\"ratio\":%.4f,\"driver_mallocs\":%llu,"
           "\"driver_frees\":%llu,\"gmshim\":%s,\"peak_allocated\":%llu,\"fence_waits\":%llu,"
           "\"fences\":%llu,\"fence_ms\":%.3f,\"streams\":%d,\"elapsed_s\":%.3f",
           name, paced ? "true" : "false", allocs, frees, failed, unknown, peak, peak_reserved,
           peak ? (double)peak_reserved / (double)peak : 0.0,
           have_gm ? gs.driver_mallocs : fs.mallocs, have_gm ? gs.driver_frees : fs.frees,
           have_gm ? "true" : "false", have_gm ? gs.allocated.peak : 0ull, have_gm ? gs.fence_waits : 0ull,
           have_gm ? gs.fences : 0ull, have_gm ? (double)gs.fence_ns / 1e6 : 0.0, nstreams, elapsed);
    /* Under the fake runtime, the calls a fence policy makes (what a change of it is judged by
     * without a GPU). */
    if (fake_stats)
        printf(",\"event_records\":%llu,\"event_queries\":%llu,\"stream_queries\":%llu,\"stream_waits\":%llu",
               fs.event_records, fs.event_queries, fs.stream_queries, fs.stream_waits);
    printf("}\n");
    return failed ? 1 : 0;
}
