/* The hit path: cudaMalloc and cudaFree served from a device's pool under one arena lock. What
 * is rare (a miss, a capture, the periodic fence and poll) is a call into slowpath.c,
 * capheap.c or fencepol.c. */
#ifndef GM_HIT_H
#define GM_HIT_H

#include "devtypes.h"

cudaError_t hit_alloc(gm_device_t *d, size_t size, uint32_t site, void **out);

typedef enum gm_free_result {
    GM_FREE_DONE,               /* the block was ours and is freed; *err holds the result */
    GM_FREE_NOT_FOUND,          /* no live block of this device starts at ptr */
} gm_free_result_t;
gm_free_result_t hit_free(gm_device_t *d, void *ptr, uint32_t site, cudaError_t *err);

/* Which arena this thread allocates from (the hit path moves a contending thread by itself;
 * tests pin one), and the arena it looks in first on a free. */
void hit_use_arena(int index);
int hit_my_arena(void);
/* This thread found its arena's lock free and the arena last used by itself (0), or taken or
 * last used by another thread (1: the arena's lines move between CPUs either way); returns 1
 * when that happened often enough to move: GM_CONTENDED times, each GM_FORGIVEN quiet
 * acquisitions cancelling one (threads that rarely meet share an arena and its cache). */
int hit_note_lock(int contended);

#endif
