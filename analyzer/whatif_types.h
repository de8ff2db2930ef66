/* The what-if search's types: one configuration's run (the pool's, or the model of PyTorch's
 * allocator's), the options, and the plan of runs with its recommendation. Below the search
 * (whatif_search.c) and the recommendation rule (advice.c), which both fill them; no code. */
#ifndef GM_WHATIF_TYPES_H
#define GM_WHATIF_TYPES_H

#include "replay.h"
#include "replay_torch.h"

#define WT_MAX_RUNS 64

/* A run of the model of PyTorch's allocator (whatif_torch.c). */
typedef struct wt_run {
    rt_conf_t conf;
    rt_result_t res;
    char text[160];           /* PYTORCH_CUDA_ALLOC_CONF's value ("" for PyTorch's defaults) */
    int as_recorded;
    char flag[160];           /* why this combination is not to be used ("" when none) */
    char also[80];            /* a setting outside PYTORCH_CUDA_ALLOC_CONF it ran under ("" for none):
                                 gmshim's raised cap */
} wt_run_t;

typedef struct wt_plan {
    wt_run_t *runs;           /* [0] the log's own settings */
    size_t nruns;
    int best;                 /* the fewest failures, then the lowest peak; -1: none */
    int grid;
} wt_plan_t;

typedef struct wi_run {
    rp_cfg_t cfg;
    rp_result_t res;
    char label[200];          /* "as recorded", "frees at once", a setting */
    char env_name[32];        /* the setting changed ("" for none) */
    char env_value[160];      /* its value as GMSHIM_* takes it ("128M"), or PYTORCH_CUDA_ALLOC_CONF's */
    int candidate;            /* a remedy tried on its own (may be recommended) */
    int headroom_ok;          /* advice.c: it also got past every failure with the headroom taken away */
    int model;                /* 1 + the run of the model of PyTorch's allocator it is (wi_plan_t.torch),
                                 not the pool's: res holds the model's figures; 0: the pool's */
    int raises_cap;           /* a larger cap than the one that refused (more memory, not a setting) */
} wi_run_t;

typedef struct wi_opts {
    uint64_t device_limit;    /* RP_RECORDED when not given */
    uint64_t max_split;
    uint64_t cache_limit;
    int pending_wait;         /* -1 when not given */
    int grid;
    unsigned threads;         /* 0: one per CPU */
    int progress;             /* progress on stderr */
    /* The failing device's growth (advice.c: advice_growth), for the recommendation rule. */
    uint64_t growth_per_step; /* bytes per step (mark, iteration); 0: none */
    uint64_t step_ns;         /* a step's mean time, 0: unknown */
    const char *growth_word;  /* "step", "mark", "iteration" */
    int growth_peaks;         /* the steps' peaks grow (a growing transient), not what they keep */
    uint32_t growth_site;     /* the growing line (a transient's: the line that asked), 0: none */
} wi_opts_t;

typedef struct wi_plan {
    wi_run_t *runs;           /* [0] the recording followed, [1] its settings simulated */
    size_t nruns, caprun;
    int failing;              /* the recording failed (an OOM the replay reproduces) */
    int reproduced;           /* ...and the simulation of its settings fails too */
    uint64_t outside;         /* device memory outside the pool at the first failure */
    uint64_t min_pool_bytes;  /* the smallest the pool may reserve for no failure (to 1 MiB) */
    uint64_t min_device_bytes;/* ...plus what was outside the pool: the device it needs */
    int min_found;
    unsigned bisect_replays;
    unsigned bisect_rounds;   /* rounds of replays at once, one after another */
    unsigned bisect_first;    /* ...the first round's replays */
    int bisect_beside_runs;   /* it ran beside the runs (whatif_search.c, early_t), not after them */
    int rec;                  /* the recommended run, -1: none */
    int fits;                 /* the recording fits under the recommendation (or as it is) */
    char why[640];
    uint64_t headroom;        /* advice.c: what a recommended setting must leave under the cap */
    int growing;              /* memory grows from step to step: no setting is a remedy */
    int climbing;             /* the failure asked for more than the job had ever held: what it
                                 needs past the recording is unknown, no larger cap is a remedy */
    uint64_t climb_need;      /* ...live + the request then */
    uint64_t climb_held;      /* ...the most live before it */
    int growth_peaks;         /* ...the steps' peaks of it */
    uint32_t growth_site;     /* the growing line, 0: none named */
    uint64_t growth_per_step;
    uint64_t lasting_device_bytes; /* growing: a device lasting the recording plus ADVICE_STEPS_PAST steps */
    double events_per_s;      /* replay speed per configuration */
    /* A log that kept PyTorch's cache, its tensors in the log: the model of PyTorch's allocator
     * replays the candidates (PyTorch's settings), the pool's replay imitates none of them. */
    const rt_log_t *tlog;     /* the model's input; NULL: the pool's candidates */
    wt_plan_t torch;          /* the model's runs ([0] as run) */
} wi_plan_t;

#endif
