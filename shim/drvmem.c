/* Driver-API allocations of other libraries, seen through the driver functions cuGetProcAddress
 * hands them (drvhooks.c): an ALLOC of kind FOREIGN with the requesting library's name, a FREE
 * when it goes back, an OOM record and a ledger sample when the driver refuses one; for the
 * virtual memory calls, per handle (its mappings counted, never its bytes twice). Called only
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

/* Physical memory of cuMemCreate, logged under the address of this record. */
typedef struct drv_handle {
    uint64_t handle;
    int dev;
    unsigned maps;              /* its mappings now */
    int released;
    UT_hash_handle hh;
} drv_handle_t;

typedef struct drv_map {
    uint64_t va;
    drv_handle_t *h;
    UT_hash_handle hh;
} drv_map_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static drv_block_t *live;
static drv_handle_t *handles;
static drv_map_t *maps;
static int forgotten;

static int logging(void)
{
    return !__atomic_load_n(&forgotten, __ATOMIC_ACQUIRE) &&
           __atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) != GM_CHILD && evlog_enabled();
}

static GM_COLD void refused(int dev, size_t size)
{
    ledger_foreign_oom(dev, size, stacks_site_skip(requester_is_machinery));
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

/* ---- the virtual memory calls ----------------------------------------------------------------- */

static uint64_t handle_key(const drv_handle_t *h)
{
    return (uint64_t)(uintptr_t)h;
}

/* Its physical memory is gone: the FREE, and the record forgotten (lock held). */
static void handle_gone(drv_handle_t *h)
{
    HASH_DEL(handles, h);
    uint64_t now = gm_now_ns();
    evlog_free(h->dev, GMLOG_KIND_FOREIGN << GMLOG_KIND_SHIFT, handle_key(h), 0, now, now);
    free(h);
}

/* A mapping's end (lock held): the handle goes with its last one once released. */
static void map_drop(drv_map_t *m)
{
    drv_handle_t *h = m->h;
    HASH_DEL(maps, m);
    free(m);
    if (h->maps && !--h->maps && h->released)
        handle_gone(h);
}

void drvmem_created(int result, uint64_t handle, size_t size, int dev, uint64_t t0)
{
    if (dev < 0 || dev >= GM_MAX_DEVICES || !logging())
        return;
    device_get(dev);
    if (result == CU_OUT_OF_MEMORY) {
        refused(dev, size);
        return;
    }
    if (result != 0 || !size)
        return;
    drv_handle_t *h = malloc(sizeof *h);
    if (!h)
        return;
    memset(h, 0, sizeof *h);
    h->handle = handle;
    h->dev = dev;
    uint32_t site = stacks_site_skip(requester_is_machinery);
    uint32_t lib = requester_library();
    pthread_mutex_lock(&lock);
    drv_handle_t *old = NULL;
    HASH_FIND(hh, handles, &handle, sizeof handle, old);
    if (old) { /* its release went unseen, and the driver gave its value out again */
        drv_map_t *m, *tmp;
        HASH_ITER(hh, maps, m, tmp)
            if (m->h == old) {
                HASH_DEL(maps, m);
                free(m);
            }
        handle_gone(old);
    }
    HASH_ADD(hh, handles, handle, sizeof h->handle, h);
    evlog_alloc(dev, GMLOG_KIND_FOREIGN << GMLOG_KIND_SHIFT, handle_key(h), size, lib, site, gm_now_ns(), t0);
    pthread_mutex_unlock(&lock);
}

void drvmem_mapped(uint64_t va, uint64_t handle)
{
    if (!va || !logging())
        return;
    pthread_mutex_lock(&lock);
    drv_handle_t *h = NULL;
    if (handles)
        HASH_FIND(hh, handles, &handle, sizeof handle, h);
    drv_map_t *m = h ? malloc(sizeof *m) : NULL;
    if (m) {
        drv_map_t *old = NULL;
        HASH_FIND(hh, maps, &va, sizeof va, old);
        if (old) /* its unmap went unseen */
            map_drop(old);
        memset(m, 0, sizeof *m);
        m->va = va;
        m->h = h;
        h->maps++;
        HASH_ADD(hh, maps, va, sizeof m->va, m);
    }
    pthread_mutex_unlock(&lock);
}

void drvmem_unmapped(uint64_t va, size_t size)
{
    if (!logging())
        return;
    pthread_mutex_lock(&lock);
    drv_map_t *m, *tmp;
    HASH_ITER(hh, maps, m, tmp) /* a library's few mappings: every one that lay in the range */
        if (m->va >= va && m->va - va < size)
            map_drop(m);
    pthread_mutex_unlock(&lock);
}

void drvmem_released(uint64_t handle)
{
    if (!logging())
        return;
    pthread_mutex_lock(&lock);
    drv_handle_t *h = NULL;
    if (handles)
        HASH_FIND(hh, handles, &handle, sizeof handle, h);
    if (h) {
        h->released = 1;
        if (!h->maps)
            handle_gone(h);
    }
    pthread_mutex_unlock(&lock);
}

void drvmem_forget(void)
{
    __atomic_store_n(&forgotten, 1, __ATOMIC_RELEASE);
}
