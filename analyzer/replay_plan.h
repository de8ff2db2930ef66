/* The replay's growable ranges and planned step: GMSHIM_SEGMENTS=vmm (pages mapped as blocks
 * need them, common/vmm.c) and GMSHIM_PLAN (the step learnt by common/steprec.c and served by
 * common/stepplan.c from a range of its own), the shim's own code with the driver's calls
 * counted instead of made. Below replay.c, which decides when each is asked; never trusts the
 * log: a block id out of range is nobody's. */
#ifndef GM_REPLAY_PLAN_H
#define GM_REPLAY_PLAN_H

#include "pool.h"

#include <stddef.h>
#include <stdint.h>

typedef struct rplan rplan_t;

/* A plan learning from scratch, for block ids below nids; NULL when out of host memory. */
rplan_t *rplan_create(uint32_t nids);
void rplan_destroy(rplan_t *p);
/* cudaDeviceReset: the plan and its range are gone; it learns again (as the shim's planner). */
void rplan_reset(rplan_t *p);

/* Whether it is learning the step (the shim's ranges then move idle pages); serving it. */
int rplan_learning(const rplan_t *p);
int rplan_serving(const rplan_t *p);
/* Learning: block id of `rounded` bytes from `site`, served by the pool. 1 when the step was
 * found with it and the plan made (the caller releases the pool's cache, as the shim does). */
int rplan_note(rplan_t *p, uint32_t id, uint32_t site, size_t rounded);
/* Learning: block id freed by the program. */
void rplan_note_free(rplan_t *p, uint32_t id);

/* Serving: the slot the plan expects for this allocation, or -1 (the pool serves it). */
int32_t rplan_next(rplan_t *p, uint32_t site, size_t rounded);
/* Slot s taken when its addresses are free (stepplan_claim): 0 and *off, else the fence it waits
 * for or STEPPLAN_BUSY. `done`: the newest fence complete. */
uint64_t rplan_claim(rplan_t *p, int32_t s, uint64_t done, uint64_t *off);
/* The allocation rplan_next gave slot s went to the pool after all: s not yet claimed (-1), or
 * claimed and given back. */
void rplan_unclaimed(rplan_t *p, int32_t s);
/* Bytes of [off, off + n) of the plan's range not mapped yet; then mapped. */
uint64_t rplan_missing(const rplan_t *p, uint64_t off, size_t n);
void rplan_map(rplan_t *p, uint64_t off, size_t n);
/* The pool's OOM release or an explicit empty cache: the mapped pages no planned block needs
 * (as shim/planner.c planner_give_back: the device waited for, every fence complete) unmapped;
 * their bytes. */
uint64_t rplan_give_back(rplan_t *p);
/* Slot s, claimed at off, is block id's: its bytes (the slot's size). */
uint64_t rplan_taken(rplan_t *p, uint32_t id, int32_t s, uint64_t off);
/* Block id freed: 1 and its bytes when the plan holds it (reusable once fence seq completes,
 * 0: at once), else 0. */
int rplan_free(rplan_t *p, uint32_t id, uint64_t seq, uint64_t *bytes);

typedef struct rplan_stats {
    uint64_t planned;        /* allocations served from the plan */
    uint64_t period;         /* the step's allocations (0: no plan made) */
    uint64_t mapped;         /* bytes of the plan's range mapped */
    uint64_t top;            /* bytes the plan's range spans */
} rplan_stats_t;
void rplan_stats(const rplan_t *p, rplan_stats_t *out);

/* GMSHIM_SEGMENTS=vmm: the best fit in h's ranges with its missing pages mapped while the heap's
 * reservation stays within `cap` (under the plan's learning, idle pages moved first where mapping
 * would pass `budget`; 0: no moving); NULL with *refused = 1 when the cap refused, 0 when no range
 * has room. */
gm_block_t *rplan_range_alloc(gm_heap_t *h, size_t rounded, size_t req, uint64_t cap, uint64_t budget, int *refused);
/* Bytes a grow maps for `rounded` in h's ranges: the best fit's missing pages, or the whole
 * request in pages where no free block fits (shim/ranges.c ranges_bytes_wanted). */
size_t rplan_range_wanted(const gm_heap_t *h, size_t rounded);
/* A range of `size` addresses at base for `rounded`'s class: 0, or -1. */
int rplan_range_add(gm_heap_t *h, uintptr_t base, size_t size, size_t rounded);
/* Idle pages of h's ranges given back: all, those idle for idle_ns at now, or the oldest until
 * at most `keep` bytes stay idle (vmm_release_idle). The bytes. */
size_t rplan_range_release(gm_heap_t *h, size_t keep, uint64_t idle_ns, uint64_t now);

#endif
