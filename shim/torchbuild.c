/* The PyTorch bridge's build: the installed torch found from its libc10_cuda.so (version, headers,
 * C++ ABI, CUDA headers), the bridge's source (carried inside libgmshim.so) written out and
 * compiled against it with the program's environment less the preload, under a lock file so that
 * ranks started together build once. It never touches CUDA or the pool; torchload.c decides when. */
#include "torchbuild.h"
#include "common.h"
#include "trust.h"
#include "torch_bridge_src.h" /* generated: gm_bridge_cpp, gm_bridge_header, GM_BRIDGE_HASH */

#include <errno.h>
#include <fcntl.h>
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

/* ---- small file helpers -------------------------------------------------------------------- */

int torchbuild_is_file(const char *path)
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
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
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
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
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

int torchbuild_is_allocator_lib(const char *path)
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
        if (torchbuild_is_file(api) && torchbuild_is_file(crt))
            return snprintf(out, len, "%s", cand[i]) < (int)len ? 0 : -1;
    }
    return -1;
}

int torchbuild_find_install(const char *c10_path, torch_install_t *out, char *why, size_t why_len)
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
    if (!torchbuild_is_file(header)) {
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

void torchbuild_bridge_name(const torch_install_t *t, char *out, size_t len)
{
    snprintf(out, len, "torch-%s-%s.so", t->version, GM_BRIDGE_HASH);
}

int torchbuild_cache_dir(char *out, size_t len)
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
    posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
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
    return torchbuild_is_file(path) && access(path, X_OK) == 0;
}

/* Whether the compiler exists, before anything is said about building: $CXX's (or c++'s) first
 * word, a path or a name searched in PATH as posix_spawnp will, an executable regular file. */
int torchbuild_compiler_found(char *why, size_t why_len)
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
    else if (rc != 0 || !torchbuild_is_file(out_so))
        snprintf(why, why_len, "the build failed (status %d); see %s", rc, log);
    else
        return 0;
    return -1;
}

int torchbuild_build(const torch_install_t *t, const char *dir, const char *name, int again, long timeout_ms,
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
    /* The directory, every one above it and the lock are checked before anything is written
     * or run: no other user can then move, replace or add a file on these paths (trust.h), so
     * the compiler may be given them by name. */
    char reason[PATH_MAX + 160];
    int dfd = trust_open_dir(dir, reason, sizeof reason);
    if (dfd < 0) {
        snprintf(why, why_len, "the bridge's directory cannot be trusted (%s)", reason);
        return -1;
    }
    /* Ranks started together build once: the others wait on the lock, then find the file. */
    int lfd = trust_open_at(dfd, strrchr(lock, '/') + 1, O_RDWR | O_CREAT, reason, sizeof reason);
    close(dfd);
    if (lfd < 0) {
        snprintf(why, why_len, "the build's lock cannot be trusted (%s in %s)", reason, dir);
        return -1;
    }
    flock(lfd, LOCK_EX);
    if (again && !torchbuild_is_file(final))
        unlink(log); /* in the directory just checked, under its lock */
    int rc = 0;
    if (!torchbuild_is_file(final) && torchbuild_is_file(log)) {
        /* A build that failed is not tried again by every process of every job: its log stays
         * until someone reads it and removes it (or the torch version or the bridge changes). */
        snprintf(why, why_len, "an earlier build failed; see %s (remove it to build again)", log);
        rc = -1;
    } else if (!torchbuild_is_file(final)) {
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
    close(lfd); /* the lock goes with it */
    return rc;
}
