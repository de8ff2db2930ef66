/* `gmshim run`'s PyTorch bridge, built before the job starts (run_torch.c, docs/pytorch.md). */
#ifndef GM_RUN_TORCH_H
#define GM_RUN_TORCH_H

#include <stddef.h>

/* The python the job runs: COMMAND itself when it is one (python, python3.12, a path to one),
 * the python its #! line names (torchrun, accelerate, a script), else PATH's python3. 0 and its
 * path (or name), or -1. */
int run_torch_python(const char *cmd, char *out, size_t len);
/* The torch package directory that python finds (without importing torch). 0, or -1. */
int run_torch_find(const char *python, char *dir, size_t len);
/* With PyTorch's cache kept and no bridge built for the job's torch: builds it with the library
 * at `lib`, saying so on stderr. Never fails the job: every problem is left to the job's loader. */
void run_torch_prebuild(const char *lib, const char *cmd);

#endif
