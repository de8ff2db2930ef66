/* Which library asked for an allocation CUPTI saw (requester.c). */
#ifndef GM_REQUESTER_H
#define GM_REQUESTER_H

#include <stdint.h>

/* Loads and resolves the unwinder (libgcc_s) now, not inside a driver call. */
void requester_init(void);
/* The string id of the base name of the first object on this thread's stack that is not
 * CUDA's or gmshim's own (libcublasLt.so.13, libnccl.so.2, the program); 0 if none. */
uint32_t requester_library(void);
/* For stacks_site_skip: whether a frame belongs to CUDA's machinery (the driver, libcupti, a
 * shared libcudart, gmshim), which the call site should not start with. */
int requester_is_machinery(uintptr_t pc);
/* Whether frames in the object with this path belong to the CUDA stack, gmshim or the C
 * runtime, and so cannot be the library that asked for an allocation. */
int requester_is_cuda_stack(const char *path);

#endif
