/* A device's pool as a whole: created on first use with its settings read once; its arenas
 * (threads on one device share one until they contend, then spread over more); the blocks the
 * driver hands out itself; frees no arena knows; stats; the cap; a reset; fork. The types are in
 * devtypes.h; the hit path hit.h, the slow path slowpath.h, fences fencepol.h, the device table
 * and the current device devctx.h, captures' heaps capheap.h. */
#ifndef GM_DEVICE_H
#define GM_DEVICE_H

#include "devtypes.h"

/* The device's pool, created on first use. NULL on failure. */
gm_device_t *device_get(int id);

/* Pass-through: forwards to the real cudaMalloc and keeps the counting. */
/* A caching allocator's own segment (PyTorch with its cache kept): the driver's memory of exactly
 * `size`, never gmshim's pool, so that it sees the addresses, sizes and failures it would see
 * without gmshim (its block splits, and so its memory_allocated, follow from them); the cap
 * holds, and an out-of-memory first releases gmshim's cache (slowpath_exact). Freed at once
 * through the real cudaFree, like any pass-through block. */
cudaError_t device_alloc_exact(gm_device_t *d, size_t size, uint32_t site, void **out);
cudaError_t device_alloc_pass(gm_device_t *d, size_t size, uint32_t site, uint64_t t0, void **out);
/* A forwarded allocation (managed, pitched, host, stream-ordered): counted; device memory
 * (managed, pitched) tracked so that its cudaFree is recognised. Logged with `kind`. */
void device_note_unpooled(gm_device_t *d, int kind, void *ptr, size_t size, uint64_t extra,
                          uint32_t site, uint64_t t0);

/* For a pointer no device knows as live: whether it lies in one of this device's segments
 * (a double or interior free) — then 1 and *kind = GMLOG_WARN_*. */
int device_owns_address(gm_device_t *d, uintptr_t ptr, int *kind);
/* A refused (double, interior) or forwarded (foreign) free, counted. */
void device_note_bad_free(gm_device_t *d);
void device_note_foreign_free(gm_device_t *d);

/* Free bytes the program may count on in addition to the driver's: cached + pending. */
size_t device_cached_bytes(gm_device_t *d);
/* cudaDeviceReset: forgets every segment and block of the device without driver calls. */
void device_forget(gm_device_t *d);
/* An IPC handle is being taken on ptr: 1 if ptr is ours and not its segment's start (the block is
 * held from now on), -1 if it lies in a growable range (CUDA refuses it; nothing held), else 0. */
int device_ipc_export(gm_device_t *d, void *ptr, int *found);
void device_get_stats(gm_device_t *d, gmshim_stats_t *out);
/* GMSHIM_WARN's readings (warn.c), each arena's lock taken in turn, briefly. The least allocated
 * bytes since the last reading (the sum of each arena's least: exact with one arena, a lower
 * bound with more) and the bytes allocated now; each arena's low-water mark starts again. */
void device_take_low(gm_device_t *d, uint64_t *low, uint64_t *now);
/* The troughs of d's allocated bytes, found as they change (read without a lock), while the
 * device has one arena; NULL with several (each holds a share) or when GMSHIM_WARN is off. */
leakwarn_tap_t *device_tap(gm_device_t *d);
/* The bytes of the blocks the program holds (a thread's cached blocks left out) that were handed
 * out in GMSHIM_WARN's step `since` or later and outlived a step since (made before the step
 * before the one under way: d->warn_epoch), per call site, sorted by site into *out (malloc'd,
 * the caller frees it; NULL on failure): how many sites. */
typedef struct gm_site_bytes {
    uint32_t site;
    uint64_t bytes;
} gm_site_bytes_t;
size_t device_site_bytes(gm_device_t *d, uint32_t since, gm_site_bytes_t **out);
/* One of GMSHIM_WARN's steps of d ended: blocks handed out from now on are of the next. */
static inline void device_warn_step(gm_device_t *d) { __atomic_add_fetch(&d->warn_epoch, 1, __ATOMIC_RELAXED); }
/* v[0..n) sorted by site, each site's bytes summed into one entry: the entries left. */
size_t device_site_bytes_merge(gm_site_bytes_t *v, size_t n);
/* gmshim_set_limit: the cap on device `id` (0 = none); releases cache above it. */
int device_set_limit(int id, size_t bytes);

/* Arenas: one more (returns its index, or -1 when at the maximum). */
int device_add_arena(gm_device_t *d);
/* Every arena of the device locked, in the lock order (no arena can be added until unlocked):
 * returns how many. For a consistent view of the device (a log checkpoint). */
int device_lock_arenas(gm_device_t *d);
void device_unlock_arenas(gm_device_t *d, int narenas);
/* Where a thread that keeps contending for arena `current` goes: a new arena while fewer than
 * max_arenas exist, then another existing one (round robin); `current` if there is no other. */
int device_move_arena(gm_device_t *d, int current);

/* Fork: prepare takes every lock of every device, parent and child release them. */
void device_fork_prepare(void);
void device_fork_release(void);

#endif
