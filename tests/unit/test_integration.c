/* Integration tests: the programs in tests/integration/, built against the fake CUDA runtime,
 * run under LD_PRELOAD=build/libgmshim.so; each checks its own results and exits non-zero with a
 * message when something is wrong. */
#include "options.h"
#include "suites.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int run(const char *prog, const char *const *env, const char *arg, char **out)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", build_path(prog));
    const char *argv[] = {path, arg, NULL};
    return run_program(argv, env, 1, out);
}

#define RUN_OK(prog, ...)                                                                         \
    do {                                                                                          \
        const char *env_[] = {__VA_ARGS__, NULL};                                                 \
        char *out_ = NULL;                                                                        \
        int rc_ = run(prog, env_, NULL, &out_);                                                   \
        ck_assert_msg(rc_ == 0, "%s exited %d:\n%s", prog, rc_, out_);                            \
        free(out_);                                                                               \
    } while (0)

START_TEST(test_pool_serves_repeats_without_the_driver)
{
    RUN_OK("tests/integration/pool_hits", "FAKECUDA_MEM=1G");
}
END_TEST

START_TEST(test_oom_releases_the_cache_and_retries_once)
{
    RUN_OK("tests/integration/oom_retry", "FAKECUDA_MEM=256M");
}
END_TEST

START_TEST(test_freed_block_waits_for_the_kernel_still_using_it)
{
    RUN_OK("tests/integration/reuse_order", "FAKECUDA_MEM=1G");
}
END_TEST

START_TEST(test_trusting_stream_order_shows_the_hazard)
{
    const char *env[] = {"FAKECUDA_MEM=1G", "GMSHIM_TRUST_STREAM_ORDER=1", NULL};
    char *out = NULL;
    int rc = run("tests/integration/reuse_order", env, "3", &out);
    ck_assert_msg(rc != 0 && strstr(out, "corrupted"),
                  "without gmshim's ordering the late kernel write must corrupt the new block; "
                  "exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

/* GMSHIM_GPU_ORDER: the freed block comes back at once and the new owner's stream waits on the
 * GPU, whatever kind of stream the old and new owners use. `devices`: the program's use of two
 * visible devices (gpu_order.c), "" for one device visible; `warning`: what stderr must say
 * once (NULL: nothing about GMSHIM_GPU_ORDER). */
static void gpu_order_on(const char *streams, const char *expect, const char *devices, const char *warning)
{
    const char *env[] = {"FAKECUDA_MEM=1G", "GMSHIM_GPU_ORDER=1", "GMSHIM_LOG=off",
                         *devices ? "FAKECUDA_DEVICES=2" : "FAKECUDA_DEVICES=1", NULL};
    char path[4096];
    snprintf(path, sizeof path, "%s", build_path("tests/integration/gpu_order"));
    const char *argv[] = {path, streams, expect, *devices ? devices : NULL, NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0, "gpu_order %s %s %s exited %d:\n%s", streams, expect, devices, rc, out);
    const char *said = strstr(out, "GMSHIM_GPU_ORDER=1");
    if (warning) {
        ck_assert_msg(said && strstr(out, warning), "gpu_order %s %s %s: no warning '%s':\n%s", streams, expect,
                      devices, warning, out);
        ck_assert_msg(!strstr(said + 1, "GMSHIM_GPU_ORDER=1"), "gpu_order %s: said more than once:\n%s", devices, out);
    } else {
        ck_assert_msg(!said, "gpu_order %s %s %s: unexpected warning:\n%s", streams, expect, devices, out);
    }
    free(out);
}

START_TEST(test_gpu_order_new_owner_on_another_nonblocking_stream)
{
    gpu_order_on("nb:nb2", "ordered", "", NULL);
}
END_TEST

START_TEST(test_gpu_order_new_owner_on_a_blocking_stream)
{
    gpu_order_on("nb:blocking", "ordered", "", NULL);
}
END_TEST

START_TEST(test_gpu_order_new_owner_on_the_legacy_stream)
{
    gpu_order_on("nb:legacy", "ordered", "", NULL);
}
END_TEST

START_TEST(test_gpu_order_new_owner_on_the_per_thread_stream)
{
    gpu_order_on("nb:perthread", "ordered", "", NULL);
}
END_TEST

START_TEST(test_gpu_order_new_owner_on_a_stream_created_after_the_allocation)
{
    gpu_order_on("nb:later", "ordered", "", NULL);
    gpu_order_on("blocking:later", "ordered", "", NULL);
}
END_TEST

START_TEST(test_gpu_order_old_owner_on_the_legacy_or_a_blocking_stream)
{
    gpu_order_on("legacy:nb2", "ordered", "", NULL);
    gpu_order_on("blocking:nb2", "ordered", "", NULL);
}
END_TEST

/* Two devices visible, one in use (a torchrun rank sees every GPU): GPU order applies there. */
START_TEST(test_gpu_order_applies_when_two_devices_are_visible_and_one_is_used)
{
    gpu_order_on("nb:nb2", "ordered", "dev0", NULL);
    gpu_order_on("nb:nb2", "ordered", "dev1", NULL);
}
END_TEST

/* Both devices in use before the first allocation: it does not apply, and says so once. */
START_TEST(test_gpu_order_waits_on_the_cpu_when_two_devices_are_in_use)
{
    gpu_order_on("nb:nb2", "waited", "both", "does not apply to device 0: the process uses more than one device");
}
END_TEST

/* A second device comes into use right after a block was handed out under GPU order, and its
 * stream writes the block: that write must come after the old owner's late kernel (the switch
 * waits for the first device's ordered fences); later reuse waits on the CPU. */
START_TEST(test_gpu_order_stops_and_waits_when_a_second_device_comes_into_use)
{
    gpu_order_on("nb:nb2", "switched", "peer", "stops applying: the process uses a second device besides device 0");
}
END_TEST

START_TEST(test_capture_stays_valid_and_graph_memory_stays_private)
{
    RUN_OK("tests/integration/capture", "FAKECUDA_MEM=1G");
}
END_TEST

START_TEST(test_odd_arguments_behave_as_the_real_runtime)
{
    RUN_OK("tests/integration/odd_args", "FAKECUDA_MEM=1G");
}
END_TEST

START_TEST(test_device_reset_forgets_the_device_segments)
{
    RUN_OK("tests/integration/device_reset", "FAKECUDA_MEM=1G");
}
END_TEST

START_TEST(test_two_devices_have_separate_pools)
{
    RUN_OK("tests/integration/two_devices", "FAKECUDA_MEM=1G", "FAKECUDA_DEVICES=2");
}
END_TEST

START_TEST(test_sixteen_threads_keep_blocks_apart_and_intact)
{
    RUN_OK("tests/integration/threads", "FAKECUDA_MEM=4G");
}
END_TEST

START_TEST(test_fork_child_leaves_the_parent_pool_alone)
{
    const char *dir = temp_dir();
    char logenv[512];
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s/fork-%%p.gmlog", dir);
    RUN_OK("tests/integration/fork_child", "FAKECUDA_MEM=1G", logenv);
    /* Only the parent wrote a log. */
    int logs = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        logs += strstr(e->d_name, ".gmlog") != NULL;
    closedir(d);
    ck_assert_msg(logs == 1, "%d logs in %s, expected the parent's only", logs, dir);
}
END_TEST

/* The writer maps and faults in the next 16 MiB of the log ahead; the end of the run cuts the
 * file back to what was written. */
START_TEST(test_log_pages_are_faulted_in_ahead_and_cut_back_at_exit)
{
    const char *dir = temp_dir();
    char log[512], logenv[600];
    snprintf(log, sizeof log, "%s/ahead.gmlog", dir);
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
    RUN_OK("tests/integration/log_ahead", "FAKECUDA_MEM=1G", logenv);
    struct stat st;
    ck_assert_int_eq(stat(log, &st), 0);
    ck_assert_msg(st.st_size < (1 << 20), "after the run the log is still %lld bytes", (long long)st.st_size);
    unlink(log);
    rmdir(dir);
}
END_TEST

START_TEST(test_program_without_cuda_gets_no_file_and_no_thread)
{
    const char *dir = temp_dir();
    char logenv[512];
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s/gmshim-%%n-%%p.gmlog", dir);
    RUN_OK("tests/integration/no_cuda", logenv, "GMSHIM_VERBOSE=1");
    DIR *d = opendir(dir);
    struct dirent *e;
    int files = 0;
    while (d && (e = readdir(d)))
        files += e->d_name[0] != '.';
    closedir(d);
    ck_assert_msg(files == 0, "%d files appeared in %s", files, dir);
}
END_TEST

START_TEST(test_bad_settings_warn_once_and_keep_defaults)
{
    const char *env[] = {"FAKECUDA_MEM=1G", "GMSHIM_POOL=maybe", "GMSHIM_FENCE_BYTES=12Q",
                         "GMSHIM_MAX_SPLIT=1M", "GMSHIM_DEVICE_LIMIT=half", NULL};
    char *out = NULL;
    int rc = run("tests/integration/pool_hits", env, NULL, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    const char *want[] = {"GMSHIM_POOL='maybe'", "GMSHIM_FENCE_BYTES='12Q'", "GMSHIM_MAX_SPLIT='1M'",
                          "GMSHIM_DEVICE_LIMIT='half'"};
    for (int i = 0; i < 4; i++) {
        const char *at = strstr(out, want[i]);
        ck_assert_msg(at != NULL, "no warning about %s:\n%s", want[i], out);
        ck_assert_msg(strstr(at + 1, want[i]) == NULL, "%s warned twice:\n%s", want[i], out);
    }
    free(out);
}
END_TEST

/* GMSHIM_STACK_DEPTH of 2^31 once became a negative depth (a crash at the first cudaMalloc),
 * and 2^32-1 a depth of -1 (a garbage record in the log): both are out of range now, warned
 * about once, and the program runs with the default and writes a log that reads. */
START_TEST(test_stack_depth_of_two_to_the_31_or_more_warns_and_the_log_reads)
{
    const char *values[] = {"2147483648", "4294967295"};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        const char *dir = temp_dir();
        char log[512], logenv[600], depth[64], want[128];
        snprintf(log, sizeof log, "%s/depth.gmlog", dir);
        snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
        snprintf(depth, sizeof depth, "GMSHIM_STACK_DEPTH=%s", values[i]);
        const char *env[] = {"FAKECUDA_MEM=1G", logenv, depth, NULL};
        char *out = NULL;
        int rc = run("tests/integration/pool_hits", env, NULL, &out);
        ck_assert_msg(rc == 0, "GMSHIM_STACK_DEPTH=%s: exit %d:\n%s", values[i], rc, out);
        snprintf(want, sizeof want, "GMSHIM_STACK_DEPTH='%s' is out of range (at most 64); using the default 16",
                 values[i]);
        const char *at = strstr(out, want);
        ck_assert_msg(at && !strstr(at + 1, "GMSHIM_STACK_DEPTH"), "one warning '%s' in:\n%s", want, out);
        free(out);
        const char *dump[] = {build_path("gmshim"), "dump", log, NULL};
        const char *none[] = {NULL};
        rc = run_program(dump, none, 0, &out);
        ck_assert_msg(rc == 0, "gmshim dump of the log (GMSHIM_STACK_DEPTH=%s) exited %d:\n%.3000s", values[i], rc,
                      out);
        ck_assert_msg(strstr(out, "GMSHIM_STACK_DEPTH=16\n") && strstr(out, " native=["),
                      "GMSHIM_STACK_DEPTH=%s: no depth 16 or no site in the log:\n%.3000s", values[i], out);
        ck_assert_msg(!strstr(out, " type_"), "GMSHIM_STACK_DEPTH=%s: a record of no known type:\n%.3000s",
                      values[i], strstr(out, " type_"));
        free(out);
        unlink(log);
        rmdir(dir);
    }
}
END_TEST

/* ---- the hostile-environment sweep ----------------------------------------------------------- */

typedef struct sweep_job {
    const char *name, *value;   /* the variable set (NULL: none, the baseline) */
    pid_t pid;
    int status;
} sweep_job_t;

/* Runs hostile_env with one variable set, in `dir` (a relative GMSHIM_LOG lands there), its stdout
 * and stderr into dir/out.K and dir/err.K. */
static pid_t sweep_spawn(const char *prog, const char *dir, const char *preload, int k, const sweep_job_t *j)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    char path[4096];
    snprintf(path, sizeof path, "%s/out.%d", dir, k);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    snprintf(path, sizeof path, "%s/err.%d", dir, k);
    int fe = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || fe < 0 || chdir(dir) != 0)
        _exit(126);
    dup2(fd, 1);
    dup2(fe, 2);
    extern char **environ;
    for (char **e = environ; *e; e++)
        if (!strncmp(*e, "GMSHIM_", 7)) {
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)strcspn(*e, "="), *e);
            unsetenv(name);
            e = environ - 1;
        }
    setenv("FAKECUDA_MEM", "1G", 1);
    /* Under TSan each exit would sleep a second (its default), for a thousand runs. */
    const char *tsan = getenv("TSAN_OPTIONS");
    snprintf(path, sizeof path, "%s%satexit_sleep_ms=0", tsan ? tsan : "", tsan && *tsan ? ":" : "");
    setenv("TSAN_OPTIONS", path, 1);
    /* A log costs a run three times as much (its pages are faulted in ahead): only where the
     * variable is the log's or the call sites' that it records. */
    snprintf(path, sizeof path, "%s/%%p.gmlog", dir);
    setenv("GMSHIM_LOG", j->name && (strstr(j->name, "LOG") || strstr(j->name, "DEPTH")) ? path : "off", 1);
    if (j->name)
        setenv(j->name, j->value, 1);
    setenv("LD_PRELOAD", preload, 1);
    execl(prog, prog, (char *)NULL);
    _exit(127);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    static char buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = 0;
    if (f)
        fclose(f);
    return buf;
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[8192];
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* For every GMSHIM_* variable of the table (and a per-device limit), values that are empty,
 * spaced, signed, hex, huge, exponents, nan/inf, tiny fractions, paths, format directives,
 * control bytes, non-ASCII and 10 KB long: the program ends as it does without the variable,
 * by no signal, with at most one line (a gmshim warning) on stderr. */
START_TEST(test_hostile_values_of_every_setting_neither_crash_nor_chatter)
{
    static char digits[10241], letters[10241];
    memset(digits, '9', sizeof digits - 1);
    memset(letters, 'A', sizeof letters - 1);
    const char *values[] = {
        "", " ", "  16", "16 ", "\t1", "+1", "-1", "-0", "0x10", "0X7fffffff", "010x", "1e3", "1e30", "1E-9",
        "nan", "NaN", "inf", "-inf", "infinity", "2147483647", "2147483648", "4294967295", "4294967296",
        "9223372036854775807", "9223372036854775808", "18446744073709551616", "99999999999999999999999999999",
        "0.0000001", "0.00001%", "1..5", "1.5.5", ".", "..", "%", "%%", "%n%n%n", "%s%s%s%s%s", "/", "//", "\\",
        "1 G", "8GiBB", "0.5G ", "5s ", "1\n2", "\x01", "\x7f", "\x1b[31m", "\xc3\xa9", "\xef\xbc\x91",
        "1\xef\xbc\xa7", "\xf0\x9f\x92\xa5", "\xff\xfe", "100%", "101%", "-50%", "0%", "1.0000000001",
        "'", "\"", "$(id)", ";", digits, letters};
    enum { NV = sizeof values / sizeof *values };
    const char *names[GM_OPT__COUNT + 1];
    int nn = 0;
    for (int i = 0; i < GM_OPT__COUNT; i++)
        names[nn++] = options_name((gm_option_t)i);
    names[nn++] = "GMSHIM_DEVICE_LIMIT_0";
    int njobs = 1 + nn * NV;
    sweep_job_t *jobs = calloc((size_t)njobs, sizeof *jobs);
    for (int v = 0; v < nn; v++)
        for (int k = 0; k < NV; k++) {
            /* A log template of "/" once made gmshim create "/.1": try such paths below the
             * run's own directory, so that a regression writes nothing outside it. */
            const char *value = values[k];
            if (!strcmp(names[v], "GMSHIM_LOG") && value[0] == '/')
                value = value[1] ? "sub//" : "./";
            jobs[1 + v * NV + k] = (sweep_job_t){.name = names[v], .value = value};
        }
    char preload[8192];
    const char *san = getenv("GMSHIM_TEST_PRELOAD");
    snprintf(preload, sizeof preload, "%s%s%s", san && *san ? san : "", san && *san ? " " : "",
             build_path("libgmshim.so"));
    char dir[256], prog[4096], base_err[512];
    snprintf(dir, sizeof dir, "%s", temp_dir());
    snprintf(prog, sizeof prog, "%s", build_path("tests/integration/hostile_env"));
    snprintf(base_err, sizeof base_err, "%s/err.0", dir);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int width = cpus < 2 ? 2 : cpus > 16 ? 16 : (int)cpus, running = 0, next = 1;
    /* The baseline first, alone: its status is what every other run must end with. */
    jobs[0].pid = sweep_spawn(prog, dir, preload, 0, &jobs[0]);
    ck_assert_int_gt(jobs[0].pid, 0);
    waitpid(jobs[0].pid, &jobs[0].status, 0);
    ck_assert_msg(WIFEXITED(jobs[0].status) && WEXITSTATUS(jobs[0].status) == 0 && !*slurp(base_err),
                  "baseline: status %#x, stderr:\n%s", jobs[0].status, slurp(base_err));
    while (next < njobs || running) {
        while (next < njobs && running < width) {
            jobs[next].pid = sweep_spawn(prog, dir, preload, next, &jobs[next]);
            ck_assert_int_gt(jobs[next].pid, 0);
            next++;
            running++;
        }
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0 && errno == EINTR)
            continue;
        ck_assert_int_gt(pid, 0);
        for (int k = 1; k < next; k++)
            if (jobs[k].pid == pid) {
                jobs[k].status = status;
                char log[512];
                snprintf(log, sizeof log, "%s/%d.gmlog", dir, (int)pid);
                unlink(log);
            }
        running--;
    }
    char report[16384];
    size_t rl = 0;
    int bad = 0;
    for (int k = 1; k < njobs; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/err.%d", dir, k);
        const char *err = slurp(path);
        int lines = 0, foreign = 0;
        for (const char *l = err; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
            lines++;
            foreign += strncmp(l, "gmshim[", 7) != 0;
        }
        int st = jobs[k].status;
        const char *why = WIFSIGNALED(st)                                      ? "killed by a signal"
                          : !WIFEXITED(st) || WEXITSTATUS(st) != WEXITSTATUS(jobs[0].status) ? "another exit status"
                          : lines > 1                                          ? "more than one line on stderr"
                          : foreign                                            ? "stderr that is not a gmshim warning"
                                                                               : NULL;
        if (!why) {
            snprintf(path, sizeof path, "%s/out.%d", dir, k);
            if (!strstr(slurp(path), "ok ("))
                why = "no 'ok' on stdout";
        }
        if (why && bad++ < 12) {
            char shown[80];
            snprintf(shown, sizeof shown, "%.60s", jobs[k].value);
            for (char *c = shown; *c; c++)
                if ((unsigned char)*c < 0x20)
                    *c = '?';
            snprintf(path, sizeof path, "%s/err.%d", dir, k);
            rl += (size_t)snprintf(report + rl, sizeof report - rl, "%s='%s': %s (status %#x):\n%.400s\n",
                                   jobs[k].name, shown, why, st, slurp(path));
            if (rl >= sizeof report)
                rl = sizeof report - 1;
        }
    }
    remove_dir(dir);
    free(jobs);
    ck_assert_msg(!bad, "%d of %d hostile settings went wrong:\n%s", bad, njobs - 1, report);
}
END_TEST

START_TEST(test_verbose_prints_the_effective_settings)
{
    const char *env[] = {"FAKECUDA_MEM=1G", "GMSHIM_VERBOSE=1", "GMSHIM_CACHE_LIMIT=1G", NULL};
    char *out = NULL;
    int rc = run("tests/integration/pool_hits", env, NULL, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "effective settings") && strstr(out, "GMSHIM_CACHE_LIMIT") &&
                  strstr(out, "1 GiB"), "no settings table:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_quiet_by_default)
{
    const char *env[] = {"FAKECUDA_MEM=1G", NULL};
    char *out = NULL;
    int rc = run("tests/integration/pool_hits", env, NULL, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "gmshim[") == NULL, "gmshim printed without being asked:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_pass_through_forwards_every_call_and_counts)
{
    const char *env[] = {"FAKECUDA_MEM=1G", "GMSHIM_POOL=0", NULL};
    char *out = NULL;
    int rc = run("tests/integration/pool_hits", env, NULL, &out);
    /* pool_hits insists on pool hits: with the pool off the driver sees every call. */
    ck_assert_msg(rc != 0 && strstr(out, "new cudaMalloc calls"), "exit %d:\n%s", rc, out);
    free(out);
    RUN_OK("tests/integration/odd_args", "FAKECUDA_MEM=1G", "GMSHIM_POOL=0");
    RUN_OK("tests/integration/threads", "FAKECUDA_MEM=4G", "GMSHIM_POOL=0");
}
END_TEST

START_TEST(test_memgetinfo_counts_the_cache_as_free)
{
    RUN_OK("tests/integration/memgetinfo", "FAKECUDA_MEM=1G");
}
END_TEST

START_TEST(test_device_limit_caps_the_pool_and_memgetinfo)
{
    const char *env[] = {"FAKECUDA_MEM=1G", "GMSHIM_DEVICE_LIMIT=256M", NULL};
    char *out = NULL;
    int rc = run("tests/integration/memgetinfo", env, "cap", &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    free(out);
    const char *env2[] = {"FAKECUDA_MEM=1G", "GMSHIM_DEVICE_LIMIT=0.25", NULL};
    rc = run("tests/integration/memgetinfo", env2, "cap", &out);
    ck_assert_msg(rc == 0, "a fraction of the device: exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_unpooled_calls_are_forwarded_and_counted)
{
    const char *env[] = {"FAKECUDA_MEM=1G", NULL};
    char *out = NULL;
    int rc = run("tests/integration/unpooled", env, NULL, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    const char *w = strstr(out, "cudaIpcGetMemHandle");
    ck_assert_msg(w != NULL, "no warning for an IPC handle on a sub-block:\n%s", out);
    ck_assert_msg(strstr(w + 1, "cudaIpcGetMemHandle") == NULL, "warned more than once:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_cache_limit_is_never_exceeded)
{
    RUN_OK("tests/integration/cache_limit", "FAKECUDA_MEM=2G", "GMSHIM_CACHE_LIMIT=64M");
}
END_TEST

/* After the last free no allocation comes to poll the fences: the trimmer does, every 10 ms
 * (docs/options.md), and fences the frees itself when they did not (GMSHIM_FENCE_FREES=0 and
 * bytes far past what is freed). The bound is 25 poll periods, for loaded and sanitized runs. */
START_TEST(test_cache_limit_holds_once_the_gpu_is_done_without_another_allocation)
{
    const char *fenced[] = {"FAKECUDA_MEM=2G", "GMSHIM_CACHE_LIMIT=64M", NULL};
    const char *unfenced[] = {"FAKECUDA_MEM=2G", "GMSHIM_CACHE_LIMIT=64M", "GMSHIM_FENCE_FREES=0",
                              "GMSHIM_FENCE_BYTES=16G", NULL};
    const char *const *envs[] = {fenced, unfenced};
    for (int i = 0; i < 2; i++) {
        char *out = NULL;
        int rc = run("tests/integration/cache_limit", envs[i], "idle", &out);
        ck_assert_msg(rc == 0, "%s: exit %d:\n%s", i ? "frees without a fence" : "fenced frees", rc, out);
        free(out);
    }
}
END_TEST

START_TEST(test_cache_limit_waits_for_the_end_of_a_capture)
{
    const char *env[] = {"FAKECUDA_MEM=2G", "GMSHIM_CACHE_LIMIT=64M", NULL};
    char *out = NULL;
    int rc = run("tests/integration/cache_limit", env, "capture", &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_max_split_changes_which_blocks_split)
{
    const char *env[] = {"FAKECUDA_MEM=2G", NULL};
    char *out = NULL;
    int rc = run("tests/integration/max_split", env, "split", &out);
    ck_assert_msg(rc == 0, "without GMSHIM_MAX_SPLIT: exit %d:\n%s", rc, out);
    free(out);
    const char *env2[] = {"FAKECUDA_MEM=2G", "GMSHIM_MAX_SPLIT=64M", NULL};
    rc = run("tests/integration/max_split", env2, "nosplit", &out);
    ck_assert_msg(rc == 0, "with GMSHIM_MAX_SPLIT=64M: exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_idle_segments_go_back_after_the_interval_not_before)
{
    RUN_OK("tests/integration/trim_idle", "FAKECUDA_MEM=1G", "GMSHIM_IDLE_RELEASE=0.6",
           "GMSHIM_EMPTY_CACHE_INTERVAL=0.1");
}
END_TEST

START_TEST(test_trimmer_makes_no_driver_call_during_a_capture)
{
    RUN_OK("tests/integration/trim_capture", "FAKECUDA_MEM=1G", "GMSHIM_EMPTY_CACHE_INTERVAL=0.05");
}
END_TEST

static char *torch_env(const char *const *env, int preload)
{
    const char *argv[] = {build_path("tests/integration/torch_env"), NULL};
    char *out = NULL;
    int rc = run_program(argv, env, preload, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    return out;
}

START_TEST(test_torch_takeover_sets_the_variable_only_when_unset)
{
    const char *own[] = {"GMSHIM_TORCH=own", NULL};
    char *out = torch_env(own, 1);
    ck_assert_msg(strstr(out, "PYTORCH_NO_CUDA_MEMORY_CACHING=1\n") != NULL, "own: %s", out);
    free(out);
    const char *preset[] = {"GMSHIM_TORCH=own", "PYTORCH_NO_CUDA_MEMORY_CACHING=0", NULL};
    out = torch_env(preset, 1);
    ck_assert_msg(strstr(out, "PYTORCH_NO_CUDA_MEMORY_CACHING=0\n") != NULL, "preset: %s", out);
    free(out);
    const char *keep[] = {"GMSHIM_TORCH=keep", NULL};
    out = torch_env(keep, 1);
    ck_assert_msg(strstr(out, "=(unset)") != NULL, "keep: %s", out);
    free(out);
    const char *dflt[] = {NULL};
    out = torch_env(dflt, 1);
    ck_assert_msg(strstr(out, "=(unset)") != NULL, "default: %s", out);
    free(out);
}
END_TEST

START_TEST(test_api_works_with_and_without_the_preload)
{
    const char *env[] = {"FAKECUDA_MEM=1G", NULL};
    char *out = NULL;
    int rc = run("tests/integration/api", env, "with", &out);
    ck_assert_msg(rc == 0, "with the preload: exit %d:\n%s", rc, out);
    free(out);
    const char *argv[] = {build_path("tests/integration/api"), "without", NULL};
    rc = run_program(argv, env, 0, &out);
    ck_assert_msg(rc == 0, "without the preload: exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_no_runtime_at_all_returns_an_error_and_one_message)
{
    const char *env[] = {NULL};
    char *out = NULL;
    int rc = run("tests/integration/no_runtime", env, NULL, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    const char *w = strstr(out, "no real CUDA runtime function");
    ck_assert_msg(w != NULL, "no message:\n%s", out);
    ck_assert_msg(strstr(w + 1, "no real CUDA runtime function") == NULL, "more than one message:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_runtime_loaded_rtld_local_is_found)
{
    char lib[4096];
    snprintf(lib, sizeof lib, "%s", build_path("fake/libcudart.so.13"));
    const char *env[] = {"FAKECUDA_MEM=1G", NULL};
    char *out = NULL;
    int rc = run("tests/integration/local_cudart", env, lib, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

/* Line of a marker comment in tests/integration/pyleak.py. */
static int marker_line(const char *marker)
{
    FILE *f = fopen("tests/integration/pyleak.py", "r");
    char line[512];
    int n = 0, found = 0;
    while (f && fgets(line, sizeof line, f)) {
        n++;
        if (strstr(line, marker)) {
            found = n;
            break;
        }
    }
    if (f)
        fclose(f);
    return found;
}

START_TEST(test_python_frames_name_the_python_lines)
{
    static const char *const pythons[] = {
        "/root/.pyenv/versions/3.13.0/bin/python3.13", "/root/.pyenv/versions/3.12.1/bin/python3.12",
        "/root/.pyenv/versions/3.11.7/bin/python3.11", "/usr/bin/python3.13", "/usr/bin/python3.12",
        "/usr/bin/python3.11"};
    int tried = 0;
    for (size_t i = 0; i < sizeof pythons / sizeof *pythons; i++) {
        if (access(pythons[i], X_OK) != 0)
            continue;
        tried++;
        const char *dir = temp_dir();
        char logenv[512], fake[4096], log[512];
        snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s/py.gmlog", dir);
        snprintf(fake, sizeof fake, "FAKE_CUDART=%s", build_path("fake/libcudart.so.13"));
        snprintf(log, sizeof log, "%s/py.gmlog", dir);
        /* CPython itself leaks at exit: not for LeakSanitizer to report in the ASan build. */
        const char *env[] = {"FAKECUDA_MEM=1G", logenv, fake, "ASAN_OPTIONS=detect_leaks=0", NULL};
        const char *argv[] = {pythons[i], "tests/integration/pyleak.py", NULL};
        char *out = NULL;
        int rc = run_program(argv, env, 1, &out);
        ck_assert_msg(rc == 0, "%s exited %d:\n%s", pythons[i], rc, out);
        free(out);
        char cli[4096];
        snprintf(cli, sizeof cli, "%s", build_path("gmshim"));
        const char *leaks[] = {cli, "leaks", "--json", log, NULL};
        const char *none[] = {NULL};
        rc = run_program(leaks, none, 0, &out);
        ck_assert_msg(rc == 0, "gmshim leaks exited %d:\n%s", rc, out);
        char *w = out; /* JSON compared without its spaces */
        for (char *r = out; *r; r++)
            if (*r != ' ')
                *w++ = *r;
        *w = 0;
        int lines[] = {marker_line("MAKE_TENSOR_LINE"), marker_line("FORWARD_LINE"), marker_line("LEAK_LINE")};
        const char *funcs[] = {"make_tensor", "Model.forward", "<module>"};
        for (int k = 0; k < 3; k++) {
            char want[256];
            snprintf(want, sizeof want, "\"function\":\"%s\",\"file\":", funcs[k]);
            const char *at = strstr(out, want);
            ck_assert_msg(at != NULL, "%s: no Python frame for %s in:\n%.2000s", pythons[i], funcs[k], out);
            char line[64];
            snprintf(line, sizeof line, "pyleak.py\",\"line\":%d}", lines[k]);
            ck_assert_msg(strstr(at, line) && strstr(at, line) - at < 300, "%s: %s not at line %d:\n%.600s",
                          pythons[i], funcs[k], lines[k], at);
        }
        ck_assert_msg(strstr(out, "\"count\":4") != NULL, "%s: the 4 kept allocations:\n%.2000s", pythons[i], out);
        free(out);
    }
    if (!tried)
        fprintf(stderr, "test_python_frames_name_the_python_lines: no CPython 3.11-3.13 here, skipped\n");
}
END_TEST

Suite *integration_suite(void)
{
    Suite *s = suite_create("integration");
    TCase *tc = tcase_create("preload");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_pool_serves_repeats_without_the_driver);
    tcase_add_test(tc, test_oom_releases_the_cache_and_retries_once);
    tcase_add_test(tc, test_freed_block_waits_for_the_kernel_still_using_it);
    tcase_add_test(tc, test_trusting_stream_order_shows_the_hazard);
    tcase_add_test(tc, test_gpu_order_new_owner_on_another_nonblocking_stream);
    tcase_add_test(tc, test_gpu_order_new_owner_on_a_blocking_stream);
    tcase_add_test(tc, test_gpu_order_new_owner_on_the_legacy_stream);
    tcase_add_test(tc, test_gpu_order_new_owner_on_the_per_thread_stream);
    tcase_add_test(tc, test_gpu_order_new_owner_on_a_stream_created_after_the_allocation);
    tcase_add_test(tc, test_gpu_order_old_owner_on_the_legacy_or_a_blocking_stream);
    tcase_add_test(tc, test_gpu_order_applies_when_two_devices_are_visible_and_one_is_used);
    tcase_add_test(tc, test_gpu_order_waits_on_the_cpu_when_two_devices_are_in_use);
    tcase_add_test(tc, test_gpu_order_stops_and_waits_when_a_second_device_comes_into_use);
    tcase_add_test(tc, test_capture_stays_valid_and_graph_memory_stays_private);
    tcase_add_test(tc, test_odd_arguments_behave_as_the_real_runtime);
    tcase_add_test(tc, test_device_reset_forgets_the_device_segments);
    tcase_add_test(tc, test_two_devices_have_separate_pools);
    tcase_add_test(tc, test_sixteen_threads_keep_blocks_apart_and_intact);
    tcase_add_test(tc, test_fork_child_leaves_the_parent_pool_alone);
    tcase_add_test(tc, test_log_pages_are_faulted_in_ahead_and_cut_back_at_exit);
    tcase_add_test(tc, test_program_without_cuda_gets_no_file_and_no_thread);
    tcase_add_test(tc, test_bad_settings_warn_once_and_keep_defaults);
    tcase_add_test(tc, test_stack_depth_of_two_to_the_31_or_more_warns_and_the_log_reads);
    tcase_add_test(tc, test_verbose_prints_the_effective_settings);
    tcase_add_test(tc, test_quiet_by_default);
    tcase_add_test(tc, test_pass_through_forwards_every_call_and_counts);
    tcase_add_test(tc, test_memgetinfo_counts_the_cache_as_free);
    tcase_add_test(tc, test_device_limit_caps_the_pool_and_memgetinfo);
    tcase_add_test(tc, test_unpooled_calls_are_forwarded_and_counted);
    tcase_add_test(tc, test_cache_limit_is_never_exceeded);
    tcase_add_test(tc, test_cache_limit_holds_once_the_gpu_is_done_without_another_allocation);
    tcase_add_test(tc, test_cache_limit_waits_for_the_end_of_a_capture);
    tcase_add_test(tc, test_max_split_changes_which_blocks_split);
    tcase_add_test(tc, test_idle_segments_go_back_after_the_interval_not_before);
    tcase_add_test(tc, test_trimmer_makes_no_driver_call_during_a_capture);
    tcase_add_test(tc, test_torch_takeover_sets_the_variable_only_when_unset);
    tcase_add_test(tc, test_api_works_with_and_without_the_preload);
    tcase_add_test(tc, test_no_runtime_at_all_returns_an_error_and_one_message);
    tcase_add_test(tc, test_runtime_loaded_rtld_local_is_found);
    tcase_add_test(tc, test_python_frames_name_the_python_lines);
    suite_add_tcase(s, tc);
    /* A thousand short runs, as many at once as there are CPUs (up to 16). */
    TCase *sweep = tcase_create("sweep");
    tcase_set_timeout(sweep, 300);
    tcase_add_test(sweep, test_hostile_values_of_every_setting_neither_crash_nor_chatter);
    suite_add_tcase(s, sweep);
    return s;
}
