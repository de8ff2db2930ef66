/* Device memory taken through the driver API by libraries with their own runtime (NCCL, cuBLAS,
 * cuDNN... through the cuMemAlloc_v2 and cuMemFree_v2, or the cuMemCreate and cuMemMap, that
 * cuGetProcAddress hands them, wrapped by drvhooks.c): logged as foreign allocations named by the
 * library that asked (drvmem.c). */
#ifndef GM_DRVMEM_H
#define GM_DRVMEM_H

#include <stddef.h>
#include <stdint.h>

/* After a cuMemAlloc_v2 (driver result `result`) that began at t0, made outside gmshim. */
void drvmem_alloc(int result, uint64_t ptr, size_t size, uint64_t t0);
/* Before a cuMemFree_v2 of ptr made outside gmshim: its FREE, if drvmem_alloc logged it. */
void drvmem_free(uint64_t ptr);
/* The driver's virtual memory calls made outside gmshim (drvhooks.c), PyTorch's own left out:
 * physical memory is taken by cuMemCreate (a `result` of out of memory is an OOM) on device `dev`,
 * and logged then, once per handle however many times or devices it is mapped to; it goes back
 * when its handle is released and its last mapping unmapped, as the driver frees it. The FREE
 * comes then. A handle has no address: its ALLOC and FREE are keyed by gmshim's own record of it,
 * a host address no device pointer can have. */
void drvmem_created(int result, uint64_t handle, size_t size, int dev, uint64_t t0);
void drvmem_mapped(uint64_t va, uint64_t handle);
void drvmem_unmapped(uint64_t va, size_t size);
void drvmem_released(uint64_t handle);
/* A fork child: the parent's pointers are not its own. */
void drvmem_forget(void);

#endif
