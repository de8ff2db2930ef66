/* Getting the PyTorch bridge (shim/torch/bridge.cpp) into an unmodified program: at the first
 * cudaMalloc made by PyTorch's caching allocator, find the bridge built for the installed torch
 * (next to libgmshim.so, or in the per-user cache), build it there if missing (once; the process
 * waits and says so on stderr), dlopen it and attach. Anything missing — compiler, headers, a torch
 * without the hook — is one warning and segment-level logging, never a failure. docs/pytorch.md. */
#ifndef GM_TORCHLOAD_H
#define GM_TORCHLOAD_H

#include "common.h"
#include "torchbuild.h"

#include <limits.h>
#include <stddef.h>

/* 1 once there is nothing left to decide (attached, given up, or not wanted). */
extern int torchload_settled;

void torchload_examine(const void *caller);
/* At the first CUDA call: finds PyTorch's allocator library if it is loaded already. */
void torchload_init(void);

/* Where PyTorch's caching allocator's code lies ([lo, hi) of libc10_cuda.so, once found), and
 * whether its cudaFree calls give memory back for good (PyTorch's cache on). */
extern uintptr_t torchload_c10_lo, torchload_c10_hi;
extern int torchload_c10_releases;

/* Whether a cudaMalloc or cudaFree made from `caller` is PyTorch's caching allocator with its
 * cache on: it gets exact driver segments (device_alloc_exact), and its frees (its emptyCache, its
 * OOM retry) go to the driver as they would without gmshim. Two loads and a compare. */
static inline int torchload_caching_caller(const void *caller)
{
    uintptr_t pc = (uintptr_t)caller, hi = __atomic_load_n(&torchload_c10_hi, __ATOMIC_ACQUIRE);
    return unlikely(pc < hi && pc >= torchload_c10_lo) && torchload_c10_releases;
}

/* 1 once the bridge is attached and follows PyTorch's allocator: its segments, expandable ones
 * included, are then the bridge's events. */
extern int torchload_following;

/* Whether a driver mapping call from `caller` is PyTorch's allocator's own while the bridge
 * follows it: not a library's memory (drvhooks.c). */
static inline int torchload_maps_followed(const void *caller)
{
    uintptr_t pc = (uintptr_t)caller, hi = __atomic_load_n(&torchload_c10_hi, __ATOMIC_ACQUIRE);
    return __atomic_load_n(&torchload_following, __ATOMIC_ACQUIRE) && pc < hi && pc >= torchload_c10_lo;
}

/* The caller this thread last found outside PyTorch's allocator, and torchload_resets then:
 * a program without PyTorch never settles, and asks about the same few callers every time. */
extern __thread const void *torchload_last_plain __attribute__((tls_model("initial-exec")));
extern __thread unsigned torchload_last_resets __attribute__((tls_model("initial-exec")));
extern unsigned torchload_resets;

/* Called by the cudaMalloc path with the hook's return address, outside every gmshim lock.
 * One load and a branch once settled; two compares more for a caller already looked at. */
static inline void torchload_note_malloc(const void *caller)
{
    if (unlikely(!__atomic_load_n(&torchload_settled, __ATOMIC_RELAXED)) &&
        (caller != torchload_last_plain ||
         torchload_last_resets != __atomic_load_n(&torchload_resets, __ATOMIC_RELAXED)))
        torchload_examine(caller);
}

/* ---- the decisions, exposed for the tests ------------------------------------------------- */

/* dlopens a bridge and attaches it (its frames and `c10_path`'s become machinery for the
 * sites). 0, or -1 with the reason. */
int torchload_attach_file(const char *so_path, const char *c10_path, char *why, size_t why_len);
/* Finds (next to libgmshim.so, then in the cache) or, if `build`, builds the bridge for the torch
 * of `c10_path` and attaches it. 0, or -1 with the reason. */
int torchload_attach_for(const char *c10_path, int build, char *why, size_t why_len);
/* The trimmer's pass on PyTorch's cache (registered with trim.c once the bridge is attached):
 * PyTorch's emptyCache through the bridge, when its allocator had events since the last time and,
 * with idle_ns, none for that long. */
void torchload_empty_torch_cache(unsigned long long idle_ns);
/* Forget every decision (tests). */
void torchload_reset(void);

#endif
