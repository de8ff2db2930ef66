/* `gmshim run`: runs a command with the libgmshim.so that lies beside this executable preloaded
 * and GMSHIM_LOG set, waits for it, then reports on the logs it wrote. The exit status is the
 * command's own; gmshim's problems go to stderr and never replace it. */
#include "run.h"
#include "vec.h"
#include "output.h"
#include "run_torch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_LOG "gmshim-%n-%p.gmlog"

/* The preload library: beside the executable, or in ../lib. */
static int find_library(char *out, size_t len)
{
    const char *env = getenv("GMSHIM_LIBRARY");
    if (env && *env && access(env, R_OK) == 0) {
        snprintf(out, len, "%s", env);
        return 0;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = 0;
    static const char *const rel[] = {"libgmshim.so", "../lib/libgmshim.so"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/%s", exe, rel[i]);
        char real[PATH_MAX];
        if (access(path, R_OK) == 0 && realpath(path, real)) {
            snprintf(out, len, "%s", real);
            return 0;
        }
    }
    return -1;
}

/* A GMSHIM_LOG template's file name as an fnmatch pattern: each %x becomes *. */
static void template_pattern(const char *name, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = name; *p && o + 3 < len; p++) {
        if (*p == '%' && p[1]) {
            p++;
            if (*p == '%') {
                out[o++] = '%';
            } else {
                out[o++] = '*';
            }
        } else if (strchr("*?[]\\", *p)) {
            out[o++] = '\\';
            out[o++] = *p;
        } else {
            out[o++] = *p;
        }
    }
    out[o] = 0;
}

/* What tells the job's logs from others matching the template: files that were not there
 * before the command started, whose header says they started during its run. The pids of the
 * job's descendants are not known (a parent reaps its own children), so they are not asked. */
typedef struct job {
    uint64_t since, until;      /* the command's run, CLOCK_REALTIME ns (until 0: not yet over) */
    struct stat *before;        /* the matching files there before it started */
    size_t nbefore, capbefore;
    char **logs;                /* its logs */
    int nlogs;
    size_t caplogs;
} job_t;

/* A gmshim log's start time (CLOCK_REALTIME ns), or 0 when the file is not one. */
static uint64_t log_start(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return 0;
    gmlog_file_header_t h;
    ssize_t n = read(fd, &h, sizeof h);
    close(fd);
    return n == (ssize_t)sizeof h && !memcmp(h.magic, GMLOG_MAGIC, 8) ? h.start_realtime_ns : 0;
}

static int was_there(const job_t *job, const struct stat *st)
{
    for (size_t i = 0; i < job->nbefore; i++)
        if (job->before[i].st_dev == st->st_dev && job->before[i].st_ino == st->st_ino)
            return 1;
    return 0;
}

/* One file matching the template: before the run, noted; after it, kept if the job wrote it. */
static void consider(job_t *job, const char *path, const char *shown, const struct stat *st)
{
    if (!job->until) {
        struct stat *n = vec_grow(job->before, &job->capbefore, job->nbefore + 1, sizeof *n, 16);
        if (!n)
            return;
        job->before = n;
        job->before[job->nbefore++] = *st;
        return;
    }
    uint64_t start = log_start(path);
    if (!start)
        return;
    int old = was_there(job, st), during = start >= job->since && start <= job->until;
    /* An old log of an earlier run goes quietly; an old one that claims a later start, or a new
     * one whose start is not in the run, is worth a word. */
    if (old && start >= job->since)
        fprintf(stderr, "gmshim run: not reporting %s: it was there before the command started (though its "
                        "start time says otherwise)\n", shown);
    else if (!during && !old)
        fprintf(stderr, "gmshim run: not reporting %s: its start time is not within the command's run\n", shown);
    if (old || !during)
        return;
    char **n = job->nlogs < INT_MAX ? vec_grow(job->logs, &job->caplogs, (size_t)job->nlogs + 1, sizeof *n, 8) : NULL;
    if (!n)
        return;
    job->logs = n;
    job->logs[job->nlogs] = strdup(shown);
    if (job->logs[job->nlogs])
        job->nlogs++;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The regular files matching the template (or it plus ".N"), each through consider(). */
static void scan(const char *tmpl, job_t *job)
{
    char dir[PATH_MAX], pat[PATH_MAX];
    const char *slash = strrchr(tmpl, '/');
    if (slash) {
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - tmpl), tmpl);
        if (!dir[0])
            snprintf(dir, sizeof dir, "/");
    } else {
        snprintf(dir, sizeof dir, ".");
    }
    template_pattern(slash ? slash + 1 : tmpl, pat, sizeof pat);
    char pat_n[PATH_MAX + 8];
    snprintf(pat_n, sizeof pat_n, "%s.[0-9]*", pat);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (fnmatch(pat, e->d_name, 0) != 0 && fnmatch(pat_n, e->d_name, 0) != 0)
            continue;
        char path[PATH_MAX * 2];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) || !S_ISREG(st.st_mode))
            continue;
        consider(job, path, !strcmp(dir, ".") ? e->d_name : path, &st);
    }
    closedir(d);
    if (job->nlogs > 1)
        qsort(job->logs, (size_t)job->nlogs, sizeof *job->logs, by_name);
}

static uint64_t now_realtime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Whether a log can be created in the template's directory: by creating (and removing) a file
 * there, which also catches a read-only file system and holds for root. 0, or an errno. */
static int dir_writable(const char *tmpl, char *dir, size_t len)
{
    const char *slash = strrchr(tmpl, '/');
    if (slash)
        snprintf(dir, len, "%.*s", (int)(slash - tmpl) ? (int)(slash - tmpl) : 1, tmpl);
    else
        snprintf(dir, len, ".");
    struct stat st;
    if (stat(dir, &st))
        return errno;
    if (!S_ISDIR(st.st_mode))
        return ENOTDIR;
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/.gmshim-run-XXXXXX", dir);
    int fd = mkstemp(probe);
    if (fd < 0)
        return errno;
    close(fd);
    unlink(probe);
    return 0;
}

const char cmd_run_usage[] =
    "usage: gmshim run [-o LOG] [--json] [--no-report] [--] COMMAND [ARGS...]\n"
    "\n"
    "Runs COMMAND with libgmshim.so preloaded (the one beside this gmshim, or in ../lib;\n"
    "GMSHIM_LIBRARY overrides) and GMSHIM_LOG set, waits for it, then prints `gmshim report` of\n"
    "the logs it wrote (one per process that used CUDA). The options end at COMMAND (or at '--'):\n"
    "what follows is COMMAND's. The exit status is COMMAND's (128+N when a signal N ended it);\n"
    "2 when it is not started because the log's directory is missing or cannot be written.\n"
    "With PyTorch's cache kept (GMSHIM_TORCH=keep, the default), when COMMAND's python (COMMAND\n"
    "itself, the python of its #! line, else PATH's python3) finds torch and no PyTorch bridge is\n"
    "built for that torch, the bridge is built first, said on stderr; a failed build never stops\n"
    "COMMAND.\n"
    "\n"
    "  -o, --output LOG  the log path template (GMSHIM_LOG syntax: %p pid, %r rank, %n program,\n"
    "                    %h host, %t start time); default " DEFAULT_LOG " in this directory\n"
    "      --no-report   only run and say which logs were written\n"
    "  -j, --json        the report as one JSON document on stdout; COMMAND's own stdout then goes\n"
    "                    to stderr, so that stdout holds nothing else\n"
    "  -h, --help        this text\n";

/* -o LOG, --no-report (st: the cmd_call_t). */
int cmd_run_opt(cli_ctx_t *c, void *st, int key, const char *val)
{
    (void)c;
    cmd_call_t *k = st;
    if (key == 'o')
        k->output = val;
    else if (key == CMD_RUN_NO_REPORT)
        k->no_report = 1;
    return 0;
}

/* Starts the job with the preload and the log template set; its pid, or -1 after a message. */
static pid_t start_job(char **job_argv, const char *lib, const char *tmpl, int json)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "gmshim run: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        const char *old = getenv("LD_PRELOAD");
        size_t len = strlen(lib) + (old ? strlen(old) + 2 : 1);
        char *pre = malloc(len);
        if (!pre)
            _exit(127);
        snprintf(pre, len, "%s%s%s", lib, old && *old ? " " : "", old ? old : "");
        setenv("LD_PRELOAD", pre, 1);
        setenv("GMSHIM_LOG", tmpl, 1);
        /* the JSON document has stdout to itself: the command's output goes to stderr */
        if (json && dup2(2, 1) < 0)
            _exit(126);
        execvp(job_argv[0], job_argv);
        fprintf(stderr, "gmshim run: cannot run %s: %s\n", job_argv[0], strerror(errno));
        _exit(errno == ENOENT ? 127 : 126);
    }
    return pid;
}

/* Like system(): a Ctrl-C goes to the command; we stay to report on what it left. Returns its
 * exit status (128 + N for a signal N). */
static int wait_job(pid_t pid)
{
    struct sigaction ign, old_int, old_quit;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

/* The report (or the list) of the logs the job wrote. */
static void report_job(const cmd_t *then, const job_t *job, const char *cmd, const char *tmpl, int json, int report)
{
    char **logs = job->logs;
    int n = job->nlogs;
    if (!n) {
        fprintf(stderr, "gmshim run: %s wrote no log matching %s (did it use the CUDA runtime? is libcudart "
                        "linked dynamically? nvcc needs -cudart shared)\n", cmd, tmpl);
        if (json && report) { /* still one document on stdout: no logs */
            cli_ctx_t e;
            cli_init(&e, stdout, stderr, "report");
            e.json = 1;
            cli_finish(&e, cli_run_logs(&e, 0, NULL, 0, NULL, NULL));
        }
    } else if (!report) {
        for (int i = 0; i < n; i++)
            fprintf(stderr, "gmshim run: wrote %s\n", logs[i]);
    } else {
        for (int i = 0; i < n; i++)
            fprintf(stderr, "gmshim run: log %s\n", logs[i]);
        char *rargv[3 + 256];
        int k = 0;
        rargv[k++] = "report";
        if (json)
            rargv[k++] = "--json";
        rargv[k++] = "--";
        for (int i = 0; i < n && k < (int)(sizeof rargv / sizeof rargv[0]) - 1; i++)
            rargv[k++] = logs[i];
        rargv[k] = NULL;
        if (then)
            cmd_main(then, k, rargv);
    }
}

int cmd_run_go(cmd_call_t *k)
{
    const char *tmpl = k->output ? k->output : DEFAULT_LOG;
    int json = k->c.json, report = !k->no_report;
    if (!k->c.nargs) {
        fprintf(stderr, "gmshim run: no command given\n%s", cmd_run_usage);
        return CLI_FAIL;
    }
    char **job_argv = k->c.args;
    char lib[PATH_MAX];
    if (find_library(lib, sizeof lib)) {
        fprintf(stderr, "gmshim run: libgmshim.so is neither beside this gmshim nor in ../lib; "
                        "set GMSHIM_LIBRARY to its path\n");
        return CLI_FAIL;
    }
    if (strchr(tmpl, '/') && strchr(tmpl, '%') && strchr(tmpl, '%') < strrchr(tmpl, '/')) {
        fprintf(stderr, "gmshim run: %%-patterns are expanded in the file name only, not in directories: %s\n", tmpl);
        return CLI_FAIL;
    }
    char dir[PATH_MAX];
    int werr = dir_writable(tmpl, dir, sizeof dir);
    if (werr) {
        fprintf(stderr, "gmshim run: not starting %s: the log's directory %s cannot be written: %s\n", job_argv[0],
                dir, strerror(werr));
        return CLI_PARTIAL;
    }
    run_torch_prebuild(lib, job_argv[0]); /* the job's first tensor must not wait for a compiler */
    job_t job = {0};
    scan(tmpl, &job); /* what is there already is not the job's */
    job.since = now_realtime();
    pid_t pid = start_job(job_argv, lib, tmpl, json);
    if (pid < 0)
        return CLI_FAIL;
    int rc = wait_job(pid);
    job.until = now_realtime();
    scan(tmpl, &job);
    report_job(k->cmd->then, &job, job_argv[0], tmpl, json, report);
    for (int i = 0; i < job.nlogs; i++)
        free(job.logs[i]);
    free(job.logs);
    free(job.before);
    return rc;
}
