/* The calls behind the hooks. Odd arguments (NULL out-parameters, size 0, cudaFree(NULL)) go to
 * the real runtime so that its exact result and last-error state reach the program. */
#include "alloc.h"
#include "capture.h"
#include "devctx.h"
#include "device.h"
#include "diag.h"
#include "evlog.h"
#include "fallback.h"
#include "fencepol.h"
#include "hit.h"
#include "ledger.h"
#include "logrec.h"
#include "options.h"
#include "real.h"
#include "stacks.h"
#include "state.h"
#include "torchload.h"

#include <stdlib.h>
#include <string.h>

/* Above this a request cannot be rounded safely; the real runtime answers it. */
#define GM_MAX_REQUEST (1ull << 47)

/* gm_state changes under other threads (a fallback): read as the atomic it is. */
static inline int alloc_state(void)
{
    return __atomic_load_n(&gm_state, __ATOMIC_RELAXED);
}

static __thread int hint_device __attribute__((tls_model("initial-exec")));

/* Leaves `err` as the runtime's last error, as the real call that failed would have. */
static void set_last_error(cudaError_t err)
{
    gm_ctx_t c;
    devctx_enter(NULL, &c);
    if (err == cudaErrorInvalidValue) {
        REAL_CALL(cudaMalloc, NULL, 16);
    } else if (err == cudaErrorMemoryAllocation) {
        void *p = NULL;
        if (REAL_CALL(cudaMalloc, &p, (size_t)1 << 62) == cudaSuccess)
            REAL_CALL(cudaFree, p);
    }
    devctx_leave(&c);
}

/* A failed allocation: the card's ledger sampled now, outside every pool lock. */
static GM_NOINLINE cudaError_t oom_sampled(int dev, cudaError_t err)
{
    if (err == cudaErrorMemoryAllocation)
        ledger_oom(dev);
    return err;
}

cudaError_t alloc_malloc(void **out, size_t size, const void *caller)
{
    if (unlikely(!out || size == 0 || size > GM_MAX_REQUEST || alloc_state() == GM_CHILD))
        return REAL_CALL(cudaMalloc, out, size);
    int dev = 0;
    if (unlikely(devctx_current(&dev) != 0))
        return REAL_CALL(cudaMalloc, out, size);
    gm_device_t *d = device_get(dev);
    if (unlikely(!d)) {
        fallback_engage("cannot create the pool of a device (out of host memory?)");
        return REAL_CALL(cudaMalloc, out, size);
    }
    hint_device = dev;
    torchload_note_malloc(caller); /* PyTorch's allocator: follow it from inside (torchload.h) */
    uint32_t site = stacks_site_from(caller);
    if (alloc_state() != GM_POOLED) {
        cudaError_t err = device_alloc_pass(d, size, site, gm_now_ns(), out);
        return unlikely(err != cudaSuccess) ? oom_sampled(dev, err) : err;
    }
    cudaError_t err = torchload_caching_caller(caller) ? device_alloc_exact(d, size, site, out)
                                                      : hit_alloc(d, size, site, out);
    if (likely(err == cudaSuccess))
        return err;
    if (unlikely(alloc_state() == GM_PASSTHROUGH))
        return oom_sampled(dev, device_alloc_pass(d, size, site, gm_now_ns(), out)); /* gmshim gave up */
    oom_sampled(dev, err);
    if (err == cudaErrorMemoryAllocation && REAL_CALL(cudaPeekAtLastError) != err)
        set_last_error(err);
    return err;
}

cudaError_t alloc_free(void *ptr)
{
    if (unlikely(!ptr || alloc_state() == GM_CHILD))
        return REAL_CALL(cudaFree, ptr);
    cudaError_t err = cudaSuccess;
    gm_device_t *hint = devctx_peek(hint_device);
    if (hint && hit_free(hint, ptr, 0, &err) == GM_FREE_DONE)
        return err;
    int n = devctx_created_count();
    for (int i = 0; i < n; i++) {
        gm_device_t *d = devctx_at(i);
        if (d && d != hint && hit_free(d, ptr, 0, &err) == GM_FREE_DONE)
            return err;
    }
    /* Not live anywhere: inside one of our segments it is a double or interior free, which the
     * real runtime refuses; otherwise it is someone else's memory. */
    for (int i = 0; i < n; i++) {
        gm_device_t *d = devctx_at(i);
        int kind;
        if (d && device_owns_address(d, (uintptr_t)ptr, &kind)) {
            device_note_bad_free(d);
            evlog_warning(kind, d->id, (uint64_t)(uintptr_t)ptr, 0, 0);
            set_last_error(cudaErrorInvalidValue);
            return cudaErrorInvalidValue;
        }
    }
    gm_device_t *d = hint ? hint : devctx_at(0);
    if (d)
        device_note_foreign_free(d);
    evlog_warning(GMLOG_WARN_FOREIGN_FREE, d ? d->id : GMLOG_NO_DEVICE, (uint64_t)(uintptr_t)ptr, 0, 0);
    return REAL_CALL(cudaFree, ptr);
}

cudaError_t alloc_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
    size_t f = 0, t = 0;
    cudaError_t err = REAL_CALL(cudaMemGetInfo, &f, &t);
    if (err != cudaSuccess)
        return err;
    int dev;
    if (alloc_state() != GM_CHILD && devctx_current(&dev) == 0) {
        gm_device_t *d = device_get(dev); /* a cap applies before the first allocation too */
        if (d) {
            /* What the pool caches is free to the program: it gets it without the driver. */
            gmshim_stats_t st;
            memset(&st, 0, sizeof st);
            device_get_stats(d, &st);
            size_t cached = device_cached_bytes(d);
            f = f + cached > t ? t : f + cached;
            if (st.limit && st.limit < t) {
                /* Under a cap the cap is the device: total = cap, free = the room under it. */
                size_t used = st.reserved.current > cached ? st.reserved.current - cached : 0;
                size_t room = st.limit > used ? st.limit - used : 0;
                t = st.limit;
                f = f < room ? f : room;
            }
        }
    }
    if (free_bytes)
        *free_bytes = f;
    if (total_bytes)
        *total_bytes = t;
    return cudaSuccess;
}

cudaError_t alloc_device_reset(void)
{
    int dev;
    if (alloc_state() != GM_CHILD && devctx_current(&dev) == 0) {
        gm_device_t *d = devctx_peek(dev);
        if (d) {
            capture_device_reset(d);
            device_forget(d);
        }
    }
    cudaError_t err = REAL_CALL(cudaDeviceReset);
    devctx_contexts_changed(); /* the device's context is gone; a new one may take its address */
    return err;
}

void alloc_stream_created(cudaStream_t s, unsigned flags)
{
    int dev;
    if (alloc_state() == GM_CHILD || devctx_current(&dev) != 0)
        return;
    capture_stream_created(s, dev);
    gm_device_t *d = device_get(dev);
    if (d)
        fencepol_stream_created(d, s, flags);
}

void alloc_device_set(int dev)
{
    if (alloc_state() != GM_CHILD)
        fencepol_note_used(dev);
}

void alloc_stream_destroying(cudaStream_t s)
{
    if (alloc_state() == GM_CHILD || !s || s == cudaStreamLegacy || s == cudaStreamPerThread)
        return;
    gm_device_t *d = devctx_peek(capture_stream_device(s));
    capture_stream_destroyed(s);
    if (d)
        fencepol_stream_destroyed(d, s);
}

void alloc_unpooled(int kind, void *ptr, size_t size, uint64_t extra, uint64_t t0)
{
    if (alloc_state() == GM_CHILD || !ptr)
        return;
    int dev = 0;
    devctx_current(&dev);
    gm_device_t *d = device_get(dev);
    if (d)
        device_note_unpooled(d, kind, ptr, size, extra, stacks_site(), t0);
}

GM_COLD void alloc_unpooled_oom(size_t size)
{
    if (alloc_state() == GM_CHILD || !evlog_enabled())
        return;
    int dev = 0;
    devctx_current(&dev);
    ledger_foreign_oom(dev, size, stacks_site());
}

void alloc_unpooled_free(int kind, void *ptr, uint64_t t0)
{
    if (alloc_state() == GM_CHILD || !ptr)
        return;
    int dev = hint_device;
    devctx_current(&dev);
    evlog_free(dev, (unsigned)kind << GMLOG_KIND_SHIFT, (uint64_t)(uintptr_t)ptr, 0, gm_now_ns(), t0);
}

void alloc_ipc_export(void *ptr)
{
    if (alloc_state() == GM_CHILD)
        return;
    int n = devctx_created_count();
    for (int i = 0; i < n; i++) {
        gm_device_t *d = devctx_at(i);
        int found = 0, sub = d ? device_ipc_export(d, ptr, &found) : 0;
        if (sub < 0) {
            static int once;
            diag_warn_once(&once, "cudaIpcGetMemHandle(%p): the block lies in a growable range "
                                  "(GMSHIM_SEGMENTS=vmm), which CUDA cannot export; its error is "
                                  "returned; GMSHIM_SEGMENTS=classic serves IPC", ptr);
            evlog_warning(GMLOG_WARN_VMM, d->id, (uint64_t)(uintptr_t)ptr, 0, GMLOG_VMM_IPC);
        } else if (sub) {
            static int once;
            diag_warn_once(&once, "cudaIpcGetMemHandle(%p): the pointer is not the start of its "
                                  "gmshim segment; the handle maps the segment's base, so the "
                                  "importer must add the offset (see docs/limits.md)", ptr);
            evlog_warning(GMLOG_WARN_IPC_SUBBLOCK, d->id, (uint64_t)(uintptr_t)ptr, 0, 0);
        }
        if (found)
            return;
    }
}
