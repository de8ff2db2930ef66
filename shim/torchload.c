/* The PyTorch bridge's loader (torchload.h). It acts only in a process whose cudaMalloc comes from
 * PyTorch's caching allocator, once: a process that never allocates through PyTorch (a DataLoader
 * worker, a compiler) never reaches it. It never fails the program: every problem is one warning,
 * and the log keeps PyTorch's segments as the hooks see them. */
#include "torchload.h"
#include "torchbuild.h"
#include "devctx.h"
#include "diag.h"
#include "evlog.h"
#include "objects.h"
#include "options.h"
#include "slowpath.h"
#include "state.h"
#include "torchev.h"
#include "trim.h"
#include "trust.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BUILD_TIMEOUT_MS (300 * 1000)
#define MAX_REMEMBERED 32

int torchload_settled;
__thread const void *torchload_last_plain __attribute__((tls_model("initial-exec")));
__thread unsigned torchload_last_resets __attribute__((tls_model("initial-exec")));
unsigned torchload_resets;
uintptr_t torchload_c10_lo, torchload_c10_hi;
int torchload_c10_releases;
int torchload_following;
static int claimed, warned, warned_passed;
static gmshim_torch_empty_fn bridge_empty;   /* PyTorch's emptyCache, once the bridge is attached */
static uint64_t emptied_at = UINT64_MAX;     /* torchev_count() after the trimmer last emptied it */
static __thread int trimming;                /* this thread is the trimmer, emptying PyTorch's cache */
static uintptr_t not_torch[MAX_REMEMBERED]; /* callers already found outside PyTorch's allocator */
static unsigned nnot;
static int wanted_how = -1; /* wanted()'s settings, read once: -1 not yet, 0 never, 1 with a log, 2 always */

void torchload_reset(void)
{
    __atomic_add_fetch(&torchload_resets, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&torchload_settled, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&wanted_how, -1, __ATOMIC_RELAXED);
    claimed = warned = warned_passed = 0;
    nnot = 0;
    __atomic_store_n(&torchload_c10_hi, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&torchload_following, 0, __ATOMIC_RELAXED);
    torchload_c10_lo = 0;
    bridge_empty = NULL;
    emptied_at = UINT64_MAX;
}

/* Whether PyTorch keeps its own cache: not when gmshim is its allocator (GMSHIM_TORCH=own sets
 * PYTORCH_NO_CUDA_MEMORY_CACHING=1 at load unless it is set; PyTorch 2.x reads "1" as off). */
static int torch_cache_on(void)
{
    const char *nocache = getenv("PYTORCH_NO_CUDA_MEMORY_CACHING");
    return !(nocache && !strcmp(nocache, "1"));
}

/* ---- attaching ------------------------------------------------------------------------------ */

typedef struct span_want {
    const char *path;
    gm_span_t span;
    int found;
} span_want_t;

static int find_span(struct dl_phdr_info *info, size_t size, void *arg)
{
    span_want_t *w = arg;
    if (info->dlpi_name && !strcmp(info->dlpi_name, w->path) && objects_exec_span(info, &w->span) == 0) {
        w->found = 1;
        return 1;
    }
    return 0;
}

static void add_machinery(const char *path)
{
    span_want_t w = {path, {0, 0}, 0};
    dl_iterate_phdr(find_span, &w);
    if (w.found)
        torchev_add_machinery(w.span.lo, w.span.hi);
}

/* PyTorch's allocator library, found by its file name among the loaded objects. */
static int find_c10(struct dl_phdr_info *info, size_t size, void *arg)
{
    span_want_t *w = arg;
    if (info->dlpi_name && torchbuild_is_allocator_lib(info->dlpi_name) && objects_exec_span(info, &w->span) == 0) {
        w->found = 1;
        return 1;
    }
    return 0;
}

/* Where a cudaFree from PyTorch's caching allocator comes from: its frees are its cache given
 * back (emptyCache, an OOM retry, a graph's pool released), so they go back to the driver. With
 * PyTorch's cache off they are every tensor's free, and gmshim's pool keeps them. */
static void note_c10(const char *path)
{
    if (__atomic_load_n(&torchload_c10_hi, __ATOMIC_ACQUIRE))
        return;
    span_want_t w = {path, {0, 0}, 0};
    dl_iterate_phdr(path ? find_span : find_c10, &w);
    if (!w.found)
        return;
    torchload_c10_releases = torch_cache_on();
    torchload_c10_lo = w.span.lo;
    __atomic_store_n(&torchload_c10_hi, w.span.hi, __ATOMIC_RELEASE);
}

void torchload_init(void)
{
    note_c10(NULL);
}

/* ---- PyTorch's empty_cache ------------------------------------------------------------------ */

/* The trimmer's pass (GMSHIM_EMPTY_CACHE_INTERVAL / GMSHIM_IDLE_RELEASE) on PyTorch's cache:
 * emptied when its allocator did something since the last time and, with idle_ns, has been idle
 * that long (no tensor allocated or freed). Its cudaFree calls then reach the pool as releases. */
void torchload_empty_torch_cache(unsigned long long idle_ns)
{
    gmshim_torch_empty_fn fn = __atomic_load_n(&bridge_empty, __ATOMIC_ACQUIRE);
    uint64_t n = torchev_count();
    if (!fn || n == emptied_at)
        return;
    if (idle_ns && gm_now_ns() - torchev_last_ns() < idle_ns)
        return;
    trimming = 1;
    fn();
    trimming = 0;
    emptied_at = torchev_count(); /* the segments it freed are events too */
}

/* torch.cuda.empty_cache() has returned. PyTorch's cache off: gmshim's pool is the cache to empty;
 * on: its segments went to the driver in its own cudaFree calls, and gmshim's pool (the program's
 * other memory) goes too. Either way the pool is emptied now, waiting for the fences of freed memory (PyTorch's own empty_cache waits for its
 * events, and the real cudaFree for the device). */
static void torch_emptied(void)
{
    /* From the trimmer: no waiting for the GPU under an arena lock; its polls give them back. */
    if (trimming || __atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) != GM_POOLED)
        return;
    int depth = gm_depth;
    gm_depth = 1; /* the pool's own CUDA calls must pass through */
    for (int i = 0; i < devctx_created_count(); i++) {
        gm_device_t *d = devctx_at(i);
        if (d)
            slowpath_empty_cache(d, GMLOG_EMPTY_API);
    }
    gm_depth = depth;
}

static int hook_empty(void *h, const char *so_path, char *why, size_t why_len)
{
    gmshim_torch_hook_empty_fn hook = (gmshim_torch_hook_empty_fn)dlsym(h, GMSHIM_TORCH_BRIDGE_HOOK_EMPTY);
    if (!hook) {
        snprintf(why, why_len, "%s has no %s", so_path, GMSHIM_TORCH_BRIDGE_HOOK_EMPTY);
        return -1;
    }
    int rc = hook(torch_emptied);
    if (rc != 0) {
        snprintf(why, why_len, rc == -1 ? "PyTorch's allocator does not exist yet"
                                        : "PyTorch's emptyCache could not be followed (status %d)", rc);
        return -1;
    }
    return 0;
}

int torchload_attach_file(const char *so_path, const char *c10_path, char *why, size_t why_len)
{
    /* The loader is given the checked file itself, /proc/self/fd/N: whatever happens to the name
     * meanwhile, what it maps is what was checked. The descriptor stays open (the loader knows
     * the bridge by that name, and a bridge is never unloaded). */
    char reason[PATH_MAX + 160];
    int fd = trust_open_path(so_path, O_RDONLY, reason, sizeof reason);
    if (fd < 0) {
        snprintf(why, why_len, "cannot load %s: %s", so_path, reason);
        return -1;
    }
    char by_fd[64];
    trust_fd_path(fd, by_fd, sizeof by_fd);
    void *h = dlopen(by_fd, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, why_len, "cannot load %s: %s", so_path, e ? e : "?");
        close(fd);
        return -1;
    }
    if (!torch_cache_on())
        return hook_empty(h, so_path, why, why_len); /* nothing to follow: only its empty_cache */
    gmshim_torch_attach_fn attach = (gmshim_torch_attach_fn)dlsym(h, GMSHIM_TORCH_BRIDGE_ATTACH);
    if (!attach) {
        snprintf(why, why_len, "%s has no %s", so_path, GMSHIM_TORCH_BRIDGE_ATTACH);
        return -1; /* left loaded: unloading C++ code is not worth its risks */
    }
    add_machinery(by_fd);
    if (c10_path)
        add_machinery(c10_path);
    int rc = attach(gmshim_torch_event);
    if (rc != 0) {
        snprintf(why, why_len, rc == -1 ? "PyTorch's allocator does not exist yet"
                                        : "PyTorch's allocator refused the tracker (another backend?)");
        return -1;
    }
    __atomic_store_n(&torchload_following, 1, __ATOMIC_RELEASE);
    gmshim_torch_empty_fn empty = (gmshim_torch_empty_fn)dlsym(h, GMSHIM_TORCH_BRIDGE_EMPTY);
    if (empty) {
        __atomic_store_n(&bridge_empty, empty, __ATOMIC_RELEASE);
        trim_set_upstream(torchload_empty_torch_cache);
    }
    /* The segments PyTorch's empty_cache gives back then reach the driver before it returns, as
     * without gmshim; if this fails the trimmer still gives them back once the GPU is done. */
    char ignored[PATH_MAX + 64];
    if (hook_empty(h, so_path, ignored, sizeof ignored) != 0)
        diag_verbose("PyTorch's empty_cache is not followed (%s): the trimmer gives its segments back", ignored);
    return 0;
}

/* Whether `name` may be taken from the directory `dir`: 0, there and trusted; 1, not there (nor
 * the directory); -1, there but refused (why). */
static int look_in(const char *dir, const char *name, char *why, size_t why_len)
{
    char reason[PATH_MAX + 160];
    int dfd = trust_open_dir(dir, reason, sizeof reason);
    if (dfd < 0 && errno == ENOENT)
        return 1;
    int fd = dfd < 0 ? -1 : trust_open_at(dfd, name, O_RDONLY, reason, sizeof reason);
    int absent = fd < 0 && dfd >= 0 && errno == ENOENT;
    if (dfd >= 0)
        close(dfd);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    if (absent)
        return 1;
    snprintf(why, why_len, "the bridge in %s cannot be trusted (%s)", dir, reason);
    return -1;
}

/* Where the bridge for the torch of `c10_path` is: 0, found (its path in `so`); 1, not built yet
 * and nothing known to stop a build (its place in `dir` and `name`); -1, neither (why). A bridge
 * in the library's own gmshim-torch/ that cannot be trusted is passed over, the reason in
 * `passed` (when given). */
static int find_bridge(const char *c10_path, torch_install_t *t, char *so, size_t so_len, char *dir, size_t dir_len,
                       char *name, size_t name_len, char *passed, size_t passed_len, char *why, size_t why_len)
{
    if (torchbuild_find_install(c10_path, t, why, why_len) != 0)
        return -1;
    torchbuild_bridge_name(t, name, name_len);
    const char *own = trust_own_dir();
    if (own && snprintf(dir, dir_len, "%s/gmshim-torch", own) < (int)dir_len) {
        int r = look_in(dir, name, passed ? passed : why, passed ? passed_len : why_len);
        if (r == 0) {
            snprintf(so, so_len, "%s/%s", dir, name);
            return 0;
        }
    }
    if (torchbuild_cache_dir(dir, dir_len) != 0) {
        snprintf(why, why_len, "no per-user cache directory (neither XDG_CACHE_HOME nor HOME is set)");
        return -1;
    }
    snprintf(so, so_len, "%s/%s", dir, name);
    int r = look_in(dir, name, why, why_len);
    if (r <= 0)
        return r;
    char log[PATH_MAX + 170];
    snprintf(log, sizeof log, "%s.log", so);
    if (torchbuild_is_file(log)) {
        snprintf(why, why_len, "an earlier build failed; see %s (remove it to build again)", log);
        return -1;
    }
    return torchbuild_compiler_found(why, why_len) == 0 ? 1 : -1; /* nothing said yet: the one warning is the caller's */
}

int torchload_attach_for(const char *c10_path, int build, char *why, size_t why_len)
{
    torch_install_t t;
    char name[128], dir[PATH_MAX], so[PATH_MAX + 160], passed[PATH_MAX + 256] = "";
    int found = find_bridge(c10_path, &t, so, sizeof so, dir, sizeof dir, name, sizeof name, passed, sizeof passed,
                            why, why_len);
    if (passed[0])
        diag_warn_once(&warned_passed, "%s: not loaded", passed);
    if (found < 0)
        return -1;
    if (found == 1) {
        if (!build) {
            snprintf(why, why_len, "no bridge built for torch %s", t.version);
            return -1;
        }
        diag_warn("building the PyTorch bridge for torch %s into %s (once per torch version; this "
                  "process waits for it)", t.version, dir);
        uint64_t t0 = gm_now_ns();
        if (torchbuild_build(&t, dir, name, 0, BUILD_TIMEOUT_MS, why, why_len) != 0)
            return -1;
        diag_warn("PyTorch bridge built in %.1f s", (double)(gm_now_ns() - t0) / 1e9);
    }
    return torchload_attach_file(so, c10_path, why, why_len);
}

/* ---- the first cudaMallocs ------------------------------------------------------------------ */

static int remembered(uintptr_t pc)
{
    unsigned n = __atomic_load_n(&nnot, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n && i < MAX_REMEMBERED; i++)
        if (__atomic_load_n(&not_torch[i], __ATOMIC_RELAXED) == pc)
            return 1;
    return 0;
}

static void remember(uintptr_t pc)
{
    unsigned i = __atomic_fetch_add(&nnot, 1, __ATOMIC_ACQ_REL);
    if (i < MAX_REMEMBERED)
        __atomic_store_n(&not_torch[i], pc, __ATOMIC_RELAXED);
    else
        __atomic_store_n(&nnot, MAX_REMEMBERED, __ATOMIC_RELEASE);
}

/* Whether the bridge is wanted at all: with PyTorch's cache on, to follow it (a log to write
 * into); with it off, for its empty_cache (not under GMSHIM_TORCH=segments: no bridge at all).
 * Asked at every cudaMalloc of a program without PyTorch (its callers never settle it), so the
 * settings are read once: PyTorch has read PYTORCH_NO_CUDA_MEMORY_CACHING before its first
 * allocation reaches here. */
static int wanted(void)
{
    int how = __atomic_load_n(&wanted_how, __ATOMIC_RELAXED);
    if (unlikely(how < 0)) {
        const char *mode = options_get_str(GM_OPT_TORCH);
        how = !strcmp(mode, "segments") ? 0 : !torch_cache_on() ? 2 : !strcmp(mode, "keep") ? 1 : 0;
        __atomic_store_n(&wanted_how, how, __ATOMIC_RELAXED);
    }
    return how == 2 || (how == 1 && evlog_enabled());
}

void torchload_examine(const void *caller)
{
    if (!wanted()) {
        note_c10(NULL); /* torch imported after the first CUDA call: its frees are still known */
        __atomic_store_n(&torchload_settled, 1, __ATOMIC_RELEASE);
        return;
    }
    uintptr_t pc = (uintptr_t)caller;
    int known = remembered(pc);
    Dl_info info;
    if (known || !dladdr(caller, &info) || !info.dli_fname || !torchbuild_is_allocator_lib(info.dli_fname)) {
        if (!known)
            remember(pc);
        torchload_last_plain = caller; /* asked again only once another caller came */
        torchload_last_resets = __atomic_load_n(&torchload_resets, __ATOMIC_RELAXED);
        return;
    }
    note_c10(info.dli_fname); /* loaded after the first CUDA call: its frees are known from now */
    /* The first thread here attaches; others allocating meanwhile go on without waiting (one of
     * them may hold another device's allocator lock, which the attach takes). */
    if (__atomic_exchange_n(&claimed, 1, __ATOMIC_ACQ_REL))
        return;
    char why[PATH_MAX + 256];
    int follow = torch_cache_on();
    if (torchload_attach_for(info.dli_fname, 1, why, sizeof why) == 0)
        diag_verbose(follow ? "following PyTorch's caching allocator from inside (%s)"
                            : "torch.cuda.empty_cache() empties gmshim's pool (%s)", info.dli_fname);
    else if (follow)
        diag_warn_once(&warned, "PyTorch's allocator is not followed: %s; the log has PyTorch's segments "
                       "only (GMSHIM_TORCH=segments)", why);
    else
        diag_warn_once(&warned, "torch.cuda.empty_cache() does not empty gmshim's pool: %s "
                       "(gmshim_empty_cache() and GMSHIM_EMPTY_CACHE_INTERVAL do)", why);
    __atomic_store_n(&torchload_settled, 1, __ATOMIC_RELEASE);
}

/* `make torch-bridge` (and later `gmshim run`): the same build, asked for by name. */
GM_EXPORT int gmshim_torch_bridge_build(const char *torch_dir, const char *out_dir, char *path, unsigned long len)
{
    char c10[PATH_MAX], why[PATH_MAX + 256], dir[PATH_MAX], name[128];
    torch_install_t t;
    if (!torch_dir || !path || !len || snprintf(c10, sizeof c10, "%s/lib/libc10_cuda.so", torch_dir) >= (int)sizeof c10)
        return -1;
    if (torchbuild_find_install(c10, &t, why, sizeof why) != 0) {
        diag_warn("no PyTorch bridge: %s", why);
        return -1;
    }
    if (out_dir)
        snprintf(dir, sizeof dir, "%s", out_dir);
    else if (torchbuild_cache_dir(dir, sizeof dir) != 0) {
        diag_warn("no PyTorch bridge: neither XDG_CACHE_HOME nor HOME is set");
        return -1;
    }
    torchbuild_bridge_name(&t, name, sizeof name);
    /* Asked for by name: an earlier failure is tried again. */
    if (torchbuild_build(&t, dir, name, 1, BUILD_TIMEOUT_MS, why, sizeof why) != 0) {
        diag_warn("no PyTorch bridge: %s", why);
        return -1;
    }
    return snprintf(path, len, "%s/%s", dir, name) < (int)len ? 0 : -1;
}

/* `gmshim run`, before it starts a job: the loader's own decision for the torch at `torch_dir`,
 * made ahead so that the job never waits for a build. Prints nothing: 0, the bridge is there (its
 * path in msg); 1, it can be built ("torch V into DIR" in msg) — with `build`, it is built then,
 * 0 and its path, or -1 and why; -1, it cannot (why: what the job's loader will warn of). */
GM_EXPORT int gmshim_torch_bridge_prepare(const char *torch_dir, int build, char *msg, unsigned long len)
{
    char c10[PATH_MAX], name[128], dir[PATH_MAX], so[PATH_MAX + 160];
    torch_install_t t;
    if (!torch_dir || !msg || !len || snprintf(c10, sizeof c10, "%s/lib/libc10_cuda.so", torch_dir) >= (int)sizeof c10)
        return -1;
    int found = find_bridge(c10, &t, so, sizeof so, dir, sizeof dir, name, sizeof name, NULL, 0, msg, len);
    if (found == 1 && build) {
        if (torchbuild_build(&t, dir, name, 0, BUILD_TIMEOUT_MS, msg, len) != 0)
            return -1;
        found = 0;
    } else if (found == 1) {
        snprintf(msg, len, "torch %s into %s", t.version, dir);
    }
    if (found == 0)
        snprintf(msg, len, "%s", so);
    return found;
}
