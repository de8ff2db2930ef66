/* The causes of an OOM under PyTorch's expandable segments: the pool's replay places tensors in
 * classic segments, so there the model of PyTorch's allocator (replay_torch.h) stands in for it. */
#ifndef GM_CAUSES_TORCH_H
#define GM_CAUSES_TORCH_H

#include "replay_torch.h"

/* Runs the model's input `log` (NULL: none loaded) under its own settings up to its k-th recorded
 * OutOfMemoryError; when the model fails there too, fills *st with the pool's figures there (cap,
 * live, reserved, free blocks, the part live since epoch_start) and returns 1; 0 when the model
 * gets past it; -1 when it cannot tell. Below the causes, which take the figures from it. */
int causes_torch_expandable(const rt_log_t *log, size_t k, uint64_t epoch_start, rt_oom_state_t *st);

#endif
