/* The causes of an OOM under PyTorch's expandable segments: the pool's replay places tensors in
 * classic segments, so there the model of PyTorch's allocator (replay_torch.h) stands in for it. */
#ifndef GM_CAUSES_TORCH_H
#define GM_CAUSES_TORCH_H

#include "causes.h"

/* Replays m's log (device dev) through the model under its own settings up to its k-th recorded
 * OutOfMemoryError; when the model fails there too, sets c->reproduced and the pool's figures
 * (cap, live, reserved, free blocks, the persistent part against c->epoch_start) from it and
 * returns 1; 0 when the model gets past it; -1 when it cannot tell. */
int causes_torch_expandable(const model_t *m, int dev, size_t k, cause_t *c);

#endif
