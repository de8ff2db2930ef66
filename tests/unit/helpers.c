/* Helpers the suites share: paths under the build directory, running a program under the
 * preload with extra environment and capturing its output, temporary directories. */
#include "suites.h"
#include "gmlog.h"
#include "model.h"
#include "reader.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

const char *build_path(const char *rel)
{
    static char buf[8][4096];
    static int next;
    const char *b = getenv("GMSHIM_BUILD");
    char *out = buf[next++ % 8];
    snprintf(out, sizeof buf[0], "%s/%s", b && *b ? b : "build", rel);
    return out;
}

const char *temp_dir(void)
{
    static char buf[8][256];
    static int next;
    char *out = buf[next++ % 8];
    snprintf(out, sizeof buf[0], "/tmp/gmshim-test-XXXXXX");
    if (!mkdtemp(out))
        return "/tmp";
    return out;
}

static int has_key(const char *const *env, const char *kv)
{
    size_t klen = strcspn(kv, "=");
    for (int i = 0; env && env[i]; i++)
        if (!strncmp(env[i], kv, klen) && env[i][klen] == '=')
            return 1;
    return 0;
}

/* GMSHIM_TEST_ENV ("K=V K=V", `make test TEST_ENV=...`): entries every program the tests run gets
 * unless its test sets the same variable — the whole suite under another configuration (e.g.
 * GMSHIM_PLAN=1). In a child: `copy` taken before the GMSHIM_ variables are cleared, put before
 * the test's own entries; never freed (the child execs). */
static int classic_only;

void classic_pool_test(void)
{
    classic_only = 1;
}

static int pool_kind_key(const char *kv)
{
    return !strncmp(kv, "GMSHIM_PLAN=", 12) || !strncmp(kv, "GMSHIM_SEGMENTS=", 16);
}

static void put_test_env(char *copy, const char *const *env)
{
    for (char *save = NULL, *kv = copy ? strtok_r(copy, " ", &save) : NULL; kv; kv = strtok_r(NULL, " ", &save))
        if (strchr(kv, '=') && !has_key(env, kv) && !(classic_only && pool_kind_key(kv)))
            putenv(kv);
}

int run_program(const char *const *argv, const char *const *env, int preload, char **out)
{
    return run_program_from(NULL, argv[0], argv, env, preload, out);
}

int run_program_from(const char *cwd, const char *path, const char *const *argv, const char *const *env, int preload,
                     char **out)
{
    int pfd[2];
    if (pipe(pfd))
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(pfd[1], 1);
        dup2(pfd[1], 2);
        close(pfd[0]);
        close(pfd[1]);
        const char *te = getenv("GMSHIM_TEST_ENV");
        char *test_env = te && *te ? strdup(te) : NULL;
        for (char **e = environ; *e; e++)
            if (!strncmp(*e, "GMSHIM_", 7) && strncmp(*e, "GMSHIM_BUILD=", 13) &&
                strncmp(*e, "GMSHIM_TEST_PRELOAD=", 20)) {
                char name[256];
                snprintf(name, sizeof name, "%.*s", (int)strcspn(*e, "="), *e);
                unsetenv(name);
                e = environ - 1;
            }
        put_test_env(test_env, env);
        if (!has_key(env, "GMSHIM_LOG=x")) {
            /* Logs on by default, so that every test also exercises the writer. */
            mkdir("/tmp/gmshim-tests", 0700);
            setenv("GMSHIM_LOG", "/tmp/gmshim-tests/%n-%p.gmlog", 1);
        }
        for (int i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        if (cwd && chdir(cwd) != 0)
            _exit(126);
        if (preload && !has_key(env, "LD_PRELOAD=x")) {
            char pre[8192];
            const char *san = getenv("GMSHIM_TEST_PRELOAD");
            snprintf(pre, sizeof pre, "%s%s%s", san && *san ? san : "", san && *san ? " " : "",
                     build_path("libgmshim.so"));
            setenv("LD_PRELOAD", pre, 1);
        }
        execv(path, (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", path, strerror(errno));
        _exit(127);
    }
    close(pfd[1]);
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (len + 1024 > cap)
            buf = realloc(buf, cap *= 2);
        ssize_t n = read(pfd[0], buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = 0;
    close(pfd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (out)
        *out = buf;
    else
        free(buf);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

int spawn_preloaded(const char *prog, const char *const *env, int *out_fd)
{
    int pfd[2];
    if (pipe(pfd))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        char pre[8192];
        const char *san = getenv("GMSHIM_TEST_PRELOAD");
        snprintf(pre, sizeof pre, "%s%s%s", san && *san ? san : "", san && *san ? " " : "", build_path("libgmshim.so"));
        setenv("LD_PRELOAD", pre, 1);
        const char *te = getenv("GMSHIM_TEST_ENV");
        put_test_env(te && *te ? strdup(te) : NULL, env);
        for (int i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        const char *path = build_path(prog);
        execl(path, path, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    if (pid < 0) {
        close(pfd[0]);
        return -1;
    }
    *out_fd = pfd[0];
    return pid;
}

int run_built(const char *prog, const char *const *env, const char *arg, char **out)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", build_path(prog));
    const char *argv[] = {path, arg, NULL};
    return run_program(argv, env, 1, out);
}

const char *stderr_of(void (*fn)(void))
{
    static char buf[8192];
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(p[1], 2);
    fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(p[1]);
    ssize_t n = read(p[0], buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    close(p[0]);
    return buf;
}

const char *frames_python(void)
{
    static const char *const pythons[] = {
        "/root/.pyenv/versions/3.13.0/bin/python3.13", "/root/.pyenv/versions/3.12.1/bin/python3.12",
        "/root/.pyenv/versions/3.11.7/bin/python3.11", "/usr/bin/python3.13", "/usr/bin/python3.12",
        "/usr/bin/python3.11"};
    for (size_t i = 0; i < sizeof pythons / sizeof *pythons; i++)
        if (access(pythons[i], X_OK) == 0)
            return pythons[i];
    return NULL;
}

const char *wrapped_log_model(const char *name, const char *const *extra, unsigned long long stray, rd_log_t *lf,
                              model_t *m)
{
    static char log[4200];
    char env_log[4300];
    snprintf(log, sizeof log, "%s/%s", temp_dir(), name);
    snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s", log);
    const char *env[16] = {env_log, "GMSHIM_LOG_LIMIT=64M"};
    size_t n = 2;
    for (size_t i = 0; extra && extra[i] && n + 1 < sizeof env / sizeof env[0]; i++)
        env[n++] = extra[i];
    env[n] = NULL;
    char *out = NULL;
    int rc = run_built("tests/integration/log_bounded", env, NULL, &out);
    ck_assert_msg(rc == 0, "log_bounded exited %d:\n%s", rc, out);
    free(out);
    ck_assert_msg(rd_open_path(lf, log) == 0, "%s does not read", log);
    ck_assert_msg(lf->hdr.flags & GMLOG_F_WRAPPED, "the log did not wrap: the test proves nothing");
    memset(m, 0, sizeof *m);
    model_build(m, lf, MODEL_ALL);
    const model_dev_t *d0 = m->dev[0];
    ck_assert_ptr_nonnull(d0);
    ck_assert_uint_eq(m->malformed, 0);
    ck_assert_msg(d0->bad_segment_frees == 0 && d0->unmatched_frees <= stray,
                  "%llu segments or pages and %llu blocks freed that the log never made",
                  (unsigned long long)d0->bad_segment_frees, (unsigned long long)d0->unmatched_frees);
    ck_assert_uint_ge(d0->reserved, d0->allocated);
    ck_assert_uint_ge(d0->peak_reserved, d0->peak_allocated);
    return log;
}
