/* Every device's state for a bounded log's checkpoint: what a reader needs in place of the
 * records the log drops (segments, live blocks with their sites, figures and peaks). */
#ifndef GM_CUT_H
#define GM_CUT_H

#include <stdint.h>

/* Appends, for each device in use, a GMLOG_CUT and its SEGMENT_ALLOC and ALLOC records, each
 * device taken with all its arenas locked; returns the records appended. An evlog_cut_fn. */
uint64_t cut_all_devices(uint64_t start_mono);

#endif
