/* 8 threads in tight loops of their own sizes, each block written and checked, some blocks freed
 * by another thread (handed over through a shared slot): whether the threads end up in one
 * arena or spread over several (they do when they contend), the pool stays consistent. The
 * multi-arena paths themselves are unit-tested in tests/unit/test_device.c. */
#include "itest.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#define THREADS 8

static _Atomic(void *) handover[THREADS];
static atomic_int stop;

static void *worker(void *arg)
{
    int me = (int)(uintptr_t)arg;
    size_t size = 4096u * (size_t)(me + 1) + 512;
    unsigned char tag = (unsigned char)(me + 1);
    unsigned long long n = 0;
    while (!atomic_load(&stop)) {
        void *p;
        CUDA_OK(cudaMalloc(&p, size));
        unsigned char *c = p;
        c[0] = c[size - 1] = tag;
        CHECK(c[0] == tag && c[size - 1] == tag, "overwritten");
        if (n % 16 == 0) {
            /* Hand this block to the next thread to free; free what was handed to us. */
            void *old = atomic_exchange(&handover[(me + 1) % THREADS], p);
            if (old)
                CUDA_OK(cudaFree(old));
        } else {
            CUDA_OK(cudaFree(p));
        }
        n++;
    }
    return NULL;
}

int main(void)
{
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
    usleep(500000);
    atomic_store(&stop, 1);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < THREADS; t++) {
        void *p = atomic_exchange(&handover[t], NULL);
        if (p)
            CUDA_OK(cudaFree(p));
    }
    gmshim_stats_t st;
    gm_stats(0, &st);
    CHECK(st.allocs == st.frees, "allocs %llu frees %llu", st.allocs, st.frees);
    CHECK(st.allocated.current == 0, "allocated %llu", st.allocated.current);
    CHECK(st.reserved.current == fake_stats(0).bytes_in_use, "reserved %llu, driver %llu",
          st.reserved.current, fake_stats(0).bytes_in_use);
    printf("ok: %llu allocations over %llu arenas\n", st.allocs, st.arenas);
    return 0;
}
