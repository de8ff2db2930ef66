/* Analyzer round trip: a fixed sequence of calls whose log the analyzer tests check record by
 * record — 10 pooled allocations (1000..10000 bytes) of which 7 are freed, two marks, 4 more
 * from a second thread (2 freed), one managed allocation freed. Prints its pid first. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

typedef int (*mark_fn)(const char *);

static void *worker(void *arg)
{
    (void)arg;
    void *p[4];
    for (int i = 0; i < 4; i++)
        if (cudaMalloc(&p[i], 2048) != cudaSuccess)
            return (void *)1;
    cudaFree(p[0]);
    cudaFree(p[1]);
    return NULL;
}

int main(void)
{
    printf("pid=%d\n", (int)getpid());
    fflush(stdout);
    mark_fn mark = (mark_fn)dlsym(RTLD_DEFAULT, "gmshim_mark");
    void *p[10];
    for (int i = 0; i < 10; i++)
        if (cudaMalloc(&p[i], (size_t)(i + 1) * 1000) != cudaSuccess)
            return 1;
    for (int i = 0; i < 7; i++)
        cudaFree(p[i]);
    if (mark) {
        mark("first");
        mark("second");
    }
    pthread_t t;
    void *rc = NULL;
    if (pthread_create(&t, NULL, worker, NULL) || pthread_join(t, &rc) || rc)
        return 1;
    void *m;
    if (cudaMallocManaged(&m, 1 << 20, cudaMemAttachGlobal) != cudaSuccess)
        return 1;
    cudaFree(m);
    printf("done\n");
    return 0;
}
