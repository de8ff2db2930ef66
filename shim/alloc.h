/* What the hooks call: argument checks as the real runtime does them, the device lookup, the
 * choice between pool and pass-through, and the calls gmshim forwards but counts. */
#ifndef GM_ALLOC_H
#define GM_ALLOC_H

#include <cuda_runtime_api.h>
#include <stdint.h>

/* caller: the return address into the program (for call-site caching), or NULL. */
cudaError_t alloc_malloc(void **out, size_t size, const void *caller);
cudaError_t alloc_free(void *ptr);
cudaError_t alloc_mem_get_info(size_t *free_bytes, size_t *total_bytes);
cudaError_t alloc_device_reset(void);
/* Streams: registered after creation, retired before destruction. */
void alloc_stream_created(cudaStream_t s, unsigned flags);
/* The program made `dev` current (cudaSetDevice succeeded). */
void alloc_device_set(int dev);
void alloc_stream_destroying(cudaStream_t s);
/* Forwarded allocations (managed, pitched, host, stream-ordered): counted and logged. Device
 * ones are tracked so that their cudaFree is recognised. */
void alloc_unpooled(int kind, void *ptr, size_t size, uint64_t extra, uint64_t t0);
/* A stream-ordered allocation the runtime refused for memory (PyTorch's cudaMallocAsync backend):
 * an OOM record with the driver's figures and the caller's site, so that `gmshim oom` finds it. */
void alloc_unpooled_oom(size_t size);
void alloc_unpooled_free(int kind, void *ptr, uint64_t t0);
void alloc_ipc_export(void *ptr);

#endif
