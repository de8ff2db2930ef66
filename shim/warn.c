/* GMSHIM_WARN (warn.h): steps and their low-water marks per device, the rule of
 * common/leakwarn.c, and the one line on stderr. A device's figures are PyTorch's tensors once the
 * bridge forwards them (warntensor.c), else gmshim's pool. It never runs inside a hook: its thread
 * and gmshim_mark read the figures (each arena's lock, briefly) and it allocates only there;
 * anything that fails leaves the warning out, never the program. */
#include "warn.h"
#include "devctx.h"
#include "device.h"
#include "diag.h"
#include "leakwarn.h"
#include "options.h"
#include "stacks.h"
#include "state.h"
#include "warntensor.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { SYS_MARKS, SYS_TROUGHS };
/* What a device's figures are: gmshim's pool (what it serves, or in pass-through forwards), or
 * PyTorch's tensors (its cache kept: the pool then holds PyTorch's segments, which a leak grows
 * late or never while a cached segment has room). */
enum { SRC_NONE, SRC_POOL, SRC_TENSORS };

/* Marks describe a device's steps once there are this many (as `gmshim top` decides). */
#define MARKS_NEEDED 3
/* A verdict waits for the site of what was made since arming for this many readings that found a
 * step's end (one made just before a reading is counted two such readings later), or, while none
 * is found (the program stopped stepping), this many readings of any kind. */
#define WAIT_FOR_SITE_STEPS 3
#define WAIT_FOR_SITE_READINGS 30

typedef struct warn_dev {
    int seen;
    int src;                      /* SRC_*: a change starts the device's steps again */
    int armed;                    /* the sites' growth counted from `armed_at` (warntensor_arm) */
    uint32_t armed_at;            /* SRC_POOL: the device's warn_epoch then */
    uint64_t peak;                /* the most allocated bytes read */
    uint64_t low[2];              /* the least since the step under way began, per system */
    uint32_t marks;
    leakwarn_t steps[2];
    uint64_t tap_seen;            /* the troughs of the figures' tap read so far */
    leakwarn_trough_t tr;         /* troughs of the readings, when there is no tap */
    uint32_t armed_step;          /* steps[] count then: arming older than a window is done again */
    uint64_t readings;            /* the device's readings so far */
    uint64_t stepped_at;          /* the reading that last moved the blocks' and tensors' step */
    uint64_t stepped;             /* ...readings that did so far */
    int waiting;                  /* a verdict given, its site awaited (`verdict`, since the figures */
    uint64_t waited_from, waited_steps; /* readings and stepped were these) */
    leakwarn_verdict_t verdict;
} warn_dev_t;

static struct {
    pthread_mutex_t lock;         /* the steps; taken before any arena lock, never under one */
    pthread_cond_t wake;
    int started, stop, done;      /* done: the warning was given (or cannot be) */
    int state;                    /* gm_state at the start: a change (a fallback) ends the warning */
    pthread_t thread;
    warn_dev_t dev[GM_MAX_DEVICES];
} W = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

/* The system of steps a device's warning follows: its marks once there are enough, else troughs. */
static int system_in_use(const warn_dev_t *w)
{
    return w->marks >= MARKS_NEEDED ? SYS_MARKS : SYS_TROUGHS;
}

/* The sites' growth is no longer counted (warntensor_disarm forgets the tensors kept). */
static void sites_disarm(int id, warn_dev_t *w)
{
    if (w->armed && w->src == SRC_TENSORS)
        warntensor_disarm(id);
    w->armed = 0;
}

/* The start of the sites' growth, half way up a rise: from now on the blocks (or tensors) made
 * that outlive a step are the growth (the pool's blocks carry the step they were made in, the
 * tensors are kept by site), so that a line's transient bytes, live at one reading and not at
 * another, never count. */
static void sites_arm(int id, gm_device_t *d, warn_dev_t *w)
{
    if (w->src == SRC_TENSORS)
        warntensor_arm(id);
    else
        w->armed_at = __atomic_load_n(&d->warn_epoch, __ATOMIC_RELAXED);
    w->armed = 1;
    w->armed_step = w->steps[system_in_use(w)].steps;
}

/* The site with the most bytes made since arming that outlived a step; 0 when none (or not
 * armed). */
static uint32_t grew_most(int id, gm_device_t *d, warn_dev_t *w)
{
    if (!w->armed)
        return 0;
    gm_site_bytes_t *now;
    size_t n = w->src == SRC_TENSORS ? warntensor_site_bytes(id, &now) : device_site_bytes(d, w->armed_at, &now);
    uint32_t best = 0;
    uint64_t most = 0;
    for (size_t i = 0; now && i < n; i++) {
        if (now[i].site && now[i].bytes > most) {
            most = now[i].bytes;
            best = now[i].site;
        }
    }
    free(now);
    return best;
}

/* The warning, once: verdict v, naming `site` (0: none known). */
static void say(int id, warn_dev_t *w, const leakwarn_verdict_t *v, uint32_t site)
{
    char where[256] = "", line[512];
    if (site)
        stacks_describe(site, where, sizeof where);
    diag_warn("%s", leakwarn_format(line, sizeof line, id, v, where));
    W.done = 1;
    sites_disarm(id, w);
}

/* What device id's figures run up against: its cap, else its memory (tensors count against them
 * as the pool's blocks do); d: its pool, NULL if it has none (tensors in memory PyTorch mapped
 * itself: the device's size, looked up once). */
static size_t capacity(int id, gm_device_t *d)
{
    if (!d)
        d = device_get(id);
    return !d ? 0 : device_limit(d) ? device_limit(d) : d->total;
}

/* A step of system `sys` ended on device id (d: its pool, NULL if it has none): the sites armed
 * half way up a rise, the verdict at its top; `newest`: no later step is known yet (a verdict on
 * an older one would count the steps left from a floor already passed). */
static void judge(int id, gm_device_t *d, warn_dev_t *w, int sys, int newest)
{
    if (sys != system_in_use(w) || W.done)
        return;
    /* The step blocks and tensors are made in: once a reading, however many troughs it finds
     * (steps shorter than a reading), so that one made just before the reading never counts as
     * having outlived the troughs found with it. */
    if (w->stepped_at != w->readings) {
        w->stepped_at = w->readings;
        w->stepped++;
        if (w->src == SRC_TENSORS)
            warntensor_step(id);
        else if (d)
            device_warn_step(d);
    }
    if (w->waiting)
        return; /* a verdict given, its site awaited (sample) */
    unsigned rising = leakwarn_rising(&w->steps[sys]);
    if (rising < LEAKWARN_RISES / 2) {
        sites_disarm(id, w);
        return;
    }
    leakwarn_verdict_t v;
    int leak = leakwarn_check(&w->steps[sys], 0, &v);
    if (leak && !newest)
        return; /* the sites kept armed: the verdict comes with the newest step */
    if (!leak || !leakwarn_check(&w->steps[sys], capacity(id, d), &v)) {
        if (w->armed && w->steps[sys].steps - w->armed_step > LEAKWARN_RISES)
            sites_disarm(id, w); /* growth since then would count a warm-up long past */
        if (!w->armed)
            sites_arm(id, d, w);
        return;
    }
    uint32_t best = grew_most(id, d, w);
    /* Steps far shorter than a reading: the table was armed and the verdict came due in one
     * reading's troughs, before a tensor kept since outlived a step; the verdict waits a few
     * readings for them to name the line (the warning then comes up to 30 ms later). */
    if (!best && w->armed) {
        w->waiting = 1;
        w->waited_from = w->readings;
        w->waited_steps = w->stepped;
        w->verdict = v;
        return;
    }
    say(id, w, &v, best);
}

/* One reading of device id's figures: its tensors' when the bridge forwards them, else its pool's
 * (d); `mark`: a gmshim_mark ends the step of marks. W.lock held. */
static void sample(int id, gm_device_t *d, int mark)
{
    if (id < 0 || id >= GM_MAX_DEVICES)
        return;
    warn_dev_t *w = &W.dev[id];
    int src = warntensor_seen(id) ? SRC_TENSORS : SRC_POOL;
    if (src == SRC_POOL && !d)
        return;
    if (w->src != src) {
        /* The bridge attached after the pool's first readings (PyTorch's first segment): those
         * steps were of segments, not tensors. */
        sites_disarm(id, w);
        memset(w, 0, sizeof *w);
        w->src = src;
    }
    w->readings++;
    uint64_t low, cur, t = gm_now_ns();
    leakwarn_tap_t *tap;
    if (src == SRC_TENSORS) {
        warntensor_take_low(id, &low, &cur);
        tap = warntensor_tap(id);
    } else {
        device_take_low(d, &low, &cur);
        tap = device_tap(d);
    }
    if (!w->seen) {
        w->seen = 1;
        leakwarn_trough_init(&w->tr);
        w->low[SYS_MARKS] = w->low[SYS_TROUGHS] = low;
    }
    for (int s = 0; s < 2; s++)
        if (low < w->low[s])
            w->low[s] = low;
    if (cur > w->peak)
        w->peak = cur;
    uint64_t lo, lo_t;
    if (tap) {
        /* Every trough since the last reading, however many steps a reading spans. */
        int more = leakwarn_tap_next(tap, &w->tap_seen, &lo, &lo_t);
        while (!W.done && more) {
            leakwarn_step(&w->steps[SYS_TROUGHS], lo, lo_t);
            more = leakwarn_tap_next(tap, &w->tap_seen, &lo, &lo_t);
            judge(id, d, w, SYS_TROUGHS, !more);
        }
    } else {
        /* Several arenas, each a share: troughs of the readings, where the least since the last
         * reading came before the figure now (steps shorter than GM_WARN_PERIOD_MS are missed). */
        int closed = leakwarn_trough_feed(&w->tr, low, w->peak, t);
        closed |= leakwarn_trough_feed(&w->tr, cur, w->peak, t);
        if (closed) {
            leakwarn_step(&w->steps[SYS_TROUGHS], w->low[SYS_TROUGHS], t);
            w->low[SYS_TROUGHS] = cur;
            judge(id, d, w, SYS_TROUGHS, 1);
        }
    }
    if (mark) {
        if (w->marks++)
            leakwarn_step(&w->steps[SYS_MARKS], w->low[SYS_MARKS], t);
        w->low[SYS_MARKS] = cur;
        judge(id, d, w, SYS_MARKS, 1);
    }
    if (w->waiting && !W.done) { /* the verdict's site once its tensors outlived a step, or none */
        uint32_t best = grew_most(id, d, w);
        if (best || w->stepped - w->waited_steps >= WAIT_FOR_SITE_STEPS ||
            w->readings - w->waited_from >= WAIT_FOR_SITE_READINGS) {
            /* the figures as of this reading: the steps left are fewer than when it came due */
            leakwarn_verdict_t v;
            int fresh = leakwarn_check(&w->steps[system_in_use(w)], capacity(id, d), &v);
            say(id, w, fresh ? &v : &w->verdict, best);
        }
    }
}

static void sample_all(int mark)
{
    int depth = gm_depth;
    gm_depth = 1; /* nothing below may come back through the hooks */
    pthread_mutex_lock(&W.lock);
    int pooled[GM_MAX_DEVICES] = {0};
    for (int i = 0; i < devctx_created_count() && !W.done; i++) {
        gm_device_t *d = devctx_at(i);
        if (d && d->id >= 0 && d->id < GM_MAX_DEVICES) {
            pooled[d->id] = 1;
            sample(d->id, d, mark);
        }
    }
    /* Devices with tensors and no pool (expandable segments: PyTorch maps its own memory) */
    for (int id = 0; id < GM_MAX_DEVICES && !W.done; id++)
        if (!pooled[id] && warntensor_seen(id))
            sample(id, devctx_peek(id), mark);
    pthread_mutex_unlock(&W.lock);
    gm_depth = depth;
}

static void *warn_main(void *arg)
{
    (void)arg;
    gm_depth = 1;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (;;) {
        next.tv_nsec += GM_WARN_PERIOD_MS * 1000000L;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        pthread_mutex_lock(&W.lock);
        while (!__atomic_load_n(&W.stop, __ATOMIC_ACQUIRE) && !W.done &&
               pthread_cond_timedwait(&W.wake, &W.lock, &next) == 0)
            ;
        int stop = __atomic_load_n(&W.stop, __ATOMIC_ACQUIRE) || W.done;
        pthread_mutex_unlock(&W.lock);
        if (stop || __atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) != W.state)
            break;
        sample_all(0);
    }
    return NULL;
}

void warn_start(void)
{
    if (!options_get(GM_OPT_WARN))
        return;
    pthread_mutex_lock(&W.lock);
    if (!W.started && !W.done) {
        /* Pooled or (GMSHIM_POOL=0) forwarding: both count each device's blocks by site. */
        W.state = __atomic_load_n(&gm_state, __ATOMIC_ACQUIRE);
        warntensor_enable();
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&W.wake, &attr);
        pthread_condattr_destroy(&attr);
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old); /* the host's signals go to the host's threads */
        int ok = pthread_create(&W.thread, NULL, warn_main, NULL) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        __atomic_store_n(&W.started, ok, __ATOMIC_RELEASE);
        if (!ok)
            W.done = 1; /* no thread, no troughs: marks alone would say less than promised */
    }
    pthread_mutex_unlock(&W.lock);
}

void warn_mark(void)
{
    if (__atomic_load_n(&W.started, __ATOMIC_ACQUIRE) && !__atomic_load_n(&W.done, __ATOMIC_RELAXED) &&
        __atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) == W.state)
        sample_all(1);
}

void warn_stop(void)
{
    /* No lock: exit may come from a handler of a signal that interrupted this module holding it;
     * the thread sees the flag within a period. */
    if (!__atomic_exchange_n(&W.started, 0, __ATOMIC_ACQ_REL))
        return;
    __atomic_store_n(&W.stop, 1, __ATOMIC_RELEASE);
    pthread_cond_signal(&W.wake);
    pthread_join(W.thread, NULL);
}

void warn_forget(void)
{
    /* The parent's thread is not the child's, and its lock may have been copied held. */
    pthread_mutex_init(&W.lock, NULL);
    pthread_cond_init(&W.wake, NULL);
    W.started = 0;
    W.done = 1;
    warntensor_forget();
}
