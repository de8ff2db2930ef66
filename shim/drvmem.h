/* Device memory taken through the driver API by libraries with their own runtime (NCCL, cuBLAS,
 * cuDNN... through the cuMemAlloc_v2 and cuMemFree_v2 that cuGetProcAddress hands them, wrapped
 * by drvhooks.c): logged as foreign allocations named by the library that asked (drvmem.c). */
#ifndef GM_DRVMEM_H
#define GM_DRVMEM_H

#include <stddef.h>
#include <stdint.h>

/* After a cuMemAlloc_v2 (driver result `result`) that began at t0, made outside gmshim. */
void drvmem_alloc(int result, uint64_t ptr, size_t size, uint64_t t0);
/* Before a cuMemFree_v2 of ptr made outside gmshim: its FREE, if drvmem_alloc logged it. */
void drvmem_free(uint64_t ptr);
/* A fork child: the parent's pointers are not its own. */
void drvmem_forget(void);

#endif
