/* GMSHIM_PLAN: a device's repeating step learnt from its allocations (common/steprec.h, keyed by
 * call site and size) and then served from a plan (common/stepplan.h) in a growable range of its
 * own, pages mapped as slots first need them. Anything the plan does not place goes to the
 * online pool, and so does anything the plan cannot do safely: a slot is handed out only when
 * every block planned over its addresses is freed and its fence complete (or, under GPU order,
 * ordered), never during a capture, never in a fork child. Its own lock comes after the arena
 * and thread-cache locks and before the fence lock; its records are written under it. */
#ifndef GM_PLANNER_H
#define GM_PLANNER_H

#include "devtypes.h"
#include "gmlog.h"

typedef struct gm_plan gm_plan_t;

/* What planner_free did with a pointer. */
enum {
    PLANNER_NOT_MINE = 0,   /* not in the plan's range: the pool's */
    PLANNER_FREED,          /* a planned block, freed and logged */
    PLANNER_BAD,            /* in the range but no live planned block starts there (double, interior) */
};

typedef struct planner_counts {
    uint64_t planned;    /* allocations served from the plan */
    uint64_t online;     /* allocations of the planned phase that went to the online pool */
    uint64_t busy;       /* ...of them: their slot's addresses were held or awaited a fence */
    uint64_t departures; /* keys the plan did not expect where it was in step */
    uint64_t frees;      /* planned blocks freed */
    uint64_t fences;     /* fences recorded so that a slot could be taken at once (GPU order) */
    uint64_t period;     /* allocations of the step planned (0 while it learns) */
    uint64_t top;        /* bytes of the plan's range */
    uint64_t allocated, allocated_peak, requested, requested_peak; /* its live blocks (slot sizes; as asked) */
    int state;           /* 0 off, 1 learning, 2 serving */
} planner_counts_t;

/* At the device's creation: the plan's state when GMSHIM_PLAN is on and the device has growable
 * ranges (else one warning, and no plan). */
void planner_setup(gm_device_t *d);

/* An allocation of `size` from `site`, outside any lock: 1 and *out when the plan served it,
 * 0 for the online pool. */
int planner_alloc(gm_device_t *d, size_t size, uint32_t site, void **out);
/* The online pool served it at ptr: while the plan learns, the recogniser records it. */
void planner_note_online(gm_device_t *d, size_t size, uint32_t site, uintptr_t ptr);

/* A free, before the pool looks (no lock held): PLANNER_FREED with the block's bytes and the fence
 * count it was deferred on (*issued: what the caller counts for the next fence; UINT64_MAX when
 * it waits for none), PLANNER_BAD, or PLANNER_NOT_MINE (recorded for the recogniser while it learns). */
int planner_free(gm_device_t *d, uintptr_t ptr, uint32_t site, size_t *bytes, uint64_t *issued);

/* Whether ptr lies in the plan's range (a refused free's kind into *kind: GMLOG_WARN_*). */
int planner_owns_address(gm_device_t *d, uintptr_t ptr, int *kind);
/* Live bytes of the plan (they count as the device's allocated bytes) and its range's pages. */
void planner_counts(gm_device_t *d, planner_counts_t *out);
/* The plan's mapped pages that no planned block needs (every block over them freed; the device
 * waited for once before the first goes, which completes their fences) unmapped and given back,
 * logged as an empty cache for `reason` (GMLOG_EMPTY_*): the bytes. Nothing during a capture.
 * Reached through d->plan_give_back from the pool's releases (an arena lock may be held: the
 * plan's lock comes after it); later slots map their pages again as they first need them. */
size_t planner_give_back(gm_device_t *d, int reason);
/* A cudaDeviceReset: the plan's memory is gone with the context; it learns again. */
void planner_forget(gm_device_t *d);
/* A bounded log's checkpoint (cut.c), the arenas' locks held: the plan's lock taken (after the
 * arenas', as for fork), its mapped pages and its live blocks counted (write 0) or logged as the
 * pool's are, then its lock given back, its next records timed after `after`. */
void planner_cut_lock(gm_device_t *d);
uint32_t planner_cut_pages(gm_device_t *d, int write, uint64_t now);
uint32_t planner_cut_blocks(gm_device_t *d, int write, uint64_t now);
/* The plan's counts and live bytes added to a checkpoint's figures (as gmshim_get_stats adds them). */
void planner_cut_stats(gm_device_t *d, gmlog_cut_t *c);
void planner_cut_unlock(gm_device_t *d, uint64_t after);
/* fork(): the plan's lock around it (after the arenas', before the fence lock). */
void planner_fork_lock(gm_device_t *d);
void planner_fork_unlock(gm_device_t *d);

#endif
