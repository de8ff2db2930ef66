/* Growable ranges (GMSHIM_SEGMENTS=vmm, common/vmm.h): the only place the pool calls the
 * driver's virtual memory API (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess,
 * cuMemUnmap, cuMemRelease), resolved from libcuda at run time. One range of addresses per arena
 * and class, as large as the device; each 2 MiB page its own physical allocation, mapped where a
 * block needs it, readable and writable by the device and every peer that can reach it, logged as
 * a SEGMENT_ALLOC / SEGMENT_FREE of one page (flag GMLOG_SEG_VMM). The caller holds the arena lock
 * and is inside devctx_enter; nothing here maps or unmaps while a capture runs. */
#ifndef GM_RANGES_H
#define GM_RANGES_H

#include "devtypes.h"

/* At the device's creation, with GMSHIM_SEGMENTS=vmm: d->ranges set when the driver and the
 * device have the API at a granularity that divides GM_VMM_PAGE; otherwise the classic pool, one
 * warning and one WARNING record (GMLOG_WARN_VMM, aux GMLOG_VMM_UNAVAILABLE). */
void ranges_setup(gm_device_t *d);

/* Serves a request from the arena's ranges: the best fit, its missing pages mapped; a new range
 * when none has room. cudaErrorMemoryAllocation when the driver or GMSHIM_DEVICE_LIMIT refused a
 * page (what was mapped before stays, idle); cudaErrorNotSupported when the driver has no
 * addresses left for a new range or refuses to map for a reason other than memory (a classic
 * segment then). */
cudaError_t ranges_grow(gm_arena_t *a, size_t rounded, size_t requested, gm_block_t **bp);
/* Whether new memory of the device comes from its ranges: they exist, no capture runs, and the
 * driver never refused a mapping for a reason other than memory (then the classic pool serves it,
 * one warning, one WARNING record: GMLOG_VMM_REFUSED). */
int ranges_usable(gm_device_t *d);
/* Bytes a request would map now (the whole request when a new range is needed). */
size_t ranges_bytes_wanted(gm_arena_t *a, size_t rounded);
/* Unmaps and releases the arena's idle pages (wholly inside free blocks): all, those free for
 * idle_ns, or the oldest until `keep` bytes stay idle, after waiting for the device once (as a
 * cudaFree does) if any goes; the bytes; *npages counts pages. */
size_t ranges_release_idle(gm_arena_t *a, size_t keep, uint64_t idle_ns, uint64_t now, unsigned *npages);
/* Bytes of idle pages in the arena. */
size_t ranges_idle_bytes(gm_arena_t *a);

/* A bounded log's checkpoint (cut.c, planner.c): the mapped pages of the range at base (tokens[i]
 * nonzero: page i mapped) counted, and with `write` logged as the pages' SEGMENT records at now. */
uint32_t ranges_cut_pages(int dev, uintptr_t base, const uint64_t *tokens, size_t npages, int write, uint64_t now);

/* The planned step's range (planner.c, under its lock, inside devctx_enter): `size` bytes of
 * addresses reserved (0, or -1); n pages mapped at addr, their tokens written, logged as pages
 * after *last_stamp (raised to their time), refused (-1, none mapped) during a capture or past
 * GMSHIM_DEVICE_LIMIT. ranges_plan_unmap gives n pages at addr back (their tokens cleared),
 * after waiting for the device once a pass (*synced: as a cudaFree does), logged after *last_stamp:
 * 0, or -1 (a capture, the driver's failure: the pages before it went, their tokens cleared). */
int ranges_plan_reserve(gm_device_t *d, size_t size, uintptr_t *base);
int ranges_plan_map(gm_device_t *d, uintptr_t addr, size_t n, uint64_t *tokens, uint64_t *last_stamp);
int ranges_plan_unmap(gm_device_t *d, uintptr_t addr, size_t n, uint64_t *tokens, int *synced,
                      uint64_t *last_stamp);

#endif
