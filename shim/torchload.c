/* The PyTorch bridge's loader (torchload.h). It acts only in a process whose cudaMalloc comes from
 * PyTorch's caching allocator, once: a process that never allocates through PyTorch (a DataLoader
 * worker, a compiler) never reaches it. It never fails the program: every problem is one warning,
 * and the log keeps PyTorch's segments as the hooks see them. */
#include "torchload.h"
#include "devctx.h"
#include "diag.h"
#include "evlog.h"
#include "objects.h"
#include "options.h"
#include "slowpath.h"
#include "state.h"
#include "torchev.h"
#include "trim.h"
#include "torch_bridge_src.h" /* generated: gm_bridge_cpp, gm_bridge_header, GM_BRIDGE_HASH */

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

extern char **environ;

#define BUILD_TIMEOUT_MS (300 * 1000)
#define MAX_REMEMBERED 32

int torchload_settled;
uintptr_t torchload_c10_lo, torchload_c10_hi;
int torchload_c10_releases;
static int claimed, warned;
static gmshim_torch_empty_fn bridge_empty;   /* PyTorch's emptyCache, once the bridge is attached */
static uint64_t emptied_at = UINT64_MAX;     /* torchev_count() after the trimmer last emptied it */
static __thread int trimming;                /* this thread is the trimmer, emptying PyTorch's cache */
static uintptr_t not_torch[MAX_REMEMBERED]; /* callers already found outside PyTorch's allocator */
static unsigned nnot;

void torchload_reset(void)
{
    __atomic_store_n(&torchload_settled, 0, __ATOMIC_RELAXED);
    claimed = warned = 0;
    nnot = 0;
    __atomic_store_n(&torchload_c10_hi, 0, __ATOMIC_RELAXED);
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

/* ---- small file helpers -------------------------------------------------------------------- */

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The first `len - 1` bytes of a file, NUL-terminated; -1 if it cannot be read. */
static ssize_t slurp(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = 0;
    while (n + 1 < len) {
        ssize_t r = read(fd, buf + n, len - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    return (ssize_t)n;
}

static int contains(const char *path, const char *needle)
{
    size_t cap = 1u << 20;
    char *buf = malloc(cap);
    if (!buf)
        return 0;
    int found = slurp(path, buf, cap) > 0 && strstr(buf, needle) != NULL;
    free(buf);
    return found;
}

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    size_t len = strlen(text), done = 0;
    while (done < len) {
        ssize_t w = write(fd, text + done, len - done);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)w;
    }
    return close(fd);
}

/* The reason a build failed, last in its log (the compiler may have said nothing). */
static void append_line(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    char line[PATH_MAX + 512];
    int n = snprintf(line, sizeof line, "gmshim: %s\n", text);
    if (n > 0 && write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0)
        n = 0;
    close(fd);
}

/* mkdir -p, private to the user (0700 for what it creates). */
static int make_dirs(const char *path)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p)
        return -1;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, 0700) != 0 && errno != EEXIST)
            return -1;
        *s = '/';
    }
    return mkdir(p, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

/* ---- the install ---------------------------------------------------------------------------- */

int torchload_is_allocator_lib(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return !strncmp(base, "libc10_cuda.so", 14);
}

/* torch/version.py: `__version__ = '2.11.0+cu130'` (quotes of either kind, maybe `: str`); the
 * name also appears earlier, in __all__. */
static int read_version(const char *root, char *out, size_t len)
{
    char path[PATH_MAX + 16], text[4096];
    snprintf(path, sizeof path, "%s/version.py", root);
    if (slurp(path, text, sizeof text) <= 0)
        return -1;
    for (const char *v = strstr(text, "__version__"); v; v = strstr(v + 1, "__version__")) {
        const char *p = v + 11;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == ':')
            while (*p && *p != '=' && *p != '\n')
                p++;
        if (*p != '=' || p[1] == '=')
            continue;
        for (p++; *p == ' ' || *p == '\t'; p++)
            ;
        if (*p != '\'' && *p != '"')
            continue;
        char q = *p++;
        size_t n = 0;
        for (; p[n] && p[n] != q; n++) {
            char c = p[n];
            int ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
                     c == '+' || c == '-' || c == '_';
            if (!ok || n + 1 >= len)
                return -1;
            out[n] = c;
        }
        if (!n || p[n] != q)
            return -1;
        out[n] = 0;
        return 0;
    }
    return -1;
}

/* The C++ ABI torch was built with, from its CMake config; -1 when it does not say. */
static int read_abi(const char *root)
{
    static const char *const files[] = {"share/cmake/Torch/TorchConfig.cmake",
                                        "share/cmake/Caffe2/Caffe2Targets.cmake"};
    for (size_t i = 0; i < GM_ARRAY_LEN(files); i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/%s", root, files[i]);
        if (contains(path, "_GLIBCXX_USE_CXX11_ABI=1"))
            return 1;
        if (contains(path, "_GLIBCXX_USE_CXX11_ABI=0"))
            return 0;
    }
    return -1;
}

/* The CUDA runtime's headers: the CUDA wheels beside torch first (the runtime torch loads), then
 * $CUDA_HOME and the toolkit. A wheel may ship cuda_runtime_api.h without the crt/ headers that
 * cuda_runtime.h includes (nvidia/cu13 beside torch 2.11 does): such a directory is passed over. */
static int find_cuda_include(const char *root, char *out, size_t len)
{
    char site[PATH_MAX];
    snprintf(site, sizeof site, "%s", root);
    char *slash = strrchr(site, '/');
    if (slash)
        *slash = 0;
    const char *home = getenv("CUDA_HOME");
    char cand[5][PATH_MAX + 64];
    int n = 0;
    snprintf(cand[n++], sizeof cand[0], "%s/nvidia/cu13/include", site);
    snprintf(cand[n++], sizeof cand[0], "%s/nvidia/cuda_runtime/include", site);
    if (home && *home)
        snprintf(cand[n++], sizeof cand[0], "%s/include", home);
    snprintf(cand[n++], sizeof cand[0], "/usr/local/cuda/include");
    for (int i = 0; i < n; i++) {
        char api[PATH_MAX + 96], crt[PATH_MAX + 96];
        snprintf(api, sizeof api, "%.4000s/cuda_runtime_api.h", cand[i]);
        snprintf(crt, sizeof crt, "%.4000s/crt/host_config.h", cand[i]);
        if (is_file(api) && is_file(crt))
            return snprintf(out, len, "%s", cand[i]) < (int)len ? 0 : -1;
    }
    return -1;
}

int torchload_find_install(const char *c10_path, torch_install_t *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    /* .../torch/lib/libc10_cuda.so → .../torch */
    char root[PATH_MAX];
    if (!realpath(c10_path, root)) {
        snprintf(why, why_len, "cannot resolve %s: %s", c10_path, strerror(errno));
        return -1;
    }
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(root, '/');
        if (!slash || slash == root) {
            snprintf(why, why_len, "%s is not inside a torch package", c10_path);
            return -1;
        }
        *slash = 0;
    }
    snprintf(out->root, sizeof out->root, "%s", root);
    if (read_version(root, out->version, sizeof out->version) != 0) {
        snprintf(why, why_len, "no torch version in %s/version.py", root);
        return -1;
    }
    char header[PATH_MAX + 64];
    snprintf(header, sizeof header, "%s/include/c10/cuda/CUDACachingAllocator.h", root);
    if (!is_file(header)) {
        snprintf(why, why_len, "torch %s has no C++ headers (%s)", out->version, header);
        return -1;
    }
    if (!contains(header, "attachAllocatorTraceTracker")) {
        snprintf(why, why_len, "torch %s has no allocator trace tracker (torch 2.1 and later have it)",
                 out->version);
        return -1;
    }
    if (find_cuda_include(root, out->cuda_include, sizeof out->cuda_include) != 0) {
        snprintf(why, why_len, "no CUDA headers (cuda_runtime_api.h and crt/) beside torch, in $CUDA_HOME "
                 "or /usr/local/cuda");
        return -1;
    }
    out->cxx11_abi = read_abi(root);
    return 0;
}

void torchload_bridge_name(const torch_install_t *t, char *out, size_t len)
{
    snprintf(out, len, "torch-%s-%s.so", t->version, GM_BRIDGE_HASH);
}

int torchload_cache_dir(char *out, size_t len)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/')
        n = snprintf(out, len, "%s/gmshim/torch", xdg);
    else if (home && home[0] == '/')
        n = snprintf(out, len, "%s/.cache/gmshim/torch", home);
    else
        return -1;
    return n > 0 && (size_t)n < len ? 0 : -1;
}

/* ---- the build ------------------------------------------------------------------------------ */

/* The environment minus the preload: the compiler must not run under gmshim. */
static char **child_environ(void)
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = calloc(n + 1, sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) && strncmp(environ[i], "CUDA_INJECTION64_PATH=", 22))
            env[k++] = environ[i];
    return env;
}

/* Runs argv with stdout and stderr into log_path; waits at most timeout_ms. Returns the exit
 * status, 127 when the program is not there, -1 on timeout or failure to start. */
static int run_logged(char *const argv[], const char *log_path, long timeout_ms)
{
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0)
        return -1;
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    char **env = child_environ();
    pid_t pid;
    int err = env ? posix_spawnp(&pid, argv[0], &fa, NULL, argv, env) : ENOMEM;
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    if (err)
        return err == ENOENT ? 127 : -1;
    struct timespec nap = {0, 20 * 1000 * 1000};
    for (long waited = 0;; waited += 20) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        if (r < 0)
            return errno == ECHILD ? 0 : -1; /* SIGCHLD ignored: reaped for us; the file tells */
        if (waited >= timeout_ms) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        nanosleep(&nap, NULL);
    }
}

/* The compiler command: $CXX split at spaces (e.g. "ccache g++"), else c++. */
static int compiler_argv(char *buf, size_t len, char **argv, int max)
{
    const char *cxx = getenv("CXX");
    snprintf(buf, len, "%s", cxx && *cxx ? cxx : "c++");
    int n = 0;
    for (char *tok = strtok(buf, " \t"); tok && n < max; tok = strtok(NULL, " \t"))
        argv[n++] = tok;
    return n;
}

static int is_executable(const char *path)
{
    return is_file(path) && access(path, X_OK) == 0;
}

/* Whether the compiler exists, before anything is said about building: $CXX's (or c++'s) first
 * word, a path or a name searched in PATH as posix_spawnp will, an executable regular file. */
static int compiler_found(char *why, size_t why_len)
{
    char buf[512], *argv[8];
    if (!compiler_argv(buf, sizeof buf, argv, 8)) {
        snprintf(why, why_len, "CXX is empty");
        return -1;
    }
    const char *cc = argv[0], *dirs = getenv("PATH");
    if (strchr(cc, '/'))
        return is_executable(cc) ? 0 : (snprintf(why, why_len, "no C++ compiler (%s; set CXX)", cc), -1);
    for (const char *d = dirs && *dirs ? dirs : "/usr/bin:/bin";; d++) {
        size_t n = strcspn(d, ":");
        char cand[PATH_MAX];
        if (snprintf(cand, sizeof cand, "%.*s%s%s", (int)n, d, n ? "/" : "", cc) < (int)sizeof cand &&
            is_executable(cand))
            return 0;
        d += n;
        if (!*d)
            break;
    }
    snprintf(why, why_len, "no C++ compiler (%s; set CXX)", cc);
    return -1;
}

static int compile_bridge(const torch_install_t *t, const char *src_dir, const char *out_so,
                          const char *log, long timeout_ms, char *why, size_t why_len)
{
    char cxxbuf[512], inc_src[PATH_MAX + 4], inc_torch[PATH_MAX + 16], inc_cuda[PATH_MAX + 4],
        src[PATH_MAX + 16], libdir[PATH_MAX + 8], rpath[PATH_MAX + 24], abi[40];
    char *argv[40];
    int n = compiler_argv(cxxbuf, sizeof cxxbuf, argv, 8);
    if (!n) {
        snprintf(why, why_len, "CXX is empty");
        return -1;
    }
    snprintf(inc_src, sizeof inc_src, "-I%s", src_dir);
    snprintf(inc_torch, sizeof inc_torch, "-I%s/include", t->root);
    snprintf(inc_cuda, sizeof inc_cuda, "-I%s", t->cuda_include);
    snprintf(src, sizeof src, "%s/bridge.cpp", src_dir);
    snprintf(libdir, sizeof libdir, "-L%s/lib", t->root);
    snprintf(rpath, sizeof rpath, "-Wl,-rpath,%s/lib", t->root);
    static char *const fixed[] = {"-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-w"};
    for (size_t i = 0; i < GM_ARRAY_LEN(fixed); i++)
        argv[n++] = fixed[i];
    if (t->cxx11_abi >= 0) {
        snprintf(abi, sizeof abi, "-D_GLIBCXX_USE_CXX11_ABI=%d", t->cxx11_abi);
        argv[n++] = abi;
    }
    char *rest[] = {inc_src, inc_torch, inc_cuda, src, "-o", (char *)out_so, libdir, "-lc10_cuda", "-lc10", rpath};
    for (size_t i = 0; i < GM_ARRAY_LEN(rest); i++)
        argv[n++] = rest[i];
    argv[n] = NULL;
    int rc = run_logged(argv, log, timeout_ms);
    if (rc == 127)
        snprintf(why, why_len, "no C++ compiler (%s; set CXX)", argv[0]);
    else if (rc < 0)
        snprintf(why, why_len, "the compiler did not start or finish within %ld s; see %s", timeout_ms / 1000, log);
    else if (rc != 0 || !is_file(out_so))
        snprintf(why, why_len, "the build failed (status %d); see %s", rc, log);
    else
        return 0;
    return -1;
}

int torchload_build(const torch_install_t *t, const char *dir, const char *name, long timeout_ms,
                    char *why, size_t why_len)
{
    char final[PATH_MAX], log[PATH_MAX], lock[PATH_MAX], tmp[PATH_MAX], path[PATH_MAX + 32];
    if (make_dirs(dir) != 0) {
        snprintf(why, why_len, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    if (snprintf(final, sizeof final, "%s/%s", dir, name) >= (int)sizeof final ||
        snprintf(log, sizeof log, "%s.log", final) >= (int)sizeof log ||
        snprintf(lock, sizeof lock, "%s.lock", final) >= (int)sizeof lock ||
        snprintf(tmp, sizeof tmp, "%s/build.XXXXXX", dir) >= (int)sizeof tmp) {
        snprintf(why, why_len, "the cache path is too long");
        return -1;
    }
    /* Ranks started together build once: the others wait on the lock, then find the file. */
    int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lfd >= 0)
        flock(lfd, LOCK_EX);
    int rc = 0;
    if (!is_file(final) && is_file(log)) {
        /* A build that failed is not tried again by every process of every job: its log stays
         * until someone reads it and removes it (or the torch version or the bridge changes). */
        snprintf(why, why_len, "an earlier build failed; see %s (remove it to build again)", log);
        rc = -1;
    } else if (!is_file(final)) {
        rc = -1;
        if (!mkdtemp(tmp)) {
            snprintf(why, why_len, "cannot create a build directory in %s: %s", dir, strerror(errno));
        } else {
            char hdr[PATH_MAX + 16], so[PATH_MAX + 16];
            snprintf(path, sizeof path, "%s/bridge.cpp", tmp);
            snprintf(hdr, sizeof hdr, "%s/gmshim.h", tmp);
            snprintf(so, sizeof so, "%s/bridge.so", tmp);
            unlink(log);
            if (write_file(path, gm_bridge_cpp) != 0 || write_file(hdr, gm_bridge_header) != 0)
                snprintf(why, why_len, "cannot write the bridge's source into %s", tmp);
            else if (compile_bridge(t, tmp, so, log, timeout_ms, why, why_len) == 0)
                rc = rename(so, final) == 0 ? 0 : (snprintf(why, why_len, "cannot move the bridge to %s", final), -1);
            unlink(path), unlink(hdr), unlink(so), rmdir(tmp);
        }
        if (rc == 0)
            unlink(log);
        else
            append_line(log, why);
    }
    if (lfd >= 0)
        close(lfd); /* the lock goes with it */
    return rc;
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
    if (info->dlpi_name && torchload_is_allocator_lib(info->dlpi_name) && objects_exec_span(info, &w->span) == 0) {
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
 * on: the segments it just gave back wait for their fences in gmshim's pool. Either way the pool
 * is emptied now, waiting for the fences of freed memory (PyTorch's own empty_cache waits for its
 * events, and the real cudaFree for the device). */
static void torch_emptied(void)
{
    /* From the trimmer: no waiting for the GPU under an arena lock; its polls give them back. */
    if (trimming || __atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) != GM_POOLED)
        return;
    int depth = gm_depth;
    gm_depth = 1; /* the pool's own CUDA calls must pass through */
    for (int i = 0; i < device_created_count(); i++) {
        gm_device_t *d = device_at(i);
        if (d)
            device_empty_cache(d, GMLOG_EMPTY_API);
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
    void *h = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, why_len, "cannot load %s: %s", so_path, e ? e : "?");
        return -1;
    }
    if (!torch_cache_on())
        return hook_empty(h, so_path, why, why_len); /* nothing to follow: only its empty_cache */
    gmshim_torch_attach_fn attach = (gmshim_torch_attach_fn)dlsym(h, GMSHIM_TORCH_BRIDGE_ATTACH);
    if (!attach) {
        snprintf(why, why_len, "%s has no %s", so_path, GMSHIM_TORCH_BRIDGE_ATTACH);
        return -1; /* left loaded: unloading C++ code is not worth its risks */
    }
    add_machinery(so_path);
    if (c10_path)
        add_machinery(c10_path);
    int rc = attach(gmshim_torch_event);
    if (rc != 0) {
        snprintf(why, why_len, rc == -1 ? "PyTorch's allocator does not exist yet"
                                        : "PyTorch's allocator refused the tracker (another backend?)");
        return -1;
    }
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

/* The directory libgmshim.so was loaded from (make torch-bridge and make install put bridges in
 * its gmshim-torch/). */
static int own_dir(char *out, size_t len)
{
    Dl_info info;
    if (!dladdr((void *)torchload_attach_for, &info) || !info.dli_fname || !strchr(info.dli_fname, '/'))
        return -1;
    if (snprintf(out, len, "%s", info.dli_fname) >= (int)len)
        return -1;
    *strrchr(out, '/') = 0;
    return 0;
}

/* Where the bridge for the torch of `c10_path` is: 0, found (its path in `so`); 1, not built yet
 * and nothing known to stop a build (its place in `dir` and `name`); -1, neither (why). */
static int find_bridge(const char *c10_path, torch_install_t *t, char *so, size_t so_len, char *dir, size_t dir_len,
                       char *name, size_t name_len, char *why, size_t why_len)
{
    if (torchload_find_install(c10_path, t, why, why_len) != 0)
        return -1;
    torchload_bridge_name(t, name, name_len);
    if (own_dir(dir, dir_len) == 0 && snprintf(so, so_len, "%s/gmshim-torch/%s", dir, name) < (int)so_len &&
        is_file(so))
        return 0;
    if (torchload_cache_dir(dir, dir_len) != 0) {
        snprintf(why, why_len, "no per-user cache directory (neither XDG_CACHE_HOME nor HOME is set)");
        return -1;
    }
    snprintf(so, so_len, "%s/%s", dir, name);
    if (is_file(so))
        return 0;
    char log[PATH_MAX + 170];
    snprintf(log, sizeof log, "%s.log", so);
    if (is_file(log)) {
        snprintf(why, why_len, "an earlier build failed; see %s (remove it to build again)", log);
        return -1;
    }
    return compiler_found(why, why_len) == 0 ? 1 : -1; /* nothing said yet: the one warning is the caller's */
}

int torchload_attach_for(const char *c10_path, int build, char *why, size_t why_len)
{
    torch_install_t t;
    char name[128], dir[PATH_MAX], so[PATH_MAX + 160];
    int found = find_bridge(c10_path, &t, so, sizeof so, dir, sizeof dir, name, sizeof name, why, why_len);
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
        if (torchload_build(&t, dir, name, BUILD_TIMEOUT_MS, why, why_len) != 0)
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
 * into); with it off, for its empty_cache (not under GMSHIM_TORCH=segments: no bridge at all). */
static int wanted(void)
{
    const char *mode = options_get_str(GM_OPT_TORCH);
    if (!strcmp(mode, "segments"))
        return 0;
    return torch_cache_on() ? evlog_enabled() && !strcmp(mode, "keep") : 1;
}

void torchload_examine(const void *caller)
{
    if (!wanted()) {
        note_c10(NULL); /* torch imported after the first CUDA call: its frees are still known */
        __atomic_store_n(&torchload_settled, 1, __ATOMIC_RELEASE);
        return;
    }
    uintptr_t pc = (uintptr_t)caller;
    if (remembered(pc))
        return;
    Dl_info info;
    if (!dladdr(caller, &info) || !info.dli_fname || !torchload_is_allocator_lib(info.dli_fname)) {
        remember(pc);
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
    if (torchload_find_install(c10, &t, why, sizeof why) != 0) {
        diag_warn("no PyTorch bridge: %s", why);
        return -1;
    }
    if (out_dir)
        snprintf(dir, sizeof dir, "%s", out_dir);
    else if (torchload_cache_dir(dir, sizeof dir) != 0) {
        diag_warn("no PyTorch bridge: neither XDG_CACHE_HOME nor HOME is set");
        return -1;
    }
    torchload_bridge_name(&t, name, sizeof name);
    char log[PATH_MAX + 136];
    snprintf(log, sizeof log, "%s/%s.log", dir, name);
    unlink(log); /* asked for by name: an earlier failure is tried again */
    if (torchload_build(&t, dir, name, BUILD_TIMEOUT_MS, why, sizeof why) != 0) {
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
    int found = find_bridge(c10, &t, so, sizeof so, dir, sizeof dir, name, sizeof name, msg, len);
    if (found == 1 && build) {
        if (torchload_build(&t, dir, name, BUILD_TIMEOUT_MS, msg, len) != 0)
            return -1;
        found = 0;
    } else if (found == 1) {
        snprintf(msg, len, "torch %s into %s", t.version, dir);
    }
    if (found == 0)
        snprintf(msg, len, "%s", so);
    return found;
}
