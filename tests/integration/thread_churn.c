/* Threads that come and go: each allocates and frees blocks small enough for the thread caches
 * and a few large ones, keeps some across its exit for the next round to free, marks, and ends.
 * The malloc failer runs it under a library whose own host allocations fail; it prints the same
 * line with gmshim, with the failer and without gmshim, and exits 0 only if every call worked. */
#include "itest.h"

#include <pthread.h>

#define THREADS 4
#define KEEP 8

static void *kept[THREADS][KEEP];
static unsigned long failures;

/* The first failure is named on stderr. */
static void count_failure_at(cudaError_t e, int line)
{
    if (e != cudaSuccess && __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED) == 0)
        fprintf(stderr, "thread_churn.c:%d: CUDA error %d\n", line, (int)e);
}
#define count_failure(e) count_failure_at((e), __LINE__)

static void *worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg % THREADS, r = (unsigned)(uintptr_t)arg * 2654435761u;
    int (*mark)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "gmshim_mark");
    for (int k = 0; k < KEEP; k++) /* the previous round's thread left these */
        if (kept[id][k])
            count_failure(cudaFree(kept[id][k]));
    for (int it = 0; it < 40; it++) {
        void *p[16] = {0};
        for (int k = 0; k < 16; k++) {
            r = r * 1103515245u + 12345u;
            size_t size = it % 16 == 0 && k == 0 ? (size_t)3 << 20 : 512u * (1 + (r >> 8) % 64);
            cudaError_t e = cudaMalloc(&p[k], size);
            count_failure(e);
            if (e == cudaSuccess)
                memset(p[k], k, 64);
        }
        for (int k = 0; k < 16; k++)
            if (p[k] && ((unsigned char *)p[k])[63] == (unsigned char)k)
                count_failure(cudaFree(p[k]));
            else
                count_failure(cudaErrorUnknown);
    }
    for (int k = 0; k < KEEP; k++) {
        kept[id][k] = NULL;
        count_failure(cudaMalloc(&kept[id][k], 1024u * (k + 1)));
    }
    if (mark)
        mark("thread done");
    return NULL;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 12;
    for (int round = 0; round < rounds; round++) {
        pthread_t t[THREADS];
        for (int i = 0; i < THREADS; i++)
            CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(round * THREADS + i)) == 0,
                  "pthread_create");
        for (int i = 0; i < THREADS; i++)
            pthread_join(t[i], NULL);
        size_t free_b = 0, total = 0;
        count_failure(cudaMemGetInfo(&free_b, &total));
    }
    for (int i = 0; i < THREADS; i++)
        for (int k = 0; k < KEEP; k++)
            if (kept[i][k])
                count_failure(cudaFree(kept[i][k]));
    printf("churn: %d rounds of %d threads, %lu failed calls\n", rounds, THREADS, failures);
    return failures ? 1 : 0;
}
