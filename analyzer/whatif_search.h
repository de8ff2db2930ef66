/* What-if search over one device's replay: the recording as it ran, the settings asked for or a
 * grid of them, the candidate remedies (GMSHIM_MAX_SPLIT, GMSHIM_PENDING_WAIT, GMSHIM_DEVICE_LIMIT;
 * for a keep-mode log PyTorch's settings, run by the model of its allocator),
 * and the smallest device, by bisection, on which the recording gets past every failure. A
 * setting is recommended only when a replay with its value got past every recorded OOM; it is
 * never the value already in force. */
#ifndef GM_WHATIF_SEARCH_H
#define GM_WHATIF_SEARCH_H

#include "whatif_types.h"

void wi_opts_default(wi_opts_t *o);
/* tlog: the model's input (replay_torch_load) where the log kept PyTorch's cache, else NULL: then
 * PyTorch's settings are the candidates, each replayed by the model, not imitated by the pool. */
int wi_plan_make(const rp_log_t *log, const rt_log_t *tlog, const wi_opts_t *o, wi_plan_t *p);
void wi_plan_free(wi_plan_t *p);
/* A size as GMSHIM_* settings take it: "2G", "128M", or plain bytes. */
const char *wi_size(uint64_t bytes, char buf[32]);

#endif
