/* An OOM's cause from the model's figures at the failure (docs/cli.md has the rules): what
 * the reports, the verdict of ranks, diff and the exports name it by. */
#ifndef GM_OOM_CLASSIFY_H
#define GM_OOM_CLASSIFY_H

#include "causes.h"


typedef struct oom_verdict {
    oom_cause_t cause;
    uint64_t request;         /* bytes asked for, rounded to the pool's 512 */
    uint64_t available;       /* what the device gives this process */
    uint64_t outside;         /* device memory the pool does not hold */
    uint64_t pool_free;       /* reserved - allocated at the failure */
    uint64_t growth;          /* leak: low-water growth over the epochs */
    uint64_t growth_per_epoch;
    int under_limit;          /* GMSHIM_DEVICE_LIMIT refused it, or PyTorch's memory fraction: */
    int torch_limit;          /* the cap is PyTorch's (available = fraction x total) */
    uint64_t total;           /* the device */
    char why[512];            /* one sentence of evidence */
} oom_verdict_t;
const char *oom_cause_name(oom_cause_t c);
/* The verdict: the counterfactual replay's (causes.c), else the snapshot rules'. */
void oom_classify(const model_t *m, const model_oom_t *o, oom_verdict_t *v);
/* The snapshot rules alone: the model's figures at the failure. */
void oom_classify_snapshot(const model_t *m, const model_oom_t *o, oom_verdict_t *v);

#endif
