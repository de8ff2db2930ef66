/* One thread that wakes every interval and, per device, returns whole free segments (all of
 * them, or those idle for GMSHIM_IDLE_RELEASE) to the driver under that device's lock, with
 * the device current and in relaxed capture mode. It makes no call while a capture runs there. */
#include "trim.h"
#include "common.h"
#include "device.h"
#include "diag.h"
#include "init.h"
#include "options.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

static pthread_t thread;
static int running;
static int stopping;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake;

static void *trim_main(void *arg)
{
    (void)arg;
    gm_depth = 1; /* the pool's own CUDA calls must not come back through the hooks */
    long long interval_ms = options_get(GM_OPT_EMPTY_CACHE_INTERVAL);
    long long idle_ms = options_get(GM_OPT_IDLE_RELEASE);
    if (!interval_ms)
        interval_ms = 1000;
    pthread_mutex_lock(&lock);
    while (!stopping) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += interval_ms / 1000;
        until.tv_nsec += (interval_ms % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        while (!stopping && pthread_cond_timedwait(&wake, &lock, &until) != ETIMEDOUT)
            ;
        if (stopping || gm_state != GM_POOLED)
            break;
        pthread_mutex_unlock(&lock);
        for (int i = 0; i < device_created_count(); i++) {
            gm_device_t *d = device_at(i);
            if (d)
                device_trim(d, (uint64_t)idle_ms * 1000000u);
        }
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

void trim_start(void)
{
    if (!options_get(GM_OPT_EMPTY_CACHE_INTERVAL) && !options_get(GM_OPT_IDLE_RELEASE))
        return;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&wake, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&thread, NULL, trim_main, NULL) != 0) {
        diag_warn("cannot start the cache trimmer thread; GMSHIM_EMPTY_CACHE_INTERVAL and "
                  "GMSHIM_IDLE_RELEASE are ignored");
        return;
    }
    running = 1;
    diag_verbose("cache trimmer started");
}

void trim_stop(void)
{
    if (!running)
        return;
    pthread_mutex_lock(&lock);
    stopping = 1;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
    pthread_join(thread, NULL);
    running = 0;
}

void trim_forget(void)
{
    running = 0;
}
