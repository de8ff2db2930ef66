/* The CUDA injection entry point: CUDA_INJECTION64_PATH=libgmshim.so makes the driver call
 * InitializeInjection at cuInit. It initializes gmshim in injection mode (or, under the preload
 * too, adds CUPTI to it) and subscribes. Like the hooks, an entry point: it may call the roof
 * (init.h); nothing calls it. Never fails the driver's start: it returns 1 whatever happens. */
#include "cupti.h"
#include "common.h"
#include "evlog.h"
#include "init.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* Whether gmshim is preloaded, so that its hooks serve the program and what CUPTI sees
 * bypassed them. (Not "is the global cudaMalloc ours": the driver loads the injection library
 * into the global scope, where nothing may ever call it.) */
static int preloaded(void)
{
    if (__atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) != GM_UNINIT)
        return 1; /* a hook initialized gmshim before the driver started */
    Dl_info self;
    const char *pre = getenv("LD_PRELOAD");
    if (!pre || !dladdr((void *)preloaded, &self) || !self.dli_fname)
        return 0;
    const char *me = base_name(self.dli_fname);
    size_t len = strlen(me);
    for (const char *p = pre; *p;) {
        size_t n = strcspn(p, " :");
        const char *b = p;
        for (const char *q = p; q < p + n; q++)
            if (*q == '/')
                b = q + 1;
        if ((size_t)(p + n - b) == len && !strncmp(b, me, len))
            return 1;
        p += n;
        p += *p != 0;
    }
    return 0;
}

/* The driver's entry point (see the top of this file). Returns 1. */
GM_EXPORT int InitializeInjection(void);
GM_EXPORT int InitializeInjection(void)
{
    if (__atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) == GM_CHILD)
        return 1;
    int hooks = gm_depth || preloaded();
    /* gm_depth set: the driver was started from inside gmshim (a hook's real call, the init):
     * the shim is initialized or being initialized on this very thread; do not wait for it. */
    if (!gm_depth) {
        if (!hooks) {
            evlog_set_mode("injection");
            cupti_set_injection_only();
        }
        cupti_set_injecting(1);
        gm_depth = 1;
        init_start();
        gm_depth = 0;
        cupti_set_injecting(0);
    }
    cupti_start_as(hooks ? GMLOG_KIND_FOREIGN : GMLOG_KIND_OBSERVED);
    return 1;
}
