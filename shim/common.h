/* Macros and small types every shim module uses. Nothing here may allocate, lock or call CUDA. */
#ifndef GM_COMMON_H
#define GM_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "gmbase.h"
#include "version.h"
#include "gmshim.h"

#define GM_EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define GM_NOINLINE __attribute__((noinline))
#define GM_COLD __attribute__((cold, noinline))
#define GM_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#ifdef GM_DEBUG
#include <assert.h>
#define gm_assert(x) assert(x)
#else
#define gm_assert(x) ((void)0)
#endif

#define GM_MAX_DEVICES 64
#define GM_KiB ((size_t)1 << 10)
#define GM_MiB ((size_t)1 << 20)
#define GM_GiB ((size_t)1 << 30)

/* CLOCK_MONOTONIC in ns (vDSO, no system call). */
static inline uint64_t gm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
