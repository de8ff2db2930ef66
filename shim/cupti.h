/* CUPTI observation: the device allocations that never reach the hooks (a static cudart, the
 * driver API, cuBLAS/NCCL's private cudart), through a driver-API callback subscription. Never
 * links CUPTI; never fails or blocks the program. <cupti.h> is NVIDIA's; this is "cupti.h". */
#ifndef GM_CUPTI_H
#define GM_CUPTI_H

#include <stddef.h>

/* Subscribes once for the whole process. `kind` says what the records are: GMLOG_KIND_FOREIGN
 * (the hooks are live, so what CUPTI sees bypassed them) or GMLOG_KIND_OBSERVED (injection
 * mode: CUPTI is the only eye). The first call decides; later ones return its result. Returns 0
 * when subscribed, -1 when CUPTI is missing, unusable or taken (one warning said so). */
int cupti_start(int kind);

/* 1 when gmshim runs only as the injection library (not preloaded): its hooks, which the driver
 * put in the global scope, must then pass calls through rather than pool them. Set by the
 * injection entry point (inject.c). */
int cupti_injection_only(void);
void cupti_set_injection_only(void);
/* While InitializeInjection initializes the shim, cupti_start leaves the start (and the kind)
 * to it; it then starts with cupti_start_as (which, unlike cupti_start, always starts). */
void cupti_set_injecting(int on);
int cupti_start_as(int kind);

/* ---- for the tests ------------------------------------------------------------------------- */

/* The files tried for libcupti, in order (an already loaded libcupti is used before any of
 * them): up to `max` paths of at most `len` bytes each into out[i * len]; returns the count.
 * GMSHIM_TEST_CUPTI_NO_SYSTEM=1 leaves out /usr/local/cuda and the loader's own search. */
int cupti_candidates(char *out, size_t len, int max);
/* The libcupti in use, or NULL. */
const char *cupti_loaded_path(void);

#endif
