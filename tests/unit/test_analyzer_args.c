/* The gmshim CLI as people type it: options and logs in any order, `--`, every --help, mistakes
 * told rather than swallowed, `gmshim run`'s log directory and JSON, units and folded frames in
 * the reports, and every command line the README shows run as written (on the demo log). */
#include "output.h"
#include "suites.h"
#include "testlog.h"

#include <errno.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEMO "tests/fixtures/demo.gmlog"
#define DEMO_DIR "tests/fixtures"
#define TORCH "tests/fixtures/h200_torch_leak_oom.gmlog"

/* build/gmshim with the arguments up to the first NULL; stdout and stderr in *out. */
static int gmv(char **out, const char *const *args)
{
    const char *argv[24] = {build_path("gmshim")};
    for (int i = 0; args[i] && i < 22; i++)
        argv[i + 1] = args[i];
    return run_program(argv, NULL, 0, out);
}
#define gm(out, ...) gmv(out, (const char *const[]){__VA_ARGS__, NULL})

/* The environment of a job gmshim run starts: the fake GPU, and a sanitizer's runtime first. */
static const char *const *job_env(void)
{
    const char *san = getenv("GMSHIM_TEST_PRELOAD");
    static char pre[4200];
    static const char *env[4];
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s", san ? san : "");
    env[0] = "FAKECUDA_MEM=1G";
    env[1] = "ASAN_OPTIONS=verify_asan_link_order=0";
    env[2] = san && *san ? pre : NULL;
    env[3] = NULL;
    return env;
}

/* Under TSan a program that is not built with it cannot take its runtime preloaded (/bin/sh
 * dies with SIGSEGV): the shell and shell jobs run without it there. */
static int under_tsan(void)
{
    const char *san = getenv("GMSHIM_TEST_PRELOAD");
    return san && strstr(san, "tsan");
}

/* A shell command line; stdout and stderr in *out. The sanitizer runtime, if any, goes to the
 * commands the shell starts, not to the shell. */
static int sh(char **out, const char *cmd)
{
    const char *san = getenv("GMSHIM_TEST_PRELOAD");
    char *line = malloc(strlen(cmd) + (san ? strlen(san) : 0) + 64);
    sprintf(line, "%s%s%s%s", san && *san ? "LD_PRELOAD='" : "", san && *san ? san : "",
            san && *san ? "'; export LD_PRELOAD; " : "", cmd);
    const char *argv[] = {"/bin/sh", "-c", line, NULL};
    const char *env[] = {"FAKECUDA_MEM=1G", "ASAN_OPTIONS=verify_asan_link_order=0", NULL};
    int rc = run_program(argv, env, 0, out);
    free(line);
    return rc;
}

/* gmshim run ...: as gm(), in job_env(). */
static int gmrunv(char **out, const char *const *args)
{
    const char *argv[24] = {build_path("gmshim")};
    for (int i = 0; args[i] && i < 22; i++)
        argv[i + 1] = args[i];
    return run_program(argv, job_env(), 0, out);
}
#define gmrun(out, ...) gmrunv(out, (const char *const[]){__VA_ARGS__, NULL})

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* The text with every run of spaces and newlines made one space: what a wrapped line says. */
static char *flat(const char *s)
{
    char *o = malloc(strlen(s) + 1), *p = o;
    ck_assert_msg(o != NULL, "out of memory");
    for (; *s; s++) {
        if (*s == ' ' || *s == '\n') {
            if (p == o || p[-1] != ' ')
                *p++ = ' ';
        } else {
            *p++ = *s;
        }
    }
    *p = 0;
    return o;
}

/* An unsigned JSON member after `after` in doc. */
static unsigned long long json_num(const char *doc, const char *after, const char *key)
{
    const char *p = strstr(doc, after);
    ck_assert_msg(p != NULL, "no %s in\n%.2000s", after, doc);
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    p = strstr(p, k);
    ck_assert_msg(p != NULL, "no %s after %s in\n%.2000s", key, after, doc);
    return strtoull(p + strlen(k), NULL, 10);
}

/* ---- point 1: options and files in any order ------------------------------------------------ */

START_TEST(test_options_after_the_logs_work_for_every_command)
{
    const char *dir = temp_dir();
    char html[512], svg[512];
    snprintf(html, sizeof html, "%s/t.html", dir);
    snprintf(svg, sizeof svg, "%s/t.svg", dir);
    char *out;
    int rc = gm(&out, "summary", DEMO, "--json");
    ck_assert_msg(rc == 0 && !strncmp(out, "{\"command\":\"summary\"", 20) && !strstr(out, "cannot open"),
                  "summary LOG --json: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "timeline", DEMO, "--html", html);
    ck_assert_msg(rc == 0 && exists(html), "timeline LOG --html FILE: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "timeline", "-s", svg, DEMO);
    ck_assert_msg(rc == 0 && exists(svg), "timeline -s FILE LOG: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "leaks", DEMO, "--at", "3", "--symbol-path", DEMO_DIR, "--top=1");
    ck_assert_msg(rc == 0 && strstr(out, "at mark 3 \"iteration 3\"") && strstr(out, "load_weights (demo_train.c:31)") &&
                  strstr(out, "1 more sites"),
                  "leaks LOG --at 3 --symbol-path DIR --top=1 (a global option after the command): exit %d\n%.3000s",
                  rc, out);
    free(out);
    rc = gm(&out, "oom", DEMO, "-j");
    ck_assert_msg(rc == 0 && strstr(out, "\"cause\":\"leak\""), "oom LOG -j: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "frag", DEMO, "--json");
    ck_assert_msg(rc == 0 && !strncmp(out, "{\"command\":\"frag\"", 17), "frag LOG --json: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "dump", DEMO, "--json");
    ck_assert_msg(rc == 0 && !strncmp(out, "{\"record\":\"header\"", 18), "dump LOG --json: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "report", DEMO, "--depth", "1", "--color=never", "--json");
    ck_assert_msg(rc == 0 && !strncmp(out, "{\"command\":\"report\"", 19), "report LOG ... --json: exit %d\n%.2000s",
                  rc, out);
    free(out);
    /* `--` ends the options: what follows is a file, whatever it looks like */
    rc = gm(&out, "summary", "--", "--json");
    ck_assert_msg(rc == 1 && strstr(out, "--json: byte 0: cannot open"), "summary -- --json: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "summary", "--nosuch", DEMO);
    ck_assert_msg(rc == 1 && count(out, "\n") == 1 && strstr(out, "unknown option '--nosuch'"),
                  "an unknown option: exit %d\n%.2000s", rc, out);
    free(out);
    unlink(html);
    unlink(svg);
    rmdir(dir);
}
END_TEST

/* run's options end at the command: the command's own options are its own. */
START_TEST(test_run_leaves_the_commands_options_to_it)
{
    const char *dir = temp_dir();
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/r-%%p.gmlog", dir);
    char *out;
    int rc = gmrun(&out, "run", "--no-report", "-o", tmpl, "/bin/echo", "--json", "-o", "x");
    ck_assert_msg(rc == 0 && strstr(out, "--json -o x\n"), "run CMD --json -o x: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gmrun(&out, "run", "-o", tmpl, "--", "/bin/sh", "-c", "exit 7");
    ck_assert_msg(rc == 7, "run -- sh -c 'exit 7': exit %d\n%.2000s", rc, out);
    free(out);
    rmdir(dir);
}
END_TEST

/* ---- point 2: gmshim run ---------------------------------------------------------------------- */

START_TEST(test_run_refuses_a_log_directory_it_cannot_write)
{
    const char *dir = temp_dir();
    char marker[512], tmpl[600], script[1200];
    snprintf(marker, sizeof marker, "%s/ran", dir);
    snprintf(tmpl, sizeof tmpl, "%s/missing/x-%%p.gmlog", dir);
    snprintf(script, sizeof script, "touch '%s'", marker);
    char *out;
    int rc = gmrun(&out, "run", "-o", tmpl, "--", "/bin/sh", "-c", script);
    ck_assert_msg(rc == 2 && count(out, "\n") == 1 && strstr(out, "gmshim run: not starting /bin/sh: the log's directory") &&
                  strstr(out, "No such file or directory") && !exists(marker),
                  "run -o MISSING_DIR/x.gmlog: exit %d, the job %s\n%.2000s", rc, exists(marker) ? "ran" : "did not run",
                  out);
    free(out);
    /* a file where the directory should be */
    snprintf(tmpl, sizeof tmpl, "%s/ran/x.gmlog", dir);
    FILE *f = fopen(marker, "w");
    ck_assert_msg(f && fclose(f) == 0, "cannot create %s", marker);
    rc = gmrun(&out, "run", "-o", tmpl, "--", "/bin/true");
    ck_assert_msg(rc == 2 && strstr(out, "Not a directory"), "run -o FILE/x.gmlog: exit %d\n%.2000s", rc, out);
    free(out);
    unlink(marker);
    rmdir(dir);
}
END_TEST

START_TEST(test_run_json_has_stdout_to_itself_and_keeps_the_exit_status)
{
    if (under_tsan())
        return; /* its job is a shell (see under_tsan) */
    const char *dir = temp_dir();
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' run --json -o '%s/j-%%p.gmlog' -- /bin/sh -c 'echo job-output; '\"'%s'\"'; exit 5' "
             "2>/dev/null", build_path("gmshim"), dir, build_path("tests/integration/oom_leak"));
    char *out;
    int rc = sh(&out, cmd);
    size_t len = strlen(out);
    ck_assert_msg(rc == 5 && !strncmp(out, "{\"command\":\"report\"", 19) && len > 2 && !strcmp(out + len - 2, "}\n") &&
                  count(out, "\n") == 1 && !strstr(out, "job-output") && strstr(out, "\"cause\":\"leak\""),
                  "stdout of run --json: exit %d\n%.3000s", rc, out);
    free(out);
    /* the job's output is not lost: it is on stderr */
    snprintf(cmd, sizeof cmd, "'%s' run --json -o '%s/k-%%p.gmlog' -- /bin/sh -c 'echo job-output' 2>&1 >/dev/null",
             build_path("gmshim"), dir);
    rc = sh(&out, cmd);
    ck_assert_msg(rc == 0 && strstr(out, "job-output\n"), "stderr of run --json: exit %d\n%.3000s", rc, out);
    free(out);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir); /* and the logs the runs wrote */
    ck_assert_msg(system(cmd) == 0, "cannot remove %s", dir);
}
END_TEST

/* ---- point 3: units, fragmentation, hints, estimates, width ---------------------------------- */

START_TEST(test_the_combined_line_gives_bytes_in_bytes)
{
    static const char *const sets[][3] = {{DEMO, DEMO, NULL}, {DEMO, TORCH, DEMO}, {TORCH, DEMO, NULL}};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        char *text, *json;
        int rt = gm(&text, "summary", sets[i][0], sets[i][1], sets[i][2]);
        int rj = gm(&json, "--json", "summary", sets[i][0], sets[i][1], sets[i][2]);
        ck_assert_msg(rt == 0 && rj == 0, "summary of set %zu: exit %d and %d", i, rt, rj);
        char *f = flat(text);
        static const char *const keys[] = {"peak_requested", "peak_allocated", "peak_reserved"};
        static const char *const words[] = {"requested", "allocated", "reserved"};
        const char *combined = strstr(f, "combined: ");
        ck_assert_msg(combined != NULL, "no combined line:\n%s", text);
        for (int k = 0; k < 3; k++) {
            char b[32], want[64];
            snprintf(want, sizeof want, " %s %s,", words[k], rep_bytes(json_num(json, "\"combined\":", keys[k]), b));
            ck_assert_msg(strstr(combined, want), "set %zu: the combined line lacks '%s':\n%s", i, want, combined);
        }
        free(f);
        free(text);
        free(json);
    }
}
END_TEST

/* A healthy run frees everything at its end: the pool keeps its segments as a cache, which is
 * not fragmentation. */
START_TEST(test_frag_tells_cached_segments_from_fragmentation)
{
    char *json, *text;
    int rc = gm(&json, "--json", "frag", DEMO);
    ck_assert_msg(rc == 0, "frag --json: exit %d", rc);
    const char *last = NULL;
    for (const char *p = json; (p = strstr(p, "{\"t\":")); p++)
        if (p < strstr(json, "\"ooms\":"))
            last = p;
    ck_assert_msg(last != NULL, "no samples:\n%.2000s", json);
    unsigned long long reserved = json_num(last, "{", "reserved"), allocated = json_num(last, "{", "allocated");
    unsigned long long external = json_num(last, "{", "external"), cached = json_num(last, "{", "cached_whole");
    ck_assert_msg(allocated == 0 && reserved > 0 && external == 0 && cached == reserved,
                  "the last sample: reserved %llu, allocated %llu, external %llu, cached %llu",
                  reserved, allocated, external, cached);
    /* at the peak, the gaps inside used segments are still external */
    unsigned long long peak_ext = json_num(json, "\"peak\":", "external");
    ck_assert_msg(peak_ext > 0, "external at the peak: %llu", peak_ext);
    free(json);
    rc = gm(&text, "frag", DEMO);
    char *f = flat(text);
    ck_assert_msg(rc == 0 && strstr(f, "external 41.2 MiB in 15 gaps inside segments that hold live blocks") &&
                  strstr(f, "0.104 s 1016 MiB 0 B 0 B 0 B 1016 MiB"), "frag:\n%s", text);
    free(f);
    free(text);
}
END_TEST

/* A run of 100 ms on one device (or two), with `segs` 2 MiB segments and a fence wait of wait_ns. */
static const char *hint_log(int two_devices, uint32_t wait_ns, unsigned segs)
{
    static char path[8][512];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, sizeof path[0], "%s/hint.gmlog", temp_dir());
    tlog_t b;
    tlog_begin(&b, 0);
    tlog_chunk(&b, 1, 0, 0, 0);
    tlog_device(&b, 1000, "Fake", 1024 * TLOG_MiB);
    for (unsigned i = 0; i < segs; i++) {
        uint64_t at = TLOG_SEG + i * 2 * TLOG_MiB, t = 1000000 + i * 1000;
        tlog_segment(&b, t, GMLOG_SEGMENT_ALLOC, at, 2 * TLOG_MiB);
        tlog_alloc(&b, t + 10, at, TLOG_MiB, GMLOG_A_MISS, 0);
        tlog_free(&b, t + 20, at);
        tlog_alloc(&b, t + 30, at, TLOG_MiB, 0, 0);
        tlog_free(&b, t + 40, at);
    }
    if (two_devices) {
        gmlog_alloc_t a = {{GMLOG_ALLOC, 0, 1, 0, 0}, 0x9000000000ull, TLOG_MiB, 0, 100, 0};
        tlog_rec(&b, &a, 32, 40000000);
    }
    gmlog_fence_wait_t w = {{GMLOG_FENCE_WAIT, 0, 0, 0, 0}, 1, wait_ns, 0};
    tlog_rec(&b, &w, sizeof w, 50000000);
    gmlog_end_t e = {{GMLOG_END, 0, GMLOG_NO_DEVICE, 0, 0}, GMLOG_CLOSE_EXIT, 0};
    tlog_rec(&b, &e, sizeof e, 100000000);
    tlog_end_chunk(&b);
    ck_assert_msg(tlog_write(&b, p) == 0, "cannot write %s", p);
    tlog_free_buf(&b);
    return p;
}

START_TEST(test_the_gpu_order_hint_only_when_waits_are_1_percent_on_one_device)
{
    static const struct {
        int two;
        uint32_t wait_ns;
        int hint;
    } cases[] = {{0, 500000, 0}, {0, 5000000, 1}, {1, 5000000, 0}, {0, 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *log = hint_log(cases[i].two, cases[i].wait_ns, 10);
        char *out, *json;
        int rc = gm(&out, "summary", log);
        int rj = gm(&json, "--json", "summary", log);
        int has = strstr(out, "GMSHIM_GPU_ORDER=1") != NULL;
        ck_assert_msg(rc == 0 && rj == 0 && has == cases[i].hint &&
                      strstr(json, cases[i].hint ? "\"gpu_order_hint\":true" : "\"gpu_order_hint\":false"),
                      "%s device%s, a wait of %u ns in 100 ms: the hint %s (exit %d)\n%s", cases[i].two ? "two" : "one",
                      cases[i].two ? "s" : "", cases[i].wait_ns, has ? "shown" : "not shown", rc, out);
        free(out);
        free(json);
    }
}
END_TEST

START_TEST(test_the_time_estimate_says_what_it_rests_on_or_is_left_out)
{
    char *out, *json;
    int rc = gm(&out, "summary", hint_log(0, 0, 2));
    int rj = gm(&json, "--json", "summary", hint_log(0, 0, 2));
    char *f = flat(out);
    ck_assert_msg(rc == 0 && rj == 0 && !strstr(f, "saved") &&
                  strstr(f, "not estimated: 2 segment allocations are too few to measure the driver's cost (8 needed)") &&
                  strstr(json, "\"est_time_saved_ns\":null"), "2 segment allocations: exit %d\n%s", rc, out);
    free(f);
    free(out);
    free(json);
    rc = gm(&out, "summary", DEMO);
    f = flat(out);
    ck_assert_msg(rc == 0 && strstr(f, "est. 6.7 ms saved: 107 allocations and 107 frees at the driver's mean cost "
                                       "here (cudaMalloc 35.4 us, measured on 23 segment allocations)"),
                  "the demo's estimate:\n%s", out);
    free(f);
    free(out);
}
END_TEST

/* Visible columns of a line: colour escapes take none, UTF-8 characters one. */
static size_t columns(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\033') {
            while (i < n && !((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z')))
                i++;
            continue;
        }
        c += ((unsigned char)s[i] & 0xc0) != 0x80;
    }
    return c;
}

START_TEST(test_text_reports_wrap_at_100_columns_off_a_terminal)
{
    static const char *const cmds[] = {"report", "summary", "leaks", "frag", "oom"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char *out;
        int rc = gm(&out, "--color=always", cmds[i], TORCH, DEMO);
        ck_assert_msg(rc == 0, "%s: exit %d", cmds[i], rc);
        for (char *line = out; *line;) {
            char *nl = strchr(line, '\n');
            size_t len = nl ? (size_t)(nl - line) : strlen(line);
            size_t cols = columns(line, len);
            int one_word = 1;
            for (size_t k = 0; k < len && one_word; k++) /* a path or name longer than a line stays whole */
                one_word = line[k] == ' ' || !memchr(line + k, ' ', len - k);
            ck_assert_msg(cols <= 100 || one_word, "gmshim %s: a line of %zu columns:\n%.*s", cmds[i], cols, (int)len,
                          line);
            line += len + (nl != NULL);
        }
        if (!strcmp(cmds[i], "oom") || !strcmp(cmds[i], "report"))
            ck_assert_msg(strstr(out, "growing by 128 MiB per mark") &&
                          strstr(out, "\n           growing by 128 MiB per mark"),
                          "gmshim %s: the cause does not continue under its text:\n%s", cmds[i], out);
        free(out);
    }
}
END_TEST

/* ---- point 4: frames a user cannot act on ----------------------------------------------------- */

START_TEST(test_library_frames_under_a_python_line_fold_into_one)
{
    char *out;
    int rc = gm(&out, "leaks", TORCH);
    ck_assert_msg(rc == 0 && strstr(out, "py  <module> /work/main/tests/gpu/torch_leak_oom.py:21\n") &&
                  strstr(out, "… 16 frames in libc10_cuda.so, libtorch_cpu.so, libtorch_cuda.so\n") &&
                  !strstr(out, "libtorch_cuda.so+0x") && !strstr(out, "more frames"),
                  "leaks of the PyTorch log: exit %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "leaks", TORCH, "--frames", "all", "--depth", "0");
    ck_assert_msg(rc == 0 && !strstr(out, "… ") && strstr(out, "libtorch_cuda.so +0xcd035f +0xcd056e +0xcd0697") &&
                  count(out, "libc10_cuda.so +0x44bec") == 1, "leaks --frames all: exit %d\n%s", rc, out);
    free(out);
    /* without a Python line nothing folds; unnamed frames name their library once */
    rc = gm(&out, "leaks", "tests/fixtures/h200_cupti_static_inject.gmlog");
    ck_assert_msg(rc == 0 && !strstr(out, "… ") && strstr(out, "libcupti.so.13 +0x7d163 +0x1215bd") &&
                  !strstr(out, "libcupti.so.13+0x"), "leaks of the CUPTI log: exit %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "oom", TORCH, "--frames", "sometimes");
    ck_assert_msg(rc == 1 && strstr(out, "use all or folded"), "--frames sometimes: exit %d\n%s", rc, out);
    free(out);
}
END_TEST

/* ---- point 5: mistakes told ------------------------------------------------------------------- */

START_TEST(test_two_outputs_or_an_option_given_twice_are_errors)
{
    const char *dir = temp_dir();
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/a.html", dir);
    snprintf(b, sizeof b, "%s/b.svg", dir);
    char *out;
    int rc = gm(&out, "timeline", "--html", a, "--svg", b, DEMO);
    ck_assert_msg(rc == 1 && !exists(a) && !exists(b) && strstr(out, "one output at a time"),
                  "timeline --html a --svg b: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "timeline", "--svg", a, "--svg", b, DEMO);
    ck_assert_msg(rc == 1 && !exists(a) && !exists(b), "timeline --svg a --svg b: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "--json", "timeline", "--svg", b, DEMO);
    ck_assert_msg(rc == 1 && !exists(b) && strstr(out, "--json and --svg"), "--json timeline --svg b: exit %d\n%.2000s",
                  rc, out);
    free(out);
    rc = gm(&out, "leaks", "--top", "3", DEMO, "--top", "5");
    ck_assert_msg(rc == 1 && strstr(out, "--top is given twice"), "leaks --top 3 --top 5: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gmrun(&out, "run", "-o", a, "-o", b, "--", "/bin/true");
    ck_assert_msg(rc == 1 && strstr(out, "--output is given twice"), "run -o a -o b: exit %d\n%.2000s", rc, out);
    free(out);
    rmdir(dir);
}
END_TEST

START_TEST(test_a_mark_not_in_the_log_is_exit_2_with_the_nearest)
{
    char *out;
    int rc = gm(&out, "leaks", "--at", "99", DEMO);
    ck_assert_msg(rc == 2 && strstr(out, "gmshim: tests/fixtures/demo.gmlog: byte 69632: no mark \"99\" up to the log's end (13 marks; "
                                         "the nearest: "
                                         "11 \"iteration 11\", 12 \"iteration 12\", 13 \"iteration 13\")\n") &&
                  !strstr(out, "live at the end"), "leaks --at 99: exit %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "leaks", "--at", "iteraton 4", DEMO);
    ck_assert_msg(rc == 2 && strstr(out, "4 \"iteration 4\""), "leaks --at 'iteraton 4': exit %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "--json", "leaks", "--at", "99", DEMO);
    ck_assert_msg(rc == 2 && strstr(out, "\"found\":false,\"nearest\":[{\"mark\":11,") && strstr(out, "\"leaks\":[]"),
                  "leaks --json --at 99: exit %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "leaks", "--at", "13", DEMO);
    ck_assert_msg(rc == 0 && strstr(out, "at mark 13"), "leaks --at 13: exit %d\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_every_form_of_help_works)
{
    static const char *const cmds[] = {"report", "summary", "leaks", "frag", "oom", "timeline", "dump", "run"};
    char *out;
    const char *const *forms[] = {
        (const char *const[]){"help", "--help", NULL}, (const char *const[]){"help", "help", NULL},
        (const char *const[]){"help", NULL}, (const char *const[]){"--help", NULL},
        (const char *const[]){"-h", NULL}, (const char *const[]){"help", "-h", NULL},
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        int rc = gmv(&out, forms[i]);
        ck_assert_msg(rc == 0 && strstr(out, "usage: gmshim [--json]") && strstr(out, "timeline"),
                      "gmshim %s %s: exit %d\n%.2000s", forms[i][0], forms[i][1] ? forms[i][1] : "", rc, out);
        free(out);
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "usage: gmshim %s ", cmds[i]);
        const char *const *cmd_forms[] = {
            (const char *const[]){"help", cmds[i], NULL}, (const char *const[]){cmds[i], "--help", NULL},
            (const char *const[]){cmds[i], "-h", NULL}, (const char *const[]){cmds[i], DEMO, "--help", NULL},
            (const char *const[]){"--json", cmds[i], "--help", NULL},
        };
        /* (after run's first operand everything is the command's: `run CMD --help` runs CMD) */
        size_t forms_n = sizeof cmd_forms / sizeof cmd_forms[0];
        for (size_t k = 0; k < forms_n; k++) {
            if (!strcmp(cmds[i], "run") && k == 3)
                continue;
            int rc = gmv(&out, cmd_forms[k]);
            ck_assert_msg(rc == 0 && strstr(out, want) && !strstr(out, "gmshim: "), "gmshim %s %s %s: exit %d\n%.2000s",
                          cmd_forms[k][0], cmd_forms[k][1], cmd_forms[k][2] ? cmd_forms[k][2] : "", rc, out);
            free(out);
        }
    }
}
END_TEST

/* ---- point 8: the README's command lines run as written --------------------------------------- */

/* Replaces each whole-word `from` in line (len bytes of room) with `to`. */
static void subst(char *line, size_t len, const char *from, const char *to)
{
    char out[8192];
    size_t o = 0, fl = strlen(from);
    for (const char *p = line; *p && o + strlen(to) + 2 < sizeof out;) {
        int word = !strncmp(p, from, fl) && (p == line || p[-1] == ' ') && (!p[fl] || p[fl] == ' ');
        if (word) {
            o += (size_t)snprintf(out + o, sizeof out - o, "%s", to);
            p += fl;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = 0;
    snprintf(line, len, "%s", out);
}

START_TEST(test_every_gmshim_command_line_of_the_readme_exits_0)
{
    FILE *f = fopen("README.md", "r");
    ck_assert_msg(f != NULL, "no README.md");
    char line[8192], log[4200], gmshim[4096], prog[4096], cwd[4096];
    snprintf(log, sizeof log, "%s/" DEMO, getcwd(cwd, sizeof cwd) ? cwd : ".");
    snprintf(gmshim, sizeof gmshim, "%s", build_path("gmshim"));
    snprintf(prog, sizeof prog, "%s", build_path("tests/integration/oom_leak"));
    const char *dir = temp_dir();
    int in_sh = 0, ran = 0, timeline = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "```", 3)) {
            in_sh = !in_sh && !strcmp(line, "```sh");
            continue;
        }
        if (!in_sh)
            continue;
        char *hash = strstr(line, "  #");
        if (hash)
            *hash = 0;
        for (size_t n = strlen(line); n && line[n - 1] == ' ';)
            line[--n] = 0;
        if (strncmp(line, "gmshim ", 7) && strncmp(line, "build/gmshim ", 13))
            continue;
        char shown[8192], cmd[16384];
        snprintf(shown, sizeof shown, "%s", line);
        subst(line, sizeof line, line[0] == 'b' ? "build/gmshim" : "gmshim", gmshim);
        subst(line, sizeof line, "LOG", log);
        subst(line, sizeof line, "gmshim-*.gmlog", log);
        subst(line, sizeof line, "gmshim-train-12345.gmlog", log);
        subst(line, sizeof line, "./my_cuda_program", prog);
        subst(line, sizeof line, "python train.py", prog);
        snprintf(cmd, sizeof cmd, "cd '%s' && %s", dir, line);
        char *out;
        int rc = sh(&out, cmd);
        ck_assert_msg(rc == 0, "the README's `%s` (run as `%s`) exited %d:\n%.3000s", shown, line, rc, out);
        free(out);
        ran++;
        timeline += strstr(shown, "timeline") != NULL;
    }
    fclose(f);
    ck_assert_msg(ran >= 8 && timeline, "%d gmshim command lines in the README's sh blocks", ran);
    snprintf(line, sizeof line, "rm -rf '%s'", dir);
    ck_assert_msg(system(line) == 0, "cannot remove %s", dir);
}
END_TEST

/* ---- colour: NO_COLOR as no-color.org says, --color with or without a value ------------------ */

/* build/gmshim on a terminal (TERM=xterm), NO_COLOR set to no_color (unset when NULL); what the
 * terminal showed in buf; the exit status. */
static int gm_tty(const char *no_color, const char *const *args, char *buf, size_t len)
{
    const char *argv[16] = {build_path("gmshim")};
    for (int i = 0; args[i] && i < 14; i++)
        argv[i + 1] = args[i];
    int fd;
    pid_t pid = forkpty(&fd, NULL, NULL, NULL);
    ck_assert_msg(pid >= 0, "forkpty: %s", strerror(errno));
    if (pid == 0) {
        setenv("TERM", "xterm", 1);
        if (no_color)
            setenv("NO_COLOR", no_color, 1);
        else
            unsetenv("NO_COLOR");
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    size_t n = 0;
    for (;;) {
        ssize_t k = read(fd, buf + n, len - 1 - n);
        if (k <= 0)
            break; /* EIO once the child has gone */
        n += (size_t)k;
    }
    buf[n] = 0;
    close(fd);
    int status;
    ck_assert(waitpid(pid, &status, 0) == pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

START_TEST(test_an_empty_no_color_leaves_colour_on)
{
    static char tty[1 << 16];
    const char *const args[] = {"summary", DEMO, NULL};
    int rc = gm_tty(NULL, args, tty, sizeof tty);
    ck_assert_msg(rc == 0 && strstr(tty, "\033["), "a terminal without NO_COLOR: rc %d, no colour:\n%.2000s", rc, tty);
    rc = gm_tty("", args, tty, sizeof tty);
    ck_assert_msg(rc == 0 && strstr(tty, "\033["), "NO_COLOR= (empty): rc %d, no colour:\n%.2000s", rc, tty);
    rc = gm_tty("1", args, tty, sizeof tty);
    ck_assert_msg(rc == 0 && !strstr(tty, "\033["), "NO_COLOR=1: rc %d, colour:\n%.2000s", rc, tty);
}
END_TEST

START_TEST(test_a_bare_color_takes_no_value_and_means_always)
{
    char *out;
    int rc = gm(&out, "--color", "summary", DEMO);
    ck_assert_msg(rc == 0 && strstr(out, "\033[") && strstr(out, "device 0"),
                  "gmshim --color summary LOG: rc %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "summary", "--color", DEMO);
    ck_assert_msg(rc == 0 && strstr(out, "\033[") && strstr(out, "device 0"),
                  "gmshim summary --color LOG (the log is no value): rc %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "summary", "--color=never", DEMO);
    ck_assert_msg(rc == 0 && !strstr(out, "\033["), "--color=never: rc %d\n%.2000s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_the_global_help_lists_every_exit_status)
{
    char *out;
    int rc = gm(&out, "--help");
    const char *st = out ? strstr(out, "Exit status:") : NULL;
    ck_assert_msg(rc == 0 && st, "gmshim --help: rc %d\n%s", rc, out);
    ck_assert_msg(strstr(st, "0 success") && strstr(st, "1 error") && strstr(st, "2 a report") &&
                  strstr(st, "3 'gmshim whatif'"), "an exit status missing:\n%s", st);
    free(out);
}
END_TEST

Suite *analyzer_args_suite(void)
{
    Suite *s = suite_create("analyzer_args");
    TCase *tc = tcase_create("args");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_options_after_the_logs_work_for_every_command);
    tcase_add_test(tc, test_run_leaves_the_commands_options_to_it);
    tcase_add_test(tc, test_run_refuses_a_log_directory_it_cannot_write);
    tcase_add_test(tc, test_run_json_has_stdout_to_itself_and_keeps_the_exit_status);
    tcase_add_test(tc, test_two_outputs_or_an_option_given_twice_are_errors);
    tcase_add_test(tc, test_the_combined_line_gives_bytes_in_bytes);
    tcase_add_test(tc, test_frag_tells_cached_segments_from_fragmentation);
    tcase_add_test(tc, test_the_gpu_order_hint_only_when_waits_are_1_percent_on_one_device);
    tcase_add_test(tc, test_the_time_estimate_says_what_it_rests_on_or_is_left_out);
    tcase_add_test(tc, test_text_reports_wrap_at_100_columns_off_a_terminal);
    tcase_add_test(tc, test_library_frames_under_a_python_line_fold_into_one);
    tcase_add_test(tc, test_a_mark_not_in_the_log_is_exit_2_with_the_nearest);
    tcase_add_test(tc, test_every_form_of_help_works);
    tcase_add_test(tc, test_every_gmshim_command_line_of_the_readme_exits_0);
    suite_add_tcase(s, tc);
    TCase *col = tcase_create("colour");
    tcase_add_test(col, test_an_empty_no_color_leaves_colour_on);
    tcase_add_test(col, test_a_bare_color_takes_no_value_and_means_always);
    tcase_add_test(col, test_the_global_help_lists_every_exit_status);
    suite_add_tcase(s, col);
    return s;
}
