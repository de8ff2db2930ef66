/* Growable ranges (GMSHIM_SEGMENTS=vmm): one range of reserved addresses per heap and class,
 * cut into blocks as any segment, with physical memory mapped in GM_VMM_PAGE pages only where a
 * live or pending block needs it. Best fit runs across the whole range, so free space is never
 * stranded between segments; pages wholly inside free blocks are what the cache holds, and what
 * an empty cache, GMSHIM_CACHE_LIMIT, the idle trimmer and an OOM retry give back. Pure
 * bookkeeping, as pool.h: the driver calls (map, unmap) are the caller's, passed in. */
#ifndef GM_VMM_H
#define GM_VMM_H

#include "pool.h"

/* Maps npages unmapped pages from addr (a run inside seg), a nonzero token for each into
 * tokens: 0, or -1 when the driver or a cap refused (nothing of the run is mapped then). Pages
 * of one mapping (one driver handle) carry the same token, and only whole mappings go back. */
typedef int (*vmm_map_fn)(void *arg, gm_segment_t *seg, uintptr_t addr, size_t npages, uint64_t *tokens);
/* Unmaps and releases one whole idle mapping of npages from addr, its token given: 0, or -1
 * (it stays mapped). */
typedef int (*vmm_unmap_fn)(void *arg, gm_segment_t *seg, uintptr_t addr, size_t npages, const uint64_t *tokens);

/* Pages a best fit for `rounded` in h would have to map: 0 when it is served without mapping,
 * SIZE_MAX when no free block of h fits (a range must be added). */
size_t vmm_pages_wanted(const gm_heap_t *h, size_t rounded);

/* The best fit for `rounded`, its missing pages mapped (in runs, through map), taken. NULL with
 * *refused = 0 when no free block fits; with *refused = 1 when map failed (pages mapped before
 * the failure stay, idle). */
gm_block_t *vmm_alloc(gm_heap_t *h, size_t rounded, size_t requested, vmm_map_fn map, void *arg, int *refused);

/* Bytes of idle mappings (wholly inside free blocks) of h's ranges: what could go back now. */
size_t vmm_idle_bytes(const gm_heap_t *h);

/* Gives idle pages back through unmap, the longest free first: all of them (keep 0, idle_ns 0),
 * those of blocks free for idle_ns at `now`, or the oldest until at most `keep` bytes stay idle.
 * Returns the bytes; *npages counts the pages. */
size_t vmm_release_idle(gm_heap_t *h, size_t keep, uint64_t idle_ns, uint64_t now, vmm_unmap_fn unmap, void *arg,
                        unsigned *npages);

/* As vmm_alloc, but pages it must map are first taken from idle ones (the longest free first,
 * none of the block it takes) while mapping them would lift the heap's reservation above
 * `budget`: a reservation that grows only when no idle page is left, for the price of unmapping
 * and mapping again (a page moved). *moved counts the pages unmapped. */
gm_block_t *vmm_alloc_within(gm_heap_t *h, size_t rounded, size_t requested, size_t budget, vmm_map_fn map,
                             vmm_unmap_fn unmap, void *arg, int *refused, unsigned *moved);

/* For the tests: whether every range's page map agrees with its count and covers every live and
 * pending block. NULL or what is wrong. */
const char *vmm_check(const gm_heap_t *h);

#endif
