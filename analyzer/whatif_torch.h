/* whatif for a keep-mode log: PyTorch's allocator, modelled (replay_torch.h), under the log's
 * own PYTORCH_CUDA_ALLOC_CONF and the settings a user could set instead, one by one or (--grid)
 * every combination, the winner named and combinations known to misbehave flagged. */
#ifndef GM_WHATIF_TORCH_H
#define GM_WHATIF_TORCH_H

#include "json.h"
#include "whatif_types.h"

#include <stdio.h>

/* Runs the settings on log; 0, or -1 when out of memory. */
int wt_plan_make(const rt_log_t *log, int grid, unsigned threads, wt_plan_t *p);
void wt_plan_free(wt_plan_t *p);
/* The evidence table; `rec`: the run the recommendation names (-1: none). */
void wt_plan_text(FILE *f, const rt_log_t *log, const wt_plan_t *p, int rec);
/* "torch_replays": [...] and "torch_best" in the object being written. */
void wt_plan_json(json_t *j, const rt_log_t *log, const wt_plan_t *p, int rec);

#endif
