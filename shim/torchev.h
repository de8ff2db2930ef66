/* PyTorch's allocator events (from the bridge, shim/torch/bridge.cpp) into gmshim's log: one
 * GMLOG_T_* record each, with the stream and the call site taken in the allocating thread. */
#ifndef GM_TORCHEV_H
#define GM_TORCHEV_H

#include <stdint.h>

/* The log record type of a bridge action (enum gmshim_torch_action), or 0 for none. */
int torchev_record_type(int action);
/* Code whose frames are PyTorch's allocator or the bridge, not the program: dropped from the
 * sites of tensor events. Up to four spans [lo, hi); called before the tracker is attached. */
void torchev_add_machinery(uintptr_t lo, uintptr_t hi);
/* Events recorded since the start (tests, GMSHIM_VERBOSE). */
uint64_t torchev_count(void);
/* When the last one was recorded (gm_now_ns; 0: none yet). */
uint64_t torchev_last_ns(void);

#endif
