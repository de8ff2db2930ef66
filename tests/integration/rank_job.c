/* One rank of a pretend distributed job, for the cross-rank verdict (tests/unit/
 * test_analyzer_ranks.c): `rank_job oom` fails an allocation larger than the device and exits 1
 * as a framework would; `rank_job abort MS [LEAK_MIB]` keeps LEAK_MIB more, then after MS
 * milliseconds aborts as the NCCL watchdog does; `rank_job hang` prints "ready" once its weights are
 * allocated, then waits in a pretend collective until it is killed. Run with FAKECUDA_MEM=1G. */
#include "itest.h"

#include <signal.h>
#include <unistd.h>
#include <time.h>

static __attribute__((noinline)) void *load_weights(void)
{
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, 16u << 20));
    return p;
}

static __attribute__((noinline)) void *keep_history(unsigned mib)
{
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, (size_t)mib << 20));
    return p;
}

static __attribute__((noinline)) cudaError_t forward_pass(void **out)
{
    cudaError_t e = cudaMalloc(out, (size_t)4 << 30);
    __asm__ volatile("" ::: "memory"); /* not a tail call: the site keeps this frame */
    return e;
}

int main(int argc, char **argv)
{
    CHECK(argc >= 2, "usage: rank_job oom | abort MS [LEAK_MIB] | hang");
    void *w = load_weights();
    (void)w;
    if (!strcmp(argv[1], "hang")) {
        printf("ready\n");
        fflush(stdout);
        for (;;)
            pause();
    }
    if (!strcmp(argv[1], "oom")) {
        void *act = NULL;
        cudaError_t e = forward_pass(&act);
        CHECK(e == cudaErrorMemoryAllocation, "a 4 GiB allocation returned %d", (int)e);
        fprintf(stderr, "rank_job: CUDA out of memory\n");
        return 1;
    }
    CHECK(argc >= 3, "abort needs MS");
    if (argc >= 4 && atoi(argv[3]) > 0)
        keep_history((unsigned)atoi(argv[3]));
    long ms = atol(argv[2]);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
    raise(SIGABRT);
    return 3;
}
