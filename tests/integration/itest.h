/* Shared by the integration programs: each runs under LD_PRELOAD=libgmshim.so against the fake
 * runtime, checks its own results and exits non-zero with a message when one is wrong. */
#ifndef GM_ITEST_H
#define GM_ITEST_H

#include "../../shim/gmshim.h"
#include "../fakecuda.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                                          \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                       \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fprintf(stderr, "\n");                                                                \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

#define CUDA_OK(call)                                                                             \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        CHECK(e_ == cudaSuccess, "%s returned %d (%s)", #call, (int)e_, cudaGetErrorName(e_));    \
    } while (0)

/* gmshim's statistics for a device, through dlsym so the program also runs without gmshim
 * (then *st is zeroed and 0 is returned). */
static inline int gm_stats(int dev, gmshim_stats_t *st)
{
    int (*get)(int, gmshim_stats_t *) = (int (*)(int, gmshim_stats_t *))dlsym(RTLD_DEFAULT, "gmshim_get_stats");
    memset(st, 0, sizeof *st);
    st->size = sizeof *st;
    if (!get)
        return 0;
    return get(dev, st) == 0;
}

static inline int gm_present(void)
{
    return dlsym(RTLD_DEFAULT, "gmshim_get_stats") != NULL;
}

static inline struct fakecuda_stats fake_stats(int dev)
{
    struct fakecuda_stats s;
    fakecuda_get_stats(dev, &s);
    return s;
}

static inline uint64_t itest_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* pid's exit status (128 + a signal), or -1 when it still ran after ms: then it is killed. */
static inline int itest_wait_for(pid_t pid, unsigned ms)
{
    uint64_t end = itest_now_us() + (uint64_t)ms * 1000u;
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (r < 0 && errno != EINTR)
            return 1;
        if (itest_now_us() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(1000);
    }
}

#endif
