/* P5, the log writer: T threads each append N allocation/free record pairs through the shim's
 * writer (shim/evlog.c, linked in), into a real log file. Prints events per second per thread and
 * bytes per event, the threads' CPU time in the program and in the kernel (the log's pages are
 * the kernel's to find and zero); the file it leaves is the input of the analyzer's throughput test
 * (gmshim summary). Also its peak and final resident file memory (the log's mapped pages). No CUDA
 * needed.
 *   p5_writer --out LOG --threads 2 --events 100000000 */
#include "common.h"
#include "evlog.h"
#include "options.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct worker {
    pthread_t th;
    int index;
    unsigned long long events;
    double seconds;
    double user_s, sys_s; /* this thread's CPU time: in the program and in the kernel (faults) */
} worker_t;

static uint64_t clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The process's resident file-backed memory (the log's mapped pages, and the libraries'). */
static long rss_file_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "RssFile: %ld", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

static long rss_peak;

static void *run(void *arg)
{
    worker_t *w = arg;
    uint64_t base = 0x7f0000000000ull + ((uint64_t)w->index << 36);
    double t0 = now_s();
    unsigned long long pairs = w->events / 2;
    uint64_t now = clock_ns();
    for (unsigned long long i = 0; i < pairs; i++) {
        if ((i & 63) == 0)
            now = clock_ns(); /* the shim reads the clock once per record; so do we, in bulk */
        uint64_t ptr = base + ((i * 512) & ((1ull << 32) - 1));
        size_t size = 512 + (i % 64) * 4096;
        evlog_alloc(0, 0, ptr, size, gm_round_up(size, 512), (uint32_t)(i % 100), now, now);
        evlog_free(0, 0x01, ptr, 0, now, now);
        if (w->index == 0 && (i & ((1u << 20) - 1)) == 0) {
            long r = rss_file_kib();
            if (r > rss_peak)
                rss_peak = r;
        }
    }
    w->seconds = now_s() - t0;
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) == 0) {
        w->user_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6;
        w->sys_s = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *out = "p5.gmlog";
    int threads = 1;
    unsigned long long events = 10000000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--events") && i + 1 < argc)
            events = strtoull(argv[++i], NULL, 0);
    }
    setenv("GMSHIM_LOG", out, 1);
    evlog_open();
    if (!evlog_enabled()) {
        fprintf(stderr, "p5_writer: cannot open %s\n", out);
        return 2;
    }
    worker_t *w = calloc((size_t)threads, sizeof *w);
    for (int i = 0; i < threads; i++) {
        w[i].index = i;
        w[i].events = events / (unsigned long long)threads;
        pthread_create(&w[i].th, NULL, run, &w[i]);
    }
    double slowest = 0, fastest = 0, user_s = 0, sys_s = 0;
    unsigned long long total = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(w[i].th, NULL);
        total += w[i].events / 2 * 2;
        if (w[i].seconds > slowest)
            slowest = w[i].seconds;
        if (!fastest || w[i].seconds < fastest)
            fastest = w[i].seconds;
        user_s += w[i].user_s;
        sys_s += w[i].sys_s;
    }
    long rss_end = rss_file_kib();
    if (rss_end > rss_peak)
        rss_peak = rss_end;
    evlog_close(GMLOG_CLOSE_EXIT);
    struct stat st;
    stat(evlog_path() ? evlog_path() : out, &st);
    printf("{\"bench\":\"p5_writer\",\"threads\":%d,\"events\":%llu,\"seconds\":%.3f,"
           "\"events_per_s_per_thread\":%.0f,\"fastest_thread_seconds\":%.3f,\"user_s\":%.3f,\"sys_s\":%.3f,"
           "\"file_bytes\":%lld,\"bytes_per_event\":%.2f,\"rss_file_peak_kib\":%ld,\"rss_file_end_kib\":%ld,"
           "\"log\":\"%s\"}\n",
           threads, total, slowest, total / (double)threads / slowest, fastest, user_s, sys_s, (long long)st.st_size,
           (double)st.st_size / (double)total, rss_peak, rss_end, evlog_path() ? evlog_path() : out);
    return 0;
}
