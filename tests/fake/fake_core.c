/* fake_core.c — the fake CUDA runtime's shared state: initialisation from the environment,
 * the global lock, per-thread last error, sticky errors, fork handling, the handle registry
 * and the test-only hooks of fakecuda.h. */
#include "fake_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

pthread_mutex_t fk_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t fk_cv = PTHREAD_COND_INITIALIZER;
int fk_ndev = 1;
struct fk_device fk_dev[FK_MAX_DEV];
struct fk_capture *fk_captures;
int fk_fail_mallocs;
_Thread_local int fk_cur_dev;
_Thread_local enum cudaStreamCaptureMode fk_thread_mode = cudaStreamCaptureModeGlobal;

static pthread_once_t fk_once = PTHREAD_ONCE_INIT;
static _Atomic int fk_forked;
static _Atomic int fk_sticky;
static _Thread_local cudaError_t fk_last;

/* "16G", "512MiB", "1048576" -> bytes; 0 when malformed. */
static unsigned long long parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return 0;
    static const struct { const char *sfx; unsigned shift; } units[] = {
        {"", 0}, {"b", 0}, {"k", 10}, {"kb", 10}, {"kib", 10}, {"m", 20}, {"mb", 20},
        {"mib", 20}, {"g", 30}, {"gb", 30}, {"gib", 30}, {"t", 40}, {"tb", 40}, {"tib", 40},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcasecmp(end, units[i].sfx) == 0) {
            if (units[i].shift && v > (~0ULL >> units[i].shift))
                return 0;
            return v << units[i].shift;
        }
    return 0;
}

static void fk_init(void);

/* FAKECUDA_OTHERS="PID:SIZE[:NAME],...": other processes holding memory of device 0. */
#define FK_MAX_OTHERS 8
static struct { unsigned pid; unsigned long long bytes; char name[64]; } fk_others[FK_MAX_OTHERS];
static int fk_nothers;

static void parse_others(const char *e)
{
    char buf[1024];
    if (!e || !*e || strlen(e) >= sizeof buf)
        return;
    strcpy(buf, e);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item && fk_nothers < FK_MAX_OTHERS; item = strtok_r(NULL, ",", &save)) {
        char *size = strchr(item, ':');
        if (!size)
            continue;
        *size++ = 0;
        char *name = strchr(size, ':');
        if (name)
            *name++ = 0;
        fk_others[fk_nothers].pid = (unsigned)strtoul(item, NULL, 10);
        fk_others[fk_nothers].bytes = parse_size(size);
        snprintf(fk_others[fk_nothers].name, sizeof fk_others[0].name, "%s", name ? name : "");
        fk_dev[0].others += (size_t)fk_others[fk_nothers].bytes;
        fk_nothers++;
    }
}

int fakecuda_card(int device, unsigned long long *capacity, unsigned long long *self_used, int *context_made)
{
    pthread_once(&fk_once, fk_init);
    if (device < 0 || device >= fk_ndev)
        return -1;
    pthread_mutex_lock(&fk_mu);
    *capacity = fk_dev[device].capacity;
    *self_used = fk_dev[device].st.bytes_in_use;
    *context_made = fk_dev[device].context_made;
    pthread_mutex_unlock(&fk_mu);
    return 0;
}

int fakecuda_other(int i, unsigned *pid, unsigned long long *bytes, const char **name)
{
    pthread_once(&fk_once, fk_init);
    if (i < 0 || i >= fk_nothers)
        return -1;
    *pid = fk_others[i].pid;
    *bytes = fk_others[i].bytes;
    *name = fk_others[i].name;
    return 0;
}

int fakecuda_device_count(void)
{
    pthread_once(&fk_once, fk_init);
    return fk_ndev;
}

/* In a child the parent's workers do not exist and fk_mu may be held by one of them: every
 * entry point checks fk_forked first and never takes the lock. */
static void fk_atfork_child(void)
{
    atomic_store(&fk_forked, 1);
}

static void fk_init(void)
{
    const char *e = getenv("FAKECUDA_DEVICES");
    if (e && *e) {
        long n = strtol(e, NULL, 10);
        fk_ndev = n < 1 ? 1 : n > FK_MAX_DEV ? FK_MAX_DEV : (int)n;
    }
    unsigned long long cap = 16ULL << 30;
    e = getenv("FAKECUDA_MEM");
    if (e && *e) {
        unsigned long long v = parse_size(e);
        if (v)
            cap = v;
        else
            fprintf(stderr, "fakecuda: ignoring malformed FAKECUDA_MEM=%s\n", e);
    }
    unsigned long long context = 0;
    if ((e = getenv("FAKECUDA_CONTEXT")) && *e)
        context = parse_size(e);
    for (int i = 0; i < FK_MAX_DEV; i++) {
        fk_dev[i].capacity = (size_t)cap;
        fk_dev[i].context = (size_t)context;
        fk_dev[i].pool.device = i;
    }
    parse_others(getenv("FAKECUDA_OTHERS"));
    pthread_atfork(NULL, NULL, fk_atfork_child);
}

cudaError_t fk_set_error(cudaError_t err)
{
    if (err != cudaSuccess && err != cudaErrorNotReady)
        fk_last = err;
    return err;
}

cudaError_t fk_enter(void)
{
    pthread_once(&fk_once, fk_init);
    if (atomic_load(&fk_forked))
        return fk_set_error(cudaErrorInitializationError);
    cudaError_t sticky = (cudaError_t)atomic_load(&fk_sticky);
    if (sticky != cudaSuccess)
        return fk_set_error(sticky);
    pthread_mutex_lock(&fk_mu);
    return cudaSuccess;
}

cudaError_t fk_leave(cudaError_t err)
{
    pthread_mutex_unlock(&fk_mu);
    return fk_set_error(err);
}

cudaError_t cudaGetLastError(void)
{
    pthread_once(&fk_once, fk_init);
    if (atomic_load(&fk_forked))
        return cudaErrorInitializationError;
    cudaError_t sticky = (cudaError_t)atomic_load(&fk_sticky);
    if (sticky != cudaSuccess)
        return sticky;
    cudaError_t e = fk_last;
    fk_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    pthread_once(&fk_once, fk_init);
    if (atomic_load(&fk_forked))
        return cudaErrorInitializationError;
    cudaError_t sticky = (cudaError_t)atomic_load(&fk_sticky);
    return sticky != cudaSuccess ? sticky : fk_last;
}

/* ---- handle registry ------------------------------------------------------------------------ */
#define FK_BUCKETS 4096
static struct fk_obj *fk_objs[FK_BUCKETS];

static size_t obj_hash(const void *p)
{
    return (size_t)((((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ULL) >> 52) % FK_BUCKETS;
}

void fk_obj_add(void *obj, int type)
{
    struct fk_obj *o = obj;
    size_t h = obj_hash(o);
    o->type = type;
    o->hnext = fk_objs[h];
    fk_objs[h] = o;
}

void fk_obj_del(void *obj)
{
    for (struct fk_obj **pp = &fk_objs[obj_hash(obj)]; *pp; pp = &(*pp)->hnext)
        if (*pp == obj) {
            *pp = (*pp)->hnext;
            return;
        }
}

void *fk_obj_find(const void *p, int type)
{
    if (!p)
        return NULL;
    for (struct fk_obj *o = fk_objs[obj_hash(p)]; o; o = o->hnext)
        if ((const void *)o == p)
            return o->type == type ? o : NULL;
    return NULL;
}

void fk_obj_foreach(int type, void (*fn)(void *obj, void *arg), void *arg)
{
    for (size_t b = 0; b < FK_BUCKETS; b++) {
        struct fk_obj *o = fk_objs[b], *next;
        for (; o; o = next) {
            next = o->hnext;       /* fn may remove o */
            if (o->type == type)
                fn(o, arg);
        }
    }
}

/* ---- test-only hooks -------------------------------------------------------------------- */
void fakecuda_get_stats(int device, struct fakecuda_stats *out)
{
    pthread_once(&fk_once, fk_init);
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (device < 0 || device >= fk_ndev || atomic_load(&fk_forked))
        return;
    pthread_mutex_lock(&fk_mu);
    *out = fk_dev[device].st;
    pthread_mutex_unlock(&fk_mu);
}

void fakecuda_reset_stats(void)
{
    pthread_once(&fk_once, fk_init);
    if (atomic_load(&fk_forked))
        return;
    pthread_mutex_lock(&fk_mu);
    for (int i = 0; i < FK_MAX_DEV; i++) {
        unsigned long long used = fk_dev[i].st.bytes_in_use;
        memset(&fk_dev[i].st, 0, sizeof fk_dev[i].st);
        fk_dev[i].st.bytes_in_use = fk_dev[i].st.peak_bytes = used;
    }
    pthread_mutex_unlock(&fk_mu);
}

void fakecuda_set_capacity(int device, size_t bytes)
{
    pthread_once(&fk_once, fk_init);
    if (atomic_load(&fk_forked))
        return;
    if (device < 0 || device >= FK_MAX_DEV)
        return;
    pthread_mutex_lock(&fk_mu);
    fk_dev[device].capacity = bytes;
    pthread_mutex_unlock(&fk_mu);
}

void fakecuda_set_sticky_error(cudaError_t err)
{
    pthread_once(&fk_once, fk_init);
    atomic_store(&fk_sticky, (int)err);
    if (err == cudaSuccess)
        fk_last = cudaSuccess;
}

void fakecuda_fail_next_malloc(int count)
{
    pthread_once(&fk_once, fk_init);
    if (atomic_load(&fk_forked))
        return;
    pthread_mutex_lock(&fk_mu);
    fk_fail_mallocs = count > 0 ? count : 0;
    pthread_mutex_unlock(&fk_mu);
}

void fakecuda_drain(void)
{
    pthread_once(&fk_once, fk_init);
    if (atomic_load(&fk_forked))
        return;
    pthread_mutex_lock(&fk_mu);
    fk_wait_streams(-1);
    pthread_mutex_unlock(&fk_mu);
}
