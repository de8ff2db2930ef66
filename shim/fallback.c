/* fallback_engage: the one way from pooling to pass-through. Never stops the program. */
#include "fallback.h"
#include "diag.h"
#include "evlog.h"
#include "state.h"

void fallback_engage(const char *why)
{
    static int once;
    diag_warn_once(&once, "%s; falling back to pass-through (the program goes on without the pool)", why);
    evlog_warning(GMLOG_WARN_PASSTHROUGH, GMLOG_NO_DEVICE, 0, 0, 0);
    int expected = GM_POOLED;
    __atomic_compare_exchange_n(&gm_state, &expected, GM_PASSTHROUGH, 0, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
}
