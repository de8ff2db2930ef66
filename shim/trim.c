/* One thread that wakes every interval and, per device, returns whole free segments (all of
 * them, or those idle for GMSHIM_IDLE_RELEASE) to the driver under that device's lock, with
 * the device current and in relaxed capture mode, after emptying PyTorch's cache when the bridge
 * gave it the way; and that polls the fences of freed memory over GMSHIM_CACHE_LIMIT until it
 * can go. It never waits for the GPU, and makes no call on
 * a device while a capture runs there. */
#include "trim.h"
#include "common.h"
#include "devctx.h"
#include "diag.h"
#include "options.h"
#include "slowpath.h"
#include "state.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

static pthread_t thread;
static int running;     /* read by trim_cache_kick from any thread (atomic) */
static int stopping;
static int cache_kicked; /* a free left the cache over its cap (atomic; set, then signalled) */
static int start_failed;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake;

static void add_ms(struct timespec *t, long long ms)
{
    t->tv_sec += ms / 1000;
    t->tv_nsec += (ms % 1000) * 1000000;
    if (t->tv_nsec >= 1000000000) {
        t->tv_sec++;
        t->tv_nsec -= 1000000000;
    }
}

static int before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static int kicked_now(void);

/* Waits (lock held) until `until` (NULL: no deadline) or the stop, and if `on_kick` a kick. */
static void sleep_until(const struct timespec *until, int on_kick)
{
    while (!stopping && !(on_kick && kicked_now())) {
        if (!until)
            pthread_cond_wait(&wake, &lock);
        else if (pthread_cond_timedwait(&wake, &lock, until) == ETIMEDOUT)
            return;
    }
}

/* PyTorch's cache (or another allocator above gmshim's pool), emptied at each periodic pass from
 * this thread: no gmshim lock held, the hooks live (its cudaFree calls must reach the pool), in
 * relaxed capture mode, and never while a capture runs on a device gmshim knows. */
static trim_upstream_fn upstream;

static int any_capture(void)
{
    for (int i = 0; i < devctx_created_count(); i++) {
        gm_device_t *d = devctx_at(i);
        if (d && device_captures(d))
            return 1;
    }
    return 0;
}

static void empty_upstream(uint64_t idle_ns)
{
    trim_upstream_fn fn = __atomic_load_n(&upstream, __ATOMIC_ACQUIRE);
    if (!fn || any_capture())
        return;
    gm_ctx_t c;
    devctx_enter(NULL, &c);
    gm_depth = 0;
    fn(idle_ns);
    gm_depth = 1;
    devctx_leave(&c);
}

/* The cache cap's pass on every device; returns whether freed memory still waits for the GPU. */
static int poll_passes(int cache)
{
    int waiting = 0;
    for (int i = 0; cache && i < devctx_created_count(); i++) {
        gm_device_t *d = devctx_at(i);
        if (d)
            slowpath_cache_trim(d, &waiting);
    }
    return waiting;
}

static int kicked_now(void)
{
    return __atomic_load_n(&cache_kicked, __ATOMIC_ACQUIRE);
}

static void *trim_main(void *arg)
{
    (void)arg;
    gm_depth = 1; /* the pool's own CUDA calls must not come back through the hooks */
    long long interval_ms = options_get(GM_OPT_EMPTY_CACHE_INTERVAL);
    long long idle_ms = options_get(GM_OPT_IDLE_RELEASE);
    int periodic = interval_ms || idle_ms;
    if (!interval_ms)
        interval_ms = 1000;
    int polling = 0; /* freed memory over the cache cap waits for its fences */
    struct timespec next, last_poll = {0, 0};
    clock_gettime(CLOCK_MONOTONIC, &next);
    add_ms(&next, interval_ms);
    pthread_mutex_lock(&lock);
    while (!stopping) {
        /* Polls come at most every GM_CACHE_POLL_MS, however often frees kick. */
        int kicked = kicked_now();
        struct timespec due = last_poll, now;
        add_ms(&due, GM_CACHE_POLL_MS);
        const struct timespec *until = polling || kicked ? &due : NULL;
        if (periodic && (!until || before(&next, until)))
            until = &next;
        sleep_until(until, !polling && !kicked);
        if (stopping || gm_state != GM_POOLED)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int trim = periodic && !before(&now, &next);
        int poll = (polling || kicked_now()) && !before(&now, &due);
        if (!trim && !poll)
            continue; /* a kick: the deadline is worked out again */
        int cache = polling;
        if (poll) {
            cache |= __atomic_exchange_n(&cache_kicked, 0, __ATOMIC_ACQ_REL);
            last_poll = now;
        }
        pthread_mutex_unlock(&lock);
        if (trim) {
            empty_upstream((uint64_t)idle_ms * 1000000u);
            for (int i = 0; i < devctx_created_count(); i++) {
                gm_device_t *d = devctx_at(i);
                if (!d)
                    continue;
                slowpath_trim(d, (uint64_t)idle_ms * 1000000u);
                if (d->plan_give_back) /* the planned step's pages no block needs, when it is idle */
                    d->plan_give_back(d, idle_ms ? GMLOG_EMPTY_IDLE : GMLOG_EMPTY_PERIODIC);
            }
            next = now;
            add_ms(&next, interval_ms);
        }
        polling = poll_passes(cache);
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* Starts the thread once, at the first CUDA call when a setting asks for it. */
static void start_thread(void)
{
    pthread_mutex_lock(&start_lock);
    if (!__atomic_load_n(&running, __ATOMIC_ACQUIRE) && !start_failed && !__atomic_load_n(&stopping, __ATOMIC_ACQUIRE)) {
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&wake, &attr);
        pthread_condattr_destroy(&attr);
        if (pthread_create(&thread, NULL, trim_main, NULL) != 0) {
            start_failed = 1;
            diag_warn("cannot start the cache trimmer thread; GMSHIM_EMPTY_CACHE_INTERVAL and "
                      "GMSHIM_IDLE_RELEASE are ignored, GMSHIM_CACHE_LIMIT applies only when memory "
                      "is allocated, and memory PyTorch's empty_cache gives back stays cached");
        } else {
            __atomic_store_n(&running, 1, __ATOMIC_RELEASE);
            diag_verbose("cache trimmer started");
        }
    }
    pthread_mutex_unlock(&start_lock);
}

void trim_start(void)
{
    if (!options_get(GM_OPT_EMPTY_CACHE_INTERVAL) && !options_get(GM_OPT_IDLE_RELEASE) &&
        !options_get(GM_OPT_CACHE_LIMIT))
        return;
    start_thread();
}

void trim_set_upstream(trim_upstream_fn fn)
{
    __atomic_store_n(&upstream, fn, __ATOMIC_RELEASE);
}

void trim_stop(void)
{
    if (!__atomic_load_n(&running, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&lock);
    stopping = 1;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
    pthread_join(thread, NULL);
    __atomic_store_n(&running, 0, __ATOMIC_RELEASE);
}

void trim_forget(void)
{
    __atomic_store_n(&running, 0, __ATOMIC_RELEASE);
}

void trim_cache_kick(void)
{
    if (!__atomic_load_n(&running, __ATOMIC_ACQUIRE) || __atomic_load_n(&cache_kicked, __ATOMIC_RELAXED) ||
        __atomic_exchange_n(&cache_kicked, 1, __ATOMIC_ACQ_REL))
        return;
    pthread_mutex_lock(&lock);
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
}
