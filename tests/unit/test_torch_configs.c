/* PyTorch as people configure it, end to end on the fake runtime: the stand-in allocator of
 * tests/fake_torch built with expandable segments (no cudaMalloc, memory mapped through the driver
 * calls of cudaGetDriverEntryPointByVersion) as a torch package's libc10_cuda.so, the real bridge
 * built against it at first use, tests/integration/torch_expandable under the preload, then the
 * log and the CLI's reports: the bridge attaches at the first mapping, every tensor and mapping is
 * logged, and an OOM under PyTorch's memory fraction is named and replayed as that cap (the model of
 * PyTorch's allocator reproduces an expandable run); with
 * PyTorch's cache kept, GMSHIM_WARN follows the tensors: a leak inside a cached segment is warned
 * before its OOM at the line that keeps the tensor, steady loops never are. */
#include "replay_torch.h"
#include "suites.h"
#include "test_analyzer_cli.h"
#include "torchtest.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A torch package in the scratch directory: version.py, the stand-in's header, its allocator
 * library (with expandable segments) as lib/libc10_cuda.so, and $CXX a compiler that builds the
 * real bridge against them. Returns the library's path. */
static const char *expandable_torch(void)
{
    static char lib[PATH_MAX + 64];
    char root[PATH_MAX], dir[PATH_MAX + 32], path[PATH_MAX + 96], cmd[8 * PATH_MAX], fake[PATH_MAX];
    ck_assert_msg(realpath(".", root) && access("shim/torch/bridge.cpp", R_OK) == 0, "run from the repository root");
    ck_assert_msg(realpath(build_path("fake"), fake), "no fake runtime in %s", build_path("fake"));
    snprintf(dir, sizeof dir, "%s/site-packages/torch", scratch());
    snprintf(path, sizeof path, "%s/lib", dir);
    mkdir_p(path);
    snprintf(path, sizeof path, "%s/include/c10/cuda", dir);
    mkdir_p(path);
    snprintf(path, sizeof path, "%s/version.py", dir);
    write_text(path, "__version__ = '2.11.0+test'\n");
    snprintf(cmd, sizeof cmd, "cp '%s/tests/fake_torch/c10/cuda/CUDACachingAllocator.h' '%s/include/c10/cuda/'", root, dir);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    snprintf(lib, sizeof lib, "%s/lib/libc10_cuda.so", dir);
    const char *cuda = getenv("CUDA_HOME") ? getenv("CUDA_HOME") : "/usr/local/cuda";
    snprintf(cmd, sizeof cmd,
             "c++ -std=c++17 -O1 -fPIC -shared -DGM_MOCK_EXPANDABLE -I'%s/tests/fake_torch' -I'%s/include' "
             "'%s/tests/fake_torch/mock_c10.cpp' -o '%s' -L'%s' -lcudart",
             root, cuda, root, lib, fake);
    ck_assert_msg(system(cmd) == 0, "cannot build the stand-in allocator: %s", cmd);
    char script[8 * PATH_MAX];
    snprintf(path, sizeof path, "%s/cxx-bridge", scratch());
    snprintf(script, sizeof script,
             "#!/bin/sh\nout=; while [ $# -gt 0 ]; do [ \"$1\" = -o ] && out=$2; shift; done\n"
             "exec c++ -std=c++17 -O1 -fPIC -shared -fvisibility=hidden -w -I'%s/tests/fake_torch' -I'%s/shim' "
             "'%s/shim/torch/bridge.cpp' -o \"$out\" -L'%s/lib' -lc10_cuda -Wl,-rpath,'%s/lib'\n",
             root, root, root, dir, dir);
    write_text(path, script);
    chmod(path, 0755);
    setenv("CXX", path, 1);
    snprintf(path, sizeof path, "%s/cache", scratch());
    setenv("XDG_CACHE_HOME", path, 1);
    return lib;
}

/* The fake device's memory: the stand-in reserves 4 GiB of addresses, so a device larger than that
 * runs out of addresses first, which PyTorch (1.125 x the device) never does. */
static const char *fake_mem = "FAKECUDA_MEM=8G";

/* Runs torch_expandable under the preload with a log in the scratch directory (its path in
 * `log`); its exit status, the output in *out. */
static int run_expandable(const char *lib, const char *mode, const char *fraction, char *log, size_t len, char **out)
{
    snprintf(log, len, "%s/run.gmlog", scratch());
    char logenv[PATH_MAX + 16], prog[PATH_MAX];
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
    snprintf(prog, sizeof prog, "%s", build_path("tests/integration/torch_expandable"));
    const char *argv[] = {prog, lib, mode, fraction, NULL};
    const char *env[] = {logenv, fake_mem, NULL};
    return run_program(argv, env, 1, out);
}

/* Expandable segments make no cudaMalloc: the bridge attaches at PyTorch's first mapping, so the
 * log has every tensor, free and mapping of the run. */
START_TEST(test_expandable_segments_attach_the_bridge_at_the_first_mapping)
{
    const char *lib = expandable_torch();
    char log[PATH_MAX + 16], *out = NULL;
    int rc = run_expandable(lib, "tensors", NULL, log, sizeof log, &out);
    ck_assert_msg(rc == 0, "torch_expandable exited %d:\n%s", rc, out);
    counts_t c = read_back(log);
    /* PyTorch's own mappings are the bridge's events, never a library's memory besides. */
    ck_assert_msg(c.by_type[GMLOG_ALLOC] == 0, "a cudaMalloc or a library's mapping was logged: %u",
                  c.by_type[GMLOG_ALLOC]);
    ck_assert_msg(c.by_type[GMLOG_T_ALLOC] == 2 && c.by_type[GMLOG_T_FREE_REQUESTED] == 2 &&
                      c.by_type[GMLOG_T_FREE_COMPLETED] == 2,
                  "tensors %u, frees %u/%u:\n%s", c.by_type[GMLOG_T_ALLOC], c.by_type[GMLOG_T_FREE_REQUESTED],
                  c.by_type[GMLOG_T_FREE_COMPLETED], out);
    ck_assert_msg(c.by_type[GMLOG_T_SEGMENT_MAP] == 2 && c.by_type[GMLOG_T_SEGMENT_UNMAP] == 1,
                  "maps %u, unmaps %u", c.by_type[GMLOG_T_SEGMENT_MAP], c.by_type[GMLOG_T_SEGMENT_UNMAP]);
    ck_assert_msg(c.sited[GMLOG_T_ALLOC] == 2, "tensors with a site: %u", c.sited[GMLOG_T_ALLOC]);
    free(out);
    rc = gm(&out, "--json", "summary", log);
    ck_assert_msg(rc == 0 && !strstr(out, "\"term\":\"library\""), "the card names a library: %d\n%s", rc, out);
    free(out);
}
END_TEST

/* A loop that keeps a tensor per step under expandable segments dies of the driver: the OOM is a
 * leak, at the line that keeps the tensor, decided by the model of PyTorch's expandable segments,
 * which fails there too. On a device larger
 * than the stand-in's 4 GiB of addresses the stand-in runs out of addresses first, which PyTorch
 * would not: the model gets past that OOM and the recorded figures decide, said so; there one
 * segment grew (no free pieces between ranges). */
START_TEST(test_an_expandable_leak_is_a_leak_at_its_line)
{
    const char *lib = expandable_torch();
    const char *mem[] = {"FAKECUDA_MEM=2G", "FAKECUDA_MEM=8G"};
    const char *says[] = {"under the recorded settings it fails here too",
                          "the model of PyTorch's expandable segments got past it"};
    for (int i = 0; i < 2; i++) {
        char log[PATH_MAX + 16], *out = NULL;
        fake_mem = mem[i];
        int rc = run_expandable(lib, "leak", "0", log, sizeof log, &out);
        fake_mem = "FAKECUDA_MEM=8G";
        ck_assert_msg(rc == 0 && strstr(out, "oom at step"), "torch_expandable exited %d:\n%s", rc, out);
        free(out);
        rc = gm(&out, "--color=never", "oom", log);
        ck_assert_msg(rc == 0 && strstr(out, "cause    leak") && strstr(out, "kept_activation") && strstr(out, says[i]) &&
                          (i == 0 || !strstr(out, "inactive split blocks")),
                      "%s: oom: %d\n%s", mem[i], rc, out);
        free(out);
        unlink(log); /* the next run's log takes the same name */
    }
}
END_TEST

/* Under set_per_process_memory_fraction the OOM names PyTorch's fraction, not the driver, and
 * whatif replays under it: the run that died never "fits as it ran", and its leak is never fixed
 * by a larger fraction. */
START_TEST(test_an_oom_under_pytorchs_memory_fraction_names_it_and_whatif_keeps_it)
{
    const char *lib = expandable_torch();
    char log[PATH_MAX + 16], *out = NULL;
    int rc = run_expandable(lib, "leak", "0.03", log, sizeof log, &out);
    ck_assert_msg(rc == 0 && strstr(out, "oom at step"), "torch_expandable exited %d:\n%s", rc, out);
    free(out);
    rc = gm(&out, "--color=never", "oom", log);
    ck_assert_msg(rc == 0 && strstr(out, "PyTorch's memory fraction 0.03 = ") &&
                      !strstr(out, "free in the driver") && strstr(out, "cause    leak"),
                  "oom: %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "--color=never", "whatif", log);
    /* A leak: no raised fraction is ever its remedy (advice.c), only the device that lasts. */
    ck_assert_msg(!strstr(out, "fits as it ran") && !strstr(out, "<- recommended") &&
                      strstr(out, "no setting is a remedy"), "whatif: %d\n%s", rc, out);
    free(out);
}
END_TEST

/* torch_expandable MODE under the preload with GMSHIM_WARN=1 on a 2 GiB device (the brief steps'
 * mode: 64 GiB of memory and of the stand-in's addresses, for the tens of readings before the OOM
 * that a real loop of brief steps has); its output. */
static char *run_warn(const char *lib, const char *mode)
{
    int brief = !strcmp(mode, "warn-leak-brief");
    const char *mem = brief ? "FAKECUDA_MEM=64G" : "FAKECUDA_MEM=2G";
    char logenv[PATH_MAX + 16], prog[PATH_MAX], *out = NULL;
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s/warn.gmlog", scratch());
    snprintf(prog, sizeof prog, "%s", build_path("tests/integration/torch_expandable"));
    const char *argv[] = {prog, lib, mode, NULL};
    const char *env[] = {logenv, mem, "GMSHIM_WARN=1", brief ? "MOCK_C10_RESERVE_GIB=64" : NULL, NULL};
    int rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0, "torch_expandable %s exited %d:\n%.3000s", mode, rc, out);
    return out;
}

static unsigned occurrences(const char *hay, const char *needle)
{
    unsigned n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

#define TENSOR_WARN "leak suspected on device 0: +16.0 MiB per step at warn_kept_tensor (torch_expandable); "

/* The loop keeps 16 MiB a step inside a GiB PyTorch mapped once and reuses: its segment does not
 * grow while the warning comes, once, naming the tensor's line, well before the OOM, with the
 * steps left those the device had. */
/* `exact`: the segment did not grow by the warning and the estimate is within its steps (the brief
 * steps' stand-in maps ahead of its reuse, so neither holds there). */
static void check_tensor_leak_warned(const char *mode, int exact)
{
    const char *lib = expandable_torch();
    char *out = run_warn(lib, mode);
    const char *w = strstr(out, TENSOR_WARN), *oom = strstr(out, "oom at step ");
    ck_assert_msg(w && oom && w < oom && occurrences(out, "leak suspected") == 1, "not one warning before the OOM:\n%.3000s",
                  strstr(out, "leak suspected") ? strstr(out, "leak suspected") : out);
    unsigned warned = 0, mapped = 0, first = 0, oom_step = (unsigned)atoi(oom + strlen("oom at step "));
    const char *one = strstr(out, "step 1 mapped ");
    if (one)
        sscanf(one, "step 1 mapped %u", &first);
    for (const char *p = out; (p = strstr(p, "step ")) && p < w; p += 5)
        if (p == out || p[-1] == '\n')
            sscanf(p, "step %u mapped %u", &warned, &mapped);
    const char *near = w - out > 1500 ? w - 1500 : out; /* the lines before the warning */
    ck_assert_msg(warned && first >= 1024 && (mapped == first || !exact) && warned * 2 < oom_step,
                  "warned at step %u with %u MiB mapped (%u at first), OOM at step %u:\n%.3000s", warned, mapped,
                  first, oom_step, near);
    const char *paren = strchr(w, '(');
    paren = paren ? strchr(paren + 1, '(') : NULL; /* the site's, then the steps' */
    unsigned est = paren ? (unsigned)atoi(paren + 1) : 0, real = oom_step - warned;
    /* the estimate counts to the whole device; the OOM comes a step's activations (144 MiB, 9 steps)
     * and the program's own 64 MiB (4 steps) sooner */
    ck_assert_msg(!exact || (est >= real && est <= real + 16), "%u steps estimated, %u left in fact:\n%s", est, real, w);
    free(out);
}

START_TEST(test_a_leak_inside_a_cached_segment_is_warned_from_the_tensors)
{
    check_tensor_leak_warned("warn-leak", 1);
}
END_TEST

/* Steps of 0.3 ms, thirty to one of the warning thread's readings: the sites' table is armed and the
 * verdict due in one reading, before any tensor was kept; the verdict waits until tensors kept
 * since have outlived the troughs of two readings and names the line (on the H100 a 64 MiB-a-step
 * loop was warned "at an unknown site", run 122). */
START_TEST(test_a_leak_of_brief_steps_names_its_tensors_line)
{
    check_tensor_leak_warned("warn-leak-brief", 0);
}
END_TEST

START_TEST(test_steady_tensor_loops_are_never_warned)
{
    const char *lib = expandable_torch();
    static const char *const modes[] = {"warn-steady", "warn-noisy"};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        char *out = run_warn(lib, modes[i]);
        ck_assert_msg(!strstr(out, "leak suspected") && strstr(out, "done 60 steps"), "%s:\n%s", modes[i], out);
        free(out);
    }
}
END_TEST

/* From Python (tests/integration/pytorchwarn.py drives the stand-in as PyTorch would): the site
 * is train_step's line that keeps the tensor, not the helper whose activations come and go. */
START_TEST(test_a_python_leak_with_the_cache_kept_names_its_line)
{
    const char *python = frames_python();
    if (!python)
        return; /* no CPython whose frames gmshim reads: nothing to check here */
    const char *lib = expandable_torch();
    static char src[8192];
    FILE *f = fopen("tests/integration/pytorchwarn.py", "r");
    ck_assert_msg(f != NULL, "tests/integration/pytorchwarn.py is missing (run from the repository root)");
    src[fread(src, 1, sizeof src - 1, f)] = 0;
    fclose(f);
    const char *at = strstr(src, "# LEAK_LINE");
    ck_assert_msg(at != NULL, "pytorchwarn.py has no LEAK_LINE");
    unsigned line = 1;
    for (const char *p = src; p < at; p++)
        line += *p == '\n';
    char fake[PATH_MAX + 16], logenv[PATH_MAX + 16], want[160], *out = NULL;
    snprintf(fake, sizeof fake, "FAKE_CUDART=%s", build_path("fake/libcudart.so.13"));
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s/py.gmlog", scratch());
    const char *env[] = {"FAKECUDA_MEM=2G", "GMSHIM_WARN=1", fake, logenv, "ASAN_OPTIONS=detect_leaks=0", NULL};
    const char *argv[] = {python, "tests/integration/pytorchwarn.py", lib, NULL};
    int rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0, "%s exited %d:\n%s", python, rc, out);
    snprintf(want, sizeof want, "leak suspected on device 0: +16.0 MiB per step at train_step (pytorchwarn.py:%u); ",
             line);
    const char *w = strstr(out, want), *oom = strstr(out, "oom at step");
    ck_assert_msg(w && oom && w < oom && occurrences(out, "leak suspected") == 1, "not one '%s' before the OOM:\n%s",
                  want, out);
    free(out);
}
END_TEST

/* The expandable-segments model on a log recorded under expandable segments: replayed under the
 * log's own settings it maps what the run mapped, within 2 % of its peak, and dies at the same
 * OutOfMemoryError (the driver's room, then PyTorch's memory fraction). */
START_TEST(test_the_expandable_model_reproduces_a_recorded_expandable_run)
{
    const char *lib = expandable_torch();
    const char *fractions[] = {"0", "0.03"};
    fake_mem = "FAKECUDA_MEM=2G"; /* the driver's room runs out, not the stand-in's addresses */
    for (int i = 0; i < 2; i++) {
        char log[PATH_MAX + 16], *out = NULL;
        int rc = run_expandable(lib, "leak", fractions[i], log, sizeof log, &out);
        ck_assert_msg(rc == 0 && strstr(out, "oom at step"), "torch_expandable exited %d:\n%s", rc, out);
        free(out);
        rd_log_t lf;
        rt_log_t l;
        ck_assert_msg(rd_open_path(&lf, log) == 0, "%s", log);
        ck_assert_msg(replay_torch_load(&l, &lf, 0) == 0, "no tensors in %s", log);
        ck_assert_msg(l.conf.expandable, "the log's mappings did not say expandable segments");
        rt_result_t r = replay_torch_run(&l, &l.conf);
        uint64_t rec = l.peak_reserved_recorded, got = r.peak_reserved;
        uint64_t off = got > rec ? got - rec : rec - got;
        ck_assert_msg(rec && off * 50 <= rec, "fraction %s: modelled %llu, recorded %llu", fractions[i],
                      (unsigned long long)got, (unsigned long long)rec);
        ck_assert_msg(l.nooms == 1 && r.recorded_failed == 1 && r.new_failures == 0,
                      "fraction %s: %llu of %llu OOMs reproduced, %llu new", fractions[i],
                      (unsigned long long)r.recorded_failed, (unsigned long long)l.nooms,
                      (unsigned long long)r.new_failures);
        replay_torch_free(&l);
        rd_close(&lf);
        unlink(log);
    }
    fake_mem = "FAKECUDA_MEM=8G";
}
END_TEST

Suite *torch_configs_suite(void)
{
    Suite *s = suite_create("torch_configs");
    TCase *tc = tcase_create("expandable");
    tcase_add_checked_fixture(tc, new_scratch, NULL);
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_expandable_segments_attach_the_bridge_at_the_first_mapping);
    tcase_add_test(tc, test_an_expandable_leak_is_a_leak_at_its_line);
    tcase_add_test(tc, test_an_oom_under_pytorchs_memory_fraction_names_it_and_whatif_keeps_it);
    tcase_add_test(tc, test_a_leak_inside_a_cached_segment_is_warned_from_the_tensors);
    tcase_add_test(tc, test_a_leak_of_brief_steps_names_its_tensors_line);
    tcase_add_test(tc, test_steady_tensor_loops_are_never_warned);
    tcase_add_test(tc, test_a_python_leak_with_the_cache_kept_names_its_line);
    tcase_add_test(tc, test_the_expandable_model_reproduces_a_recorded_expandable_run);
    suite_add_tcase(s, tc);
    return s;
}
