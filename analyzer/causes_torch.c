/* causes_torch.h: the figures of an OOM under PyTorch's expandable segments, from the model of
 * PyTorch's allocator run over the log's tensors (the model's input the causes loaded with the
 * pool replay's log); never trusts it (the model skips what it cannot place). */
#include "causes_torch.h"

int causes_torch_expandable(const rt_log_t *log, size_t k, uint64_t epoch_start, rt_oom_state_t *st)
{
    if (!log)
        return -1;
    return replay_torch_oom_state(log, &log->conf, k, epoch_start, st);
}
