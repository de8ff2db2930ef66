/* The roof: the shim's life. Inert until the first CUDA call, then initialized once (which calls
 * every module's start); fork and exit handling. Only the entry points (hooks, the API, the
 * injection entry) include this; the state the modules read is the floor, state.h. */
#ifndef GM_INIT_H
#define GM_INIT_H

#include "state.h"

void init_start(void);

/* 1: the hook should handle the call (and must gm_leave); 0: forward it untouched. */
static inline int gm_enter(void)
{
    if (unlikely(gm_depth))
        return 0;
    gm_depth = 1;
    if (unlikely(__atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) == GM_UNINIT))
        init_start();
    return 1;
}

static inline void gm_leave(void)
{
    gm_depth = 0;
}

#endif
