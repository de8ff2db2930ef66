/* The gmshim_* functions an application may call (shim/gmshim.h). Each works before the first
 * CUDA call too (it initializes the shim) and never fails the program. In a fork child the
 * parent's pools are not its own (their locks may have been copied held): no pool is touched. */
#include "device.h"
#include "devctx.h"
#include "evlog.h"
#include "gmshim.h"
#include "init.h"
#include "ledger.h"
#include "slowpath.h"
#include "warn.h"

#include <string.h>

static int api_in_child(void)
{
    return __atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) == GM_CHILD;
}

GM_EXPORT int gmshim_mark(const char *label)
{
    init_start();
    int rc = evlog_mark(label ? label : "", 0);
    warn_mark();
    ledger_mark();
    return rc;
}

GM_EXPORT int gmshim_phase_end(const char *label)
{
    init_start();
    return evlog_mark(label ? label : "", GMLOG_MARK_END);
}

GM_EXPORT unsigned long long gmshim_empty_cache(void)
{
    init_start();
    if (api_in_child())
        return 0;
    unsigned long long bytes = 0;
    int depth = gm_depth;
    gm_depth = 1; /* the pool's own CUDA calls must pass through */
    for (int i = 0; i < devctx_created_count(); i++) {
        gm_device_t *d = devctx_at(i);
        if (d)
            bytes += slowpath_empty_cache(d, GMLOG_EMPTY_API);
    }
    gm_depth = depth;
    return bytes;
}

GM_EXPORT int gmshim_get_stats(int device, gmshim_stats_t *out)
{
    if (!out || (out->size != sizeof *out && out->size != GMSHIM_STATS_V2_SIZE && out->size != GMSHIM_STATS_V1_SIZE) || device < 0 ||
        device >= GM_MAX_DEVICES)
        return -1;
    unsigned int size = out->size;
    gmshim_stats_t st;
    memset(&st, 0, sizeof st);
    gm_device_t *d = api_in_child() ? NULL : devctx_peek(device);
    if (d)
        device_get_stats(d, &st);
    st.size = size;
    st.device = device;
    memcpy(out, &st, size); /* an older caller's struct ends earlier */
    return 0;
}

GM_EXPORT int gmshim_set_limit(int device, unsigned long long bytes)
{
    if (device < 0 || device >= GM_MAX_DEVICES)
        return -1;
    init_start();
    if (api_in_child())
        return -1;
    int depth = gm_depth;
    gm_depth = 1;
    int rc = device_set_limit(device, (size_t)bytes);
    gm_depth = depth;
    return rc;
}

GM_EXPORT int gmshim_version(void)
{
    return GMSHIM_API_VERSION;
}
