/* P6: 1, 2, 4, 8, 16 threads each allocating and freeing its own size for a fixed time, on one
 * device or spread over all devices (--devices N). Prints one JSON object per thread count:
 * pairs per second in all, the speed-up over one thread, each thread's pairs and, under gmshim,
 * the fences device 0 recorded and waited for. --pin binds thread i to CPU i (modulo
 * the CPUs this process may use), to tell the scheduler's share of uneven progress from the
 * pool's. Runtime API only: it builds against the fake runtime and the real one. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../shim/gmshim.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct worker {
    pthread_t th;
    int index, device, cpu; /* cpu -1: not pinned */
    size_t size;
    double seconds;
    unsigned long long pairs;
    atomic_int *go;
} worker_t;

static void *run(void *arg)
{
    worker_t *w = arg;
    if (w->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(w->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    if (cudaSetDevice(w->device) != cudaSuccess)
        return NULL;
    void *p;
    cudaMalloc(&p, w->size); /* warm: the first pair goes to the driver */
    cudaFree(p);
    while (!atomic_load(w->go))
        ;
    double end = now_s() + w->seconds;
    unsigned long long n = 0;
    while ((n & 255) || now_s() < end) {
        if (cudaMalloc(&p, w->size) != cudaSuccess)
            break;
        cudaFree(p);
        n++;
    }
    w->pairs = n;
    return NULL;
}

int main(int argc, char **argv)
{
    int ndev = 1;
    double seconds = 1.0;
    const char *label = "run";
    int pin = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--devices") && i + 1 < argc)
            ndev = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--label") && i + 1 < argc)
            label = argv[++i];
        else if (!strcmp(argv[i], "--pin"))
            pin = 1;
    }
    int have = 0;
    if (cudaGetDeviceCount(&have) != cudaSuccess || have < ndev) {
        fprintf(stderr, "p6_threads: %d device(s) asked, %d present\n", ndev, have);
        return 2;
    }
    for (int d = 0; d < ndev; d++) {
        cudaSetDevice(d);
        cudaFree(NULL);
    }
    /* The CPUs this process may run on, in order, for --pin. */
    int cpus[CPU_SETSIZE], ncpu = 0;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &allowed))
                cpus[ncpu++] = c;
    int counts[] = {1, 2, 4, 8, 16};
    double base = 0;
    unsigned long long fences_before = 0, waits_before = 0;
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        int n = counts[c];
        worker_t *w = calloc((size_t)n, sizeof *w);
        atomic_int go = 0;
        for (int i = 0; i < n; i++) {
            w[i].index = i;
            w[i].device = i % ndev;
            w[i].size = (size_t)(i + 1) * 4096 + 512 * (size_t)(i % 3); /* distinct sizes */
            w[i].seconds = seconds;
            w[i].cpu = pin && ncpu ? cpus[i % ncpu] : -1;
            w[i].go = &go;
            pthread_create(&w[i].th, NULL, run, &w[i]);
        }
        double t0 = now_s();
        atomic_store(&go, 1);
        unsigned long long total = 0;
        for (int i = 0; i < n; i++) {
            pthread_join(w[i].th, NULL);
            total += w[i].pairs;
        }
        double rate = total / (now_s() - t0);
        if (n == 1)
            base = rate;
        /* How evenly the threads progressed, and how many arenas gmshim had (when preloaded). */
        unsigned long long lo = w[0].pairs, hi = w[0].pairs;
        for (int i = 1; i < n; i++) {
            lo = w[i].pairs < lo ? w[i].pairs : lo;
            hi = w[i].pairs > hi ? w[i].pairs : hi;
        }
        int (*get)(int, gmshim_stats_t *) = (int (*)(int, gmshim_stats_t *))dlsym(RTLD_DEFAULT, "gmshim_get_stats");
        gmshim_stats_t st;
        memset(&st, 0, sizeof st);
        st.size = sizeof st;
        int have_stats = get && get(0, &st) == 0;
        long long arenas = have_stats ? (long long)st.arenas : -1;
        /* Fences recorded and waited for on device 0 during this thread count (the counters are
         * totals since the start). */
        long long fences = have_stats ? (long long)(st.fences - fences_before) : -1;
        long long waits = have_stats ? (long long)(st.fence_waits - waits_before) : -1;
        if (have_stats) {
            fences_before = st.fences;
            waits_before = st.fence_waits;
        }
        printf("{\"bench\":\"p6\",\"label\":\"%s\",\"devices\":%d,\"threads\":%d,\"pairs_per_s\":%.0f,"
               "\"speedup\":%.2f,\"thread_pairs_min\":%llu,\"thread_pairs_max\":%llu,\"arenas_dev0\":%lld,"
               "\"fences_dev0\":%lld,\"fence_waits_dev0\":%lld,\"pinned\":%d,\"thread_pairs\":[",
               label, ndev, n, rate, base ? rate / base : 0.0, lo, hi, arenas, fences, waits, pin);
        for (int i = 0; i < n; i++)
            printf("%s%llu", i ? "," : "", w[i].pairs);
        printf("]}\n");
        fflush(stdout);
        free(w);
    }
    return 0;
}
