/* The PyTorch bridge built for the installed torch (shim/torchbuild.c): where torch is, what to
 * call the bridge, where the per-user cache is, and the build itself. Exposed for torchload.c, the
 * CLI's pre-build and the tests. */
#ifndef GM_TORCHBUILD_H
#define GM_TORCHBUILD_H

#include <limits.h>
#include <stddef.h>

typedef struct torch_install {
    char root[PATH_MAX];          /* .../site-packages/torch */
    char version[64];             /* torch/version.py's __version__ */
    char cuda_include[PATH_MAX];  /* a directory holding cuda_runtime_api.h */
    int cxx11_abi;                /* _GLIBCXX_USE_CXX11_ABI torch was built with; -1: not known */
} torch_install_t;

/* Whether `path` names PyTorch's CUDA allocator library (libc10_cuda.so). */
int torchbuild_is_allocator_lib(const char *path);
/* The torch install that `c10_path` (.../torch/lib/libc10_cuda.so) belongs to. 0, or -1 with
 * the reason in `why`: no version file, no headers, headers without the trace tracker, no CUDA
 * headers. */
int torchbuild_find_install(const char *c10_path, torch_install_t *out, char *why, size_t why_len);
/* The bridge's file name for this install: "torch-<version>-<source hash>.so". */
void torchbuild_bridge_name(const torch_install_t *t, char *out, size_t len);
/* The per-user cache: $XDG_CACHE_HOME/gmshim/torch or $HOME/.cache/gmshim/torch. -1: neither. */
int torchbuild_cache_dir(char *out, size_t len);
/* Builds the bridge into dir/name with $CXX (else c++), the process waiting (at most
 * `timeout_ms`); the compiler's output goes to dir/name.log. A failed build's log stops later
 * builds, unless `again` (asked for by name): then it is removed, once the directory is trusted.
 * 0, or -1 with the reason. */
int torchbuild_build(const torch_install_t *t, const char *dir, const char *name, int again, long timeout_ms,
                    char *why, size_t why_len);
/* Whether path is a regular file. */
int torchbuild_is_file(const char *path);
/* Whether the compiler ($CXX's first word, else c++) exists, as a path or in PATH: 0, or -1 with
 * the reason in `why`. */
int torchbuild_compiler_found(char *why, size_t why_len);

#endif
