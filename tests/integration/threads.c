/* 16 threads allocate and free random sizes concurrently, each filling its blocks with its own
 * pattern: no two live blocks overlap, contents stay intact, the counters add up. */
#include "itest.h"

#include <pthread.h>

#define THREADS 16
#define ROUNDS 400
#define KEEP 24

static void *worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
    unsigned char tag = (unsigned char)(uintptr_t)arg + 1;
    void *live[KEEP] = {0};
    size_t size[KEEP] = {0};
    for (int r = 0; r < ROUNDS; r++) {
        int i = (int)(rand_r(&seed) % KEEP);
        if (live[i]) {
            const unsigned char *c = live[i];
            for (size_t k = 0; k < size[i]; k += 509)
                CHECK(c[k] == tag, "thread %d: block of %zu bytes overwritten at %zu", tag, size[i], k);
            CHECK(c[size[i] - 1] == tag, "thread %d: last byte overwritten", tag);
            CUDA_OK(cudaFree(live[i]));
            live[i] = NULL;
        } else {
            int kind = (int)(rand_r(&seed) % 3);
            size[i] = kind == 0 ? 1 + rand_r(&seed) % 8192
                    : kind == 1 ? 8192 + rand_r(&seed) % (1 << 20)
                                : (1 << 20) + rand_r(&seed) % (12 << 20);
            CUDA_OK(cudaMalloc(&live[i], size[i]));
            memset(live[i], tag, size[i]);
        }
    }
    for (int i = 0; i < KEEP; i++)
        if (live[i])
            CUDA_OK(cudaFree(live[i]));
    return NULL;
}

int main(void)
{
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    gmshim_stats_t st;
    gm_stats(0, &st);
    CHECK(st.allocs == st.frees, "allocs %llu frees %llu", st.allocs, st.frees);
    CHECK(st.allocated.current == 0, "allocated %llu", st.allocated.current);
    CHECK(st.reserved.current == fake_stats(0).bytes_in_use, "reserved %llu, driver %llu",
          st.reserved.current, fake_stats(0).bytes_in_use);
    printf("ok: %llu allocations, %llu driver mallocs, %llu arenas\n", st.allocs, st.driver_mallocs, st.arenas);
    return 0;
}
