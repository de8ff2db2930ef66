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
/* A bounded log's checkpoint: per device with tensor events, a CUT (flags GMLOG_CUT_TORCH) of
 * PyTorch's figures, then a T_SEGMENT_ALLOC per live segment, a T_ALLOC per live tensor and a
 * T_FREE_REQUESTED per pending one, as of one instant (events timed at or before the CUT's
 * cut_ns are in it). Returns the records appended. Nothing while no tensor event was seen. */
uint64_t torchev_cut(uint64_t start_mono);
/* Forgets the live tensors and segments (tests). */
void torchev_forget(void);

#endif
