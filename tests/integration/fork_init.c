/* Forks at any moment of gmshim's start: a process that has not touched CUDA starts a thread
 * whose cudaMalloc initialises gmshim and forks meanwhile, after a delay drawn anew each time;
 * the child marks (the gmshim API), allocates, frees and exits. Each race runs in a fresh
 * process (a fork of the untouched main process), a child that has not exited within 5 s is a
 * hang: killed and counted. Prints the counts; exits 0 only with no hang and no failure. */
#include "itest.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int (*mark)(const char *);

static void *first_call(void *arg)
{
    (void)arg;
    void *p = NULL;
    if (cudaMalloc(&p, 4096) == cudaSuccess)
        cudaFree(p);
    return NULL;
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* pid's exit status (128 + a signal), or -1 when it still ran after ms (then killed). A race
 * whose child hung exits HUNG. */
#define HUNG 2
static int wait_for(pid_t pid, unsigned ms)
{
    uint64_t end = now_us() + (uint64_t)ms * 1000u;
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (r < 0 && errno != EINTR)
            return 1;
        if (now_us() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(1000);
    }
}

/* In a fresh process: a thread starts gmshim, this one forks after delay_us. */
static int race(unsigned delay_us)
{
    pthread_t t;
    if (pthread_create(&t, NULL, first_call, NULL) != 0)
        return 1;
    for (uint64_t end = now_us() + delay_us; now_us() < end;)
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
    int r = c < 0 ? 1 : wait_for(c, 5000);
    pthread_join(t, NULL);
    return r < 0 ? HUNG : r;
}

int main(int argc, char **argv)
{
    int forks = argc > 1 ? atoi(argv[1]) : 40;
    unsigned span_us = argc > 2 ? (unsigned)atoi(argv[2]) : 3000, seed = (unsigned)now_us();
    mark = (int (*)(const char *))dlsym(RTLD_DEFAULT, "gmshim_mark");
    int hung = 0, failed = 0;
    for (int i = 0; i < forks; i++) {
        unsigned delay = (unsigned)rand_r(&seed) % (span_us + 1);
        fflush(stdout);
        pid_t w = fork();
        CHECK(w >= 0, "fork");
        if (w == 0)
            _exit(race(delay));
        int r = wait_for(w, 20000);
        hung += r == HUNG || r < 0;
        failed += r != 0 && r != HUNG && r >= 0;
    }
    printf("fork_init: %d forks, %d hung, %d failed\n", forks, hung, failed);
    return hung || failed ? 1 : 0;
}
