/* fork(): the child neither frees the parent's blocks nor writes into the parent's log; the
 * parent carries on with an intact pool. */
#include "itest.h"

#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    void *a;
    CUDA_OK(cudaMalloc(&a, 1 << 20));
    memset(a, 3, 1 << 20);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        /* CUDA is unusable in a fork child; gmshim forwards and touches nothing. */
        cudaError_t e = cudaFree(a);
        void *b = NULL;
        cudaError_t e2 = cudaMalloc(&b, 4096);
        _exit(e == cudaErrorInitializationError && e2 == cudaErrorInitializationError ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    const unsigned char *c = a;
    CHECK(c[0] == 3 && c[(1 << 20) - 1] == 3, "the parent's block changed");
    gmshim_stats_t st;
    gm_stats(0, &st);
    CHECK(st.frees == 0 && st.allocated.current == 1 << 20, "frees %llu allocated %llu", st.frees,
          st.allocated.current);
    CUDA_OK(cudaFree(a));
    void *b;
    CUDA_OK(cudaMalloc(&b, 1 << 20));
    CUDA_OK(cudaFree(b));
    printf("ok\n");
    return 0;
}
