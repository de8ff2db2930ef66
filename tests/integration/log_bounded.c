/* A long-running job for the bounded log: THREADS threads allocate and free in a loop for SECONDS
 * (or PAIRS pairs each), marking every 100 000 pairs, beside IDLE_THREADS threads that log once and
 * wait; one site leaks a 1 MiB block every
 * LEAK_EVERY pairs of thread 0; at the end, with everything else freed, an allocation of the
 * whole device fails (a recorded OOM). A timed run ends early once the file STOP_FILE exists. Prints the writer's peak resident file memory
 * (VmRSS's file part, from /proc/self/status) in KiB, as "rss_file_kib N". */
#include "itest.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

static int (*mark)(const char *);
static double seconds;
static unsigned long pairs = 200000, leak_every = 50000;
static long peak_rss_file;
static pthread_mutex_t rss_lock = PTHREAD_MUTEX_INITIALIZER;

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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void __attribute__((noinline)) leak_one(void)
{
    void *p;
    CUDA_OK(cudaMalloc(&p, 1u << 20));
}

/* A thread that logs one pair (the i-th 100 ms after the start) and then waits for the end,
 * keeping its chunk (PyTorch's threads go idle like this). */
static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_end = PTHREAD_COND_INITIALIZER;
static int ending;

static void *idler(void *arg)
{
    usleep((useconds_t)(long)arg * 100000); /* one after another, in different extents */
    void *p;
    CUDA_OK(cudaMalloc(&p, 4096));
    CUDA_OK(cudaFree(p));
    pthread_mutex_lock(&idle_lock);
    while (!ending)
        pthread_cond_wait(&idle_end, &idle_lock);
    pthread_mutex_unlock(&idle_lock);
    return NULL;
}

/* A timed run ends early, as its time would, once the file STOP_FILE names exists (a test that
 * saw what it waited for); looked for with the clock, every 1 024 pairs. */
static const char *stop_file;

static int running(double end)
{
    return now_s() < end && !(stop_file && access(stop_file, F_OK) == 0);
}

static void *worker(void *arg)
{
    long id = (long)arg;
    double end = now_s() + seconds;
    for (unsigned long i = 1; seconds > 0 ? (i % 1024 || running(end)) : i <= pairs; i++) {
        void *p;
        CUDA_OK(cudaMalloc(&p, 512 + (i % 64) * 512));
        CUDA_OK(cudaFree(p));
        if (id == 0 && i % leak_every == 0)
            leak_one();
        if (id == 0 && i % 100000 == 0 && mark) {
            char label[64];
            snprintf(label, sizeof label, "step %lu", i / 100000);
            mark(label);
        }
        if (i % 65536 == 0) {
            long r = rss_file_kib();
            pthread_mutex_lock(&rss_lock);
            if (r > peak_rss_file)
                peak_rss_file = r;
            pthread_mutex_unlock(&rss_lock);
        }
    }
    return NULL;
}

int main(void)
{
    stop_file = getenv("STOP_FILE");
    const char *s = getenv("SECONDS_TO_RUN");
    seconds = s ? atof(s) : 0;
    if ((s = getenv("PAIRS")))
        pairs = strtoul(s, NULL, 10);
    if ((s = getenv("LEAK_EVERY")))
        leak_every = strtoul(s, NULL, 10);
    int threads = getenv("THREADS") ? atoi(getenv("THREADS")) : 4;
    mark = (int (*)(const char *))dlsym(RTLD_DEFAULT, "gmshim_mark");
    int idle = getenv("IDLE_THREADS") ? atoi(getenv("IDLE_THREADS")) : 0;
    pthread_t t[64], it[64];
    for (long i = 0; i < idle && i < 64; i++)
        pthread_create(&it[i], NULL, idler, (void *)i);
    for (long i = 0; i < threads && i < 64; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (long i = 0; i < threads && i < 64; i++)
        pthread_join(t[i], NULL);
    pthread_mutex_lock(&idle_lock);
    ending = 1;
    pthread_cond_broadcast(&idle_end);
    pthread_mutex_unlock(&idle_lock);
    for (long i = 0; i < idle && i < 64; i++)
        pthread_join(it[i], NULL);
    size_t free_b = 0, total_b = 0;
    CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
    void *big;
    cudaError_t e = cudaMalloc(&big, total_b + ((size_t)1 << 30)); /* more than the device has */
    CHECK(e == cudaErrorMemoryAllocation, "a request of the whole device returned %d", (int)e);
    cudaGetLastError();
    printf("rss_file_kib %ld\n", peak_rss_file);
    return 0;
}
