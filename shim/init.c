/* Initialization at the first CUDA call (never at load: the library is preloaded into every
 * process a job starts, most of which never touch CUDA), fork handlers and the exit path. */
#include "init.h"
#include "capture.h"
#include "cupti.h"
#include "cut.h"
#include "device.h"
#include "diag.h"
#include "drvmem.h"
#include "evlog.h"
#include "ledger.h"
#include "options.h"
#include "real.h"
#include "stacks.h"
#include "torchev.h"
#include "torchload.h"
#include "trim.h"
#include "warn.h"
#include "clock.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int torch_took_over;
static int init_begun; /* init_impl's first step: from then on a fork's child is a GM_CHILD */

/* GMSHIM_TORCH=own: PyTorch reads PYTORCH_NO_CUDA_MEMORY_CACHING when it loads, long before the
 * first CUDA call, so this one setting is made at load time. It only sets an environment
 * variable (no file, no thread), and only if the user did not. */
__attribute__((constructor)) static void torch_takeover(void)
{
    const char *mode = getenv("GMSHIM_TORCH");
    if (!mode || strcmp(mode, "own") != 0)
        return;
    if (getenv("PYTORCH_NO_CUDA_MEMORY_CACHING"))
        return;
    setenv("PYTORCH_NO_CUDA_MEMORY_CACHING", "1", 0);
    torch_took_over = 1;
}

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
    /* Forked before gmshim started: to gmshim the child is a fresh process, which starts it at
     * its own first CUDA call (nothing of a start was under way in any thread). */
    if (!__atomic_load_n(&init_begun, __ATOMIC_ACQUIRE))
        return;
    /* The child's CUDA is unusable and the parent's log and blocks are not its own. Forked
     * while another thread was starting gmshim, it never starts it again: that start may hold
     * the loader's locks, copied held into this child (init_start returns at once here). */
    evlog_abandon();
    trim_forget();
    warn_forget();
    ledger_forget();
    drvmem_forget();
    __atomic_store_n(&gm_state, GM_CHILD, __ATOMIC_RELEASE);
}

/* At load, not in init_impl: a fork that comes while another thread runs init_impl must find
 * them (a fork handler registered during init would miss such a fork's child). They take only
 * gmshim's own locks, statically initialised, and do nothing more before gmshim starts. */
__attribute__((constructor)) static void fork_handlers(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static void at_exit(void)
{
    if (__atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) == GM_CHILD)
        return;
    trim_stop();
    warn_stop();
    ledger_stop();
    stacks_note_totals();
    evlog_close(GMLOG_CLOSE_EXIT);
}

/* A checkpoint's device state: PyTorch's tensors first (a reader then knows, at each device's
 * own CUT, that PyTorch's state stands for its tensors), then gmshim's pools. */
static uint64_t checkpoint_cut(uint64_t start_mono)
{
    uint64_t n = torchev_cut(start_mono);
    return n + cut_all_devices(start_mono);
}

static void init_impl(void)
{
    __atomic_store_n(&init_begun, 1, __ATOMIC_RELEASE);
    options_load_all();
    clock_init(!strcmp(options_get_str(GM_OPT_CLOCK), "auto"));
    if (real_resolve() == 0)
        diag_verbose("no CUDA runtime found yet; calls will be resolved when it is loaded");
    checkpoint_set_cut(checkpoint_cut);
    evlog_open();
    stacks_init();
    atexit(at_exit);
    if (options_get(GM_OPT_CUPTI))
        cupti_start(GMLOG_KIND_FOREIGN);
    int pooled = (int)options_get(GM_OPT_POOL) && !cupti_injection_only();
    diag_verbose("%s; log: %s", pooled ? "pool on" : "pool off (pass-through, counting)",
                 evlog_path() ? evlog_path() : "off");
    if (torch_took_over)
        diag_verbose("GMSHIM_TORCH=own: set PYTORCH_NO_CUDA_MEMORY_CACHING=1, so gmshim is "
                     "PyTorch's allocator and sees every tensor");
    else if (!strcmp(options_get_str(GM_OPT_TORCH), "own"))
        diag_verbose("GMSHIM_TORCH=own, but PYTORCH_NO_CUDA_MEMORY_CACHING was already set to '%s': "
                     "left as it was", getenv("PYTORCH_NO_CUDA_MEMORY_CACHING"));
    torchload_init();
    __atomic_store_n(&gm_state, pooled ? GM_POOLED : GM_PASSTHROUGH, __ATOMIC_RELEASE);
    if (pooled)
        trim_start();
    warn_start(); /* pass-through too: its blocks, or PyTorch's tensors, are counted alike */
    ledger_start();
}

void init_start(void)
{
    /* glibc's pthread_once runs init_impl again in the child of a fork that came during it. */
    if (__atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) == GM_CHILD)
        return;
    pthread_once(&init_once, init_impl);
}
