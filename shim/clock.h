/* The shim's clock: gm_now_ns (common.h) reads the time-stamp counter once it is calibrated. */
#ifndef GM_CLOCK_H
#define GM_CLOCK_H

#include "common.h"

/* At the first CUDA call: whether the counter is used (allowed by GMSHIM_CLOCK=auto, the kernel's
 * clocksource, the CPU's flags); if so takes the first calibration pair. */
void clock_init(int counter_allowed);
/* Whether the kernel keeps time with an invariant counter this CPU reads with rdtscp. */
int clock_counter_usable(void);
/* Takes the second pair now (refused if under half the calibration interval since the first, and
 * then never used); 1 if the counter is in use. */
int clock_calibrate_now(void);
int clock_uses_counter(void);

#endif
