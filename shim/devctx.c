/* The device table and the current device. The table only grows (a pool lives as long as the
 * process); lookups are atomic loads. Nothing here allocates or takes a pool lock. */
#include "devctx.h"
#include "diag.h"
#include "evlog.h"
#include "real.h"

static gm_device_t *devices[GM_MAX_DEVICES];
static int created[GM_MAX_DEVICES]; /* ids in creation order */
static int ncreated;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
/* The process sees exactly one device: the current device is always 0, no need to ask. */
static int one_device;

/* The current device, cheaper than cudaGetDevice, which serializes threads once several devices
 * are visible (docs/performance.md, "The current device"). The driver's current context is a
 * thread-local read; its device is asked once per context and kept per thread, keyed by the
 * context and by ctx_gen, which a device reset bumps. This relies on cudaSetDevice making the
 * device's primary context current at once, as the runtime does since CUDA 12 (checked by
 * tests/gpu/gpu_devices.cu, with runtime and driver switches). */
static gm_cu_ctx_get_current_t cu_ctx_get_current;
static gm_cu_ctx_get_device_t cu_ctx_get_device;
static int driver_lookups; /* attempts to find the driver calls, up to DRIVER_LOOKUPS */
#define DRIVER_LOOKUPS 16
static unsigned ctx_gen;
static __thread void *my_ctx __attribute__((tls_model("initial-exec")));
static __thread int my_ctx_device __attribute__((tls_model("initial-exec")));
static __thread unsigned my_ctx_gen __attribute__((tls_model("initial-exec")));

static GM_NOINLINE void find_driver(void)
{
    gm_cu_ctx_get_current_t c;
    gm_cu_ctx_get_device_t g;
    if (__atomic_add_fetch(&driver_lookups, 1, __ATOMIC_RELAXED) > DRIVER_LOOKUPS ||
        real_driver_ctx(&c, &g) != 0)
        return;
    __atomic_store_n(&cu_ctx_get_device, g, __ATOMIC_RELAXED);
    __atomic_store_n(&cu_ctx_get_current, c, __ATOMIC_RELEASE);
}

void devctx_contexts_changed(void)
{
    __atomic_add_fetch(&ctx_gen, 1, __ATOMIC_RELEASE);
}

int devctx_current(int *dev)
{
    if (likely(devctx_is_only())) {
        *dev = 0;
        return 0;
    }
    gm_cu_ctx_get_current_t get_current = __atomic_load_n(&cu_ctx_get_current, __ATOMIC_ACQUIRE);
    if (unlikely(!get_current) && __atomic_load_n(&driver_lookups, __ATOMIC_RELAXED) < DRIVER_LOOKUPS &&
        devctx_created_count()) /* the runtime is initialized: libcuda is loaded */
        find_driver();
    void *ctx = NULL;
    if (get_current && get_current(&ctx) == 0 && ctx) {
        unsigned gen = __atomic_load_n(&ctx_gen, __ATOMIC_ACQUIRE);
        if (ctx == my_ctx && gen == my_ctx_gen) {
            *dev = my_ctx_device;
            return 0;
        }
        int d;
        if (cu_ctx_get_device(&d) == 0) {
            my_ctx = ctx;
            my_ctx_device = d;
            my_ctx_gen = gen;
            *dev = d;
            return 0;
        }
    }
    /* No context current yet (the runtime binds one lazily), or no driver calls: ask the runtime. */
    return REAL_CALL(cudaGetDevice, dev) == cudaSuccess ? 0 : -1;
}

void devctx_enter(gm_device_t *d, gm_ctx_t *c)
{
    c->saved_mode = cudaStreamCaptureModeRelaxed;
    if (REAL_CALL(cudaThreadExchangeStreamCaptureMode, &c->saved_mode) != cudaSuccess)
        c->saved_mode = (enum cudaStreamCaptureMode)-1;
    c->switched = 0;
    if (d && devctx_current(&c->saved_device) == 0 && c->saved_device != d->id &&
        REAL_CALL(cudaSetDevice, d->id) == cudaSuccess)
        c->switched = 1;
}

void devctx_leave(gm_ctx_t *c)
{
    if (c->switched)
        REAL_CALL(cudaSetDevice, c->saved_device);
    if ((int)c->saved_mode != -1)
        REAL_CALL(cudaThreadExchangeStreamCaptureMode, &c->saved_mode);
}

static int sticky_warned;

void devctx_note_cuda_failure(gm_device_t *d, const char *what, cudaError_t err)
{
    diag_warn_once(&sticky_warned, "%s failed on device %d with CUDA error %d; freed memory stays "
                                   "pending until the runtime recovers", what, d->id, (int)err);
    evlog_warning(GMLOG_WARN_STICKY, d->id, 0, 0, (uint32_t)err);
}

int devctx_is_only(void)
{
    return __atomic_load_n(&one_device, __ATOMIC_RELAXED);
}

gm_device_t *devctx_peek(int id)
{
    if (id < 0 || id >= GM_MAX_DEVICES)
        return NULL;
    return __atomic_load_n(&devices[id], __ATOMIC_ACQUIRE);
}

int devctx_created_count(void)
{
    return __atomic_load_n(&ncreated, __ATOMIC_ACQUIRE);
}

gm_device_t *devctx_at(int index)
{
    return index < devctx_created_count() ? devctx_peek(created[index]) : NULL;
}

void devctx_lock(void)
{
    pthread_mutex_lock(&table_lock);
}

void devctx_unlock(void)
{
    pthread_mutex_unlock(&table_lock);
}

gm_device_t *devctx_find_locked(int id)
{
    return devices[id];
}

void devctx_publish_locked(gm_device_t *d, int only)
{
    if (only)
        __atomic_store_n(&one_device, 1, __ATOMIC_RELAXED);
    created[ncreated] = d->id;
    __atomic_store_n(&ncreated, ncreated + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&devices[d->id], d, __ATOMIC_RELEASE);
}
