/* One thread allocates a block and hands it to another, which frees it; the first allocates again
 * at once and gets the same block back (run with GMSHIM_TRUST_STREAM_ORDER=1, so that a freed
 * block is reused at once), with the log on. The log must show every free before the allocation
 * that reused the block. Argument: the number of handoffs (default 200000). */
#include "itest.h"

#include <pthread.h>
#include <stdatomic.h>

static _Atomic(void *) handed; /* the block the freeing thread is to free; NULL: none */
static atomic_int done;

static void *freer(void *arg)
{
    (void)arg;
    for (;;) {
        void *p = atomic_exchange_explicit(&handed, NULL, memory_order_acq_rel);
        if (p) {
            CUDA_OK(cudaFree(p));
            atomic_store_explicit(&done, 1, memory_order_release);
        } else if (atomic_load_explicit(&done, memory_order_acquire) == 2) {
            return NULL;
        }
    }
}

int main(int argc, char **argv)
{
    long handoffs = argc > 1 ? atol(argv[1]) : 200000;
    CHECK(gm_present(), "run me under LD_PRELOAD=libgmshim.so");
    pthread_t t;
    CHECK(pthread_create(&t, NULL, freer, NULL) == 0, "pthread_create");
    void *first = NULL;
    long same = 0;
    for (long i = 0; i < handoffs; i++) {
        void *p;
        CUDA_OK(cudaMalloc(&p, 4096));
        if (!first)
            first = p;
        same += p == first;
        atomic_store_explicit(&done, 0, memory_order_relaxed);
        atomic_store_explicit(&handed, p, memory_order_release);
        while (atomic_load_explicit(&done, memory_order_acquire) != 1)
            ;
    }
    atomic_store_explicit(&done, 2, memory_order_release);
    pthread_join(t, NULL);
    CHECK(same == handoffs, "the block came back %ld times of %ld", same, handoffs);
    printf("ok: %ld handoffs\n", handoffs);
    return 0;
}
