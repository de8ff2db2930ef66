/* The PyTorch bridge's C side without torch: gmshim_torch_event's records (a fake bridge replays
 * a TraceEntry stream, tests/fixtures/torch_trace.txt: see its header), and the
 * loader's decisions on fake torch trees with stub compilers (shim/torchload.c). */
#include "suites.h"
#include "evlog.h"
#include "init.h"
#include "options.h"
#include "reader.h"
#include "stacks.h"
#include "torchev.h"
#include "torchload.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIXTURE "tests/fixtures/torch_trace.txt"

/* One scratch directory per test (temp_dir() makes a new one at each call). */
static char scratch_dir[256];

static void new_scratch(void)
{
    snprintf(scratch_dir, sizeof scratch_dir, "%s", temp_dir());
}

static const char *scratch(void)
{
    return scratch_dir;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

static void mkdir_p(const char *path)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
}

/* A log of this test process (each test runs in its own fork) with sites on. */
static const char *open_log(void)
{
    static char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/torch.gmlog", scratch());
    setenv("GMSHIM_LOG", path, 1);
    options_reset();
    evlog_open();
    ck_assert_msg(evlog_enabled(), "the log %s did not open", path);
    stacks_init();
    return path;
}

typedef struct counts {
    unsigned by_type[GMLOG_TYPE_MAX + 1];
    unsigned sited[GMLOG_TYPE_MAX + 1];
    gmlog_tensor_t first_alloc;
} counts_t;

static counts_t read_back(const char *path)
{
    evlog_close(GMLOG_CLOSE_EXIT);
    counts_t c;
    memset(&c, 0, sizeof c);
    rd_log_t lf;
    ck_assert_msg(rd_open_path(&lf, path) == 0, "cannot read %s back", path);
    rd_rec_t r;
    while (rd_next(&lf, &r)) {
        if (r.type > GMLOG_TYPE_MAX)
            continue;
        c.by_type[r.type]++;
        if (r.type >= GMLOG_T_ALLOC && ((const gmlog_tensor_t *)r.p)->site)
            c.sited[r.type]++;
        if (r.type == GMLOG_T_ALLOC && c.by_type[r.type] == 1)
            memcpy(&c.first_alloc, r.p, sizeof c.first_alloc);
    }
    ck_assert_msg(lf.unknown_records == 0 && !lf.partial, "%llu unknown records, partial %d",
                  (unsigned long long)lf.unknown_records, lf.partial);
    rd_close(&lf);
    return c;
}

/* ---- the entry point ---------------------------------------------------------------------- */

/* Replays the recorded stream; returns the events of each action and the first ALLOC's fields. */
static unsigned replay(const char *path, unsigned per_action[9], gmshim_torch_event_t *first_alloc)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "the fixture %s is missing (run from the repository root)", path);
    char line[256];
    unsigned n = 0;
    while (fgets(line, sizeof line, f)) {
        gmshim_torch_event_t ev;
        memset(&ev, 0, sizeof ev);
        ev.size = sizeof ev;
        if (line[0] == '#' || sscanf(line, "%d %d %llx %llu %llx %u", &ev.action, &ev.device, &ev.addr,
                                     &ev.bytes, &ev.stream, &ev.pool) != 6)
            continue;
        ck_assert_msg(ev.action >= 1 && ev.action <= 8, "fixture action %d", ev.action);
        if (ev.action == GMSHIM_TORCH_ALLOC && !per_action[GMSHIM_TORCH_ALLOC])
            *first_alloc = ev;
        per_action[ev.action]++;
        ck_assert_msg(gmshim_torch_event(&ev) == 0, "event %u (action %d) refused", n, ev.action);
        n++;
    }
    fclose(f);
    return n;
}

START_TEST(test_a_recorded_trace_becomes_one_record_per_event)
{
    const char *log = open_log();
    unsigned per[9] = {0};
    gmshim_torch_event_t first;
    unsigned n = replay(FIXTURE, per, &first);
    ck_assert_msg(n > 100 && per[GMSHIM_TORCH_ALLOC] > 0 && per[GMSHIM_TORCH_SEGMENT_ALLOC] > 0,
                  "the fixture holds %u events, %u allocs, %u segments", n, per[1], per[4]);
    counts_t c = read_back(log);
    for (int a = 1; a <= 8; a++)
        ck_assert_msg(c.by_type[torchev_record_type(a)] == per[a], "action %d: %u events, %u records", a,
                      per[a], c.by_type[torchev_record_type(a)]);
    ck_assert_msg(c.first_alloc.addr == first.addr && c.first_alloc.size == first.bytes &&
                  c.first_alloc.stream == first.stream && c.first_alloc.h.device == first.device,
                  "first alloc: logged %#llx %llu stream %#llx dev %u, replayed %#llx %llu %#llx %d",
                  (unsigned long long)c.first_alloc.addr, (unsigned long long)c.first_alloc.size,
                  (unsigned long long)c.first_alloc.stream, c.first_alloc.h.device, first.addr, first.bytes,
                  first.stream, first.device);
    ck_assert_msg(torchev_count() == n, "counted %llu of %u", (unsigned long long)torchev_count(), n);
}
END_TEST

START_TEST(test_allocations_carry_a_site_and_completed_frees_none)
{
    const char *log = open_log();
    unsigned per[9] = {0};
    gmshim_torch_event_t first;
    replay(FIXTURE, per, &first);
    counts_t c = read_back(log);
    ck_assert_msg(c.sited[GMLOG_T_ALLOC] == per[GMSHIM_TORCH_ALLOC] && c.by_type[GMLOG_SITE] > 0,
                  "%u of %u allocs have a site; %u site records", c.sited[GMLOG_T_ALLOC], per[1],
                  c.by_type[GMLOG_SITE]);
    ck_assert_msg(c.sited[GMLOG_T_FREE_COMPLETED] == 0, "%u completed frees have a site",
                  c.sited[GMLOG_T_FREE_COMPLETED]);
}
END_TEST

START_TEST(test_bad_events_are_refused_and_write_nothing)
{
    const char *log = open_log();
    gmshim_torch_event_t ev;
    memset(&ev, 0, sizeof ev);
    ck_assert_msg(gmshim_torch_event(NULL) == -1, "NULL accepted");
    ev.action = GMSHIM_TORCH_ALLOC;
    ev.size = 8; /* a caller from before the fields it needs */
    ck_assert_msg(gmshim_torch_event(&ev) == -1, "a too small event accepted");
    ev.size = sizeof ev;
    ev.action = 0;
    ck_assert_msg(gmshim_torch_event(&ev) == -1, "action 0 accepted");
    ev.action = 99; /* a newer bridge's action (SNAPSHOT, USER_DEFINED...) */
    ck_assert_msg(gmshim_torch_event(&ev) == -1, "action 99 accepted");
    counts_t c = read_back(log);
    for (int t = GMLOG_T_ALLOC; t <= GMLOG_T_OOM; t++)
        ck_assert_msg(c.by_type[t] == 0, "type %d: %u records", t, c.by_type[t]);
}
END_TEST

START_TEST(test_without_a_log_events_are_dropped_quietly)
{
    gmshim_torch_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.size = sizeof ev;
    ev.action = GMSHIM_TORCH_ALLOC;
    ck_assert_msg(gmshim_torch_event(&ev) == -1 && torchev_count() == 0, "recorded with no log");
}
END_TEST

START_TEST(test_a_fork_child_records_nothing)
{
    const char *log = open_log();
    gmshim_torch_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.size = sizeof ev;
    ev.action = GMSHIM_TORCH_ALLOC;
    int saved = gm_state;
    gm_state = GM_CHILD; /* what fork_child sets: the parent's log is not the child's */
    int rc = gmshim_torch_event(&ev);
    gm_state = saved;
    counts_t c = read_back(log);
    ck_assert_msg(rc == -1 && c.by_type[GMLOG_T_ALLOC] == 0, "a fork child logged (rc %d, %u records)", rc,
                  c.by_type[GMLOG_T_ALLOC]);
}
END_TEST

/* ---- the loader ------------------------------------------------------------------------- */

/* A torch package under the test's directory: lib/libc10_cuda.so (empty), version.py, the
 * allocator header (with the hook or not). Returns the path of libc10_cuda.so. */
static const char *fake_torch(const char *version_py, int with_hook, int with_headers)
{
    static char c10[PATH_MAX + 32];
    char dir[PATH_MAX], path[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/site-packages/torch", scratch());
    snprintf(path, sizeof path, "%s/lib", dir);
    mkdir_p(path);
    snprintf(c10, sizeof c10, "%s/lib/libc10_cuda.so", dir);
    write_text(c10, "");
    snprintf(path, sizeof path, "%s/version.py", dir);
    write_text(path, version_py);
    if (with_headers) {
        snprintf(path, sizeof path, "%s/include/c10/cuda", dir);
        mkdir_p(path);
        snprintf(path, sizeof path, "%s/include/c10/cuda/CUDACachingAllocator.h", dir);
        write_text(path, with_hook ? "void attachAllocatorTraceTracker(AllocatorTraceTracker t);\n"
                                   : "void attachOutOfMemoryObserver(OutOfMemoryObserver o);\n");
    }
    return c10;
}

#define TORCH_2_11 "from typing import Optional\n__all__ = ['__version__', 'debug']\n" \
                   "__version__ = '2.11.0+cu130'\ndebug = False\n"

START_TEST(test_the_install_is_read_from_the_allocator_library_path)
{
    const char *c10 = fake_torch(TORCH_2_11, 1, 1);
    torch_install_t t;
    char why[512] = "";
    ck_assert_msg(torchload_find_install(c10, &t, why, sizeof why) == 0, "refused: %s", why);
    ck_assert_msg(!strcmp(t.version, "2.11.0+cu130"), "version '%s'", t.version);
    ck_assert_msg(strstr(t.root, "/site-packages/torch") && t.cuda_include[0], "root %s, CUDA %s", t.root,
                  t.cuda_include);
    char name[128];
    torchload_bridge_name(&t, name, sizeof name);
    ck_assert_msg(!strncmp(name, "torch-2.11.0+cu130-", 19) && strstr(name, ".so"), "name %s", name);
    ck_assert_msg(torchload_is_allocator_lib(c10) && !torchload_is_allocator_lib("/x/libtorch_cuda.so"),
                  "allocator library not told apart");
}
END_TEST

START_TEST(test_an_annotated_version_is_read)
{
    const char *c10 = fake_torch("__version__: str = \"2.4.1\"\n", 1, 1);
    torch_install_t t;
    char why[512] = "";
    ck_assert_msg(torchload_find_install(c10, &t, why, sizeof why) == 0 && !strcmp(t.version, "2.4.1"),
                  "version '%s' (%s)", t.version, why);
}
END_TEST

START_TEST(test_a_torch_without_the_hook_is_refused_by_name)
{
    const char *c10 = fake_torch("__version__ = '2.0.1'\n", 0, 1);
    char why[512] = "";
    ck_assert_msg(torchload_attach_for(c10, 1, why, sizeof why) == -1 && strstr(why, "2.0.1") &&
                  strstr(why, "no allocator trace tracker"), "why: %s", why);
}
END_TEST

START_TEST(test_a_torch_without_headers_is_refused)
{
    const char *c10 = fake_torch("__version__ = '2.11.0'\n", 1, 0);
    char why[512] = "";
    ck_assert_msg(torchload_attach_for(c10, 1, why, sizeof why) == -1 && strstr(why, "no C++ headers"),
                  "why: %s", why);
}
END_TEST

START_TEST(test_no_version_file_is_refused)
{
    const char *c10 = fake_torch("debug = False\n", 1, 1);
    char why[512] = "";
    ck_assert_msg(torchload_attach_for(c10, 1, why, sizeof why) == -1 && strstr(why, "no torch version"),
                  "why: %s", why);
}
END_TEST

/* A stub compiler: builds the fake bridge below with cc, whatever it is asked; counts its calls. */
static const char *fake_bridge_c =
    "#include <stdio.h>\n#include <stdlib.h>\n#include \"gmshim.h\"\n"
    "__attribute__((visibility(\"default\"))) int gmshim_torch_bridge_attach(\n"
    "    int (*event)(const gmshim_torch_event_t *)) {\n"
    "  FILE *f = fopen(getenv(\"FAKE_TRACE\"), \"r\"); char line[256];\n"
    "  if (!f) return -1;\n"
    "  while (fgets(line, sizeof line, f)) { gmshim_torch_event_t ev = {sizeof ev};\n"
    "    if (sscanf(line, \"%d %d %llx %llu %llx %u\", &ev.action, &ev.device, &ev.addr, &ev.bytes,\n"
    "               &ev.stream, &ev.pool) == 6) event(&ev); }\n"
    "  fclose(f); return 0; }\n";

static void stub_compiler(const char *name, const char *body)
{
    char path[PATH_MAX], script[4 * PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", scratch(), name);
    snprintf(script, sizeof script, "#!/bin/sh\necho run >> '%s/%s.calls'\n%s\n", scratch(), name, body);
    write_text(path, script);
    chmod(path, 0755);
    setenv("CXX", path, 1);
}

static int calls_of(const char *name)
{
    char path[PATH_MAX], line[16];
    snprintf(path, sizeof path, "%s/%s.calls", scratch(), name);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n++;
    if (f)
        fclose(f);
    return n;
}

static void use_fake_bridge(void)
{
    char src[PATH_MAX], inc[PATH_MAX], fix[PATH_MAX], body[4 * PATH_MAX];
    snprintf(src, sizeof src, "%s/fake_bridge.c", scratch());
    write_text(src, fake_bridge_c);
    ck_assert_msg(realpath("shim", inc) && realpath(FIXTURE, fix), "run from the repository root");
    setenv("FAKE_TRACE", fix, 1);
    snprintf(body, sizeof body,
             "out=; while [ $# -gt 0 ]; do [ \"$1\" = -o ] && out=$2; shift; done\n"
             "exec cc -shared -fPIC -I'%s' -o \"$out\" '%s'", inc, src);
    stub_compiler("cxx-ok", body);
    char cache[PATH_MAX];
    snprintf(cache, sizeof cache, "%s/cache", scratch());
    setenv("XDG_CACHE_HOME", cache, 1);
}

START_TEST(test_first_use_builds_into_the_cache_and_attaches)
{
    const char *log = open_log();
    const char *c10 = fake_torch(TORCH_2_11, 1, 1);
    use_fake_bridge();
    char why[1024] = "";
    ck_assert_msg(torchload_attach_for(c10, 1, why, sizeof why) == 0, "not attached: %s", why);
    ck_assert_msg(calls_of("cxx-ok") == 1, "compiler called %d times", calls_of("cxx-ok"));
    char dir[PATH_MAX];
    ck_assert_int_eq(torchload_cache_dir(dir, sizeof dir), 0);
    ck_assert_msg(strstr(dir, "/cache/gmshim/torch") != NULL, "cache dir %s", dir);
    counts_t c = read_back(log);
    ck_assert_msg(c.by_type[GMLOG_T_ALLOC] > 0, "the fake bridge's events are not in the log");
}
END_TEST

START_TEST(test_a_built_bridge_is_reused_without_the_compiler)
{
    const char *c10 = fake_torch(TORCH_2_11, 1, 1);
    use_fake_bridge();
    torch_install_t t;
    char why[1024] = "", dir[PATH_MAX], name[128];
    ck_assert_int_eq(torchload_find_install(c10, &t, why, sizeof why), 0);
    ck_assert_int_eq(torchload_cache_dir(dir, sizeof dir), 0);
    torchload_bridge_name(&t, name, sizeof name);
    ck_assert_msg(torchload_build(&t, dir, name, 60000, why, sizeof why) == 0, "build: %s", why);
    stub_compiler("cxx-never", "exit 1");
    ck_assert_msg(torchload_attach_for(c10, 1, why, sizeof why) == 0, "not attached: %s", why);
    ck_assert_msg(calls_of("cxx-never") == 0, "the compiler ran again");
}
END_TEST

START_TEST(test_without_build_a_missing_bridge_is_reported)
{
    const char *c10 = fake_torch(TORCH_2_11, 1, 1);
    use_fake_bridge();
    char why[1024] = "";
    ck_assert_msg(torchload_attach_for(c10, 0, why, sizeof why) == -1 && strstr(why, "no bridge built") &&
                  calls_of("cxx-ok") == 0, "why: %s, %d compiles", why, calls_of("cxx-ok"));
}
END_TEST

START_TEST(test_no_compiler_is_reported_by_name)
{
    const char *c10 = fake_torch(TORCH_2_11, 1, 1);
    use_fake_bridge();
    setenv("CXX", "/nonexistent/c++", 1);
    char why[1024] = "";
    ck_assert_msg(torchload_attach_for(c10, 1, why, sizeof why) == -1 && strstr(why, "no C++ compiler") &&
                  strstr(why, "/nonexistent/c++"), "why: %s", why);
}
END_TEST

START_TEST(test_a_failing_build_points_at_its_log)
{
    const char *c10 = fake_torch(TORCH_2_11, 1, 1);
    use_fake_bridge();
    stub_compiler("cxx-broken", "echo 'bridge.cpp:1: error: no such header' >&2; exit 3");
    char why[1024] = "";
    ck_assert_msg(torchload_attach_for(c10, 1, why, sizeof why) == -1 && strstr(why, "status 3") &&
                  strstr(why, ".so.log"), "why: %s", why);
    char log[PATH_MAX + 8], text[256] = "";
    snprintf(log, sizeof log, "%s", strstr(why, "see ") + 4);
    FILE *f = fopen(log, "r");
    ck_assert_msg(f && fgets(text, sizeof text, f) && strstr(text, "no such header"), "log %s: '%s'", log, text);
    fclose(f);
}
END_TEST

START_TEST(test_a_failed_build_is_not_tried_again_by_the_next_process)
{
    const char *c10 = fake_torch(TORCH_2_11, 1, 1);
    use_fake_bridge();
    stub_compiler("cxx-broken", "exit 1");
    char why[1024] = "";
    ck_assert_int_eq(torchload_attach_for(c10, 1, why, sizeof why), -1);
    use_fake_bridge(); /* a working compiler now: still not run, the log says why */
    ck_assert_msg(torchload_attach_for(c10, 1, why, sizeof why) == -1 && strstr(why, "an earlier build failed") &&
                  calls_of("cxx-broken") == 1 && calls_of("cxx-ok") == 0,
                  "why: %s; broken compiler ran %d times, good one %d", why, calls_of("cxx-broken"), calls_of("cxx-ok"));
    char log[PATH_MAX + 8];
    snprintf(log, sizeof log, "%s", strstr(why, "see ") + 4);
    *strchr(log, ' ') = 0;
    unlink(log);
    ck_assert_msg(torchload_attach_for(c10, 1, why, sizeof why) == 0 && calls_of("cxx-ok") == 1,
                  "after removing the log: %s", why);
}
END_TEST

/* The H200's torch 2.11 wheel: nvidia/cu13/include has cuda_runtime_api.h but not crt/. */
START_TEST(test_cuda_headers_without_crt_are_passed_over)
{
    const char *c10 = fake_torch(TORCH_2_11, 1, 1);
    char dir[PATH_MAX + 64], file[PATH_MAX + 128];
    snprintf(dir, sizeof dir, "%s/site-packages/nvidia/cu13/include", scratch());
    mkdir_p(dir);
    snprintf(file, sizeof file, "%s/cuda_runtime_api.h", dir);
    write_text(file, "");
    snprintf(dir, sizeof dir, "%s/toolkit/include/crt", scratch());
    mkdir_p(dir);
    snprintf(file, sizeof file, "%s/host_config.h", dir);
    write_text(file, "");
    snprintf(file, sizeof file, "%s/toolkit/include/cuda_runtime_api.h", scratch());
    write_text(file, "");
    snprintf(dir, sizeof dir, "%s/toolkit", scratch());
    setenv("CUDA_HOME", dir, 1);
    torch_install_t t;
    char why[512] = "";
    ck_assert_int_eq(torchload_find_install(c10, &t, why, sizeof why), 0);
    ck_assert_msg(strstr(t.cuda_include, "/toolkit/include") != NULL, "chose %s", t.cuda_include);
    /* complete, the wheel's own headers come first */
    snprintf(dir, sizeof dir, "%s/site-packages/nvidia/cu13/include/crt", scratch());
    mkdir_p(dir);
    snprintf(file, sizeof file, "%s/host_config.h", dir);
    write_text(file, "");
    ck_assert_int_eq(torchload_find_install(c10, &t, why, sizeof why), 0);
    ck_assert_msg(strstr(t.cuda_include, "/nvidia/cu13/include") != NULL, "chose %s", t.cuda_include);
}
END_TEST

START_TEST(test_a_bridge_without_the_entry_point_is_refused)
{
    char src[PATH_MAX], so[PATH_MAX], cmd[3 * PATH_MAX], why[1024] = "";
    snprintf(src, sizeof src, "%s/empty.c", scratch());
    snprintf(so, sizeof so, "%s/empty.so", scratch());
    write_text(src, "int not_a_bridge;\n");
    snprintf(cmd, sizeof cmd, "cc -shared -fPIC -o '%s' '%s'", so, src);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_msg(torchload_attach_file(so, NULL, why, sizeof why) == -1 && strstr(why, "has no"), "why: %s", why);
    ck_assert_msg(torchload_attach_file("/nonexistent.so", NULL, why, sizeof why) == -1 &&
                  strstr(why, "cannot load"), "why: %s", why);
}
END_TEST

START_TEST(test_callers_outside_pytorch_settle_nothing)
{
    open_log();
    torchload_reset();
    torchload_examine((const void *)test_callers_outside_pytorch_settle_nothing);
    ck_assert_msg(!torchload_settled, "a cudaMalloc from the test program settled the loader");
}
END_TEST

START_TEST(test_segments_mode_settles_at_once)
{
    setenv("GMSHIM_TORCH", "segments", 1);
    open_log();
    torchload_reset();
    torchload_examine((const void *)test_segments_mode_settles_at_once);
    ck_assert_msg(torchload_settled, "GMSHIM_TORCH=segments still looks for PyTorch");
}
END_TEST

Suite *torchev_suite(void)
{
    Suite *s = suite_create("torchev");
    TCase *ev = tcase_create("events");
    tcase_add_checked_fixture(ev, new_scratch, NULL);
    tcase_add_test(ev, test_a_recorded_trace_becomes_one_record_per_event);
    tcase_add_test(ev, test_allocations_carry_a_site_and_completed_frees_none);
    tcase_add_test(ev, test_bad_events_are_refused_and_write_nothing);
    tcase_add_test(ev, test_without_a_log_events_are_dropped_quietly);
    tcase_add_test(ev, test_a_fork_child_records_nothing);
    suite_add_tcase(s, ev);
    TCase *ld = tcase_create("loader");
    tcase_add_checked_fixture(ld, new_scratch, NULL);
    tcase_set_timeout(ld, 60);
    tcase_add_test(ld, test_the_install_is_read_from_the_allocator_library_path);
    tcase_add_test(ld, test_an_annotated_version_is_read);
    tcase_add_test(ld, test_a_torch_without_the_hook_is_refused_by_name);
    tcase_add_test(ld, test_a_torch_without_headers_is_refused);
    tcase_add_test(ld, test_no_version_file_is_refused);
    tcase_add_test(ld, test_first_use_builds_into_the_cache_and_attaches);
    tcase_add_test(ld, test_a_built_bridge_is_reused_without_the_compiler);
    tcase_add_test(ld, test_without_build_a_missing_bridge_is_reported);
    tcase_add_test(ld, test_no_compiler_is_reported_by_name);
    tcase_add_test(ld, test_a_failing_build_points_at_its_log);
    tcase_add_test(ld, test_a_failed_build_is_not_tried_again_by_the_next_process);
    tcase_add_test(ld, test_cuda_headers_without_crt_are_passed_over);
    tcase_add_test(ld, test_a_bridge_without_the_entry_point_is_refused);
    tcase_add_test(ld, test_callers_outside_pytorch_settle_nothing);
    tcase_add_test(ld, test_segments_mode_settles_at_once);
    suite_add_tcase(s, ld);
    return s;
}
