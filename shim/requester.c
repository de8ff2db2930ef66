/* Which library asked for an allocation CUPTI saw: the first frame on the calling thread's stack
 * outside the CUDA stack and gmshim, found with the unwinder (stopping at that frame) over a
 * table of the loaded objects' executable spans. Runs inside driver calls: only its own lock,
 * and the stacks lock never under it. */
#include "requester.h"
#include "common.h"
#include "objects.h"
#include "stacks.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <unwind.h>

#define LIB_FRAMES 48           /* frames searched for the requesting library */

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

int requester_is_cuda_stack(const char *path)
{
    /* The CUDA stack, gmshim, and what runs backtrace() itself (libc, libgcc_s, a sanitizer's
     * interceptor). */
    static const char *const prefixes[] = {"libcuda.so", "libcudart.so", "libcupti.so", "libgmshim",
                                           "libc.so", "ld-linux", "libgcc_s.so", "libasan.so",
                                           "libtsan.so", "libubsan.so"};
    const char *b = base_name(path);
    for (size_t i = 0; i < GM_ARRAY_LEN(prefixes); i++)
        if (!strncmp(b, prefixes[i], strlen(prefixes[i])))
            return 1;
    return 0;
}

typedef struct objrange {
    gm_span_t span;             /* first: objects.c sorts and searches by it */
    size_t name;                /* offset in M.names */
    uint32_t id;                /* interned base name, 0 until first needed */
    int cuda;
} objrange_t;

static struct {
    pthread_mutex_t lock;
    objrange_t *r;
    size_t n, cap;
    char *names;
    size_t names_len, names_cap;
    unsigned long long stamp[2]; /* the loader's counters when the table was built */
    unsigned gen;
} M = {.lock = PTHREAD_MUTEX_INITIALIZER, .stamp = {~0ull, ~0ull}};

static int cb_ranges(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    gm_span_t span;
    if (objects_exec_span(info, &span))
        return 0;
    char exe[PATH_MAX];
    const char *path = info->dlpi_name;
    if (!path || !*path) {
        ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[l > 0 ? l : 0] = 0;
        path = exe;
    }
    const char *b = base_name(path);
    size_t bl = strlen(b) + 1;
    if (M.n == M.cap) {
        size_t ncap = M.cap ? M.cap * 2 : 128;
        objrange_t *nr = realloc(M.r, ncap * sizeof *nr);
        if (!nr)
            return 1;
        M.r = nr;
        M.cap = ncap;
    }
    if (M.names_len + bl > M.names_cap) {
        size_t ncap = M.names_cap ? M.names_cap * 2 : 8192;
        while (ncap < M.names_len + bl)
            ncap *= 2;
        char *nn = realloc(M.names, ncap);
        if (!nn)
            return 1;
        M.names = nn;
        M.names_cap = ncap;
    }
    memcpy(M.names + M.names_len, b, bl);
    uintptr_t self = (uintptr_t)requester_is_cuda_stack;
    M.r[M.n++] = (objrange_t){span, M.names_len, 0, requester_is_cuda_stack(path) || (self >= span.lo && self < span.hi)};
    M.names_len += bl;
    return 0;
}

/* M.lock held. */
static void ranges_refresh(void)
{
    if (!objects_changed(M.stamp))
        return;
    M.n = 0;
    M.names_len = 0;
    M.gen++;
    dl_iterate_phdr(cb_ranges, NULL);
    objects_sort(M.r, M.n, sizeof *M.r);
}

static objrange_t *range_find(uintptr_t pc)
{
    return objects_find(M.r, M.n, sizeof *M.r, pc);
}

/* The unwinder that backtrace() uses, called directly so that the walk stops at the first
 * frame outside CUDA instead of unwinding the whole stack (what a deep Python stack would cost:
 * docs/performance.md, "Measurements the code relies on"). Resolved once libgcc_s is loaded;
 * backtrace() is the fallback. */
typedef _Unwind_Reason_Code (*unwind_backtrace_fn)(_Unwind_Trace_Fn, void *);
typedef _Unwind_Ptr (*unwind_get_ip_fn)(struct _Unwind_Context *);
static unwind_backtrace_fn unwind_backtrace;
static unwind_get_ip_fn unwind_get_ip;

void requester_init(void)
{
    void *pcs[2];
    backtrace(pcs, 2); /* loads libgcc_s now, not inside a driver call */
    void *h = dlopen("libgcc_s.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return;
    unwind_get_ip = (unwind_get_ip_fn)dlsym(h, "_Unwind_GetIP");
    if (unwind_get_ip)
        unwind_backtrace = (unwind_backtrace_fn)dlsym(h, "_Unwind_Backtrace");
    dlclose(h);
}

typedef struct lib_walk {
    int frames;
    objrange_t *hit;
} lib_walk_t;

/* M.lock held. */
static _Unwind_Reason_Code lib_step(struct _Unwind_Context *ctx, void *data)
{
    lib_walk_t *w = data;
    uintptr_t ip = (uintptr_t)unwind_get_ip(ctx);
    if (!ip || ++w->frames > LIB_FRAMES)
        return _URC_END_OF_STACK;
    /* A return address points after the call: look up the call itself. */
    objrange_t *r = range_find(ip - 1);
    if (r && !r->cuda) {
        w->hit = r;
        return _URC_END_OF_STACK; /* found: stop the walk */
    }
    return _URC_NO_REASON;
}

int requester_is_machinery(uintptr_t pc)
{
    pthread_mutex_lock(&M.lock);
    ranges_refresh();
    objrange_t *r = range_find(pc - 1);
    int cuda = r && r->cuda;
    pthread_mutex_unlock(&M.lock);
    return cuda;
}

uint32_t requester_library(void)
{
    char name[256];
    unsigned gen;
    size_t idx = 0;
    pthread_mutex_lock(&M.lock);
    ranges_refresh();
    objrange_t *hit = NULL;
    if (unwind_backtrace) {
        lib_walk_t w = {0, NULL};
        unwind_backtrace(lib_step, &w);
        hit = w.hit;
    } else {
        void *pcs[LIB_FRAMES];
        int n = backtrace(pcs, LIB_FRAMES);
        for (int i = 0; i < n && !hit; i++) {
            objrange_t *r = range_find((uintptr_t)pcs[i] - 1);
            if (r && !r->cuda)
                hit = r;
        }
    }
    if (!hit || hit->id) {
        uint32_t id = hit ? hit->id : 0;
        pthread_mutex_unlock(&M.lock);
        return id;
    }
    snprintf(name, sizeof name, "%s", M.names + hit->name);
    gen = M.gen;
    idx = (size_t)(hit - M.r);
    pthread_mutex_unlock(&M.lock);
    /* Interned outside M.lock: the stacks lock is never taken under it. */
    uint32_t id = stacks_intern_string(name);
    pthread_mutex_lock(&M.lock);
    if (M.gen == gen && idx < M.n)
        M.r[idx].id = id;
    pthread_mutex_unlock(&M.lock);
    return id;
}

