/* `gmshim run`, before it starts the job: when the job's python finds torch and no PyTorch bridge
 * is built for that torch, build it now (docs/pytorch.md), so that the job's first tensor never
 * waits for a compiler. It never stops the job: whatever fails here, the job starts as it would
 * have, and its own loader says the one warning the job would have said. */
#include "run_torch.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define PROBE_TIMEOUT_MS 30000

/* libgmshim.so's gmshim_torch_bridge_prepare (shim/gmshim.h). */
typedef int (*prepare_fn)(const char *torch_dir, int build, char *msg, unsigned long len);

static int is_python(const char *path)
{
    const char *base = strrchr(path, '/');
    return fnmatch("python*", base ? base + 1 : path, 0) == 0;
}

static int executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* A command name found in PATH as execvp finds it; a name with a slash is itself. */
static int which(const char *name, char *out, size_t len)
{
    if (strchr(name, '/'))
        return snprintf(out, len, "%s", name) < (int)len && executable(out) ? 0 : -1;
    const char *path = getenv("PATH");
    for (const char *d = path && *path ? path : "/usr/bin:/bin";; d++) {
        size_t n = strcspn(d, ":");
        if (snprintf(out, len, "%.*s%s%s", (int)n, d, n ? "/" : "", name) < (int)len && executable(out))
            return 0;
        d += n;
        if (!*d)
            return -1;
    }
}

/* The interpreter a script's #! line names when it is a python ("#!/venv/bin/python3",
 * "#!/usr/bin/env python3", "#!/usr/bin/env -S python3 -u"): 0 and its name or path. */
static int shebang_python(const char *script, char *out, size_t len)
{
    char line[512];
    int fd = open(script, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, line, sizeof line - 1);
    close(fd);
    if (n < 3 || line[0] != '#' || line[1] != '!')
        return -1;
    line[n] = 0;
    line[strcspn(line, "\r\n")] = 0;
    char *save = NULL, *tok = strtok_r(line + 2, " \t", &save);
    if (tok && !strcmp(strrchr(tok, '/') ? strrchr(tok, '/') + 1 : tok, "env"))
        while ((tok = strtok_r(NULL, " \t", &save)) && (tok[0] == '-' || strchr(tok, '=')))
            ; /* env's options and assignments */
    return tok && is_python(tok) && snprintf(out, len, "%s", tok) < (int)len ? 0 : -1;
}

int run_torch_python(const char *cmd, char *out, size_t len)
{
    char path[PATH_MAX];
    if (which(cmd, path, sizeof path) == 0) {
        if (is_python(path))
            return snprintf(out, len, "%s", path) < (int)len ? 0 : -1;
        char named[PATH_MAX];
        if (shebang_python(path, named, sizeof named) == 0)
            return which(named, out, len);
    }
    return which("python3", out, len);
}

/* The torch package directory the python finds, without importing torch: 0, or -1 (no torch, no
 * python, or no answer within PROBE_TIMEOUT_MS). The probe runs without the preload. */
int run_torch_find(const char *python, char *dir, size_t len)
{
    static const char code[] = "import importlib.util as u, os\n"
                               "s = u.find_spec('torch')\n"
                               "p = list(s.submodule_search_locations or []) if s else []\n"
                               "print(os.path.realpath(p[0]) if p else '')\n";
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = calloc(n + 1, sizeof *env);
    char *argv[] = {(char *)python, "-c", (char *)code, NULL};
    pid_t pid = -1;
    int err = ENOMEM;
    if (env) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (strncmp(environ[i], "LD_PRELOAD=", 11) && strncmp(environ[i], "CUDA_INJECTION64_PATH=", 22))
                env[k++] = environ[i];
        err = posix_spawn(&pid, python, &fa, NULL, argv, env);
    }
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    close(fds[1]);
    if (err) {
        close(fds[0]);
        return -1;
    }
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    size_t got = 0;
    struct timespec nap = {0, 10 * 1000 * 1000};
    int status = -1;
    for (long waited = 0; waited < PROBE_TIMEOUT_MS; waited += 10) {
        ssize_t r = got + 1 < len ? read(fds[0], dir + got, len - 1 - got) : 0;
        if (r > 0)
            got += (size_t)r;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            while (got + 1 < len && (r = read(fds[0], dir + got, len - 1 - got)) > 0)
                got += (size_t)r;
            pid = -1;
            break;
        }
        nanosleep(&nap, NULL);
    }
    if (pid > 0) { /* no answer in time: the job goes on without the pre-build */
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        status = -1;
    }
    close(fds[0]);
    dir[got] = 0;
    dir[strcspn(dir, "\n")] = 0;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 && dir[0] == '/' ? 0 : -1;
}

/* Whether the job's loader would want the bridge (shim/torchload.c: PyTorch's cache kept). */
static int bridge_wanted(void)
{
    const char *mode = getenv("GMSHIM_TORCH"), *nocache = getenv("PYTORCH_NO_CUDA_MEMORY_CACHING");
    return (!mode || !*mode || !strcmp(mode, "keep")) && !(nocache && !strcmp(nocache, "1"));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void run_torch_prebuild(const char *lib, const char *cmd)
{
    char python[PATH_MAX], torch[PATH_MAX], msg[PATH_MAX + 512];
    if (!bridge_wanted() || run_torch_python(cmd, python, sizeof python) || run_torch_find(python, torch, sizeof torch))
        return;
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    prepare_fn prepare = h ? (prepare_fn)dlsym(h, "gmshim_torch_bridge_prepare") : NULL;
    if (!prepare)
        return; /* an older library: its loader decides at first use, as before */
    const char *verbose = getenv("GMSHIM_VERBOSE");
    int loud = verbose && *verbose && strcmp(verbose, "0") && strcmp(verbose, "off");
    int rc = prepare(torch, 0, msg, sizeof msg);
    if (rc == 0 && loud)
        fprintf(stderr, "gmshim run: the PyTorch bridge for %s is built: %s\n", torch, msg);
    if (rc < 0 && loud)
        fprintf(stderr, "gmshim run: no PyTorch bridge for %s: %s\n", torch, msg);
    if (rc != 1)
        return; /* there already, or not buildable: the job's loader says so once */
    fprintf(stderr, "gmshim run: building the PyTorch bridge for %s before starting %s (once per torch "
                    "version; %s finds torch in %s)\n", msg, cmd, python, torch);
    double t0 = now_s();
    if (prepare(torch, 1, msg, sizeof msg) == 0)
        fprintf(stderr, "gmshim run: PyTorch bridge built in %.1f s\n", now_s() - t0);
    else
        fprintf(stderr, "gmshim run: the PyTorch bridge was not built (%s); %s starts with PyTorch's segments "
                        "logged only\n", msg, cmd);
}
