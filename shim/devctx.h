/* Device context lookups: the table of device pools (created once, never freed), the calling
 * thread's current device without cudaGetDevice's cost, and the wrapper every pool call to the
 * runtime goes through (relaxed capture mode, the pool's device current). */
#ifndef GM_DEVCTX_H
#define GM_DEVCTX_H

#include "devtypes.h"

/* The device's pool if it exists. */
gm_device_t *devctx_peek(int id);
/* 1 once a pool exists and the process sees exactly one device (its current device is 0). */
int devctx_is_only(void);
/* The calling thread's current device, as cudaGetDevice gives it, without its cost: 0 on
 * success, -1 when the runtime cannot tell. */
int devctx_current(int *dev);
/* Contexts were destroyed (a device reset): forget which device each thread's context was. */
void devctx_contexts_changed(void);
/* Every created device, in creation order, for the API, the trimmer and fork handlers. */
int devctx_created_count(void);
gm_device_t *devctx_at(int index);

void devctx_enter(gm_device_t *d, gm_ctx_t *c);
void devctx_leave(gm_ctx_t *c);

/* A runtime call of the pool failed: one warning, one WARNING record (the sticky state). */
void devctx_note_cuda_failure(gm_device_t *d, const char *what, cudaError_t err);

/* The table's lock (first in the lock order): creation, new arenas, fork. */
void devctx_lock(void);
void devctx_unlock(void);
/* Under the table's lock: the pool of `id` or NULL; publishing a new one (`only`: the process
 * sees exactly this one device, 0). */
gm_device_t *devctx_find_locked(int id);
void devctx_publish_locked(gm_device_t *d, int only);

#endif
