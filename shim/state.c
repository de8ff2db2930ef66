/* The floor's storage (state.h). */
#include "state.h"

int gm_state;
__thread int gm_depth __attribute__((tls_model("initial-exec")));
__thread int gm_in_stream_hook __attribute__((tls_model("initial-exec")));
