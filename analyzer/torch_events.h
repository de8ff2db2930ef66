/* What the model (model_torch.c) and the replay's loader (replay_load.c) share in reading
 * PyTorch's tensor events (GMLOG_T_*): which devices hold them and PyTorch's segment bases (one
 * pass, made only for a log that kept PyTorch's cache), and the OOM that stands for a T_OOM. */
#ifndef GM_TORCH_EVENTS_H
#define GM_TORCH_EVENTS_H

#include "reader.h"

#include <string.h>

/* Calls seg(arg, base) for each PyTorch segment base of the devices wanted (dev, or every
 * device when dev < 0) and sets devs[d] for each device with tensor events; 0 when none. */
int torch_events_scan(rd_log_t *lf, int dev, unsigned char devs[256], void (*seg)(void *, uint64_t), void *arg);

static inline int torch_is_tensor_type(unsigned type)
{
    return type >= GMLOG_T_ALLOC && type <= GMLOG_T_OOM;
}

/* The OOM record for PyTorch's OutOfMemoryError (T_OOM): the request is the tensor's, the pool's
 * figures those of the hooks' last failed cudaMalloc (PyTorch's segment ask) when there was one. */
static inline void torch_oom_record(gmlog_oom_t *out, const gmlog_oom_t *hook, const gmlog_tensor_t *t)
{
    memset(out, 0, sizeof *out);
    if (hook) {
        *out = *hook;
        out->segment = hook->request;
    }
    out->h = t->h;
    out->h.type = GMLOG_OOM;
    out->request = t->size;
    out->site = t->site;
}

#endif
