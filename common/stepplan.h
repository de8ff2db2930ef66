/* A planned step: every allocation of the repeating step (steprec.h) given an offset in one
 * range by planpack.h, and the state that serves later steps from it. An allocation whose key is
 * the next one the plan expects takes its slot when every block planned over the same addresses
 * (at other moments of the step) is free and its fence complete, the rule the pool keeps for a
 * freed block; anything else goes to the online pool: a key the plan does not expect (the step
 * departed: it resynchronizes on the next STEPPLAN_SYNC keys it knows in a row), a slot whose
 * addresses a block still holds. Pure bookkeeping: no CUDA, no lock; fences are the caller's
 * numbers (0: a block is free at once). */
#ifndef GM_STEPPLAN_H
#define GM_STEPPLAN_H

#include "steprec.h"

#include <stddef.h>
#include <stdint.h>

#define STEPPLAN_SYNC 4u            /* keys in a row that place a departed step again */
#define STEPPLAN_BUSY UINT64_MAX    /* stepplan_claim: a live block holds the addresses */

typedef struct stepplan stepplan_t;

typedef struct stepplan_stats {
    uint64_t planned;        /* allocations served from the plan */
    uint64_t online;         /* allocations the plan sent to the online pool */
    uint64_t busy;           /* ...of them: their slot's addresses were held */
    uint64_t departures;     /* keys the plan did not expect where it was in step */
    uint64_t resyncs;        /* times it found its place again */
} stepplan_stats_t;

/* The plan of a recorded step, offsets aligned to `align` (a power of two). NULL when out of
 * host memory or when nothing of the step can be planned. */
stepplan_t *stepplan_build(const steprec_step_t *step, uint64_t align);
void stepplan_destroy(stepplan_t *p);

/* Bytes the plan's range needs: the highest end of a planned block. */
uint64_t stepplan_top(const stepplan_t *p);
/* The step's floor: the most bytes its planned blocks hold at once (planpack_floor). */
uint64_t stepplan_floor(const stepplan_t *p);
uint32_t stepplan_period(const stepplan_t *p);
/* Planned slots (a block of the step that lives less than a period). */
uint32_t stepplan_nplanned(const stepplan_t *p);

/* The next allocation, of `key`: the slot it should take (>= 0), or -1 (the online pool). Moves
 * the plan's place in its step. */
int32_t stepplan_next(stepplan_t *p, uint64_t key);
/* Takes slot s (from stepplan_next) when its addresses are free: 0 and *off set; else the
 * fence that must complete first (> done), or STEPPLAN_BUSY. `done`: the newest fence known
 * complete. */
uint64_t stepplan_claim(stepplan_t *p, int32_t s, uint64_t done, uint64_t *off);
/* An allocation stepplan_next gave a slot for went to the online pool after all. */
void stepplan_unclaimed(stepplan_t *p);
/* Slot s, claimed, given back unused (its memory could not be had): free again, and the
 * allocation counted as the online pool's. */
void stepplan_release(stepplan_t *p, int32_t s);
/* The bytes slot s spans (its planned size, rounded to the plan's alignment). */
uint64_t stepplan_slot_size(const stepplan_t *p, int32_t s);
/* The planned block at `off` freed, its addresses reusable once fence `seq` completes (0: at
 * once): 0, or -1 when no live block of the plan starts there. */
int stepplan_free(stepplan_t *p, uint64_t off, uint64_t seq);
/* The slot of the live block of the plan that starts at off, or -1. */
int32_t stepplan_live_slot(const stepplan_t *p, uint64_t off);
/* Whether slot s (below the period) holds a live block (its offset into *off). */
int stepplan_slot_live(const stepplan_t *p, int32_t s, uint64_t *off);
/* Whether a live block of the plan starts at off (its size into *size). */
int stepplan_live_at(const stepplan_t *p, uint64_t off, uint64_t *size);

/* The pages of `page` bytes (a power of two) that a planned block still needs: held[i] set to 1
 * (never cleared) for each page i a live block spans, or a freed one whose fence is newer than
 * `done` (done = UINT64_MAX: every fence complete). Its pages alone may go back to the driver. */
void stepplan_held_pages(const stepplan_t *p, uint64_t page, uint64_t done, uint8_t *held);

void stepplan_stats(const stepplan_t *p, stepplan_stats_t *out);

/* For the tests: NULL, or what is wrong (two live blocks of the plan overlap, a count is off). */
const char *stepplan_check(const stepplan_t *p);

#endif
