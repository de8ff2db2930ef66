/* gmshim run (analyzer/run.c): the command under the preload, its exit status kept, and only
 * the logs it wrote reported. */
#include "gmlog.h"
#include "suites.h"
#include "test_analyzer_cli.h"
#include "run_torch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

START_TEST(test_run_preloads_the_shim_reports_and_keeps_the_exit_status)
{
    const char *dir = temp_dir();
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/run-%%p.gmlog", dir);
    char prog[600];
    snprintf(prog, sizeof prog, "%s", build_path("tests/integration/oom_leak"));
    const char *san = getenv("GMSHIM_TEST_PRELOAD");
    char pre[4200] = "";
    if (san && *san)
        snprintf(pre, sizeof pre, "LD_PRELOAD=%s", san);
    const char *argv[] = {build_path("gmshim"), "--color=never", "run", "-o", tmpl, "--", prog, NULL};
    const char *env[] = {"FAKECUDA_MEM=1G", "ASAN_OPTIONS=verify_asan_link_order=0", pre[0] ? pre : NULL, NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 0, &out);
    ck_assert_msg(rc == 0 && strstr(out, "expected OOM") && strstr(out, "cause    leak") && strstr(out, "gmshim run: log "),
                  "gmshim run oom_leak: exit %d\n%.3000s", rc, out);
    free(out);
    const char *argv2[] = {build_path("gmshim"), "run", "-o", tmpl, "--", "/bin/sh", "-c", "exit 7", NULL};
    rc = run_program(argv2, env, 0, &out);
    ck_assert_msg(rc == 7 && strstr(out, "wrote no log"), "the command's exit status 7 became %d:\n%.3000s", rc, out);
    free(out);
}
END_TEST

/* Only the logs the command wrote are reported: not one that was there before it started (an
 * earlier run's, though its header claims a start in the future), nor one that appears during
 * the run with a start time outside it. */
START_TEST(test_run_reports_only_the_logs_its_command_wrote)
{
    const char *dir = temp_dir();
    char tmpl[512], stale[520], copied[520], future[520];
    snprintf(tmpl, sizeof tmpl, "%s/run-%%p.gmlog", dir);
    snprintf(stale, sizeof stale, "%s/run-1.gmlog", dir);
    snprintf(copied, sizeof copied, "%s/run-2.gmlog", dir);
    snprintf(future, sizeof future, "%s/future.log", dir);
    size_t flen;
    uint8_t *fix = gm_slurp(FIXTURE, &flen);
    gmlog_file_header_t *h = (gmlog_file_header_t *)fix;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    h->start_realtime_ns = ((uint64_t)now.tv_sec + 3600) * 1000000000ull;
    gm_spew(stale, fix, flen);
    gm_spew(future, fix, flen);
    free(fix);
    char prog[600], script[2400];
    snprintf(prog, sizeof prog, "%s", build_path("tests/integration/oom_leak"));
    snprintf(script, sizeof script, "cp '%s' '%s' && exec '%s'", future, copied, prog);
    const char *san = getenv("GMSHIM_TEST_PRELOAD");
    char pre[4200] = "";
    if (san && *san)
        snprintf(pre, sizeof pre, "LD_PRELOAD=%s", san);
    const char *argv[] = {build_path("gmshim"), "--color=never", "run", "-o", tmpl, "--", "/bin/sh", "-c", script, NULL};
    const char *env[] = {"FAKECUDA_MEM=1G", "ASAN_OPTIONS=verify_asan_link_order=0", pre[0] ? pre : NULL, NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 0, &out);
    char was_there[700], outside[700];
    snprintf(was_there, sizeof was_there, "gmshim run: not reporting %s: it was there before the command started", stale);
    snprintf(outside, sizeof outside, "gmshim run: not reporting %s: its start time is not within the command's run",
             copied);
    ck_assert_msg(rc == 0 && gm_count(out, "gmshim run: log ") == 1 && !strstr(out, "combined") &&
                  strstr(out, was_there) && strstr(out, outside) && strstr(out, "cause    leak"),
                  "gmshim run beside a stale log and a copied one: exit %d\n%.4000s", rc, out);
    free(out);
}
END_TEST

/* ---- the PyTorch bridge built before the job (analyzer/run_torch.c) ------------------------ */

static void write_file_mode(const char *path, const char *text, int mode)
{
    gm_spew(path, text, strlen(text));
    ck_assert_int_eq(chmod(path, (mode_t)mode), 0);
}

/* A stub torch on PYTHONPATH (version.py, the allocator header with the hook, an empty
 * libc10_cuda.so), CUDA headers, and a compiler that builds a bridge with cc and counts its runs
 * (or fails, with `fail`). The environment entries a gmshim run needs to find them, in env[]. */
typedef struct stub_torch {
    char dir[256], env[6][600];
} stub_torch_t;

static const char *const *stub_env(stub_torch_t *t, const char *extra)
{
    static const char *e[8];
    for (int i = 0; i < 5; i++)
        e[i] = t->env[i];
    e[5] = extra;
    e[6] = NULL;
    return e;
}

static void stub_torch(stub_torch_t *t, int fail)
{
    snprintf(t->dir, sizeof t->dir, "%s", temp_dir());
    char path[512], cmd[1200], text[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/site/torch/lib %s/site/torch/include/c10/cuda %s/cuda/include/crt %s/cache",
             t->dir, t->dir, t->dir, t->dir);
    ck_assert_int_eq(system(cmd), 0);
    static const char *const files[][2] = {
        {"site/torch/__init__.py", ""}, {"site/torch/version.py", "__version__ = '2.11.0+cu130'\n"},
        {"site/torch/lib/libc10_cuda.so", ""},
        {"site/torch/include/c10/cuda/CUDACachingAllocator.h", "void attachAllocatorTraceTracker(int);\n"},
        {"cuda/include/cuda_runtime_api.h", ""}, {"cuda/include/crt/host_config.h", ""},
        {"bridge.c", "__attribute__((visibility(\"default\"))) int gmshim_torch_bridge_attach(void *e) { return 0; }\n"}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", t->dir, files[i][0]);
        gm_spew(path, files[i][1], strlen(files[i][1]));
    }
    snprintf(path, sizeof path, "%s/cxx", t->dir);
    snprintf(text, sizeof text,
             "#!/bin/sh\necho run >> %s/cxx.calls\n%s\n"
             "out=; while [ $# -gt 0 ]; do [ \"$1\" = -o ] && out=$2; shift; done\n"
             "exec cc -shared -fPIC -o \"$out\" %s/bridge.c\n", t->dir, fail ? "echo 'error: broken' >&2; exit 3" : "", t->dir);
    write_file_mode(path, text, 0755);
    snprintf(t->env[0], sizeof t->env[0], "PYTHONPATH=%s/site", t->dir);
    snprintf(t->env[1], sizeof t->env[1], "CUDA_HOME=%s/cuda", t->dir);
    snprintf(t->env[2], sizeof t->env[2], "CXX=%s/cxx", t->dir);
    snprintf(t->env[3], sizeof t->env[3], "XDG_CACHE_HOME=%s/cache", t->dir);
    snprintf(t->env[4], sizeof t->env[4], "ASAN_OPTIONS=verify_asan_link_order=0");
}

static int compiles(const stub_torch_t *t)
{
    char path[300];
    snprintf(path, sizeof path, "%s/cxx.calls", t->dir);
    FILE *f = fopen(path, "r");
    int n = 0, c;
    while (f && (c = fgetc(f)) != EOF)
        n += c == '\n';
    if (f)
        fclose(f);
    return n;
}

/* gmshim run -o DIR/x-%p.gmlog --no-report -- ARGS... in the stub's environment (+ extra). */
static int run_in(stub_torch_t *t, const char *extra, char **out, const char *const *args)
{
    char tmpl[300];
    snprintf(tmpl, sizeof tmpl, "%s/x-%%p.gmlog", t->dir);
    const char *argv[16] = {build_path("gmshim"), "run", "--no-report", "-o", tmpl, "--"};
    int n = 6;
    for (int i = 0; args[i] && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return run_program(argv, stub_env(t, extra), 0, out);
}
#define RUN_IN(t, extra, out, ...) run_in(t, extra, out, (const char *const[]){__VA_ARGS__, NULL})

START_TEST(test_run_builds_the_bridge_before_a_job_whose_python_finds_torch)
{
    stub_torch_t t;
    stub_torch(&t, 0);
    char *out;
    int rc = RUN_IN(&t, NULL, &out, "python3", "-c", "print('the job ran')");
    ck_assert_msg(rc == 0 && strstr(out, "gmshim run: building the PyTorch bridge for torch 2.11.0+cu130") &&
                  strstr(out, "PyTorch bridge built in") && strstr(out, "the job ran") && compiles(&t) == 1,
                  "exit %d, %d compiles:\n%s", rc, compiles(&t), out);
    ck_assert_msg(strstr(out, "building") < strstr(out, "the job ran"), "the job started before the build:\n%s", out);
    free(out);
    char cached[400];
    snprintf(cached, sizeof cached, "ls %s/cache/gmshim/torch/torch-2.11.0+cu130-*.so >/dev/null", t.dir);
    ck_assert_msg(system(cached) == 0, "no bridge in the cache");
    rc = RUN_IN(&t, NULL, &out, "python3", "-c", "print('the job ran')");
    ck_assert_msg(rc == 0 && !strstr(out, "PyTorch bridge") && compiles(&t) == 1,
                  "a cached bridge is built again or spoken of (exit %d, %d compiles):\n%s", rc, compiles(&t), out);
    free(out);
}
END_TEST

START_TEST(test_run_a_failed_bridge_build_never_stops_the_job)
{
    stub_torch_t t;
    stub_torch(&t, 1);
    char *out;
    int rc = RUN_IN(&t, NULL, &out, "python3", "-c", "import sys; print('the job ran'); sys.exit(5)");
    ck_assert_msg(rc == 5 && strstr(out, "the PyTorch bridge was not built") && strstr(out, "status 3") &&
                  strstr(out, "the job ran"), "exit %d:\n%s", rc, out);
    free(out);
    /* the failure is remembered (its build log): the next run neither compiles nor speaks */
    rc = RUN_IN(&t, NULL, &out, "python3", "-c", "print('the job ran')");
    ck_assert_msg(rc == 0 && !strstr(out, "PyTorch bridge") && compiles(&t) == 1, "exit %d, %d compiles:\n%s", rc,
                  compiles(&t), out);
    free(out);
}
END_TEST

START_TEST(test_run_builds_nothing_without_a_compiler_torch_or_the_cache_kept)
{
    stub_torch_t t;
    stub_torch(&t, 0);
    char *out, nocc[300], notorch[300];
    snprintf(nocc, sizeof nocc, "CXX=%s/no-such-c++", t.dir);
    snprintf(notorch, sizeof notorch, "PYTHONPATH=%s/cuda", t.dir);
    const char *cases[] = {nocc, notorch, "GMSHIM_TORCH=own", "GMSHIM_TORCH=segments", "PYTORCH_NO_CUDA_MEMORY_CACHING=1"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = RUN_IN(&t, cases[i], &out, "python3", "-c", "print('the job ran')");
        ck_assert_msg(rc == 0 && !strstr(out, "PyTorch bridge") && strstr(out, "the job ran") && compiles(&t) == 0,
                      "%s: exit %d, %d compiles:\n%s", cases[i], rc, compiles(&t), out);
        free(out);
    }
}
END_TEST

/* The job's python: the command when it is one, its #! line's (env and its options skipped),
 * else PATH's python3. */
START_TEST(test_run_takes_the_python_of_the_command_or_its_shebang)
{
    const char *dir = temp_dir();
    char py[300], script[300], envscript[300], shell[300], got[512], want[512];
    snprintf(py, sizeof py, "%s/python3.99", dir);
    write_file_mode(py, "#!/bin/sh\n", 0755);
    snprintf(script, sizeof script, "%s/torchrun", dir);
    char text[400];
    snprintf(text, sizeof text, "#!%s\nimport sys\n", py);
    write_file_mode(script, text, 0755);
    snprintf(envscript, sizeof envscript, "%s/accelerate", dir);
    write_file_mode(envscript, "#!/usr/bin/env -S PYTHONUNBUFFERED=1 python3 -u\n", 0755);
    snprintf(shell, sizeof shell, "%s/train.sh", dir);
    write_file_mode(shell, "#!/bin/sh\npython3 train.py\n", 0755);
    ck_assert_msg(run_torch_python(py, got, sizeof got) == 0 && !strcmp(got, py), "python itself: %s", got);
    ck_assert_msg(run_torch_python(script, got, sizeof got) == 0 && !strcmp(got, py), "a #! python: %s", got);
    ck_assert_msg(run_torch_python("python3", want, sizeof want) == 0 && want[0] == '/', "PATH's python3: %s", want);
    ck_assert_msg(run_torch_python(envscript, got, sizeof got) == 0 && !strcmp(got, want), "#!/usr/bin/env: %s", got);
    ck_assert_msg(run_torch_python(shell, got, sizeof got) == 0 && !strcmp(got, want), "a shell script: %s", got);
    ck_assert_msg(run_torch_find(py, got, sizeof got) == -1, "a python that says nothing found torch at '%s'", got);
}
END_TEST

Suite *analyzer_run_suite(void)
{
    Suite *s = suite_create("analyzer_run");
    TCase *tc = tcase_create("run");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_run_preloads_the_shim_reports_and_keeps_the_exit_status);
    tcase_add_test(tc, test_run_reports_only_the_logs_its_command_wrote);
    tcase_add_test(tc, test_run_builds_the_bridge_before_a_job_whose_python_finds_torch);
    tcase_add_test(tc, test_run_a_failed_bridge_build_never_stops_the_job);
    tcase_add_test(tc, test_run_builds_nothing_without_a_compiler_torch_or_the_cache_kept);
    tcase_add_test(tc, test_run_takes_the_python_of_the_command_or_its_shebang);
    suite_add_tcase(s, tc);
    return s;
}
