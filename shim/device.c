/* Per-device pool policy. The hit path is an arena lock, a best fit and a hash insert; whatever
 * talks to the driver (fences, waits, growth, OOM release and retry) is in the slow functions,
 * made in relaxed capture mode with the device current. Never a driver free during a capture.
 * Lock order: create_lock, then arena locks by index, then the device's fence lock. */
#include "device.h"
#include "diag.h"
#include "evlog.h"
#include "init.h"
#include "options.h"
#include "real.h"
#include "trim.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GM_STATS_EVERY_NS 10000000u /* the log's stats snapshots: at most one per 10 ms per device */
#define GM_POLL_EVERY 32  /* allocations: completed fences polled at least this often */
#define GM_CONTENDED 32   /* contended lock attempts after which a thread moves to another arena */
#define GM_FORGIVEN 16    /* uncontended acquisitions that cancel one contended attempt */

static gm_device_t *devices[GM_MAX_DEVICES];
static int created[GM_MAX_DEVICES]; /* ids in creation order */
static int ncreated;
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
/* The process sees exactly one device: the current device is always 0, no need to ask. */
static int one_device;

/* The current device, cheaper than cudaGetDevice, which serializes threads once several devices
 * are visible (P6 on two H200s: 7 M pairs/s in all at 16 threads, 28 M with one visible). The
 * driver's current context is a thread-local read; its device is asked once per context and kept
 * per thread, keyed by the context and by ctx_gen, which a device reset bumps. This relies on
 * cudaSetDevice making the device's primary context current at once, as the runtime does since
 * CUDA 12 (checked on two H200s by tests/gpu/gpu_devices.cu, with runtime and driver switches). */
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

void device_contexts_changed(void)
{
    __atomic_add_fetch(&ctx_gen, 1, __ATOMIC_RELEASE);
}

int device_current(int *dev)
{
    if (likely(device_is_only())) {
        *dev = 0;
        return 0;
    }
    gm_cu_ctx_get_current_t get_current = __atomic_load_n(&cu_ctx_get_current, __ATOMIC_ACQUIRE);
    if (unlikely(!get_current) && __atomic_load_n(&driver_lookups, __ATOMIC_RELAXED) < DRIVER_LOOKUPS &&
        device_created_count()) /* the runtime is initialized: libcuda is loaded */
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

static __thread unsigned char my_arena __attribute__((tls_model("initial-exec")));
static __thread unsigned char my_contention __attribute__((tls_model("initial-exec")));
static __thread unsigned char my_uncontended __attribute__((tls_model("initial-exec")));

static void log_device(gm_device_t *d, size_t free_bytes);
static void log_empty(gm_device_t *d, int reason, size_t bytes, unsigned nseg, uint64_t t0);
static void poll_now(gm_arena_t *a);
static void enforce_cache_limit(gm_arena_t *a);

static uint64_t issued_of(gm_device_t *d) { return __atomic_load_n(&d->fences.issued, __ATOMIC_SEQ_CST); }
static uint64_t done_of(gm_device_t *d) { return __atomic_load_n(&d->fences.done, __ATOMIC_ACQUIRE); }
/* Blocks waiting for fences up to here may be handed out: the fences completed, or (GPU order)
 * every stream waits for them on the GPU. */
static uint64_t reusable_of(gm_device_t *d)
{
    uint64_t done = done_of(d), ordered = __atomic_load_n(&d->fences.ordered, __ATOMIC_ACQUIRE);
    return ordered > done ? ordered : done;
}
static int captures_of(gm_device_t *d) { return __atomic_load_n(&d->captures, __ATOMIC_ACQUIRE); }
static size_t limit_of(gm_device_t *d) { return __atomic_load_n(&d->limit, __ATOMIC_RELAXED); }
static int narenas_of(gm_device_t *d) { return __atomic_load_n(&d->narenas, __ATOMIC_ACQUIRE); }

static void reserved_add(gm_device_t *d, size_t n)
{
    uint64_t now = __atomic_add_fetch(&d->reserved_total, n, __ATOMIC_RELAXED);
    uint64_t peak = __atomic_load_n(&d->reserved_peak, __ATOMIC_RELAXED);
    while (now > peak && !__atomic_compare_exchange_n(&d->reserved_peak, &peak, now, 1,
                                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

static void reserved_sub(gm_device_t *d, size_t n)
{
    __atomic_sub_fetch(&d->reserved_total, n, __ATOMIC_RELAXED);
}

static void log_limit(gm_device_t *d)
{
    if (!evlog_enabled())
        return;
    gmlog_limit_t rec;
    evlog_hdr(&rec.h, GMLOG_LIMIT, sizeof rec, d->id, 0);
    rec.bytes = limit_of(d);
    evlog_append(&rec, sizeof rec, gm_now_ns());
}

void device_ctx_enter(gm_device_t *d, gm_ctx_t *c)
{
    c->saved_mode = cudaStreamCaptureModeRelaxed;
    if (REAL_CALL(cudaThreadExchangeStreamCaptureMode, &c->saved_mode) != cudaSuccess)
        c->saved_mode = (enum cudaStreamCaptureMode)-1;
    c->switched = 0;
    if (d && device_current(&c->saved_device) == 0 && c->saved_device != d->id &&
        REAL_CALL(cudaSetDevice, d->id) == cudaSuccess)
        c->switched = 1;
}

void device_ctx_leave(gm_ctx_t *c)
{
    if (c->switched)
        REAL_CALL(cudaSetDevice, c->saved_device);
    if ((int)c->saved_mode != -1)
        REAL_CALL(cudaThreadExchangeStreamCaptureMode, &c->saved_mode);
}

/* ---- devices and arenas -------------------------------------------------------------------- */

/* A plain mutex: its uncontended path is the cheapest; threads that keep contending move to
 * their own arena instead of spinning. */
static void mutex_init_plain(pthread_mutex_t *m)
{
    pthread_mutex_init(m, NULL);
}

/* Zeroed memory aligned to a cache line (the structures' _Alignas asks for it). */
static void *zalloc_aligned(size_t size)
{
    void *p = NULL;
    if (posix_memalign(&p, GM_CACHE_LINE, size) != 0)
        return NULL;
    memset(p, 0, size);
    return p;
}

static gm_arena_t *arena_new(gm_device_t *d, int index)
{
    gm_arena_t *a = zalloc_aligned(sizeof *a);
    if (!a)
        return NULL;
    a->dev = d;
    a->index = index;
    mutex_init_plain(&a->lock);
    pool_init(&a->general, &a->bytes, NULL);
    a->general.max_split = (size_t)options_get(GM_OPT_MAX_SPLIT);
    HASH_ADD(hh, a->live, ptr, sizeof a->sentinel.ptr, &a->sentinel);
    return a;
}

static int gpu_order_warned;

/* GMSHIM_GPU_ORDER makes only the streams of the pool's device wait for its fences; work of
 * another device (a peer copy, a kernel reading through peer access) would not. So it holds while
 * the process uses one device: the first one made current or allocated on. */
static int first_used = -1;
static int many_used;     /* a second device came into use */
static int order_settled; /* and the first device's ordered fences have all completed */

static uint64_t done_of(gm_device_t *d);
static cudaError_t wait_until_done(gm_device_t *d, uint64_t seq);
static void note_cuda_failure(gm_device_t *d, const char *what, cudaError_t err);

static int gpu_order_of(gm_device_t *d) { return __atomic_load_n(&d->gpu_order, __ATOMIC_RELAXED); }

/* A second device is in use: d (the first) leaves GPU order; blocks it handed out under it may
 * only be touched by other devices' work once their fences complete, so wait for them here. */
static void gpu_order_stop(gm_device_t *d)
{
    pthread_mutex_lock(&d->fence_lock);
    int was = gpu_order_of(d);
    if (was) {
        __atomic_store_n(&d->gpu_order, 0, __ATOMIC_RELAXED);
        d->order_stop_seq = d->fences.ordered;
    }
    uint64_t seq = d->order_stop_seq;
    pthread_mutex_unlock(&d->fence_lock);
    if (was)
        diag_warn_once(&gpu_order_warned, "GMSHIM_GPU_ORDER=1 stops applying: the process uses a second device "
                                          "besides device %d (its work could touch this device's memory "
                                          "without waiting); freed memory waits on the CPU from now on", d->id);
    if (done_of(d) >= seq)
        return;
    gm_ctx_t c;
    device_ctx_enter(d, &c);
    cudaError_t err = wait_until_done(d, seq);
    device_ctx_leave(&c);
    if (err != cudaSuccess)
        note_cuda_failure(d, "cudaEventSynchronize", err);
}

void device_note_used(int id)
{
    if (unlikely(id < 0 || id >= GM_MAX_DEVICES))
        return; /* no pool can exist there */
    int first = __atomic_load_n(&first_used, __ATOMIC_ACQUIRE);
    if (likely(first == id) || __atomic_load_n(&order_settled, __ATOMIC_ACQUIRE))
        return;
    if (first < 0) {
        if (__atomic_compare_exchange_n(&first_used, &first, id, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ||
            first == id)
            return;
    }
    __atomic_store_n(&many_used, 1, __ATOMIC_SEQ_CST);
    /* A pool being created decides on GPU order under create_lock: once through it, the first
     * device's pool either exists here or will see many_used. */
    pthread_mutex_lock(&create_lock);
    gm_device_t *d = devices[first];
    pthread_mutex_unlock(&create_lock);
    if (d && d->gpu_order_ever)
        gpu_order_stop(d);
    __atomic_store_n(&order_settled, 1, __ATOMIC_RELEASE);
}

static gm_device_t *device_create(int id)
{
    device_note_used(id);
    pthread_mutex_lock(&create_lock);
    gm_device_t *d = devices[id];
    if (d) {
        pthread_mutex_unlock(&create_lock);
        return d;
    }
    d = zalloc_aligned(sizeof *d);
    gm_arena_t *a0 = d ? arena_new(d, 0) : NULL;
    if (!a0) {
        free(d);
        pthread_mutex_unlock(&create_lock);
        return NULL;
    }
    d->id = id;
    d->arenas[0] = a0;
    d->narenas = 1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    d->max_arenas = cpus < 1 ? 1 : cpus > GM_MAX_ARENAS ? GM_MAX_ARENAS : (int)cpus;
    mutex_init_plain(&d->fence_lock);
    d->fence_bytes = (size_t)options_get(GM_OPT_FENCE_BYTES);
    d->fence_frees = (unsigned)options_get(GM_OPT_FENCE_FREES);
    d->cache_limit = (size_t)options_get(GM_OPT_CACHE_LIMIT);
    d->trust_stream_order = (int)options_get(GM_OPT_TRUST_STREAM_ORDER);
    d->pending_wait = (int)options_get(GM_OPT_PENDING_WAIT);
    size_t free_bytes = 0, total = 0;
    gm_ctx_t c;
    device_ctx_enter(d, &c);
    if (REAL_CALL(cudaMemGetInfo, &free_bytes, &total) == cudaSuccess)
        d->total = total;
    device_ctx_leave(&c);
    d->limit = options_device_limit(id, d->total);
    int count = 0;
    if (!ncreated && REAL_CALL(cudaGetDeviceCount, &count) == cudaSuccess && count == 1 && id == 0)
        __atomic_store_n(&one_device, 1, __ATOMIC_RELAXED);
    /* Another device's streams could read this one's memory (peer copies) without waiting. */
    d->gpu_order = options_get(GM_OPT_GPU_ORDER) && !__atomic_load_n(&many_used, __ATOMIC_SEQ_CST);
    d->gpu_order_ever = d->gpu_order;
    if (options_get(GM_OPT_GPU_ORDER) && !d->gpu_order)
        diag_warn_once(&gpu_order_warned, "GMSHIM_GPU_ORDER=1 does not apply to device %d: the process uses "
                                          "more than one device (another device's work could touch its memory "
                                          "without waiting); freed memory waits on the CPU", id);
    created[ncreated] = id;
    __atomic_store_n(&ncreated, ncreated + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&devices[id], d, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&create_lock);
    log_device(d, free_bytes);
    if (d->limit)
        log_limit(d);
    return d;
}

gm_device_t *device_get(int id)
{
    if (unlikely(id < 0 || id >= GM_MAX_DEVICES))
        return NULL;
    gm_device_t *d = __atomic_load_n(&devices[id], __ATOMIC_ACQUIRE);
    return likely(d != NULL) ? d : device_create(id);
}

int device_is_only(void)
{
    return __atomic_load_n(&one_device, __ATOMIC_RELAXED);
}

gm_device_t *device_peek(int id)
{
    if (id < 0 || id >= GM_MAX_DEVICES)
        return NULL;
    return __atomic_load_n(&devices[id], __ATOMIC_ACQUIRE);
}

int device_created_count(void)
{
    return __atomic_load_n(&ncreated, __ATOMIC_ACQUIRE);
}

gm_device_t *device_at(int index)
{
    return index < device_created_count() ? device_peek(created[index]) : NULL;
}

void device_use_arena(int index)
{
    my_arena = (unsigned char)(index < 0 ? 0 : index);
}

/* One more arena for a thread that keeps meeting others on its own; -1 if none can be made. */
int device_add_arena(gm_device_t *d)
{
    pthread_mutex_lock(&create_lock);
    int n = d->narenas, index = -1;
    if (n < d->max_arenas) {
        gm_arena_t *a = arena_new(d, n);
        if (a) {
            d->arenas[n] = a;
            __atomic_store_n(&d->narenas, n + 1, __ATOMIC_RELEASE);
            index = n;
        }
    }
    pthread_mutex_unlock(&create_lock);
    return index;
}

int device_lock_arenas(gm_device_t *d)
{
    pthread_mutex_lock(&create_lock); /* no arena is added meanwhile */
    int n = d->narenas;
    for (int i = 0; i < n; i++)
        pthread_mutex_lock(&d->arenas[i]->lock);
    return n;
}

void device_unlock_arenas(gm_device_t *d, int n)
{
    for (int i = n - 1; i >= 0; i--)
        pthread_mutex_unlock(&d->arenas[i]->lock);
    pthread_mutex_unlock(&create_lock);
}

int device_move_arena(gm_device_t *d, int current)
{
    int n = device_add_arena(d);
    if (n > 0)
        return n;
    int have = narenas_of(d);
    if (have < 2)
        return current;
    /* All arenas exist: spread contending threads over them rather than leave them all where
     * new threads start (arena 0). */
    unsigned k = __atomic_fetch_add(&d->next_arena, 1, __ATOMIC_RELAXED);
    n = (int)(k % (unsigned)(have - 1));
    return n >= current ? n + 1 : n;
}

int device_note_lock(int contended)
{
    if (!contended) {
        if (my_contention && ++my_uncontended >= GM_FORGIVEN) {
            my_uncontended = 0;
            my_contention--;
        }
        return 0;
    }
    if (++my_contention < GM_CONTENDED)
        return 0;
    my_contention = my_uncontended = 0;
    return 1;
}

/* The arena this thread allocates from, locked. While a capture runs on the device everything
 * goes to arena 0, where the capture's heap is. */
static gm_arena_t *arena_lock_for_alloc(gm_device_t *d)
{
    int i = my_arena < narenas_of(d) ? my_arena : 0;
    if (unlikely(captures_of(d)))
        i = 0;
    gm_arena_t *a = d->arenas[i];
    const void *me = &my_arena;
    int move;
    if (likely(pthread_mutex_trylock(&a->lock) == 0)) {
        /* Two threads taking turns on one arena rarely find its lock taken, but every turn
         * moves the arena's cache lines to the other CPU: that counts as meeting too. */
        int met = a->last_user != me;
        a->last_user = me;
        if (likely(!device_note_lock(met)) || captures_of(d))
            return a;
        pthread_mutex_unlock(&a->lock); /* create_lock comes before arena locks */
        move = 1;
    } else {
        move = device_note_lock(1) && !captures_of(d);
    }
    if (move) {
        int n = device_move_arena(d, i);
        if (n != i) {
            my_arena = (unsigned char)n;
            a = d->arenas[n];
        }
    }
    pthread_mutex_lock(&a->lock);
    a->last_user = me;
    return a;
}

static void log_device(gm_device_t *d, size_t free_bytes)
{
    if (!evlog_enabled())
        return;
    struct cudaDeviceProp prop;
    const char *name = "unknown";
    memset(&prop, 0, sizeof prop);
    if (REAL_CALL(cudaGetDeviceProperties, &prop, d->id) == cudaSuccess)
        name = prop.name;
    gmlog_device_t rec;
    memset(&rec, 0, sizeof rec);
    size_t len = strnlen(name, sizeof prop.name);
    evlog_hdr(&rec.h, GMLOG_DEVICE, sizeof rec + gm_round_up(len, 8), d->id, 0);
    rec.total = d->total;
    rec.free_at_start = free_bytes;
    rec.name_len = (uint32_t)len;
    evlog_append2(&rec, sizeof rec, name, len, gm_now_ns());
}

/* ---- fences --------------------------------------------------------------------------------- */

static int sticky_warned;

static void note_cuda_failure(gm_device_t *d, const char *what, cudaError_t err)
{
    diag_warn_once(&sticky_warned, "%s failed on device %d with CUDA error %d; freed memory stays "
                                   "pending until the runtime recovers", what, d->id, (int)err);
    evlog_warning(GMLOG_WARN_STICKY, d->id, 0, 0, (uint32_t)err);
}

/* Pending blocks of the arena whose fences completed become free; returns bytes released.
 * Caller holds the arena lock and is inside device_ctx_enter (the cache cap may give segments
 * back). */
static size_t release_done(gm_arena_t *a)
{
    uint64_t done = reusable_of(a->dev);
    const gm_block_t *head = a->general.pending_head;
    if (!head || head->fence_seq > done)
        return 0; /* nothing to release: no clock read */
    size_t bytes = pool_release_pending(&a->general, done, gm_now_ns());
    if (bytes && a->dev->cache_limit)
        enforce_cache_limit(a);
    return bytes;
}

/* Advances the device's completed fences; the caller holds the fence lock, which this releases. */
static void poll_locked(gm_device_t *d)
{
    gm_fences_t *f = &d->fences;
    /* GPU order: what the fences cover is reusable already; polling only recycles events. */
    int batch = gpu_order_of(d) && f->ordered == f->issued ? GM_FENCE_BATCH : 1;
    cudaError_t err = fences_outstanding(f) >= batch ? fences_poll(f) : cudaSuccess;
    pthread_mutex_unlock(&d->fence_lock);
    if (err != cudaSuccess)
        note_cuda_failure(d, "cudaEventQuery", err);
}

/* Polls the device's fences, then takes in what they released. `blocking` 0: if another thread
 * holds the fence lock (polling or recording: what it learns is shared), do not wait for it. */
static size_t harvest(gm_arena_t *a, int blocking)
{
    gm_device_t *d = a->dev;
    if (blocking)
        pthread_mutex_lock(&d->fence_lock);
    else if (pthread_mutex_trylock(&d->fence_lock) != 0)
        return release_done(a);
    poll_locked(d);
    return release_done(a);
}

/* Whether some pending block of the arena waits for a fence not yet recorded. */
static int open_set_waiting(gm_arena_t *a)
{
    const gm_block_t *tail = a->general.pending_tail;
    return tail && tail->fence_seq > issued_of(a->dev);
}

static void log_fence(gm_arena_t *a, uint64_t seq, unsigned events)
{
    gm_device_t *d = a->dev;
    gmlog_fence_t rec;
    memset(&rec, 0, sizeof rec);
    evlog_hdr(&rec.h, GMLOG_FENCE, sizeof rec, d->id, 0);
    rec.seq = seq;
    rec.pending_bytes = a->bytes.pending.current;
    rec.events = events;
    uint64_t now = gm_now_ns();
    evlog_append(&rec, sizeof rec, now);
    /* Fences come with the rhythm of the program: a good moment for a snapshot of the arena's
     * figures, at most one per GM_STATS_EVERY_NS on the device (a program that frees and
     * allocates a segment-sized block in a loop records a fence per pair). */
    uint64_t last = __atomic_load_n(&d->stats_logged_ns, __ATOMIC_RELAXED);
    if (last && now - last < GM_STATS_EVERY_NS)
        return;
    __atomic_store_n(&d->stats_logged_ns, now, __ATOMIC_RELAXED);
    gmlog_stats_t st;
    memset(&st, 0, sizeof st);
    evlog_hdr(&st.h, GMLOG_STATS, sizeof st, d->id, 0);
    st.requested = a->bytes.requested.current;
    st.allocated = a->bytes.allocated.current;
    st.reserved = a->bytes.reserved.current;
    st.cached = a->bytes.cached.current;
    st.pending = a->bytes.pending.current;
    st.hits = a->n.hits;
    st.misses = a->n.misses;
    evlog_append(&st, sizeof st, now);
}

/* Records a fence covering every free so far, on every arena. Caller holds the arena lock
 * and is inside device_ctx_enter, with the fence lock held, which this releases. */
static int fence_issue_locked(gm_arena_t *a)
{
    gm_device_t *d = a->dev;
    if (captures_of(d)) {
        pthread_mutex_unlock(&d->fence_lock);
        return -1; /* an event on a capturing stream would join the capture */
    }
    cudaError_t err = fences_issue(&d->fences);
    cudaError_t order_err = err == cudaSuccess && gpu_order_of(d) ? fences_order(&d->fences) : cudaSuccess;
    uint64_t seq = d->fences.issued;
    unsigned events = (unsigned)(1 + d->fences.nstreams);
    pthread_mutex_unlock(&d->fence_lock);
    if (order_err != cudaSuccess) /* the fence stands: its blocks wait for it on the CPU */
        note_cuda_failure(d, "cudaStreamWaitEvent", order_err);
    if (err != cudaSuccess) {
        note_cuda_failure(d, "cudaEventRecord", err);
        return -1;
    }
    a->n.fences++;
    a->open_bytes = 0;
    a->open_count = 0;
    a->open_seen = seq;
    if (evlog_enabled())
        log_fence(a, seq, events);
    return 0;
}

static int fence_issue(gm_arena_t *a)
{
    pthread_mutex_lock(&a->dev->fence_lock);
    return fence_issue_locked(a);
}

/* Blocks until fence `seq` has completed (or none is outstanding). The wait happens outside the
 * fence lock: other arenas go on recording and polling. */
static cudaError_t wait_until_done(gm_device_t *d, uint64_t seq)
{
    cudaError_t err = cudaSuccess;
    while (done_of(d) < seq && err == cudaSuccess) {
        pthread_mutex_lock(&d->fence_lock);
        cudaEvent_t ev = fences_oldest_pending_event(&d->fences);
        pthread_mutex_unlock(&d->fence_lock);
        if (ev)
            err = REAL_CALL(cudaEventSynchronize, ev);
        if (err == cudaSuccess) {
            pthread_mutex_lock(&d->fence_lock);
            err = fences_outstanding(&d->fences) ? fences_poll(&d->fences) : cudaSuccess;
            int left = fences_outstanding(&d->fences);
            pthread_mutex_unlock(&d->fence_lock);
            if (!ev && !left)
                break;
        }
    }
    return err;
}

/* Blocks for the oldest fence; returns bytes released + 1, or 0 if nothing could be waited for. */
static size_t wait_oldest(gm_arena_t *a)
{
    gm_device_t *d = a->dev;
    if (gpu_order_of(d)) {
        /* Recording a fence orders the open frees on the GPU: no waiting, unless that failed. */
        uint64_t before = reusable_of(d);
        if (open_set_waiting(a))
            fence_issue(a);
        if (reusable_of(d) > before)
            return release_done(a) + 1;
    }
    pthread_mutex_lock(&d->fence_lock);
    int any = fences_outstanding(&d->fences);
    pthread_mutex_unlock(&d->fence_lock);
    if (!any && (!open_set_waiting(a) || fence_issue(a)))
        return 0;
    uint64_t t0 = gm_now_ns();
    uint64_t seq = done_of(d) + 1;
    cudaError_t err = wait_until_done(d, seq);
    if (err != cudaSuccess) {
        note_cuda_failure(d, "cudaEventSynchronize", err);
        return 0;
    }
    a->n.fence_waits++;
    uint64_t now = gm_now_ns();
    a->n.fence_wait_ns += now - t0;
    if (evlog_enabled()) {
        gmlog_fence_wait_t rec;
        memset(&rec, 0, sizeof rec);
        evlog_hdr(&rec.h, GMLOG_FENCE_WAIT, sizeof rec, d->id, 0);
        rec.seq = seq;
        rec.dur_ns = evlog_dur(now, t0);
        evlog_append(&rec, sizeof rec, now);
    }
    return release_done(a) + 1;
}

/* Waits until fence `seq` has completed (recording it first if it is still to come). */
static void wait_for(gm_arena_t *a, uint64_t seq)
{
    if (seq > issued_of(a->dev) && fence_issue(a))
        return;
    while (reusable_of(a->dev) < seq && wait_oldest(a))
        ;
    release_done(a);
}

/* ---- growing and releasing -------------------------------------------------------------- */

static void log_segment(gm_device_t *d, int type, gm_segment_t *seg, uint64_t t0)
{
    if (evlog_enabled())
        evlog_segment(type, d->id, seg->base, seg->size, seg->heap->graph_id, gm_now_ns(), t0);
}

/* Asks the driver for a segment of `size` into `heap` (of arena a) and serves the request from
 * it: *bp is the LIVE block on success. */
static cudaError_t driver_segment(gm_arena_t *a, gm_heap_t *heap, size_t size, size_t rounded, size_t requested,
                                  gm_block_t **bp)
{
    void *p = NULL;
    uint64_t t0 = gm_now_ns();
    cudaError_t err = REAL_CALL(cudaMalloc, &p, size);
    if (err != cudaSuccess)
        return err;
    gm_segment_t *seg = pool_add_segment(heap, (uintptr_t)p, size, pool_is_small(rounded), gm_now_ns());
    if (!seg) {
        REAL_CALL(cudaFree, p);
        gm_fall_back("out of host memory for the pool's bookkeeping");
        return cudaErrorMemoryAllocation;
    }
    reserved_add(a->dev, size);
    a->n.driver_mallocs++;
    log_segment(a->dev, GMLOG_SEGMENT_ALLOC, seg, t0);
    *bp = pool_alloc_fresh(heap, seg, rounded, requested);
    return cudaSuccess;
}

/* Gives one wholly free segment of the arena's general heap back to the driver. */
static int segment_release(gm_arena_t *a, gm_segment_t *seg)
{
    log_segment(a->dev, GMLOG_SEGMENT_FREE, seg, gm_now_ns());
    cudaError_t err = REAL_CALL(cudaFree, (void *)seg->base);
    if (err != cudaSuccess) {
        note_cuda_failure(a->dev, "cudaFree", err);
        return -1;
    }
    reserved_sub(a->dev, seg->size);
    a->n.driver_frees++;
    pool_remove_segment(&a->general, seg);
    return 0;
}

/* Frees every whole free segment of the arena's general heap idle for at least idle_ns (0:
 * all); caller is inside device_ctx_enter and no capture is under way. */
static size_t release_free_segments(gm_arena_t *a, uint64_t idle_ns, uint64_t now, unsigned *nseg)
{
    size_t bytes = 0;
    gm_segment_t *seg = a->general.segments;
    while (seg) {
        gm_segment_t *next = seg->next;
        size_t size = seg->size;
        if (pool_segment_is_free(seg) && (!idle_ns || now - seg->free_since_ns >= idle_ns) &&
            segment_release(a, seg) == 0) {
            bytes += size;
            (*nseg)++;
        }
        seg = next;
    }
    return bytes;
}

/* GMSHIM_CACHE_LIMIT: give back the oldest wholly free segments while the arena caches more
 * than the cap. Caller is inside device_ctx_enter. */
static void enforce_cache_limit(gm_arena_t *a)
{
    size_t cap = a->dev->cache_limit;
    if (!cap || captures_of(a->dev))
        return;
    size_t whole = 0;
    for (gm_segment_t *seg = a->general.segments; seg; seg = seg->next)
        if (pool_segment_is_free(seg))
            whole += seg->size;
    uint64_t t0 = gm_now_ns();
    size_t bytes = 0;
    unsigned nseg = 0;
    while (whole > cap) {
        gm_segment_t *oldest = NULL;
        for (gm_segment_t *seg = a->general.segments; seg; seg = seg->next)
            if (pool_segment_is_free(seg) && (!oldest || seg->free_since_ns < oldest->free_since_ns))
                oldest = seg;
        size_t size = oldest ? oldest->size : 0;
        if (!oldest || segment_release(a, oldest))
            break;
        whole -= size;
        bytes += size;
        nseg++;
    }
    if (nseg)
        log_empty(a->dev, GMLOG_EMPTY_CACHE_LIMIT, bytes, nseg, t0);
}

static void log_empty(gm_device_t *d, int reason, size_t bytes, unsigned nseg, uint64_t t0)
{
    if (!evlog_enabled())
        return;
    gmlog_empty_cache_t rec;
    memset(&rec, 0, sizeof rec);
    evlog_hdr(&rec.h, GMLOG_EMPTY_CACHE, sizeof rec, d->id, (unsigned)reason);
    uint64_t now = gm_now_ns();
    rec.bytes = bytes;
    rec.segments = nseg;
    rec.dur_ns = evlog_dur(now, t0);
    evlog_append(&rec, sizeof rec, now);
}

size_t device_trim(gm_device_t *d, uint64_t idle_ns)
{
    size_t bytes = 0;
    for (int i = 0; i < narenas_of(d); i++) {
        gm_arena_t *a = d->arenas[i];
        pthread_mutex_lock(&a->lock);
        if (!captures_of(d)) {
            gm_ctx_t c;
            device_ctx_enter(d, &c);
            uint64_t t0 = gm_now_ns();
            harvest(a, 1); /* completed fences only: the trimmer never waits for the GPU */
            unsigned nseg = 0;
            size_t b = release_free_segments(a, idle_ns, t0, &nseg);
            if (nseg)
                log_empty(d, idle_ns ? GMLOG_EMPTY_IDLE : GMLOG_EMPTY_PERIODIC, b, nseg, t0);
            bytes += b;
            device_ctx_leave(&c);
        }
        pthread_mutex_unlock(&a->lock);
    }
    return bytes;
}

/* GMSHIM_CACHE_LIMIT across the device: the whole free segments of every arena, newest first, are
 * kept while they fit under the cap; the rest go back. Segments are told apart by base address
 * (the arena lock is dropped between looking and releasing). */
typedef struct cached_seg {
    uint64_t free_since_ns;
    uintptr_t base;
    size_t size;
} cached_seg_t;

static int newer_first(const void *x, const void *y)
{
    const cached_seg_t *a = x, *b = y;
    if (a->free_since_ns != b->free_since_ns)
        return a->free_since_ns > b->free_since_ns ? -1 : 1;
    return a->base > b->base ? -1 : a->base < b->base;
}

/* Whether segment key (t, base) is as old as the cutoff or older. */
static int not_newer(uint64_t t, uintptr_t base, const cached_seg_t *cut)
{
    return t < cut->free_since_ns || (t == cut->free_since_ns && base <= cut->base);
}

unsigned long long device_cache_trim(gm_device_t *d, int *waiting)
{
    size_t cap = d->cache_limit;
    if (!cap)
        return 0;
    cached_seg_t *segs = NULL;
    size_t n = 0, room = 0, whole = 0, pending = 0;
    int n_arenas = narenas_of(d), capturing = 0, unfenced = -1;
    /* First every arena: take in what completed fences released (queries only), and note its
     * whole free segments and what still waits. */
    for (int i = 0; i < n_arenas && !capturing; i++) {
        gm_arena_t *a = d->arenas[i];
        pthread_mutex_lock(&a->lock);
        capturing = captures_of(d);
        if (!capturing) {
            gm_ctx_t c;
            device_ctx_enter(d, &c);
            harvest(a, 1);
            device_ctx_leave(&c);
            const gm_heap_t *h = &a->general;
            pending += h->pending_bytes[0] + h->pending_bytes[1];
            if (unfenced < 0 && open_set_waiting(a))
                unfenced = i;
            for (gm_segment_t *seg = a->general.segments; seg; seg = seg->next) {
                if (!pool_segment_is_free(seg))
                    continue;
                if (n == room) {
                    size_t nroom = room ? room * 2 : 64;
                    cached_seg_t *m = realloc(segs, nroom * sizeof *m);
                    if (!m)
                        break; /* short of host memory: what is listed still counts */
                    segs = m;
                    room = nroom;
                }
                segs[n++] = (cached_seg_t){seg->free_since_ns, seg->base, seg->size};
                whole += seg->size;
            }
        }
        pthread_mutex_unlock(&a->lock);
    }
    /* Frees no fence covers yet can only come in after one: record it (one covers every arena),
     * only when they are what keeps the cache over its cap. */
    if (!capturing && pending && whole + pending > cap && unfenced >= 0) {
        gm_arena_t *a = d->arenas[unfenced];
        pthread_mutex_lock(&a->lock);
        if (open_set_waiting(a) && !captures_of(d)) {
            gm_ctx_t c;
            device_ctx_enter(d, &c);
            fence_issue(a);
            device_ctx_leave(&c);
        }
        pthread_mutex_unlock(&a->lock);
    }
    if (capturing || (pending && whole + pending > cap))
        *waiting = 1; /* poll again: after the capture, or once the GPU is done with them */
    unsigned long long released = 0;
    if (!capturing && whole > cap) {
        qsort(segs, n, sizeof *segs, newer_first);
        size_t kept = 0, k = 0;
        while (k < n && kept + segs[k].size <= cap)
            kept += segs[k++].size;
        cached_seg_t cut = segs[k]; /* this one and everything older go */
        for (int i = 0; i < n_arenas; i++) {
            gm_arena_t *a = d->arenas[i];
            pthread_mutex_lock(&a->lock);
            if (captures_of(d)) {
                pthread_mutex_unlock(&a->lock);
                *waiting = 1;
                break;
            }
            gm_ctx_t c;
            device_ctx_enter(d, &c);
            uint64_t t0 = gm_now_ns();
            size_t bytes = 0;
            unsigned nseg = 0;
            for (gm_segment_t *seg = a->general.segments, *next; seg; seg = next) {
                next = seg->next;
                size_t size = seg->size;
                if (pool_segment_is_free(seg) && not_newer(seg->free_since_ns, seg->base, &cut) &&
                    segment_release(a, seg) == 0) {
                    bytes += size;
                    nseg++;
                }
            }
            if (nseg)
                log_empty(d, GMLOG_EMPTY_CACHE_LIMIT, bytes, nseg, t0);
            released += bytes;
            device_ctx_leave(&c);
            pthread_mutex_unlock(&a->lock);
        }
    }
    free(segs);
    return released;
}

/* Waits for every fence, then frees the arena's whole free segments. Arena lock held. */
static size_t empty_cache_locked(gm_arena_t *a, int reason)
{
    if (captures_of(a->dev))
        return 0;
    uint64_t t0 = gm_now_ns();
    while (wait_oldest(a))
        ;
    release_done(a);
    unsigned nseg = 0;
    size_t bytes = release_free_segments(a, 0, t0, &nseg);
    log_empty(a->dev, reason, bytes, nseg, t0);
    return bytes;
}

/* The other arenas' caches, for an OOM in arena `self`: only those whose lock is free right now
 * (a blocking lock here could deadlock with a thread doing the same from another arena). */
static size_t empty_other_arenas(gm_arena_t *self, int reason)
{
    gm_device_t *d = self->dev;
    size_t bytes = 0;
    for (int i = 0; i < narenas_of(d); i++) {
        gm_arena_t *a = d->arenas[i];
        if (a == self || pthread_mutex_trylock(&a->lock) != 0)
            continue;
        bytes += empty_cache_locked(a, reason);
        pthread_mutex_unlock(&a->lock);
    }
    return bytes;
}

size_t device_empty_cache(gm_device_t *d, int reason)
{
    size_t bytes = 0;
    for (int i = 0; i < narenas_of(d); i++) {
        gm_arena_t *a = d->arenas[i];
        gm_ctx_t c;
        pthread_mutex_lock(&a->lock);
        device_ctx_enter(d, &c);
        bytes += empty_cache_locked(a, reason);
        device_ctx_leave(&c);
        pthread_mutex_unlock(&a->lock);
    }
    return bytes;
}

/* The pool and the driver as they are at a failure; flags are filled in afterwards. */
static void oom_snapshot(gm_arena_t *a, gmlog_oom_t *rec, size_t request, size_t segment,
                         size_t drv_free, size_t drv_total, uint32_t site)
{
    gm_device_t *d = a->dev;
    memset(rec, 0, sizeof *rec);
    rec->request = request;
    rec->segment = segment;
    rec->driver_free = drv_free;
    rec->driver_total = drv_total;
    rec->reserved = __atomic_load_n(&d->reserved_total, __ATOMIC_RELAXED);
    rec->allocated = a->bytes.allocated.current;
    rec->requested = a->bytes.requested.current;
    rec->cached = a->bytes.cached.current;
    rec->pending = a->bytes.pending.current;
    size_t largest, count;
    pool_free_summary(&a->general, &largest, &count);
    rec->largest_free = largest;
    rec->free_blocks = (uint32_t)count;
    rec->site = site;
}

static void log_oom_record(gm_arena_t *a, gmlog_oom_t *rec, unsigned flags)
{
    if (!evlog_enabled())
        return;
    evlog_hdr(&rec->h, GMLOG_OOM, sizeof *rec, a->dev->id, flags);
    evlog_append(rec, sizeof *rec, gm_now_ns());
}

static void log_oom(gm_arena_t *a, size_t request, size_t segment, size_t drv_free,
                    size_t drv_total, unsigned flags, uint32_t site)
{
    gmlog_oom_t rec;
    oom_snapshot(a, &rec, request, segment, drv_free, drv_total, site);
    log_oom_record(a, &rec, flags);
}

/* Whether a segment for `rounded` fits under the device cap; may shrink *seg to the request and,
 * if allowed, release the cache to make room. */
static int fits_limit(gm_arena_t *a, size_t *seg, size_t rounded, int may_release)
{
    gm_device_t *d = a->dev;
    size_t limit = limit_of(d);
    size_t tight = pool_is_small(rounded) ? *seg : gm_round_up(rounded, GM_LARGE_ROUND);
    for (int pass = 0; pass < 2; pass++) {
        size_t reserved = __atomic_load_n(&d->reserved_total, __ATOMIC_RELAXED);
        if (reserved + *seg <= limit)
            return 1;
        if (reserved + tight <= limit) {
            *seg = tight;
            return 1;
        }
        if (!may_release || pass || captures_of(d))
            break;
        empty_cache_locked(a, GMLOG_EMPTY_DEVICE_LIMIT);
        empty_other_arenas(a, GMLOG_EMPTY_DEVICE_LIMIT);
    }
    return 0;
}

/* A new segment for the request; on OOM: release the cache, retry once. */
static gm_block_t *grow(gm_arena_t *a, size_t rounded, size_t size, uint32_t site,
                        unsigned *flags, cudaError_t *errp)
{
    gm_device_t *d = a->dev;
    int small = pool_is_small(rounded);
    size_t seg = pool_segment_size(rounded);
    if (limit_of(d) && !fits_limit(a, &seg, rounded, 1)) {
        gm_block_t *b = pool_alloc(&a->general, rounded, size); /* room the release made */
        if (b)
            return b;
        a->n.ooms++;
        *errp = cudaErrorMemoryAllocation;
        log_oom(a, size, seg, 0, 0, GMLOG_OOM_LIMIT | GMLOG_OOM_RELEASED, site);
        return NULL;
    }
    cudaError_t before = REAL_CALL(cudaPeekAtLastError);
    gm_block_t *b = NULL;
    cudaError_t err = driver_segment(a, &a->general, seg, rounded, size, &b);
    if (err == cudaSuccess) {
        *flags |= GMLOG_A_MISS;
        return b;
    }
    if (err != cudaErrorMemoryAllocation) {
        *errp = err;
        return NULL;
    }
    /* Out of memory: the driver and the pool as they are now, for the log (the driver's free
     * and the pool's figures at the same moment), then release and retry. */
    size_t drv_free = 0, drv_total = 0;
    REAL_CALL(cudaMemGetInfo, &drv_free, &drv_total);
    gmlog_oom_t rec;
    oom_snapshot(a, &rec, size, seg, drv_free, drv_total, site);
    unsigned oflags = GMLOG_OOM_RELEASED;
    a->n.oom_retries++;
    size_t waited_fences = a->n.fence_waits;
    empty_cache_locked(a, GMLOG_EMPTY_OOM);
    empty_other_arenas(a, GMLOG_EMPTY_OOM);
    if (a->n.fence_waits != waited_fences)
        oflags |= GMLOG_OOM_WAITED;
    b = pool_alloc(&a->general, rounded, size);
    if (!b) {
        oflags |= GMLOG_OOM_RETRIED;
        err = driver_segment(a, &a->general, seg, rounded, size, &b);
        size_t tight = gm_round_up(rounded, GM_LARGE_ROUND);
        if (err == cudaErrorMemoryAllocation && !small && tight < seg)
            err = driver_segment(a, &a->general, seg = tight, rounded, size, &b);
        if (err == cudaSuccess)
            *flags |= GMLOG_A_MISS;
    }
    if (b) {
        oflags |= GMLOG_OOM_RECOVERED;
        if (before == cudaSuccess)
            REAL_CALL(cudaGetLastError); /* the failed attempt must not reach the program */
    } else {
        a->n.ooms++;
        *errp = err;
    }
    rec.segment = seg;
    log_oom_record(a, &rec, oflags);
    return b;
}

static gm_block_t *alloc_slow(gm_arena_t *a, size_t rounded, size_t size, uint32_t site,
                              unsigned *flags, cudaError_t *err)
{
    gm_device_t *d = a->dev;
    gm_ctx_t c;
    device_ctx_enter(d, &c);
    int small = pool_is_small(rounded);
    gm_block_t *b = NULL;
    const gm_heap_t *h = &a->general;
    /* Every fence covers every arena's frees: with several threads, fences that others recorded
     * often cover this arena's older frees already. Take in what they released first, asking the
     * runtime only if they are not known to be reusable yet, and record a fence of this arena's
     * own only when that does not serve the request. */
    int busy = 0; /* the runtime said the oldest covered free is still in use */
    if (h->pending_head && h->pending_head->fence_seq <= issued_of(d)) {
        uint64_t oldest = h->pending_head->fence_seq;
        if (reusable_of(d) < oldest) {
            harvest(a, 1);
            busy = reusable_of(d) < oldest;
        } else {
            release_done(a);
        }
        if (!(d->pending_wait && !small && pool_better_pending(h, rounded)))
            b = pool_alloc(&a->general, rounded, size);
    }
    /* Frees since the last fence can only become reusable after one: record it now (cheap),
     * then take whatever has completed (nothing newer has when the oldest is still in use). */
    if (!b && open_set_waiting(a))
        fence_issue(a);
    if (!b && !busy)
        harvest(a, 1);
    for (int rounds = 0; !b && rounds < 1 << 16; rounds++) {
        uint64_t want = d->pending_wait ? pool_better_pending(h, rounded) : 0;
        if (want) {
            /* A pending block fits better than any free one: wait for the GPU to finish with
             * it rather than cut a larger block or grow (what makes a pool creep up when the
             * program runs ahead of the GPU). */
            wait_for(a, want);
            continue;
        }
        b = pool_alloc(&a->general, rounded, size);
        if (b || !d->pending_wait || !h->pending_bytes[small] ||
            h->pending_bytes[small] + h->free_bytes[small] < rounded || !wait_oldest(a))
            break;
    }
    if (!b)
        b = grow(a, rounded, size, site, flags, err);
    device_ctx_leave(&c);
    return b;
}

/* During a capture (arena 0 locked): the capture's private heap, fed by whole free segments of
 * the general heap or by the driver (in relaxed mode); never released while the capture runs. */
static gm_block_t *alloc_captured(gm_arena_t *a, size_t rounded, size_t size, uint32_t site,
                                  unsigned *flags, cudaError_t *err)
{
    gm_device_t *d = a->dev;
    gm_heap_t *heap = d->capture_heap;
    *flags |= GMLOG_A_GRAPH;
    gm_block_t *b = pool_alloc(heap, rounded, size);
    if (b)
        return b;
    int small = pool_is_small(rounded);
    gm_segment_t *best = NULL;
    for (gm_segment_t *seg = a->general.segments; seg; seg = seg->next)
        if (seg->small == small && !seg->ipc && seg->size >= rounded && pool_segment_is_free(seg) &&
            (!best || seg->size < best->size))
            best = seg;
    if (best) {
        pool_move_segment(&a->general, heap, best, 0);
        if ((b = pool_alloc(heap, rounded, size)))
            return b;
    }
    gm_ctx_t c;
    device_ctx_enter(d, &c);
    size_t seg = pool_segment_size(rounded);
    cudaError_t e = limit_of(d) && !fits_limit(a, &seg, rounded, 0)
                        ? cudaErrorMemoryAllocation
                        : driver_segment(a, heap, seg, rounded, size, &b);
    if (e == cudaSuccess) {
        *flags |= GMLOG_A_MISS;
    } else {
        size_t drv_free = 0, drv_total = 0;
        REAL_CALL(cudaMemGetInfo, &drv_free, &drv_total);
        a->n.ooms++;
        *err = e;
        log_oom(a, size, seg, drv_free, drv_total, GMLOG_OOM_CAPTURE, site);
    }
    device_ctx_leave(&c);
    return b;
}

cudaError_t device_alloc(gm_device_t *d, size_t size, uint32_t site, void **out)
{
    size_t rounded = pool_round(size);
    unsigned flags = 0;
    cudaError_t err = cudaErrorMemoryAllocation;
    uint64_t t0 = 0; /* only a slow path is timed: a hit costs less than reading the clock twice */
    gm_block_t *b;
    gm_arena_t *a = arena_lock_for_alloc(d);
    if (unlikely(a->index != 0 && captures_of(d))) {
        /* A capture began meanwhile: its allocations live in arena 0. */
        pthread_mutex_unlock(&a->lock);
        a = d->arenas[0];
        pthread_mutex_lock(&a->lock);
    }
    if (unlikely(a->index == 0 && d->captures)) {
        t0 = gm_now_ns();
        b = alloc_captured(a, rounded, size, site, &flags, &err);
    } else {
        /* Every so often, take in what completed fences released, so that hits choose among
         * all the reusable blocks (freed neighbours merged), not a stale subset. */
        if (unlikely(++a->since_poll >= GM_POLL_EVERY) && a->general.pending_head &&
            a->general.pending_head->fence_seq <= issued_of(d))
            poll_now(a);
        /* A large request that a pending block would fit better goes the slow way. */
        b = !pool_is_small(rounded) && d->pending_wait && pool_better_pending(&a->general, rounded)
                ? NULL
                : pool_alloc(&a->general, rounded, size);
        if (unlikely(!b)) {
            t0 = gm_now_ns();
            b = alloc_slow(a, rounded, size, site, &flags, &err);
        }
    }
    if (likely(b != NULL)) {
        HASH_ADD(hh, a->live, ptr, sizeof b->ptr, b);
        b->site = site;
        a->n.allocs++;
        if (flags & GMLOG_A_MISS)
            a->n.misses++;
        else
            a->n.hits++;
        if (evlog_enabled()) {
            uint64_t now = gm_now_ns(); /* inside the lock: after the free that made b reusable */
            evlog_alloc(d->id, flags, b->ptr, size, b->size, site, now, t0 ? t0 : now);
        }
        *out = (void *)b->ptr;
        err = cudaSuccess;
    }
    pthread_mutex_unlock(&a->lock);
    return err;
}

/* A block outside any segment (the driver's own), kept in arena 0's live map. */
static void track_external(gm_device_t *d, int kind, void *ptr, size_t size, uint32_t site, uint64_t t0,
                           uint64_t extra)
{
    gm_block_t *b = kind == GMLOG_KIND_PASS || kind == GMLOG_KIND_MANAGED || kind == GMLOG_KIND_PITCHED
                        ? calloc(1, sizeof *b)
                        : NULL;
    gm_arena_t *a = d->arenas[0];
    pthread_mutex_lock(&a->lock);
    if (kind == GMLOG_KIND_PASS) {
        a->n.allocs++;
        a->n.misses++;
        a->n.driver_mallocs++;
    } else {
        a->n.unpooled_allocs++;
    }
    if (b) {
        b->ptr = (uintptr_t)ptr;
        b->size = b->requested = size;
        b->state = GM_BLOCK_LIVE;
        b->kind = (uint8_t)kind;
        b->site = site;
        HASH_ADD(hh, a->live, ptr, sizeof b->ptr, b);
        if (kind == GMLOG_KIND_PASS) {
            gm_stat_add(&a->bytes.requested, size);
            gm_stat_add(&a->bytes.allocated, size);
            gm_stat_add(&a->bytes.reserved, size);
            reserved_add(d, size);
        }
    }
    evlog_alloc(d->id, (unsigned)kind << GMLOG_KIND_SHIFT, (uint64_t)(uintptr_t)ptr, size,
                kind == GMLOG_KIND_PASS ? size : extra, site, gm_now_ns(), t0);
    pthread_mutex_unlock(&a->lock);
}

cudaError_t device_alloc_pass(gm_device_t *d, size_t size, uint32_t site, uint64_t t0, void **out)
{
    cudaError_t err = REAL_CALL(cudaMalloc, out, size);
    if (err != cudaSuccess || !*out)
        return err;
    track_external(d, GMLOG_KIND_PASS, *out, size, site, t0, 0);
    return cudaSuccess;
}

void device_note_unpooled(gm_device_t *d, int kind, void *ptr, size_t size, uint64_t extra,
                          uint32_t site, uint64_t t0)
{
    track_external(d, kind, ptr, size, site, t0, extra);
}

/* ---- freeing -------------------------------------------------------------------------------- */

/* The periodic poll. When another thread already saw the oldest pending block's fence complete
 * there is nothing to ask the runtime; when another thread is polling, its answer will do. */
static GM_NOINLINE void poll_now(gm_arena_t *a)
{
    gm_device_t *d = a->dev;
    a->since_poll = 0;
    /* The try-lock comes before any runtime call: a thread that would only find the lock
     * taken makes none. */
    int ask = reusable_of(d) < a->general.pending_head->fence_seq && pthread_mutex_trylock(&d->fence_lock) == 0;
    if (!ask && !d->cache_limit) {
        release_done(a);
        return;
    }
    gm_ctx_t c;
    device_ctx_enter(d, &c); /* the runtime is asked, or the cache cap may free segments */
    if (ask)
        poll_locked(d);
    release_done(a);
    device_ctx_leave(&c);
}

/* The periodic fence, from a free: skipped when another thread holds the fence lock (the next
 * free tries again). */
static void fence_now(gm_arena_t *a)
{
    gm_device_t *d = a->dev;
    if (pthread_mutex_trylock(&d->fence_lock) != 0)
        return; /* before any runtime call, as in poll_now */
    gm_ctx_t c;
    device_ctx_enter(d, &c);
    if (fence_issue_locked(a) == 0)
        harvest(a, 0);
    device_ctx_leave(&c);
}

/* Freed bytes that make a fence worth recording now: without one they cannot be reused until
 * the next miss, and a miss would then have to wait for all of them. */
static size_t fence_threshold(const gm_arena_t *a)
{
    if (a->dev->fence_bytes)
        return a->dev->fence_bytes;
    size_t t = a->bytes.reserved.current / 64;
    return t > 2 * GM_MiB ? t : 2 * GM_MiB;
}

/* Frees a block found in arena a (locked); unlocks. */
static gm_free_result_t free_in_arena(gm_arena_t *a, gm_block_t *b, uint32_t site, cudaError_t *err)
{
    gm_device_t *d = a->dev;
    uintptr_t key = b->ptr;
    HASH_DEL(a->live, b);
    a->n.frees++;
    /* Inside the lock, before the block can be reused: its free is logged before any realloc. */
    uint64_t now = evlog_enabled() ? gm_now_ns() : 0, t0 = now;
    *err = cudaSuccess;
    if (!b->seg) { /* pass-through, managed or pitched: the driver's own */
        evlog_free(d->id, (unsigned)b->kind << GMLOG_KIND_SHIFT, key, site, now, t0);
        if (b->kind == GMLOG_KIND_PASS) {
            gm_stat_sub(&a->bytes.requested, b->requested);
            gm_stat_sub(&a->bytes.allocated, b->size);
            gm_stat_sub(&a->bytes.reserved, b->size);
            reserved_sub(d, b->size);
            a->n.driver_frees++;
        }
        pthread_mutex_unlock(&a->lock);
        free(b);
        *err = REAL_CALL(cudaFree, (void *)key);
        return GM_FREE_DONE;
    }
    gm_heap_t *heap = b->seg->heap;
    size_t size = b->size;
    if (heap != &a->general) {
        evlog_free(d->id, GMLOG_F_GRAPH, key, site, now, t0);
        pool_free_block(heap, b, now ? now : gm_now_ns()); /* a segment's idle time starts here */
    } else if (b->ipc) {
        evlog_free(d->id, GMLOG_F_DEFERRED, key, site, now, t0);
        pool_hold_block(heap, b);
    } else if (d->trust_stream_order) {
        gm_segment_t *seg = b->seg;
        evlog_free(d->id, 0, key, site, now, t0);
        pool_free_block(heap, b, now ? now : gm_now_ns());
        if (d->cache_limit && !captures_of(d) && seg->free_since_ns) {
            gm_ctx_t c;
            device_ctx_enter(d, &c);
            enforce_cache_limit(a);
            device_ctx_leave(&c);
        }
    } else {
        evlog_free(d->id, GMLOG_F_DEFERRED, key, site, now, t0);
        uint64_t issued = issued_of(d);
        pool_defer_block(heap, b, issued + 1);
        if (issued != a->open_seen) {
            /* A fence was recorded since this arena last counted (by any arena): it covers
             * every free counted so far. */
            a->open_seen = issued;
            a->open_bytes = 0;
            a->open_count = 0;
        }
        a->open_bytes += size;
        a->open_count++;
        if ((a->open_bytes >= fence_threshold(a) || (d->fence_frees && a->open_count >= d->fence_frees)) &&
            !captures_of(d))
            fence_now(a);
    }
    /* Over the cache cap: the trimmer sees it through once the GPU is done with the memory, even
     * if no allocation comes to poll. */
    if (unlikely(d->cache_limit) && heap == &a->general &&
        __atomic_load_n(&d->reserved_total, __ATOMIC_RELAXED) > d->cache_limit)
        trim_cache_kick();
    pthread_mutex_unlock(&a->lock);
    return GM_FREE_DONE;
}

gm_free_result_t device_free(gm_device_t *d, void *ptr, uint32_t site, cudaError_t *err)
{
    uintptr_t key = (uintptr_t)ptr;
    if (!key)
        return GM_FREE_NOT_FOUND; /* the sentinel's key */
    int n = narenas_of(d), first = my_arena < n ? my_arena : 0;
    for (int k = 0; k < n; k++) {
        gm_arena_t *a = d->arenas[(first + k) % n];
        gm_block_t *b;
        pthread_mutex_lock(&a->lock);
        HASH_FIND(hh, a->live, &key, sizeof key, b);
        if (b)
            return free_in_arena(a, b, site, err);
        pthread_mutex_unlock(&a->lock);
    }
    return GM_FREE_NOT_FOUND;
}

static int heap_owns(gm_heap_t *heap, uintptr_t ptr, int *kind)
{
    gm_segment_t *seg = pool_find_segment(heap, ptr);
    if (!seg)
        return 0;
    gm_block_t *b = pool_segment_find_block(seg, ptr);
    *kind = b && b->state != GM_BLOCK_LIVE ? GMLOG_WARN_DOUBLE_FREE : GMLOG_WARN_INTERIOR_FREE;
    return 1;
}

int device_owns_address(gm_device_t *d, uintptr_t ptr, int *kind)
{
    int found = 0;
    for (int i = 0; i < narenas_of(d) && !found; i++) {
        gm_arena_t *a = d->arenas[i];
        pthread_mutex_lock(&a->lock);
        found = heap_owns(&a->general, ptr, kind);
        for (gm_heap_t *h = i == 0 ? d->graph_heaps : NULL; h && !found; h = h->next_heap)
            found = heap_owns(h, ptr, kind);
        pthread_mutex_unlock(&a->lock);
    }
    return found;
}

void device_note_bad_free(gm_device_t *d)
{
    gm_arena_t *a = d->arenas[0];
    pthread_mutex_lock(&a->lock);
    a->n.bad_frees++;
    pthread_mutex_unlock(&a->lock);
}

void device_note_foreign_free(gm_device_t *d)
{
    gm_arena_t *a = d->arenas[0];
    pthread_mutex_lock(&a->lock);
    a->n.foreign_frees++;
    pthread_mutex_unlock(&a->lock);
}

/* ---- the rest ---------------------------------------------------------------------------- */

size_t device_cached_bytes(gm_device_t *d)
{
    size_t bytes = 0;
    for (int i = 0; i < narenas_of(d); i++) {
        gm_arena_t *a = d->arenas[i];
        pthread_mutex_lock(&a->lock);
        const gm_heap_t *h = &a->general;
        bytes += h->free_bytes[0] + h->free_bytes[1] + h->pending_bytes[0] + h->pending_bytes[1];
        pthread_mutex_unlock(&a->lock);
    }
    return bytes;
}

static void arena_forget(gm_arena_t *a)
{
    gm_block_t *b, *tmp;
    HASH_ITER(hh, a->live, b, tmp) {
        if (b == &a->sentinel)
            continue;
        HASH_DEL(a->live, b);
        if (!b->seg)
            free(b);
    }
    pool_destroy(&a->general);
    pool_init(&a->general, &a->bytes, NULL);
    a->general.max_split = (size_t)options_get(GM_OPT_MAX_SPLIT);
    a->open_bytes = 0;
    a->open_count = 0;
    a->bytes.requested.current = a->bytes.allocated.current = a->bytes.reserved.current = 0;
    a->bytes.cached.current = a->bytes.pending.current = 0;
}

void device_forget(gm_device_t *d)
{
    int n = narenas_of(d);
    for (int i = 0; i < n; i++)
        pthread_mutex_lock(&d->arenas[i]->lock);
    pthread_mutex_lock(&d->fence_lock);
    uint64_t reserved = __atomic_load_n(&d->reserved_total, __ATOMIC_RELAXED), live = 0;
    for (int i = 0; i < n; i++) {
        live += d->arenas[i]->bytes.allocated.current;
        arena_forget(d->arenas[i]);
    }
    gm_heap_t *h = d->graph_heaps;
    while (h) {
        gm_heap_t *next = h->next_heap;
        pool_destroy(h);
        free(h);
        h = next;
    }
    d->graph_heaps = NULL;
    d->capture_heap = NULL;
    __atomic_store_n(&d->captures, 0, __ATOMIC_RELEASE);
    fences_forget(&d->fences);
    __atomic_store_n(&d->reserved_total, 0, __ATOMIC_RELAXED);
    if (evlog_enabled()) {
        gmlog_reset_t rec;
        memset(&rec, 0, sizeof rec);
        evlog_hdr(&rec.h, GMLOG_RESET, sizeof rec, d->id, 0);
        rec.reserved_bytes = reserved;
        rec.live_bytes = live;
        evlog_append(&rec, sizeof rec, gm_now_ns());
    }
    pthread_mutex_unlock(&d->fence_lock);
    for (int i = n - 1; i >= 0; i--)
        pthread_mutex_unlock(&d->arenas[i]->lock);
}

void device_stream_created(gm_device_t *d, cudaStream_t s, unsigned flags)
{
    if (!(flags & cudaStreamNonBlocking))
        return; /* the legacy stream's event covers blocking streams; they follow its waits */
    gm_ctx_t c;
    /* GPU order (now, or until a second device came into use and its fences are still running):
     * blocks already handed out may still be in use by work before their fences. */
    int order = d->gpu_order_ever;
    if (order)
        device_ctx_enter(d, &c);
    pthread_mutex_lock(&d->fence_lock);
    fences_add_stream(&d->fences, s);
    cudaError_t err = order ? fences_order_stream(&d->fences, s) : cudaSuccess;
    pthread_mutex_unlock(&d->fence_lock);
    if (order)
        device_ctx_leave(&c);
    if (err != cudaSuccess)
        note_cuda_failure(d, "cudaStreamWaitEvent", err);
}

void device_stream_destroyed(gm_device_t *d, cudaStream_t s)
{
    gm_ctx_t c;
    device_ctx_enter(d, &c);
    pthread_mutex_lock(&d->fence_lock);
    fences_remove_stream(&d->fences, s);
    /* Work queued on the stream still runs after cudaStreamDestroy returns: blocks freed from
     * now on must wait for it too. The last event on it joins the next fence. */
    fences_retire_stream(&d->fences, s);
    pthread_mutex_unlock(&d->fence_lock);
    device_ctx_leave(&c);
}

int device_ipc_export(gm_device_t *d, void *ptr, int *found)
{
    uintptr_t key = (uintptr_t)ptr;
    int sub = 0;
    *found = 0;
    if (!key)
        return 0;
    for (int i = 0; i < narenas_of(d) && !*found; i++) {
        gm_arena_t *a = d->arenas[i];
        gm_block_t *b;
        pthread_mutex_lock(&a->lock);
        HASH_FIND(hh, a->live, &key, sizeof key, b);
        *found = b != NULL;
        if (b && b->seg) {
            b->ipc = 1;
            sub = b->ptr != b->seg->base;
        }
        pthread_mutex_unlock(&a->lock);
    }
    return sub;
}

static void stat_sum(gmshim_stat_t *to, const gm_stat_t *from)
{
    to->current += from->current;
    to->peak += from->peak; /* with one arena exact; with several an upper bound */
    to->total += from->total;
}

void device_get_stats(gm_device_t *d, gmshim_stats_t *out)
{
    out->device = d->id;
    for (int i = 0; i < narenas_of(d); i++) {
        gm_arena_t *a = d->arenas[i];
        pthread_mutex_lock(&a->lock);
        stat_sum(&out->requested, &a->bytes.requested);
        stat_sum(&out->allocated, &a->bytes.allocated);
        stat_sum(&out->reserved, &a->bytes.reserved);
        stat_sum(&out->cached, &a->bytes.cached);
        stat_sum(&out->pending, &a->bytes.pending);
        out->allocs += a->n.allocs;
        out->frees += a->n.frees;
        out->cache_hits += a->n.hits;
        out->cache_misses += a->n.misses;
        out->driver_mallocs += a->n.driver_mallocs;
        out->driver_frees += a->n.driver_frees;
        out->oom_retries += a->n.oom_retries;
        out->ooms += a->n.ooms;
        out->fences += a->n.fences;
        out->fence_waits += a->n.fence_waits;
        out->fence_wait_ns += a->n.fence_wait_ns;
        out->unpooled_allocs += a->n.unpooled_allocs;
        out->foreign_frees += a->n.foreign_frees;
        out->bad_frees += a->n.bad_frees;
        pthread_mutex_unlock(&a->lock);
    }
    /* Reserved memory is counted device-wide as well: exact however many arenas there are. */
    out->reserved.current = __atomic_load_n(&d->reserved_total, __ATOMIC_RELAXED);
    out->reserved.peak = __atomic_load_n(&d->reserved_peak, __ATOMIC_RELAXED);
    out->limit = limit_of(d);
    out->arenas = (unsigned long long)narenas_of(d);
}

int device_set_limit(int id, size_t bytes)
{
    gm_device_t *d = device_get(id);
    if (!d)
        return -1;
    __atomic_store_n(&d->limit, bytes, __ATOMIC_RELAXED);
    log_limit(d);
    if (bytes && __atomic_load_n(&d->reserved_total, __ATOMIC_RELAXED) > bytes && !captures_of(d))
        device_empty_cache(d, GMLOG_EMPTY_DEVICE_LIMIT);
    return 0;
}

gm_heap_t *device_graph_heap(gm_device_t *d, void *owner, uint32_t id)
{
    gm_heap_t *heap = calloc(1, sizeof *heap);
    if (!heap)
        return NULL;
    gm_arena_t *a = d->arenas[0];
    pthread_mutex_lock(&a->lock);
    pool_init(heap, &a->bytes, owner);
    heap->graph_id = id;
    heap->max_split = a->general.max_split;
    heap->next_heap = d->graph_heaps;
    d->graph_heaps = heap;
    pthread_mutex_unlock(&a->lock);
    return heap;
}

void device_set_captures(gm_device_t *d, int delta, gm_heap_t *current)
{
    gm_arena_t *a = d->arenas[0];
    pthread_mutex_lock(&a->lock);
    int n = d->captures + delta;
    d->capture_heap = current;
    __atomic_store_n(&d->captures, n < 0 ? 0 : n, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&a->lock);
}

void device_release_graph_heap(gm_device_t *d, gm_heap_t *heap)
{
    gm_arena_t *a = d->arenas[0];
    pthread_mutex_lock(&a->lock);
    uint64_t seq = issued_of(d) + 1;
    while (heap->segments)
        pool_move_segment(heap, &a->general, heap->segments, seq);
    gm_heap_t **link = &d->graph_heaps;
    while (*link && *link != heap)
        link = &(*link)->next_heap;
    if (*link)
        *link = heap->next_heap;
    if (d->capture_heap == heap)
        d->capture_heap = NULL;
    pool_adopt_storage(&a->general, heap);
    pool_destroy(heap);
    free(heap);
    pthread_mutex_unlock(&a->lock);
}

void device_fork_prepare(void)
{
    pthread_mutex_lock(&create_lock);
    for (int i = 0; i < ncreated; i++) {
        gm_device_t *d = devices[created[i]];
        for (int k = 0; k < d->narenas; k++)
            pthread_mutex_lock(&d->arenas[k]->lock);
        pthread_mutex_lock(&d->fence_lock);
    }
}

void device_fork_release(void)
{
    for (int i = ncreated - 1; i >= 0; i--) {
        gm_device_t *d = devices[created[i]];
        pthread_mutex_unlock(&d->fence_lock);
        for (int k = d->narenas - 1; k >= 0; k--)
            pthread_mutex_unlock(&d->arenas[k]->lock);
    }
    pthread_mutex_unlock(&create_lock);
}
