/* The step recogniser: over a device's allocations (a key each: the call site and the size, or
 * the size alone), finds the sequence a training loop repeats and records one repetition's
 * lifetimes for the planner (stepplan.h). A period is taken when the last 2P keys are one
 * sequence twice, live bytes stand where they stood one period earlier (within 1/64 of the most
 * ever live: a layer's forward, which only adds, is no step), and the period's live bytes reach
 * 15/16 of the most ever live (an optimizer's loop over alike layers is no step). It is then
 * confirmed over one more period, in which every block of the repetition that lives less than
 * a period dies. Pure bookkeeping: no CUDA, no lock, no clock (time is its own count of
 * allocations and frees). */
#ifndef GM_STEPREC_H
#define GM_STEPREC_H

#include "planpack.h"

#include <stddef.h>
#include <stdint.h>

#define STEPREC_MIN_PERIOD 4u       /* allocations a step makes at least */

typedef enum steprec_state {
    STEPREC_LEARN = 0,   /* looking for a period */
    STEPREC_CLOSE,       /* a period found: one more of it confirms it */
    STEPREC_READY,       /* a repetition recorded (steprec_step) */
    STEPREC_FULL,        /* no period within the allocations it may record: it stopped */
} steprec_state_t;

typedef struct steprec steprec_t;

/* An allocation's key: its call site and its size as the pool rounds it (the shim's planner and
 * the analyzer's planned replay both key by it, so that the replay learns the step the shim does). */
static inline uint64_t steprec_key(uint32_t site, uint64_t rounded)
{
    return rounded ^ ((uint64_t)site * 0x9E3779B97F4A7C15ull);
}

/* A recogniser that records at most max_allocs allocations (a step is at most half of them).
 * NULL when out of host memory. */
steprec_t *steprec_create(uint32_t max_allocs);
void steprec_destroy(steprec_t *r);

/* An allocation of `size` bytes (as the pool rounds it): its tag for steprec_free, 0 when it
 * is not recorded (the recogniser is READY or FULL). */
uint32_t steprec_alloc(steprec_t *r, uint64_t key, uint64_t size);
/* The block of `tag` freed (0: nothing). */
void steprec_free(steprec_t *r, uint32_t tag);

steprec_state_t steprec_state(const steprec_t *r);

/* One repetition, READY only: `period` allocations, each with its key and life on the circle of
 * `clock_period` (planpack.h; a block living a period or more, or not seen to die, has
 * planned[i] = 0 and iv[i] zero). The arrays are the recogniser's (valid until destroyed).
 * 0, or -1 when not READY. */
typedef struct steprec_step {
    uint32_t period;
    uint64_t clock_period;
    const uint64_t *keys;
    const planpack_iv_t *iv;
    const uint8_t *planned;
} steprec_step_t;
int steprec_step(const steprec_t *r, steprec_step_t *out);

#endif
