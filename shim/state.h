/* The floor: the state every module reads. Whether the shim pools, forwards or is a fork child,
 * and the per-thread guard that makes calls from inside gmshim (the runtime, backtrace(), dlsym)
 * pass straight through. Data only: nothing here calls another module. */
#ifndef GM_STATE_H
#define GM_STATE_H

#include "common.h"

typedef enum gm_state {
    GM_UNINIT = 0,
    GM_POOLED,          /* the pool serves cudaMalloc/cudaFree */
    GM_PASSTHROUGH,     /* forward every call, keep counting (GMSHIM_POOL=0 or a failure) */
    GM_CHILD,           /* a fork child: forward everything, touch nothing of the parent */
} gm_state_t;

extern int gm_state;
extern __thread int gm_depth __attribute__((tls_model("initial-exec")));
/* Set by the runtime's stream hooks around the real call: the driver's stream functions it
 * reaches (drvhooks.c) leave the stream to the hook. */
extern __thread int gm_in_stream_hook __attribute__((tls_model("initial-exec")));

#endif
