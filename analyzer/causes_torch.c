/* causes_torch.h: the figures of an OOM under PyTorch's expandable segments, from the model of
 * PyTorch's allocator run over the log's tensors. Reads the log again (the model's events are
 * not the pool replay's); never trusts it (the model skips what it cannot place). */
#include "causes_torch.h"
#include "replay_torch.h"

#include <string.h>

int causes_torch_expandable(const model_t *m, int dev, size_t k, uint64_t epoch_start, rt_oom_state_t *st)
{
    rt_log_t log;
    rd_log_t clone; /* its own reading place: other threads may read the model's log meanwhile */
    if (!m->lf || rd_clone(m->lf, &clone))
        return -1;
    int loaded = replay_torch_load(&log, &clone, dev);
    rd_close(&clone);
    if (loaded != 0)
        return -1;
    int rc = replay_torch_oom_state(&log, &log.conf, k, epoch_start, st);
    replay_torch_free(&log);
    return rc;
}
