/* A log whose next extent cannot be reserved (here: the file size limit leaves room for the
 * header and one 16 MiB extent) goes on writing in the extent it has, without a warning. */
#include "itest.h"

#include <signal.h>
#include <sys/resource.h>

int main(void)
{
    CHECK(gm_present(), "run me under LD_PRELOAD=libgmshim.so");
    signal(SIGXFSZ, SIG_IGN); /* growing past the limit then fails with EFBIG instead */
    struct rlimit r;
    CHECK(getrlimit(RLIMIT_FSIZE, &r) == 0, "getrlimit");
    rlim_t want = (rlim_t)17 << 20;
    if (r.rlim_max != RLIM_INFINITY && r.rlim_max < want) {
        printf("skipped: the hard file size limit is below 17 MiB\n");
        return 0;
    }
    r.rlim_cur = want;
    CHECK(setrlimit(RLIMIT_FSIZE, &r) == 0, "setrlimit");
    for (int i = 0; i < 1000; i++) { /* the first call opens the log */
        void *p;
        CUDA_OK(cudaMalloc(&p, 4096 + (size_t)i * 512));
        CUDA_OK(cudaFree(p));
    }
    printf("ok: 1000 pairs\n");
    return 0;
}
