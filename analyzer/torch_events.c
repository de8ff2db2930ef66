/* The pass over a log that finds PyTorch's tensor events (torch_events.h). */
#include "torch_events.h"

int torch_events_scan(rd_log_t *lf, int dev, unsigned char devs[256], void (*seg)(void *, uint64_t), void *arg)
{
    const char *mode = rd_meta_keyed(lf, GMLOG_META_OPTION, "GMSHIM_TORCH");
    if (!mode || strcmp(mode, "keep"))
        return 0; /* the bridge writes only with PyTorch's cache kept: other logs cost no pass */
    rd_log_t scan;
    memset(&scan, 0, sizeof scan);
    if (rd_clone(lf, &scan))
        return 0;
    rd_rewind(&scan);
    int any = 0;
    rd_rec_t r;
    while (rd_next(&scan, &r)) {
        if (!torch_is_tensor_type(r.type) || r.len < sizeof(gmlog_tensor_t) || r.device == GMLOG_NO_DEVICE)
            continue;
        if (dev >= 0 && r.device != dev)
            continue;
        devs[r.device] = 1;
        any = 1;
        const gmlog_tensor_t *t = (const gmlog_tensor_t *)r.p;
        if ((r.type == GMLOG_T_SEGMENT_ALLOC || r.type == GMLOG_T_SEGMENT_MAP) && t->addr && seg)
            seg(arg, t->addr);
    }
    rd_close(&scan);
    return any;
}
