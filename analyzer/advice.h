/* The one rule of what gmshim recommends (oom, report and whatif share it): a setting only when
 * its replay gets past every recorded OOM with headroom, only for the allocator the job ran
 * (PYTORCH_CUDA_ALLOC_CONF with PyTorch's cache kept, GMSHIM_* otherwise), and never for memory
 * that grows from step to step: a growing line is named with its rate and when it runs out. A
 * larger cap only where the failure asked for no more than the job had held before: one that
 * asked for more ends the recording inside a climb whose top the log does not hold. */
#ifndef GM_ADVICE_H
#define GM_ADVICE_H

#include "model.h"
#include "plan.h"
#include "whatif_types.h"

/* Steps a larger device must last past the recording at a growing line's rate. */
#define ADVICE_STEPS_PAST 100
/* Headroom: the larger of this share of the cap (percent) and ADVICE_HEADROOM_STEPS steps'
 * growth of the failing device's memory. */
#define ADVICE_HEADROOM_PCT 5
#define ADVICE_HEADROOM_STEPS 3

/* How the failing device's memory grows, from the model at its first failure. */
typedef struct advice_growth {
    uint64_t per_step;       /* bytes a step (mark) keeps more than the one before; 0: no growth */
    uint32_t steps;          /* steps (marks, iterations) before the failure */
    uint64_t step_ns;        /* a step's mean time (0: unknown) */
    uint32_t site;           /* the growing line (0: none named) */
    const char *word;        /* "step", "mark" or "iteration" */
    int peaks;               /* it is the steps' peaks that grow (a growing transient), not what they keep */
} advice_growth_t;

/* The growth at failure o: the iterations' low-water marks rise steadily (PyTorch's segments,
 * which it keeps: rising at least twice, never falling much) over at least one whole iteration.
 * The rule the causes' leak test uses too. */
void advice_growth(const model_t *m, const model_oom_t *o, int torch_cache_kept, advice_growth_t *g);
/* The same for device dev's first failure in m (none: no growth). */
void advice_growth_of_device(const model_t *m, int dev, int torch_cache_kept, advice_growth_t *g);
/* Where the model saw no growth: the steps' peaks of live bytes between marks (plan.h), a
 * transient that grows every step, which no setting fixes either. */
void advice_growth_of_log(const rp_log_t *log, advice_growth_t *g);
/* g into the what-if options the rule reads. */
void advice_opts(wi_opts_t *o, const advice_growth_t *g);
/* Headroom a setting must leave under cap (the bytes the pool could reserve). */
uint64_t advice_headroom(uint64_t cap, uint64_t per_step);
/* Whether a setting named `env` is one for the allocator the log's job ran. */
int advice_for_allocator(const rp_log_t *log, const char *env);
/* Whether run r's settings keep the planned step off: GMSHIM_PLAN is shown by whatif, never
 * recommended (at a cap it thrashes where growable ranges do not: docs/performance.md). */
int advice_plan_off(const rp_log_t *log, const wi_run_t *r);
/* Replays each candidate that got past every failure again with its capacity less the headroom
 * (run->headroom_ok), then picks the recommendation (p->rec, p->fits, p->why) by the rule. */
void advice_choose(wi_plan_t *p, const rp_log_t *log, const wi_opts_t *o);

#endif
