/* A log whose next extent cannot be reserved (here: the file size limit leaves room for the
 * header and one 16 MiB extent) goes on writing in the extent it has, without a warning; with
 * PAIRS=700000 it fills that extent and stops with one warning. The program is never sent
 * SIGXFSZ (whose default action would end it). */
#include "itest.h"

#include <sys/resource.h>

int main(void)
{
    CHECK(gm_present(), "run me under LD_PRELOAD=libgmshim.so");
    struct rlimit r;
    CHECK(getrlimit(RLIMIT_FSIZE, &r) == 0, "getrlimit");
    rlim_t want = (rlim_t)17 << 20;
    if (r.rlim_max != RLIM_INFINITY && r.rlim_max < want) {
        printf("skipped: the hard file size limit is below 17 MiB\n");
        return 0;
    }
    r.rlim_cur = want;
    CHECK(setrlimit(RLIMIT_FSIZE, &r) == 0, "setrlimit");
    const char *env = getenv("PAIRS");
    long pairs = env ? atol(env) : 1000;
    for (long i = 0; i < pairs; i++) { /* the first call opens the log */
        void *p;
        CUDA_OK(cudaMalloc(&p, 4096 + (size_t)(i % 1000) * 512));
        CUDA_OK(cudaFree(p));
    }
    printf("ok: %ld pairs\n", pairs);
    return 0;
}
