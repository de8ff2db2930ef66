/* Capture's private heaps: while a capture runs on a device, everything allocated there comes
 * from the capture's own heap (in arena 0), never released while the capture runs; a heap whose
 * graph and instances are gone goes back to the general pool (its free memory after the next
 * fence). capture.c decides when; this is the memory side. */
#ifndef GM_CAPHEAP_H
#define GM_CAPHEAP_H

#include "devtypes.h"

/* A private heap for a capture; one more (delta 1) or one fewer (-1) capture under way,
 * `current` the heap allocations go to now; a released heap's segments join arena 0. */
gm_heap_t *capheap_graph_heap(gm_device_t *d, void *owner, uint32_t id);
void capheap_set_captures(gm_device_t *d, int delta, gm_heap_t *current);
void capheap_release_graph_heap(gm_device_t *d, gm_heap_t *heap);

/* An allocation during a capture (arena 0 locked): from the capture's heap, fed by whole free
 * segments of the general heap or by the driver (in relaxed mode). */
gm_block_t *capheap_alloc(gm_arena_t *a, size_t rounded, size_t size, uint32_t site,
                          unsigned *flags, cudaError_t *err);

#endif
