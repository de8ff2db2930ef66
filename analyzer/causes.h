/* OOM causes from counterfactuals: the log's failure replayed (replay.h) to see the pool as it
 * was, then the smallest change that makes the failed request fit — a pool that wastes nothing
 * (fragmentation), without what earlier iterations kept (leak), without memory outside the
 * pool (outside), without the current iteration's own memory (transient peak), else capacity.
 * The figures in the verdict add up by construction; causes_check() says so or what does not. */
#ifndef GM_CAUSES_H
#define GM_CAUSES_H

#include "model.h"
#include "plan.h"
#include "split.h"
#include "whatif_search.h"

/* The OOM causes (docs/cli.md has the rules). */
typedef enum oom_cause {
    OOM_CAPACITY,
    OOM_TRANSIENT,
    OOM_LEAK,
    OOM_FRAGMENTATION,
    OOM_OUTSIDE,
} oom_cause_t;

typedef struct cause {
    oom_cause_t cause;
    int reproduced;          /* the replay failed at this OOM too */
    int torch_cache_kept;    /* PyTorch's cache on: the blocks are its segments */
    int torch_tensors;       /* PyTorch's cache on, its tensors logged by the bridge: they are the blocks */
    int by_limit;            /* GMSHIM_DEVICE_LIMIT refused it, or PyTorch's memory fraction: */
    int torch_limit;         /* the cap is PyTorch's per-process memory fraction */
    int torch_expandable;    /* PyTorch's expandable segments: the model of PyTorch's allocator decides
                                (causes_torch.c), else the recorded figures */
    int epoch_system;        /* EPOCH_MARKS, EPOCH_TROUGHS or -1 */
    int epoch_steps;         /* the unmarked epochs are steps of repeating allocations, not troughs */
    uint32_t epoch_index;    /* boundaries (marks, troughs) before the failure */
    uint64_t epoch_start;
    /* bytes, all as the pool counts them (blocks, rounded to 512) */
    uint64_t request;        /* the failed request, rounded */
    uint64_t requested;      /* the bytes the program asked for (the text states both) */
    uint64_t cap;            /* what the pool could reserve then (the cap, or the driver's) */
    uint64_t total;          /* the device */
    uint64_t outside;        /* device memory outside the pool (0 under a cap) */
    uint64_t live;           /* allocated at the failure = persistent + transient */
    uint64_t persistent;     /* live, allocated before the current iteration */
    uint64_t transient;      /* live, allocated in the current iteration */
    uint64_t leaked;         /* live, allocated in earlier iterations at sites that keep growing */
    uint64_t leak_per_epoch;
    uint32_t leak_site;      /* the site holding most of it (0: none) */
    uint32_t fail_site;
    uint64_t reserved;       /* after the OOM's release of the cache */
    uint64_t pool_free;      /* reserved - live: free inside segments that hold live blocks */
    uint64_t largest_free;
    uint64_t free_blocks;
    char why[768];
    char cannot_tell[320];   /* what this log cannot show, and why ("" when nothing) */
    /* the tested remedy (from the what-if search over the whole log) */
    char env_name[32], env_value[160];
    char tested[640];
    uint64_t min_device_bytes;
    int min_found;
    /* the recommendation rule's figures (advice.c) */
    uint64_t segment;         /* the segment the pool asked for at the failure */
    int growing;              /* memory grows every step: no setting is the remedy */
    int growth_peaks;         /* ...each step's peak of it (a growing transient) */
    uint64_t growth_per_step;
    uint64_t step_ns;         /* a step's mean time, 0: unknown */
    uint64_t lasting_device_bytes; /* a device lasting the recording plus ADVICE_STEPS_PAST steps */
    int climbing;             /* it asked for more than the job had ever held: no larger cap */
    uint64_t climb_need, climb_held;
    uint64_t headroom;
    /* the floor, the plan and the split (plan.h, split.h) */
    plan_point_t plan;
    split_t split;
} cause_t;

/* The cause of a failed OOM of the model, by replaying m->lf. 0, or -1 when the log cannot be
 * replayed there (no reader, a failure before a bounded log's checkpoint, out of memory). */
int causes_of(const model_t *m, const model_oom_t *o, cause_t *c);
/* The cap that decided, as the reports name it: " (PyTorch's memory fraction 0.03 = 4.19 GiB)"
 * (torch: fraction = cap / total) or " (the GMSHIM_DEVICE_LIMIT cap)". Returns buf. */
const char *causes_limit_name(char *buf, size_t len, uint64_t cap, uint64_t total, int torch);
/* NULL when the verdict's figures agree with its cause, else what contradicts it. */
const char *causes_check(const cause_t *c);
/* Forgets the replays kept between calls (tests; the CLI exits). */
void causes_reset(void);
/* For the tests: called as a log is decoded for its causes (with its name), holding that log's
 * lock and no other. NULL outside the tests. */
extern void (*causes_load_hook)(const char *name);

/* "the 4 B request (512 B as the pool rounds it)": the bytes asked for, as an OOM's first line
 * gives them, and the rounded size the sums use only where it differs, labelled as such. */
const char *causes_request_words(uint64_t requested, uint64_t rounded, char *buf, size_t len);

#endif
