/* The shim's life: inert until the first CUDA call, then initialized once; a per-thread guard
 * so that calls made by the runtime, backtrace() or dlsym inside gmshim pass straight through;
 * pass-through after an internal failure; fork and exit handling. */
#ifndef GM_INIT_H
#define GM_INIT_H

#include "common.h"

typedef enum gm_state {
    GM_UNINIT = 0,
    GM_POOLED,          /* the pool serves cudaMalloc/cudaFree */
    GM_PASSTHROUGH,     /* forward every call, keep counting (GMSHIM_POOL=0 or a failure) */
    GM_CHILD,           /* a fork child: forward everything, touch nothing of the parent */
} gm_state_t;

extern int gm_state;
extern __thread int gm_depth __attribute__((tls_model("initial-exec")));

void gm_init(void);

/* 1: the hook should handle the call (and must gm_leave); 0: forward it untouched. */
static inline int gm_enter(void)
{
    if (unlikely(gm_depth))
        return 0;
    gm_depth = 1;
    if (unlikely(__atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) == GM_UNINIT))
        gm_init();
    return 1;
}

static inline void gm_leave(void)
{
    gm_depth = 0;
}

/* After an internal failure: one warning, then pass-through for good. */
void gm_fall_back(const char *why);

#endif
