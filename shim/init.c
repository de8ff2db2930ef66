/* Initialization at the first CUDA call (never at load: the library is preloaded into every
 * process a job starts, most of which never touch CUDA), fork handlers and the exit path. */
#include "init.h"
#include "capture.h"
#include "device.h"
#include "diag.h"
#include "evlog.h"
#include "options.h"
#include "real.h"
#include "stacks.h"

#include <pthread.h>
#include <stdlib.h>

int gm_state;
__thread int gm_depth __attribute__((tls_model("initial-exec")));

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void)
{
    capture_fork_prepare();
    device_fork_prepare();
    evlog_fork_prepare();
}

static void fork_parent(void)
{
    evlog_fork_release();
    device_fork_release();
    capture_fork_release();
}

static void fork_child(void)
{
    evlog_fork_release();
    device_fork_release();
    capture_fork_release();
    /* The child's CUDA is unusable and the parent's log and blocks are not its own. */
    evlog_abandon();
    __atomic_store_n(&gm_state, GM_CHILD, __ATOMIC_RELEASE);
}

static void at_exit(void)
{
    if (__atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) != GM_CHILD)
        evlog_close(GMLOG_CLOSE_EXIT);
}

static void init_impl(void)
{
    options_load_all();
    if (real_resolve() == 0)
        diag_verbose("no CUDA runtime found yet; calls will be resolved when it is loaded");
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    evlog_open();
    stacks_init();
    atexit(at_exit);
    int pooled = (int)options_get(GM_OPT_POOL);
    diag_verbose("%s; log: %s", pooled ? "pool on" : "pool off (pass-through, counting)",
                 evlog_path() ? evlog_path() : "off");
    __atomic_store_n(&gm_state, pooled ? GM_POOLED : GM_PASSTHROUGH, __ATOMIC_RELEASE);
}

void gm_init(void)
{
    pthread_once(&init_once, init_impl);
}

void gm_fall_back(const char *why)
{
    static int once;
    diag_warn_once(&once, "%s; falling back to pass-through (the program goes on without the pool)", why);
    evlog_warning(GMLOG_WARN_PASSTHROUGH, GMLOG_NO_DEVICE, 0, 0, 0);
    int expected = GM_POOLED;
    __atomic_compare_exchange_n(&gm_state, &expected, GM_PASSTHROUGH, 0, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
}
