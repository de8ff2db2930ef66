/* A thread that allocates from a destructor of a thread-specific key that runs after gmshim's
 * own (keys are destroyed in the order they were made, and this one is made after the first CUDA
 * call): gmshim's per-thread state is gone by then and must be made afresh, not read freed. */
#include "itest.h"

#include <pthread.h>

static pthread_key_t late;

static void late_destructor(void *p)
{
    (void)p;
    for (int i = 0; i < 4; i++) { /* the same site each time: the per-thread caches are asked */
        void *d = NULL;
        CUDA_OK(cudaMalloc(&d, 4096));
        CUDA_OK(cudaFree(d));
    }
}

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 8; i++) {
        void *d = NULL;
        CUDA_OK(cudaMalloc(&d, 1024 * (i + 1)));
        CUDA_OK(cudaFree(d));
    }
    pthread_setspecific(late, (void *)1);
    return NULL;
}

int main(void)
{
    void *first = NULL;
    CUDA_OK(cudaMalloc(&first, 512)); /* gmshim starts: its keys come first */
    CHECK(pthread_key_create(&late, late_destructor) == 0, "pthread_key_create");
    for (int round = 0; round < 4; round++) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, worker, NULL) == 0, "pthread_create");
        pthread_join(t, NULL);
    }
    CUDA_OK(cudaFree(first));
    gmshim_stats_t st;
    if (gm_stats(0, &st))
        CHECK(st.allocs == 1 + 4 * (8 + 4), "allocations counted: %llu", (unsigned long long)st.allocs);
    printf("ok\n");
    return 0;
}
