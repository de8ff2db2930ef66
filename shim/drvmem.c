/* Driver-API allocations of other libraries, seen through the driver functions cuGetProcAddress
 * hands them (drvhooks.c): an ALLOC of kind FOREIGN with the requesting library's name, a FREE
 * when it goes back, an OOM record and a ledger sample when the driver refuses one. Called only
 * outside gmshim (the runtime working for a hook, or the pool itself, is not logged again) and
 * never inside a driver call. Its own table lock is a leaf. */
#include "drvmem.h"
#include "common.h"
#include "devctx.h"
#include "device.h"
#include "evlog.h"
#include "ledger.h"
#include "logrec.h"
#include "real.h"
#include "requester.h"
#include "stacks.h"
#include "state.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#define CU_OUT_OF_MEMORY 2

typedef struct drv_block {
    uint64_t ptr;
    int dev;
    UT_hash_handle hh;
} drv_block_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static drv_block_t *live;
static int forgotten;

static int logging(void)
{
    return !__atomic_load_n(&forgotten, __ATOMIC_ACQUIRE) &&
           __atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) != GM_CHILD && evlog_enabled();
}

static GM_COLD void refused(int dev, size_t size)
{
    gmlog_oom_t r;
    memset(&r, 0, sizeof r);
    r.request = size;
    r.segment = size;
    size_t f = 0, t = 0;
    if (REAL_CALL(cudaMemGetInfo, &f, &t) == cudaSuccess) {
        r.driver_free = f;
        r.driver_total = t;
    }
    r.site = stacks_site_skip(requester_is_machinery);
    logrec_oom(dev, GMLOG_OOM_ASYNC, &r); /* no pool of gmshim's was asked: no pool figures */
    ledger_oom(dev);
}

void drvmem_alloc(int result, uint64_t ptr, size_t size, uint64_t t0)
{
    if (!logging())
        return;
    int dev = 0;
    if (devctx_current(&dev) != 0)
        dev = 0;
    device_get(dev); /* the device described (and its ledger begun) before its first record */
    if (result == CU_OUT_OF_MEMORY) {
        refused(dev, size);
        return;
    }
    if (result != 0 || !ptr)
        return;
    drv_block_t *b = malloc(sizeof *b);
    if (!b)
        return;
    memset(b, 0, sizeof *b);
    b->ptr = ptr;
    b->dev = dev;
    uint32_t site = stacks_site_skip(requester_is_machinery);
    uint32_t lib = requester_library();
    pthread_mutex_lock(&lock);
    drv_block_t *old = NULL;
    HASH_FIND(hh, live, &ptr, sizeof ptr, old);
    if (old) { /* its free went unseen */
        HASH_DEL(live, old);
        free(old);
    }
    HASH_ADD(hh, live, ptr, sizeof b->ptr, b);
    /* Logged under the table's lock: a free of this pointer on another thread comes after it. */
    evlog_alloc(dev, GMLOG_KIND_FOREIGN << GMLOG_KIND_SHIFT, ptr, size, lib, site, gm_now_ns(), t0);
    pthread_mutex_unlock(&lock);
}

void drvmem_free(uint64_t ptr)
{
    if (!ptr || !logging())
        return;
    drv_block_t *b = NULL;
    pthread_mutex_lock(&lock);
    HASH_FIND(hh, live, &ptr, sizeof ptr, b);
    if (b) {
        HASH_DEL(live, b);
        uint64_t now = gm_now_ns();
        evlog_free(b->dev, GMLOG_KIND_FOREIGN << GMLOG_KIND_SHIFT, ptr, 0, now, now);
    }
    pthread_mutex_unlock(&lock);
    free(b);
}

void drvmem_forget(void)
{
    __atomic_store_n(&forgotten, 1, __ATOMIC_RELEASE);
}
