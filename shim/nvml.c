/* NVML from its public API, resolved with dlopen/dlsym: nothing is linked, and a machine without
 * the library (or whose library lacks a function) simply has no NVML terms. Initialised once, at
 * the first question, by the thread that asks (the ledger calls in only outside the pool's
 * locks); NVML itself is thread-safe. Never shut down: NVML may be in use by the program too. */
#include "nvml.h"
#include "common.h"
#include "diag.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NVML_SUCCESS 0
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_NOT_AVAILABLE 0xffffffffffffffffull
#define PROCS_MAX 256            /* processes read per question */

typedef void *nvml_dev_t;
typedef struct { unsigned long long total, free, used; } nvml_memory_t;
typedef struct { unsigned pid; unsigned long long used; } nvml_proc_v1_t;
typedef struct { unsigned pid; unsigned long long used; unsigned gi, ci; } nvml_proc_v2_t;

typedef int (*init_fn)(void);
typedef int (*by_bus_fn)(const char *, nvml_dev_t *);
typedef int (*by_index_fn)(unsigned, nvml_dev_t *);
typedef int (*memory_fn)(nvml_dev_t, nvml_memory_t *);
typedef int (*procs_fn)(nvml_dev_t, unsigned *, void *);
typedef int (*name_fn)(unsigned, char *, unsigned);

static struct {
    pthread_mutex_t lock;
    int tried, ready, forgotten;
    by_bus_fn by_bus;
    by_index_fn by_index;
    memory_fn memory;
    procs_fn compute, graphics;  /* the newest of _v3, _v2, plain found */
    int compute_v1, graphics_v1; /* the plain (v1) layout */
    name_fn name;
} N = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The newest of a function's versions the library has; *v1 set when it is the unversioned one. */
static procs_fn newest(void *h, const char *base, int *v1)
{
    char name[96];
    static const char *const suffixes[] = {"_v3", "_v2"};
    for (size_t i = 0; i < GM_ARRAY_LEN(suffixes); i++) {
        snprintf(name, sizeof name, "%s%s", base, suffixes[i]);
        procs_fn f = (procs_fn)dlsym(h, name);
        if (f)
            return f;
    }
    *v1 = 1;
    return (procs_fn)dlsym(h, base);
}

/* Under N.lock; nvml_ready publishes `tried` once this returns, so that a thread that finds it
 * set reads the outcome, never a load still under way. */
static void load_locked(void)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        diag_verbose("NVML not found (libnvidia-ml.so.1): the ledger has no other processes and "
                     "measures no context");
        return;
    }
    init_fn init = (init_fn)dlsym(h, "nvmlInit_v2");
    if (!init)
        init = (init_fn)dlsym(h, "nvmlInit");
    N.by_bus = (by_bus_fn)dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    if (!N.by_bus)
        N.by_bus = (by_bus_fn)dlsym(h, "nvmlDeviceGetHandleByPciBusId");
    N.by_index = (by_index_fn)dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    N.memory = (memory_fn)dlsym(h, "nvmlDeviceGetMemoryInfo");
    N.compute = newest(h, "nvmlDeviceGetComputeRunningProcesses", &N.compute_v1);
    N.graphics = newest(h, "nvmlDeviceGetGraphicsRunningProcesses", &N.graphics_v1);
    N.name = (name_fn)dlsym(h, "nvmlSystemGetProcessName");
    int r = init ? init() : -1;
    if (r != NVML_SUCCESS || !N.memory || (!N.by_bus && !N.by_index)) {
        diag_verbose("NVML could not be used (nvmlInit: %d): the ledger has no other processes", r);
        return; /* the library stays loaded: it may have started threads */
    }
    __atomic_store_n(&N.ready, 1, __ATOMIC_RELEASE);
    diag_verbose("NVML loaded: the ledger names other processes on the same GPU");
}

int nvml_ready(void)
{
    if (__atomic_load_n(&N.forgotten, __ATOMIC_ACQUIRE))
        return 0;
    if (likely(__atomic_load_n(&N.tried, __ATOMIC_ACQUIRE)))
        return __atomic_load_n(&N.ready, __ATOMIC_ACQUIRE);
    pthread_mutex_lock(&N.lock);
    if (!__atomic_load_n(&N.tried, __ATOMIC_ACQUIRE) && !__atomic_load_n(&N.forgotten, __ATOMIC_ACQUIRE)) {
        load_locked();
        __atomic_store_n(&N.tried, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&N.lock);
    return __atomic_load_n(&N.ready, __ATOMIC_ACQUIRE) && !__atomic_load_n(&N.forgotten, __ATOMIC_ACQUIRE);
}

void *nvml_device(const char *bus_id, int index)
{
    nvml_dev_t d = NULL;
    if (!nvml_ready())
        return NULL;
    if (bus_id && *bus_id && N.by_bus && N.by_bus(bus_id, &d) == NVML_SUCCESS && d)
        return d;
    d = NULL;
    if (index >= 0 && N.by_index && N.by_index((unsigned)index, &d) == NVML_SUCCESS)
        return d;
    return NULL;
}

int nvml_memory(void *dev, uint64_t *total, uint64_t *free_bytes)
{
    nvml_memory_t m;
    if (!dev || !nvml_ready() || N.memory(dev, &m) != NVML_SUCCESS)
        return -1;
    *total = m.total;
    *free_bytes = m.free;
    return 0;
}

/* One list (compute or graphics) added to out[0..n), each pid once: the new n. */
static int add_list(void *dev, procs_fn fn, int v1, nvml_proc_t *out, int n, int max, int *all)
{
    if (!fn)
        return n;
    /* On the heap: no thread-local buffer (a library loaded by dlopen has little static TLS). */
    union procs { nvml_proc_v1_t a[PROCS_MAX]; nvml_proc_v2_t b[PROCS_MAX]; } *buf = malloc(sizeof *buf);
    if (!buf)
        return n;
    unsigned count = PROCS_MAX;
    int r = fn(dev, &count, v1 ? (void *)buf->a : (void *)buf->b);
    if (r != NVML_SUCCESS && r != NVML_ERROR_INSUFFICIENT_SIZE) {
        free(buf);
        return n;
    }
    if (count > PROCS_MAX)
        count = PROCS_MAX; /* insufficient size: the first PROCS_MAX were not written; none */
    if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
        free(buf);
        *all += (int)count;
        return n;
    }
    for (unsigned i = 0; i < count; i++) {
        uint32_t pid = v1 ? buf->a[i].pid : buf->b[i].pid;
        unsigned long long used = v1 ? buf->a[i].used : buf->b[i].used;
        int seen = 0;
        for (int k = 0; k < n && k < max && !seen; k++)
            seen = out[k].pid == pid;
        if (seen)
            continue;
        if (n < max)
            out[n] = (nvml_proc_t){pid, used == NVML_NOT_AVAILABLE ? UINT64_MAX : (uint64_t)used};
        n++;
    }
    free(buf);
    return n;
}

int nvml_processes(void *dev, nvml_proc_t *out, int max)
{
    if (!dev || !nvml_ready() || (!N.compute && !N.graphics))
        return -1;
    int extra = 0;
    int n = add_list(dev, N.compute, N.compute_v1, out, 0, max, &extra);
    n = add_list(dev, N.graphics, N.graphics_v1, out, n, max, &extra);
    return n + extra;
}

int nvml_process_name(uint32_t pid, char *buf, size_t len)
{
    if (!len || !nvml_ready() || !N.name || N.name(pid, buf, (unsigned)len) != NVML_SUCCESS)
        return -1;
    buf[len - 1] = 0;
    return buf[0] ? 0 : -1;
}

void nvml_forget(void)
{
    __atomic_store_n(&N.forgotten, 1, __ATOMIC_RELEASE);
}
