/* The card's ledger, sampled: per device the driver's free bytes, the context term and, through
 * NVML (nvml.c), this process's and every other process's use of the GPU, with each other
 * process's command line. A sample costs a runtime call and a few NVML calls (about a
 * millisecond), so it is taken only at a device's first use, after a failed allocation (on the
 * failing thread, outside the pool's locks), and on a thread of its own after marks (at most one
 * a second) and every GMSHIM_LEDGER_INTERVAL: never on the allocation path. */
#include "ledger.h"
#include "common.h"
#include "devctx.h"
#include "diag.h"
#include "evlog.h"
#include "logrec.h"
#include "nvml.h"
#include "options.h"
#include "real.h"
#include "stacks.h"
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MARK_GAP_NS 1000000000ull   /* marks sample at most once a second */
#define OOM_GAP_NS 10000000ull      /* OOMs in a loop: at most one sample every 10 ms per device */
#define NAMES 128                   /* command lines remembered, by pid */

typedef struct ledger_dev {
    int opened;                 /* the device's first sample was written */
    int looked;                 /* its NVML handle was looked for */
    void *nvml;                 /* its NVML handle, NULL: none */
    int before_ok;              /* NVML's free bytes were read before the context existed */
    uint64_t before_free;
    uint64_t context;           /* the context term; 0: unknown */
    uint32_t how;               /* GMLOG_LEDGER_CTX_* */
    uint64_t last_oom_ns;
} ledger_dev_t;

static struct {
    pthread_mutex_t lock;       /* a leaf: the per-device state and the names */
    ledger_dev_t dev[GM_MAX_DEVICES];
    struct { uint32_t pid, id; } names[NAMES];
    unsigned nnames;
} L = {.lock = PTHREAD_MUTEX_INITIALIZER};

static struct {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int running, stopping, forgotten, start_failed;
    int mark_wanted;
    uint64_t last_mark_ns;      /* atomic */
} T = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int enabled(void)
{
    return options_get(GM_OPT_LEDGER) && evlog_enabled() && !__atomic_load_n(&T.forgotten, __ATOMIC_ACQUIRE) &&
           __atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) != GM_CHILD;
}

/* ---- NVML's view of a device --------------------------------------------------------------- */

/* The device's NVML handle: found by its PCI bus id (CUDA_VISIBLE_DEVICES renumbers devices,
 * NVML does not). NULL without NVML. */
static void *nvml_of(int dev)
{
    pthread_mutex_lock(&L.lock);
    int looked = L.dev[dev].looked;
    void *h = L.dev[dev].nvml;
    pthread_mutex_unlock(&L.lock);
    if (looked)
        return h;
    h = NULL;
    if (nvml_ready()) {
        struct cudaDeviceProp prop;
        char bus[32] = "";
        memset(&prop, 0, sizeof prop);
        if (REAL_CALL(cudaGetDeviceProperties, &prop, dev) == cudaSuccess)
            snprintf(bus, sizeof bus, "%08x:%02x:%02x.0", (unsigned)prop.pciDomainID, (unsigned)prop.pciBusID,
                     (unsigned)prop.pciDeviceID);
        h = nvml_device(bus, bus[0] ? -1 : dev);
    }
    pthread_mutex_lock(&L.lock);
    L.dev[dev].looked = 1;
    L.dev[dev].nvml = h;
    pthread_mutex_unlock(&L.lock);
    return h;
}

/* A process's command line, arguments joined by spaces, as a string id; 0 when unknown. */
static uint32_t command_of(uint32_t pid)
{
    pthread_mutex_lock(&L.lock);
    for (unsigned i = 0; i < L.nnames && i < NAMES; i++)
        if (L.names[i].pid == pid) {
            uint32_t id = L.names[i].id;
            pthread_mutex_unlock(&L.lock);
            return id;
        }
    pthread_mutex_unlock(&L.lock);
    char path[64], text[256];
    ssize_t n = -1;
    snprintf(path, sizeof path, "/proc/%u/cmdline", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, text, sizeof text - 1);
        close(fd);
    }
    if (n > 0) {
        while (n > 0 && text[n - 1] == 0)
            n--;
        for (ssize_t i = 0; i < n; i++)
            if (text[i] == 0 || text[i] == '\n')
                text[i] = ' ';
        text[n] = 0;
    } else if (nvml_process_name(pid, text, sizeof text) != 0) {
        return 0;
    }
    uint32_t id = text[0] ? stacks_intern_string(text) : 0;
    pthread_mutex_lock(&L.lock);
    L.names[L.nnames++ % NAMES].pid = pid;
    L.names[(L.nnames - 1) % NAMES].id = id;
    pthread_mutex_unlock(&L.lock);
    return id;
}

/* ---- a sample ------------------------------------------------------------------------------ */

static void sample(gm_device_t *d, unsigned why)
{
    int dev = d->id;
    gmlog_ledger_t rec;
    memset(&rec, 0, sizeof rec);
    rec.total = d->total;
    rec.driver_free = GMLOG_UNKNOWN;
    rec.self_used = GMLOG_UNKNOWN;
    rec.others = GMLOG_UNKNOWN;
    size_t f = 0, t = 0;
    gm_ctx_t c;
    devctx_enter(d, &c);
    if (REAL_CALL(cudaMemGetInfo, &f, &t) == cudaSuccess) {
        rec.driver_free = f;
        if (!rec.total)
            rec.total = t;
    }
    devctx_leave(&c);
    pthread_mutex_lock(&L.lock);
    rec.context = L.dev[dev].context;
    rec.status = L.dev[dev].how;
    pthread_mutex_unlock(&L.lock);
    gmlog_ledger_proc_t procs[GMLOG_LEDGER_MAX_PROCS];
    nvml_proc_t seen[GMLOG_LEDGER_MAX_PROCS + 1];
    void *h = nvml_of(dev);
    int n = h ? nvml_processes(h, seen, GM_ARRAY_LEN(seen)) : -1;
    if (n >= 0) {
        uint32_t self = (uint32_t)getpid();
        rec.status |= GMLOG_LEDGER_NVML;
        rec.others = 0;
        for (int i = 0; i < n && i < (int)GM_ARRAY_LEN(seen); i++) {
            if (seen[i].pid == self) {
                rec.self_used = seen[i].used;
                continue;
            }
            if (seen[i].used == UINT64_MAX)
                rec.status |= GMLOG_LEDGER_UNKNOWN_USE;
            else
                rec.others += seen[i].used;
            if (rec.nprocs == GMLOG_LEDGER_MAX_PROCS) {
                rec.status |= GMLOG_LEDGER_TRUNCATED;
                continue;
            }
            procs[rec.nprocs++] = (gmlog_ledger_proc_t){seen[i].pid, command_of(seen[i].pid),
                                                        seen[i].used == UINT64_MAX ? GMLOG_UNKNOWN : seen[i].used};
        }
        if (n > (int)GM_ARRAY_LEN(seen))
            rec.status |= GMLOG_LEDGER_TRUNCATED;
    }
    logrec_ledger(dev, why, &rec, procs, rec.nprocs);
}

/* ---- the context term ---------------------------------------------------------------------- */

void ledger_device_opening(int dev)
{
    if (dev < 0 || dev >= GM_MAX_DEVICES || !enabled())
        return;
    void *h = nvml_of(dev);
    nvml_proc_t seen[GMLOG_LEDGER_MAX_PROCS];
    int n = h ? nvml_processes(h, seen, GM_ARRAY_LEN(seen)) : -1;
    uint64_t total, free_bytes;
    if (n < 0 || n > (int)GM_ARRAY_LEN(seen) || nvml_memory(h, &total, &free_bytes))
        return;
    uint32_t self = (uint32_t)getpid();
    uint64_t used = 0;
    int listed = 0;
    for (int i = 0; i < n; i++)
        if (seen[i].pid == self)
            listed = 1, used = seen[i].used;
    pthread_mutex_lock(&L.lock);
    ledger_dev_t *l = &L.dev[dev];
    if (!l->opened && !l->how && !l->before_ok) {
        if (!listed) {
            l->before_ok = 1;
            l->before_free = free_bytes;
        } else if (used != UINT64_MAX) {
            l->context = used; /* the context was there first: this process's use before gmshim's */
            l->how = GMLOG_LEDGER_CTX_FIRST;
        }
    }
    pthread_mutex_unlock(&L.lock);
}

void ledger_device_opened(gm_device_t *d)
{
    int dev = d->id;
    if (dev < 0 || dev >= GM_MAX_DEVICES || !enabled())
        return;
    uint64_t total, after = 0;
    pthread_mutex_lock(&L.lock);
    int first = !L.dev[dev].opened, before_ok = L.dev[dev].before_ok;
    __atomic_store_n(&L.dev[dev].opened, 1, __ATOMIC_RELEASE); /* read without the lock by the sampler */
    void *h = L.dev[dev].nvml;
    pthread_mutex_unlock(&L.lock);
    if (!first)
        return;
    if (before_ok && h && nvml_memory(h, &total, &after) == 0) {
        pthread_mutex_lock(&L.lock);
        ledger_dev_t *l = &L.dev[dev];
        if (l->before_free > after) {
            l->context = l->before_free - after;
            l->how = GMLOG_LEDGER_CTX_CREATED;
        }
        pthread_mutex_unlock(&L.lock);
    }
    sample(d, GMLOG_LEDGER_START);
}

void ledger_foreign_oom(int dev, size_t size, uint32_t site)
{
    gmlog_oom_t r;
    memset(&r, 0, sizeof r);
    r.request = size;
    r.segment = size;
    /* A call that succeeds leaves the runtime's last error as the failure set it. */
    size_t f = 0, t = 0;
    if (REAL_CALL(cudaMemGetInfo, &f, &t) == cudaSuccess) {
        r.driver_free = f;
        r.driver_total = t;
    }
    r.site = site;
    logrec_oom(dev, GMLOG_OOM_ASYNC, &r); /* no pool of gmshim's was asked: no pool figures */
    ledger_oom(dev);
}

void ledger_oom(int dev)
{
    if (dev < 0 || dev >= GM_MAX_DEVICES || !enabled())
        return;
    gm_device_t *d = devctx_peek(dev);
    if (!d)
        return;
    uint64_t now = gm_now_ns();
    pthread_mutex_lock(&L.lock);
    int due = now - L.dev[dev].last_oom_ns >= OOM_GAP_NS || !L.dev[dev].last_oom_ns;
    if (due)
        L.dev[dev].last_oom_ns = now;
    pthread_mutex_unlock(&L.lock);
    if (due)
        sample(d, GMLOG_LEDGER_OOM);
}

/* ---- the sampler thread -------------------------------------------------------------------- */

static void *ledger_main(void *arg)
{
    (void)arg;
    gm_depth = 1; /* its runtime calls must not come back through the hooks */
    long long interval_ms = options_get(GM_OPT_LEDGER_INTERVAL);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    pthread_mutex_lock(&T.lock);
    while (!T.stopping) {
        unsigned why = GMLOG_LEDGER_PERIODIC;
        if (!T.mark_wanted) {
            int timed_out = 0;
            if (interval_ms > 0) {
                next.tv_sec += interval_ms / 1000;
                next.tv_nsec += (interval_ms % 1000) * 1000000;
                if (next.tv_nsec >= 1000000000)
                    next.tv_sec++, next.tv_nsec -= 1000000000;
                while (!T.stopping && !T.mark_wanted && !timed_out)
                    timed_out = pthread_cond_timedwait(&T.wake, &T.lock, &next) == ETIMEDOUT;
            } else {
                while (!T.stopping && !T.mark_wanted)
                    pthread_cond_wait(&T.wake, &T.lock);
            }
            if (T.stopping)
                break;
            if (!timed_out)
                why = GMLOG_LEDGER_MARK;
        } else {
            why = GMLOG_LEDGER_MARK;
        }
        T.mark_wanted = 0;
        pthread_mutex_unlock(&T.lock);
        if (__atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) == GM_CHILD)
            return NULL;
        for (int i = 0; i < devctx_created_count(); i++) {
            gm_device_t *d = devctx_at(i);
            if (d && d->id >= 0 && d->id < GM_MAX_DEVICES && __atomic_load_n(&L.dev[d->id].opened, __ATOMIC_ACQUIRE))
                sample(d, why);
        }
        pthread_mutex_lock(&T.lock);
    }
    pthread_mutex_unlock(&T.lock);
    return NULL;
}

void ledger_start(void)
{
    if (!enabled())
        return;
    pthread_mutex_lock(&T.lock);
    if (!T.running && !T.start_failed) {
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&T.wake, &attr);
        pthread_condattr_destroy(&attr);
        if (pthread_create(&T.thread, NULL, ledger_main, NULL) != 0) {
            T.start_failed = 1;
            diag_verbose("cannot start the ledger's sampler thread: the card is sampled at first use and "
                         "at OOMs only");
        } else {
            T.running = 1;
        }
    }
    pthread_mutex_unlock(&T.lock);
}

void ledger_mark(void)
{
    if (!__atomic_load_n(&T.running, __ATOMIC_ACQUIRE))
        return;
    uint64_t now = gm_now_ns(), last = __atomic_load_n(&T.last_mark_ns, __ATOMIC_RELAXED);
    if (last && now - last < MARK_GAP_NS)
        return;
    __atomic_store_n(&T.last_mark_ns, now, __ATOMIC_RELAXED);
    pthread_mutex_lock(&T.lock);
    T.mark_wanted = 1;
    pthread_cond_signal(&T.wake);
    pthread_mutex_unlock(&T.lock);
}

void ledger_stop(void)
{
    pthread_mutex_lock(&T.lock);
    int running = T.running;
    T.stopping = 1;
    if (running)
        pthread_cond_signal(&T.wake);
    pthread_mutex_unlock(&T.lock);
    if (running)
        pthread_join(T.thread, NULL);
    T.running = 0;
}

void ledger_forget(void)
{
    /* The thread does not exist in the child; its locks may have been copied held. */
    __atomic_store_n(&T.forgotten, 1, __ATOMIC_RELEASE);
    T.running = 0;
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    T.lock = fresh;
    L.lock = fresh;
    nvml_forget();
}
