/* The target of the kill -9 trials: THREADS threads allocate and free in a loop; thread 0 prints
 * "done N" after every 256 of its pairs (each in the log by then, its cudaFree having returned),
 * until the trial kills the process. With GMSHIM_LOG_LIMIT small, the log wraps meanwhile. */
#include "itest.h"

#include <pthread.h>

static void *worker(void *arg)
{
    long id = (long)arg;
    for (unsigned long i = 1;; i++) {
        void *p;
        CUDA_OK(cudaMalloc(&p, 512 * (1 + i % 32)));
        CUDA_OK(cudaFree(p));
        if (id == 0 && i % 256 == 0) {
            printf("done %lu\n", i);
            fflush(stdout);
        }
    }
    return NULL;
}

int main(void)
{
    int threads = getenv("THREADS") ? atoi(getenv("THREADS")) : 2;
    pthread_t t[16];
    for (long i = 1; i < threads && i < 16; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    worker((void *)0);
    return 0;
}
