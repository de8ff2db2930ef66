/* The PyTorch bridge's loader without torch (shim/torchload.c): its decisions on fake torch
 * trees with stub compilers, a fake bridge that replays tests/fixtures/torch_trace.txt. */
#include "suites.h"
#include "device.h"
#include "hit.h"
#include "init.h"
#include "options.h"
#include "torchev.h"
#include "torchload.h"
#include "torchtest.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIXTURE "tests/fixtures/torch_trace.txt"

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
    ck_assert_msg(torchbuild_find_install(c10, &t, why, sizeof why) == 0, "refused: %s", why);
    ck_assert_msg(!strcmp(t.version, "2.11.0+cu130"), "version '%s'", t.version);
    ck_assert_msg(strstr(t.root, "/site-packages/torch") && t.cuda_include[0], "root %s, CUDA %s", t.root,
                  t.cuda_include);
    char name[128];
    torchbuild_bridge_name(&t, name, sizeof name);
    ck_assert_msg(!strncmp(name, "torch-2.11.0+cu130-", 19) && strstr(name, ".so"), "name %s", name);
    ck_assert_msg(torchbuild_is_allocator_lib(c10) && !torchbuild_is_allocator_lib("/x/libtorch_cuda.so"),
                  "allocator library not told apart");
}
END_TEST

START_TEST(test_an_annotated_version_is_read)
{
    const char *c10 = fake_torch("__version__: str = \"2.4.1\"\n", 1, 1);
    torch_install_t t;
    char why[512] = "";
    ck_assert_msg(torchbuild_find_install(c10, &t, why, sizeof why) == 0 && !strcmp(t.version, "2.4.1"),
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
    ck_assert_int_eq(torchbuild_cache_dir(dir, sizeof dir), 0);
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
    ck_assert_int_eq(torchbuild_find_install(c10, &t, why, sizeof why), 0);
    ck_assert_int_eq(torchbuild_cache_dir(dir, sizeof dir), 0);
    torchbuild_bridge_name(&t, name, sizeof name);
    ck_assert_msg(torchbuild_build(&t, dir, name, 0, 60000, why, sizeof why) == 0, "build: %s", why);
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

/* The fake torch's libc10_cuda.so made a real library, loaded, with a function inside it: a
 * cudaMalloc "from PyTorch's allocator" is one whose caller is that function. */
static const void *allocator_caller(const char *c10)
{
    char src[PATH_MAX], cmd[3 * PATH_MAX];
    snprintf(src, sizeof src, "%s/c10.c", scratch());
    write_text(src, "void c10_cuda_malloc_site(void) {}\n");
    snprintf(cmd, sizeof cmd, "cc -shared -fPIC -o '%s' '%s'", c10, src);
    ck_assert_int_eq(system(cmd), 0);
    void *h = dlopen(c10, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "cannot load %s: %s", c10, dlerror());
    const void *fn = dlsym(h, "c10_cuda_malloc_site");
    ck_assert_msg(fn != NULL, "no function in %s", c10);
    return fn;
}

static const void *first_caller;

static void examine_first_caller(void)
{
    torchload_reset();
    torchload_examine(first_caller);
}

static int lines_of(const char *text, const char *prefix)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, prefix)); p++)
        n++;
    return n;
}

/* Run 57: without a compiler the loader said "building ... this process waits" first. */
static void check_no_compiler_is_one_warning(const char *cxx)
{
    open_log();
    const char *c10 = fake_torch(TORCH_2_11, 1, 1);
    use_fake_bridge();
    first_caller = allocator_caller(c10);
    setenv("CXX", cxx, 1);
    const char *err = stderr_of(examine_first_caller);
    ck_assert_msg(lines_of(err, "gmshim[") == 1 && strstr(err, "no C++ compiler") && !strstr(err, "building"),
                  "CXX=%s, stderr:\n%s", cxx, err);
    ck_assert_msg(torchload_settled, "the loader is not settled after giving up");
}

START_TEST(test_no_compiler_path_is_one_warning_and_no_build_notice)
{
    check_no_compiler_is_one_warning("/nonexistent/c++");
}
END_TEST

START_TEST(test_no_compiler_on_path_is_one_warning_and_no_build_notice)
{
    check_no_compiler_is_one_warning("gmshim-no-such-c++ -O2");
}
END_TEST

START_TEST(test_a_build_with_a_compiler_is_announced_and_attaches)
{
    const char *log = open_log();
    const char *c10 = fake_torch(TORCH_2_11, 1, 1);
    use_fake_bridge();
    first_caller = allocator_caller(c10);
    const char *err = stderr_of(examine_first_caller);
    ck_assert_msg(lines_of(err, "gmshim[") == 2 && strstr(err, "building the PyTorch bridge") &&
                  strstr(err, "bridge built in"), "stderr:\n%s", err);
    ck_assert_msg(calls_of("cxx-ok") == 1 && read_back(log).by_type[GMLOG_T_ALLOC] > 0,
                  "compiled %d times; the fake bridge's events are not in the log", calls_of("cxx-ok"));
}
END_TEST

/* The bridge built into the per-user cache, as a first use would; its path in so. */
static void build_into_cache(const char *c10, char *so, size_t len)
{
    torch_install_t t;
    char why[1024] = "", dir[PATH_MAX], name[128];
    ck_assert_int_eq(torchbuild_find_install(c10, &t, why, sizeof why), 0);
    ck_assert_int_eq(torchbuild_cache_dir(dir, sizeof dir), 0);
    torchbuild_bridge_name(&t, name, sizeof name);
    ck_assert_msg(torchbuild_build(&t, dir, name, 0, 60000, why, sizeof why) == 0, "build: %s", why);
    snprintf(so, len, "%s/%s", dir, name);
}

/* Another user of the directory's group could have put the file there: it is not loaded, the
 * one warning says why, nothing is built over it, the log keeps PyTorch's segments only. */
START_TEST(test_a_bridge_in_a_group_writable_directory_is_refused_with_a_warning)
{
    const char *log = open_log();
    const char *c10 = fake_torch(TORCH_2_11, 1, 1);
    use_fake_bridge();
    first_caller = allocator_caller(c10);
    char so[PATH_MAX + 160];
    build_into_cache(c10, so, sizeof so);
    *strrchr(so, '/') = 0;
    ck_assert_int_eq(chmod(so, 0775), 0);
    stub_compiler("cxx-never", "exit 1");
    const char *err = stderr_of(examine_first_caller);
    ck_assert_msg(lines_of(err, "gmshim[") == 1 && strstr(err, "writable by its group") && strstr(err, so) &&
                  strstr(err, "segments only"), "expected one warning naming %s as group-writable:\n%s", so, err);
    ck_assert_msg(calls_of("cxx-never") == 0, "the compiler ran");
    ck_assert_msg(read_back(log).by_type[GMLOG_T_ALLOC] == 0, "the refused bridge was loaded: its events are in the log");
}
END_TEST

/* Only root can make this one in a test: a file of uid 12345 in this user's own directory. */
START_TEST(test_a_bridge_owned_by_another_user_is_refused)
{
    if (geteuid() != 0) {
        fprintf(stderr, "skipped: chown to another uid needs root\n");
        return;
    }
    const char *log = open_log();
    const char *c10 = fake_torch(TORCH_2_11, 1, 1);
    use_fake_bridge();
    char so[PATH_MAX + 160], why[1024] = "";
    build_into_cache(c10, so, sizeof so);
    ck_assert_int_eq(chown(so, 12345, 12345), 0);
    stub_compiler("cxx-never", "exit 1");
    ck_assert_msg(torchload_attach_for(c10, 1, why, sizeof why) == -1 && strstr(why, "owned by uid 12345"),
                  "a bridge owned by uid 12345 was not refused by its owner: %s", why);
    ck_assert_msg(torchload_attach_file(so, NULL, why, sizeof why) == -1 && strstr(why, "owned by uid 12345"),
                  "loaded by name although owned by uid 12345: %s", why);
    ck_assert_msg(calls_of("cxx-never") == 0, "the compiler ran");
    ck_assert_msg(read_back(log).by_type[GMLOG_T_ALLOC] == 0, "the refused bridge was loaded: its events are in the log");
}
END_TEST

/* LD_PRELOAD=./libgmshim.so and a program that moves into a world-writable (sticky) directory
 * holding gmshim-torch/<the bridge's name>: the library's directory is still the one it was
 * loaded from. (The planted files are root's here, so only where gmshim looks is tested.) */
START_TEST(test_a_relative_preload_does_not_look_where_the_program_moved)
{
    const char *c10 = fake_torch(TORCH_2_11, 1, 1);
    torch_install_t t;
    char why[1024] = "", name[128], w[PATH_MAX], planted[PATH_MAX + 200], torch[PATH_MAX], inc[PATH_MAX + 64],
         file[PATH_MAX + 128], env_cuda[PATH_MAX + 16], env_cache[PATH_MAX + 32];
    ck_assert_int_eq(torchbuild_find_install(c10, &t, why, sizeof why), 0);
    torchbuild_bridge_name(&t, name, sizeof name);
    snprintf(w, sizeof w, "%s/shared", scratch());
    snprintf(planted, sizeof planted, "%s/gmshim-torch", w);
    mkdir_p(planted);
    ck_assert_int_eq(chmod(w, 01777), 0);
    snprintf(planted, sizeof planted, "%s/gmshim-torch/%s", w, name);
    write_text(planted, "planted");
    snprintf(torch, sizeof torch, "%s", t.root);
    snprintf(inc, sizeof inc, "%s/toolkit/include/crt", scratch());
    mkdir_p(inc);
    snprintf(file, sizeof file, "%s/host_config.h", inc);
    write_text(file, "");
    snprintf(file, sizeof file, "%s/toolkit/include/cuda_runtime_api.h", scratch());
    write_text(file, "");
    snprintf(env_cuda, sizeof env_cuda, "CUDA_HOME=%s/toolkit", scratch());
    snprintf(env_cache, sizeof env_cache, "XDG_CACHE_HOME=%s/cache", scratch());
    char env_pre[PATH_MAX + 32];
    const char *san = getenv("GMSHIM_TEST_PRELOAD"); /* a sanitizer's runtime comes first */
    snprintf(env_pre, sizeof env_pre, "LD_PRELOAD=%s%s./libgmshim.so", san && *san ? san : "", san && *san ? " " : "");
    const char *env[] = {env_pre, "GMSHIM_LOG=off", env_cuda, env_cache, NULL};
    const char *prog = build_path("tests/integration/own_dir");
    const char *argv[] = {prog, w, torch, NULL};
    char *out = NULL;
    int rc = run_program_from(build_path(""), prog, argv, env, 0, &out);
    ck_assert_msg(rc == 0, "own_dir exited %d:\n%s", rc, out);
    ck_assert_msg(!strstr(out, "./gmshim-torch") && !strstr(out, w), "gmshim looked where the program moved (%s):\n%s",
                  w, out);
    free(out);
}
END_TEST

/* Forks again and again while the bridge is being built (a stub compiler that takes a second):
 * each child marks, allocates and frees, from the program and from the allocator library, and
 * exits within 5 s (tests/integration/fork_build); the parent still attaches the bridge. */
START_TEST(test_a_fork_during_a_bridge_build_leaves_a_child_that_exits)
{
    const char *c10 = fake_torch(TORCH_2_11, 1, 1);
    char cmd[3 * PATH_MAX], src[PATH_MAX], started[PATH_MAX], body[4 * PATH_MAX], file[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", build_path("tests/integration/standin/libc10_cuda.so"), c10);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(src, sizeof src, "%s/slow_bridge.c", scratch());
    write_text(src, "__attribute__((visibility(\"default\"))) int gmshim_torch_bridge_attach(void *event)\n"
                    "{ (void)event; return 0; }\n");
    snprintf(started, sizeof started, "%s/build-started", scratch());
    snprintf(body, sizeof body,
             "touch '%s'; sleep 1\n"
             "out=; while [ $# -gt 0 ]; do [ \"$1\" = -o ] && out=$2; shift; done\n"
             "exec cc -shared -fPIC -o \"$out\" '%s'", started, src);
    stub_compiler("cxx-slow", body);
    snprintf(file, sizeof file, "%s/toolkit/include/crt", scratch());
    mkdir_p(file);
    snprintf(file, sizeof file, "%s/toolkit/include/crt/host_config.h", scratch());
    write_text(file, "");
    snprintf(file, sizeof file, "%s/toolkit/include/cuda_runtime_api.h", scratch());
    write_text(file, "");
    char env_cxx[PATH_MAX + 8], env_cuda[PATH_MAX + 16], env_cache[PATH_MAX + 32], env_started[PATH_MAX + 32],
        env_log[PATH_MAX + 32];
    snprintf(env_cxx, sizeof env_cxx, "CXX=%s", getenv("CXX"));
    snprintf(env_cuda, sizeof env_cuda, "CUDA_HOME=%s/toolkit", scratch());
    snprintf(env_cache, sizeof env_cache, "XDG_CACHE_HOME=%s/cache", scratch());
    snprintf(env_started, sizeof env_started, "FORK_BUILD_STARTED=%s", started);
    snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s/fork-build.gmlog", scratch());
    const char *env[] = {env_cxx, env_cuda, env_cache, env_started, env_log, "GMSHIM_VERBOSE=1", "FAKECUDA_MEM=1G",
                         NULL};
    const char *argv[] = {build_path("tests/integration/fork_build"), c10, "20", NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0 && strstr(out, "0 hung, 0 failed"), "exit %d:\n%.3000s", rc, out);
    ck_assert_msg(strstr(out, "bridge built in") && strstr(out, "following PyTorch's caching allocator"),
                  "the parent did not attach the bridge:\n%.3000s", out);
    printf("%s", strstr(out, "fork_build:"));
    free(out);
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

/* `make torch-bridge` asks for the build by name: an earlier failure's log is removed and the
 * build tried again — in a directory that is trusted only; elsewhere nothing there is touched. */
START_TEST(test_a_build_by_name_tries_again_only_in_a_trusted_directory)
{
    const char *c10 = fake_torch(TORCH_2_11, 1, 1);
    char torch[PATH_MAX], out[PATH_MAX], log[PATH_MAX + 200], name[128], path[PATH_MAX + 200] = "", why[1024] = "";
    snprintf(torch, sizeof torch, "%s/site-packages/torch", scratch());
    torch_install_t t;
    ck_assert_int_eq(torchbuild_find_install(c10, &t, why, sizeof why), 0);
    torchbuild_bridge_name(&t, name, sizeof name);
    snprintf(out, sizeof out, "%s/bridges", scratch());
    mkdir_p(out);
    snprintf(log, sizeof log, "%s/%s.log", out, name);
    write_text(log, "an earlier failure\n");
    use_fake_bridge();
    ck_assert_int_eq(chmod(out, 0775), 0);
    ck_assert_msg(gmshim_torch_bridge_build(torch, out, path, sizeof path) == -1 && calls_of("cxx-ok") == 0,
                  "built into a group-writable directory (compiler ran %d times)", calls_of("cxx-ok"));
    struct stat st;
    ck_assert_msg(stat(log, &st) == 0, "the log in the untrusted directory was removed");
    ck_assert_int_eq(chmod(out, 0755), 0);
    ck_assert_msg(gmshim_torch_bridge_build(torch, out, path, sizeof path) == 0 && calls_of("cxx-ok") == 1,
                  "not built again by name (compiler ran %d times)", calls_of("cxx-ok"));
    ck_assert_msg(stat(log, &st) != 0 && stat(path, &st) == 0, "log left or no bridge at %s", path);
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
    ck_assert_int_eq(torchbuild_find_install(c10, &t, why, sizeof why), 0);
    ck_assert_msg(strstr(t.cuda_include, "/toolkit/include") != NULL, "chose %s", t.cuda_include);
    /* complete, the wheel's own headers come first */
    snprintf(dir, sizeof dir, "%s/site-packages/nvidia/cu13/include/crt", scratch());
    mkdir_p(dir);
    snprintf(file, sizeof file, "%s/host_config.h", dir);
    write_text(file, "");
    ck_assert_int_eq(torchbuild_find_install(c10, &t, why, sizeof why), 0);
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

/* ---- the real bridge against a stand-in torch (tests/fake_torch) ------------------------------ */

/* Builds tests/fake_torch's allocator library and shim/torch/bridge.cpp against its header, in
 * the torch 2.8+ shape or (old) the 2.1-2.4 one; loads the library. Returns the bridge's path. */
static const char *real_bridge(int old)
{
    static char so[PATH_MAX + 32];
    char lib[PATH_MAX + 32], cmd[12 * PATH_MAX], root[PATH_MAX];
    ck_assert_msg(realpath(".", root) && access("shim/torch/bridge.cpp", R_OK) == 0, "run from the repository root");
    snprintf(lib, sizeof lib, "%s/libmockc10.so", scratch());
    snprintf(so, sizeof so, "%s/bridge.so", scratch());
    const char *def = old ? "-DGM_MOCK_OLD_EMPTY" : "";
    snprintf(cmd, sizeof cmd,
             "c++ -std=c++17 -O2 -fPIC -shared %s -I%s/tests/fake_torch %s/tests/fake_torch/mock_c10.cpp -o '%s' "
             "-Wl,-z,relro,-z,now && c++ -std=c++17 -O2 -fPIC -shared -fvisibility=hidden -w %s "
             "-I%s/tests/fake_torch -I%s/shim %s/shim/torch/bridge.cpp -o '%s' -L'%s' -lmockc10 -Wl,-rpath,'%s'",
             def, root, root, lib, def, root, root, root, so, scratch(), scratch());
    ck_assert_msg(system(cmd) == 0, "cannot build the bridge against the stand-in torch: %s", cmd);
    ck_assert_msg(dlopen(lib, RTLD_NOW | RTLD_GLOBAL) != NULL, "dlopen %s: %s", lib, dlerror());
    ((void (*)(void))dlsym(RTLD_DEFAULT, "mock_init"))();
    return so;
}

static int mock_int(const char *name)
{
    return ((int (*)(void))dlsym(RTLD_DEFAULT, name))();
}

/* PyTorch's cache off: torch.cuda.empty_cache() (the inline call through the allocator object)
 * runs PyTorch's own emptyCache, with its argument, and then empties gmshim's pool. */
START_TEST(test_with_pytorchs_cache_off_its_empty_cache_empties_the_pool)
{
    setenv("PYTORCH_NO_CUDA_MEMORY_CACHING", "1", 1);
    char logp[PATH_MAX + 16];
    snprintf(logp, sizeof logp, "%s/own.gmlog", scratch());
    setenv("GMSHIM_LOG", logp, 1); /* not in the working directory */
    options_reset();
    const char *so = real_bridge(_i);
    init_start();
    gm_device_t *d = device_get(0);
    void *p = NULL;
    ck_assert_int_eq(hit_alloc(d, 64u << 20, 0, &p), cudaSuccess);
    cudaError_t err;
    ck_assert_int_eq(hit_free(d, p, 0, &err), GM_FREE_DONE);
    ck_assert_msg(device_reserved(d) >= (64u << 20), "nothing cached: %llu", (unsigned long long)device_reserved(d));
    char why[1024] = "";
    ck_assert_msg(torchload_attach_file(so, NULL, why, sizeof why) == 0, "not hooked: %s", why);
    ((void (*)(void))dlsym(RTLD_DEFAULT, "mock_empty_cache"))();
    ck_assert_msg(mock_int("mock_empties") == 1, "PyTorch's own emptyCache ran %d times", mock_int("mock_empties"));
    ck_assert_msg(((unsigned long long (*)(void))dlsym(RTLD_DEFAULT, "mock_last_pool"))() == 0,
                  "PyTorch's emptyCache got another pool id");
    ck_assert_msg(device_reserved(d) == 0, "gmshim's pool still holds %llu", (unsigned long long)device_reserved(d));
    ck_assert_msg(torchload_attach_file(so, NULL, why, sizeof why) == 0, "hooking twice: %s", why);
    ((void (*)(void))dlsym(RTLD_DEFAULT, "mock_empty_cache"))();
    ck_assert_msg(mock_int("mock_empties") == 2, "hooked twice, PyTorch's emptyCache ran %d times",
                  mock_int("mock_empties"));
}
END_TEST

/* PyTorch's cache on: when its empty_cache returns, what it gave back is already the driver's
 * (gmshim's pool emptied after it, as in the cache-off case). */
START_TEST(test_with_pytorchs_cache_on_its_empty_cache_also_empties_the_pool)
{
    unsetenv("PYTORCH_NO_CUDA_MEMORY_CACHING");
    char logp[PATH_MAX + 16];
    snprintf(logp, sizeof logp, "%s/keep.gmlog", scratch());
    setenv("GMSHIM_LOG", logp, 1);
    options_reset();
    const char *so = real_bridge(_i);
    init_start();
    gm_device_t *d = device_get(0);
    void *p = NULL;
    ck_assert_int_eq(hit_alloc(d, 32u << 20, 0, &p), cudaSuccess);
    cudaError_t err; /* freed, not given back: the fence it waits for is the pool's business */
    ck_assert_int_eq(hit_free(d, p, 0, &err), GM_FREE_DONE);
    char why[1024] = "";
    ck_assert_msg(torchload_attach_file(so, NULL, why, sizeof why) == 0, "not attached: %s", why);
    ck_assert_msg(device_reserved(d) >= (32u << 20), "nothing cached: %llu", (unsigned long long)device_reserved(d));
    ((void (*)(void))dlsym(RTLD_DEFAULT, "mock_empty_cache"))();
    ck_assert_msg(mock_int("mock_empties") == 1, "PyTorch's own emptyCache ran %d times", mock_int("mock_empties"));
    ck_assert_msg(device_reserved(d) == 0, "gmshim's pool still holds %llu", (unsigned long long)device_reserved(d));
}
END_TEST

/* PyTorch's cache on: the trimmer's pass empties it through the bridge when its allocator did
 * something since the last pass, and under GMSHIM_IDLE_RELEASE only once it is idle that long. */
START_TEST(test_the_trimmer_empties_pytorchs_cache_when_it_had_events)
{
    unsetenv("PYTORCH_NO_CUDA_MEMORY_CACHING");
    char logp[PATH_MAX + 16];
    snprintf(logp, sizeof logp, "%s/trim.gmlog", scratch());
    setenv("GMSHIM_LOG", logp, 1);
    options_reset();
    const char *so = real_bridge(_i);
    init_start();
    gm_device_t *d = device_get(0);
    void *p = NULL;
    cudaError_t err;
    ck_assert_int_eq(hit_alloc(d, 32u << 20, 0, &p), cudaSuccess);
    ck_assert_int_eq(hit_free(d, p, 0, &err), GM_FREE_DONE);
    size_t cached = device_reserved(d);
    char why[1024] = "";
    ck_assert_msg(torchload_attach_file(so, NULL, why, sizeof why) == 0, "not attached: %s", why);
    torchload_empty_torch_cache(0);
    ck_assert_msg(mock_int("mock_empties") == 1, "first pass: emptied %d times", mock_int("mock_empties"));
    /* The trimmer never waits for the GPU under an arena lock: gmshim's cache is its own passes'. */
    ck_assert_msg(device_reserved(d) == cached, "the pass emptied gmshim's pool: %zu -> %llu", cached,
                  (unsigned long long)device_reserved(d));
    torchload_empty_torch_cache(0);
    ck_assert_msg(mock_int("mock_empties") == 1, "no event since, emptied again");
    void (*event)(int, long long, long long) = (void (*)(int, long long, long long))dlsym(RTLD_DEFAULT, "mock_event");
    event(0 /* ALLOC */, 0x7000000, 4096);
    torchload_empty_torch_cache(10ull * 1000000000u);
    ck_assert_msg(mock_int("mock_empties") == 1, "emptied although busy 0 s ago (idle 10 s asked)");
    torchload_empty_torch_cache(0);
    ck_assert_msg(mock_int("mock_empties") == 2, "an event since: emptied %d times", mock_int("mock_empties"));
}
END_TEST

Suite *torchload_suite(void)
{
    Suite *s = suite_create("torchload");
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
    tcase_add_test(ld, test_no_compiler_path_is_one_warning_and_no_build_notice);
    tcase_add_test(ld, test_no_compiler_on_path_is_one_warning_and_no_build_notice);
    tcase_add_test(ld, test_a_build_with_a_compiler_is_announced_and_attaches);
    tcase_add_test(ld, test_a_bridge_in_a_group_writable_directory_is_refused_with_a_warning);
    tcase_add_test(ld, test_a_bridge_owned_by_another_user_is_refused);
    tcase_add_test(ld, test_a_relative_preload_does_not_look_where_the_program_moved);
    tcase_add_test(ld, test_a_fork_during_a_bridge_build_leaves_a_child_that_exits);
    tcase_add_test(ld, test_a_failing_build_points_at_its_log);
    tcase_add_test(ld, test_a_failed_build_is_not_tried_again_by_the_next_process);
    tcase_add_test(ld, test_a_build_by_name_tries_again_only_in_a_trusted_directory);
    tcase_add_test(ld, test_cuda_headers_without_crt_are_passed_over);
    tcase_add_test(ld, test_a_bridge_without_the_entry_point_is_refused);
    tcase_add_test(ld, test_callers_outside_pytorch_settle_nothing);
    tcase_add_test(ld, test_segments_mode_settles_at_once);
    suite_add_tcase(s, ld);
    TCase *br = tcase_create("bridge");
    tcase_add_checked_fixture(br, new_scratch, NULL);
    tcase_set_timeout(br, 120);
    tcase_add_loop_test(br, test_with_pytorchs_cache_off_its_empty_cache_empties_the_pool, 0, 2);
    tcase_add_loop_test(br, test_with_pytorchs_cache_on_its_empty_cache_also_empties_the_pool, 0, 2);
    tcase_add_loop_test(br, test_the_trimmer_empties_pytorchs_cache_when_it_had_events, 0, 2);
    suite_add_tcase(s, br);
    return s;
}
