/* whatif for a keep-mode log: PyTorch's allocator, modelled (replay_torch.h), under the log's
 * own PYTORCH_CUDA_ALLOC_CONF and the settings a user could set instead, one by one or (--grid)
 * every combination, the winner named and combinations known to misbehave flagged. */
#ifndef GM_WHATIF_TORCH_H
#define GM_WHATIF_TORCH_H

#include "json.h"
#include "replay_torch.h"

#include <stdio.h>

typedef struct wt_run {
    rt_conf_t conf;
    rt_result_t res;
    char text[160];           /* PYTORCH_CUDA_ALLOC_CONF's value ("" for PyTorch's defaults) */
    int as_recorded;
    char flag[160];           /* why this combination is not to be used ("" when none) */
} wt_run_t;

typedef struct wt_plan {
    wt_run_t *runs;           /* [0] the log's own settings */
    size_t nruns;
    int best;                 /* the fewest failures, then the lowest peak; -1: none */
    int grid;
} wt_plan_t;

/* Runs the settings on log; 0, or -1 when out of memory. */
int wt_plan_make(const rt_log_t *log, int grid, unsigned threads, wt_plan_t *p);
void wt_plan_free(wt_plan_t *p);
void wt_plan_text(FILE *f, const rt_log_t *log, const wt_plan_t *p);
/* "torch_replays": [...] and "torch_best" in the object being written. */
void wt_plan_json(json_t *j, const rt_log_t *log, const wt_plan_t *p);

#endif
