/* Getting the PyTorch bridge (shim/torch/bridge.cpp) into an unmodified program: at the first
 * cudaMalloc made by PyTorch's caching allocator, find the bridge built for the installed torch
 * (next to libgmshim.so, or in the per-user cache), build it there if missing (once; the process
 * waits and says so on stderr), dlopen it and attach. Anything missing — compiler, headers, a torch
 * without the hook — is one warning and segment-level logging, never a failure. docs/pytorch.md. */
#ifndef GM_TORCHLOAD_H
#define GM_TORCHLOAD_H

#include "common.h"

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

/* Whether a cudaFree made from `caller` comes from a caching allocator giving its cache back
 * (PyTorch's emptyCache, its OOM retry): then the segment goes back to the driver once the GPU
 * is done with it, instead of into gmshim's cache behind PyTorch's. Two loads and a compare. */
static inline int torchload_free_releases(const void *caller)
{
    uintptr_t pc = (uintptr_t)caller, hi = __atomic_load_n(&torchload_c10_hi, __ATOMIC_ACQUIRE);
    return unlikely(pc < hi && pc >= torchload_c10_lo) && torchload_c10_releases;
}

/* Called by the cudaMalloc path with the hook's return address, outside every gmshim lock.
 * One load and a branch once settled. */
static inline void torchload_note_malloc(const void *caller)
{
    if (unlikely(!__atomic_load_n(&torchload_settled, __ATOMIC_RELAXED)))
        torchload_examine(caller);
}

/* ---- the decisions, exposed for the tests ------------------------------------------------- */

typedef struct torch_install {
    char root[PATH_MAX];          /* .../site-packages/torch */
    char version[64];             /* torch/version.py's __version__ */
    char cuda_include[PATH_MAX];  /* a directory holding cuda_runtime_api.h */
    int cxx11_abi;                /* _GLIBCXX_USE_CXX11_ABI torch was built with; -1: not known */
} torch_install_t;

/* Whether `path` names PyTorch's CUDA allocator library (libc10_cuda.so). */
int torchload_is_allocator_lib(const char *path);
/* The torch install that `c10_path` (.../torch/lib/libc10_cuda.so) belongs to. 0, or -1 with
 * the reason in `why`: no version file, no headers, headers without the trace tracker, no CUDA
 * headers. */
int torchload_find_install(const char *c10_path, torch_install_t *out, char *why, size_t why_len);
/* The bridge's file name for this install: "torch-<version>-<source hash>.so". */
void torchload_bridge_name(const torch_install_t *t, char *out, size_t len);
/* The per-user cache: $XDG_CACHE_HOME/gmshim/torch or $HOME/.cache/gmshim/torch. -1: neither. */
int torchload_cache_dir(char *out, size_t len);
/* Builds the bridge into dir/name with $CXX (else c++), the process waiting (at most
 * `timeout_ms`); the compiler's output goes to dir/name.log. 0, or -1 with the reason. */
int torchload_build(const torch_install_t *t, const char *dir, const char *name, long timeout_ms,
                    char *why, size_t why_len);
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
