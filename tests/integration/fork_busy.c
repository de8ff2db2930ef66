/* Forks while gmshim is busy: threads allocate and free (arena and thread-cache locks taken all
 * the time, the log writing and switching extents), mark, empty the cache and read the stats,
 * while the main thread forks again and again. Each child marks, reads the stats, empties the
 * cache, allocates, frees and exits within 5 s, or is a hang: killed and counted. Prints the
 * counts; exits 0 only with no hang and no failure. */
#include "itest.h"

#include <pthread.h>

#define THREADS 3

static int stop;
static int (*mark)(const char *);
static unsigned long long (*empty_cache)(void);
static int (*get_stats)(int, gmshim_stats_t *);

static void *busy(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg, r = id * 2654435761u + 1;
    for (unsigned it = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); it++) {
        void *p[16] = {0};
        for (int k = 0; k < 16; k++) {
            r = r * 1103515245u + 12345u;
            cudaMalloc(&p[k], k == 0 && it % 8 == 0 ? (size_t)3 << 20 : 512u * (1 + (r >> 8) % 64));
        }
        for (int k = 0; k < 16; k++)
            if (p[k])
                cudaFree(p[k]);
        if (mark && it % 64 == 0)
            mark("busy");
        if (id == 0 && it % 256 == 0) {
            gmshim_stats_t st = {.size = sizeof st};
            if (empty_cache)
                empty_cache();
            if (get_stats)
                get_stats(0, &st);
        }
    }
    return NULL;
}

static void child(void)
{
    gmshim_stats_t st = {.size = sizeof st};
    if (mark)
        mark("child");
    if (get_stats)
        get_stats(0, &st);
    if (empty_cache)
        empty_cache();
    void *p = NULL;
    if (cudaMalloc(&p, 4096) == cudaSuccess)
        cudaFree(p);
    _exit(0);
}

int main(int argc, char **argv)
{
    int forks = argc > 1 ? atoi(argv[1]) : 100;
    unsigned seed = (unsigned)itest_now_us();
    mark = (int (*)(const char *))dlsym(RTLD_DEFAULT, "gmshim_mark");
    empty_cache = (unsigned long long (*)(void))dlsym(RTLD_DEFAULT, "gmshim_empty_cache");
    get_stats = (int (*)(int, gmshim_stats_t *))dlsym(RTLD_DEFAULT, "gmshim_get_stats");
    void *first = NULL;
    CUDA_OK(cudaMalloc(&first, 4096));
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, busy, (void *)(uintptr_t)i) == 0, "pthread_create");
    int hung = 0, failed = 0;
    for (int i = 0; i < forks; i++) {
        usleep((unsigned)rand_r(&seed) % 5000);
        fflush(stdout);
        pid_t c = fork();
        CHECK(c >= 0, "fork");
        if (c == 0)
            child();
        int r = itest_wait_for(c, 5000);
        hung += r < 0;
        failed += r > 0;
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    CUDA_OK(cudaFree(first));
    printf("fork_busy: %d forks, %d hung, %d failed\n", forks, hung, failed);
    return hung || failed ? 1 : 0;
}
