/* Forks at any moment of gmshim's start: a process that has not touched CUDA starts a thread
 * whose cudaMalloc initialises gmshim and forks meanwhile, after a delay drawn anew each time;
 * the child marks (the gmshim API), allocates, frees and exits. Each race runs in a fresh
 * process (a fork of the untouched main process), a child that has not exited within 5 s is a
 * hang: killed and counted. Prints the counts; exits 0 only with no hang and no failure. */
#include "itest.h"

#include <pthread.h>

static int (*mark)(const char *);

static int go;

/* Started before the race and waiting for it: a fork while a thread is still being created is a
 * race of the thread library's (ASan's runtime loses it: a child creating a thread then hangs,
 * with or without gmshim), not gmshim's. */
static void *first_call(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
        ;
    void *p = NULL;
    if (cudaMalloc(&p, 4096) == cudaSuccess)
        cudaFree(p);
    return NULL;
}

/* A race whose child hung exits HUNG. */
#define HUNG 2

/* In a fresh process: a thread starts gmshim, this one forks after delay_us. */
static int race(unsigned delay_us)
{
    pthread_t t;
    if (pthread_create(&t, NULL, first_call, NULL) != 0)
        return 1;
    usleep(2000);
    __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
    for (uint64_t end = itest_now_us() + delay_us; itest_now_us() < end;)
        ;
    pid_t c = fork();
    if (c == 0) {
        if (mark)
            mark("child");
        void *p = NULL;
        if (cudaMalloc(&p, 4096) == cudaSuccess)
            cudaFree(p);
        _exit(0);
    }
    int r = c < 0 ? 1 : itest_wait_for(c, 5000);
    pthread_join(t, NULL);
    return r < 0 ? HUNG : r;
}

int main(int argc, char **argv)
{
    int forks = argc > 1 ? atoi(argv[1]) : 40;
    unsigned span_us = argc > 2 ? (unsigned)atoi(argv[2]) : 3000, seed = (unsigned)itest_now_us();
    mark = (int (*)(const char *))dlsym(RTLD_DEFAULT, "gmshim_mark");
    int hung = 0, failed = 0;
    for (int i = 0; i < forks; i++) {
        unsigned delay = (unsigned)rand_r(&seed) % (span_us + 1);
        fflush(stdout);
        pid_t w = fork();
        CHECK(w >= 0, "fork");
        if (w == 0)
            _exit(race(delay));
        int r = itest_wait_for(w, 20000);
        hung += r == HUNG || r < 0;
        failed += r != 0 && r != HUNG && r >= 0;
    }
    printf("fork_init: %d forks, %d hung, %d failed\n", forks, hung, failed);
    return hung || failed ? 1 : 0;
}
