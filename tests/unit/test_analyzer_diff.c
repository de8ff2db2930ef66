/* gmshim diff (analyzer/diff.c, diff_side.c): two runs of tests/integration/diff_leak under the
 * preload on the fake runtime, one with its leaking line on: the line is named first, per
 * device and per rank; --fail-above's exit status on both sides of its threshold; the JSON read
 * back by Python's parser; bad input (one log, a damaged or unreadable one) exits 2; two runs
 * without the line show no change. */
#include "suites.h"
#include "testlog.h"
#include "test_analyzer_cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SOURCE "tests/integration/diff_leak.c"

/* Records diff_leak MODE (steady or leak) on `devices` devices, steps marked or not (`steps`:
 * marks or troughs), into dir/name; returns the log's path (static storage, one of four). */
static const char *record_steps(const char *dir, const char *name, const char *mode, int devices, const char *steps,
                                const char *env1)
{
    static char logs[4][512];
    static int next;
    char *log = logs[next++ % 4], logenv[600], devenv[32], ndev[8];
    snprintf(log, sizeof logs[0], "%s/%s", dir, name);
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
    snprintf(devenv, sizeof devenv, "FAKECUDA_DEVICES=%d", devices);
    snprintf(ndev, sizeof ndev, "%d", devices);
    const char *argv[] = {build_path("tests/integration/diff_leak"), mode, ndev, steps, NULL};
    const char *env[] = {logenv, devenv, "FAKECUDA_MEM=1G", env1, NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0, "diff_leak %s exited %d:\n%s", mode, rc, out);
    free(out);
    return log;
}

static const char *record(const char *dir, const char *name, const char *mode, int devices, const char *env1)
{
    return record_steps(dir, name, mode, devices, "marks", env1);
}

/* "keep_history (diff_leak.c:N)", N the line of the source that the comment names. */
static const char *leak_key(void)
{
    static char key[64];
    size_t len;
    char *src = (char *)gm_slurp(SOURCE, &len);
    const char *at = strstr(src, "/* the leaking line */");
    ck_assert_msg(at != NULL, "%s has no line marked as the leaking one", SOURCE);
    unsigned line = 1;
    for (const char *p = src; p < at; p++)
        line += *p == '\n';
    snprintf(key, sizeof key, "keep_history (diff_leak.c:%u)", line);
    free(src);
    return key;
}

/* Site row `k` (from 0) of a device's table: the lines after the column heads that follow `from`. */
static char *site_row(const char *from, int k)
{
    const char *head = from ? strstr(from, "growth B  site\n") : NULL;
    ck_assert_msg(head != NULL, "no site table in:\n%s", from ? from : "(null)");
    for (int i = 0; i <= k; i++)
        head = strchr(head, '\n') + 1;
    size_t n = strcspn(head, "\n");
    char *row = malloc(n + 1);
    ck_assert_msg(row != NULL, "out of memory");
    memcpy(row, head, n);
    row[n] = 0;
    return row;
}

static char *first_row(const char *from)
{
    return site_row(from, 0);
}

/* Runs python3 with a script on `json`; returns its exit status, its output in *out. */
static int py_json(const char *json, const char *script, char **out)
{
    const char *dir = temp_dir();
    char path[512];
    snprintf(path, sizeof path, "%s/diff.json", dir);
    gm_spew(path, json, strlen(json));
    const char *argv[] = {"/usr/bin/env", "python3", "-c", script, path, NULL};
    return run_program(argv, NULL, 0, out);
}

START_TEST(test_diff_of_two_runs_names_the_leaking_line_first)
{
    classic_pool_test(); /* why: test_diff_json_parses_with_the_leaking_line_first */
    const char *dir = temp_dir();
    const char *a = record(dir, "a.gmlog", "steady", 1, NULL), *b = record(dir, "b.gmlog", "leak", 1, NULL);
    char *out;
    int rc = gm(&out, "--color=never", "diff", a, b);
    ck_assert_msg(rc == 0, "diff exited %d (want 0 without --fail-above):\n%s", rc, out);
    char *row = first_row(out);
    ck_assert_msg(strstr(row, leak_key()), "the first site is not %s: '%s' in:\n%s", leak_key(), row, out);
    ck_assert_msg(strstr(out, "1 of ") && strstr(out, " call sites changed"), "more sites than the leak changed:\n%s",
                  out);
    free(row);
    free(out);
}
END_TEST

/* The JSON through Python's parser: the leak's site first, found only in B, growing only in B,
 * and every change B - A. */
START_TEST(test_diff_json_parses_with_the_leaking_line_first)
{
    classic_pool_test(); /* why: test_two_runs_without_the_leak_show_no_change_and_exit_0 (the sites'
                          * bytes at the reserved peak, whose moment moves with it) */
    const char *dir = temp_dir();
    const char *a = record(dir, "a.gmlog", "steady", 1, NULL), *b = record(dir, "b.gmlog", "leak", 1, NULL);
    char *out, *py;
    int rc = gm(&out, "--json", "diff", a, b);
    ck_assert_msg(rc == 0, "diff --json exited %d:\n%s", rc, out);
    rc = py_json(out,
                 "import json,sys\n"
                 "d=json.load(open(sys.argv[1]))\n"
                 "assert d['command']=='diff' and d['changed'] is True and d['exceeded'] is False, d\n"
                 "dev=d['pairs'][0]['devices'][0]\n"
                 "for k,f in dev['figures'].items(): assert f['change']==f['b']-f['a'], (k,f)\n"
                 "assert dev['figures']['peak_allocated']['change']>0, dev['figures']\n"
                 "s=dev['sites'][0]\n"
                 "assert s['in']=='b' and s['file'].endswith('diff_leak.c'), s\n"
                 "assert s['growth_per_step']['a']==0 and s['growth_per_step']['b']>0, s\n"
                 "assert s['peak_bytes']['b']>=s['growth_per_step']['b'], s\n"
                 "assert dev['sites_changed']==len(dev['sites'])==1, dev['sites']\n"
                 "print('%s (%s:%d)'%(s['function'],s['file'].rsplit('/',1)[-1],s['line']))\n",
                 &py);
    ck_assert_msg(rc == 0 && strstr(py, leak_key()), "the JSON (python: %d, want %s):\n%s\n%s", rc, leak_key(), py, out);
    free(py);
    free(out);
}
END_TEST

/* A figure of B in the JSON (python prints it). */
static uint64_t figure(const char *json, const char *fig, const char *member)
{
    char script[512], *py;
    snprintf(script, sizeof script,
             "import json,sys\nd=json.load(open(sys.argv[1]))\nprint(d['pairs'][0]['devices'][0]['figures']['%s']['%s'])\n",
             fig, member);
    int rc = py_json(json, script, &py);
    uint64_t v = strtoull(py, NULL, 10);
    ck_assert_msg(rc == 0 && v > 0, "no %s.%s in the JSON (%d: %s):\n%s", fig, member, rc, py, json);
    free(py);
    return v;
}

/* Exit 1 exactly when B's figure rose by more than the amount: a byte under the rise fails, the
 * rise itself passes; a percentage likewise, and a named figure by its own rise. */
START_TEST(test_fail_above_exits_1_only_when_b_rises_by_more)
{
    const char *dir = temp_dir();
    const char *a = record(dir, "a.gmlog", "steady", 1, NULL), *b = record(dir, "b.gmlog", "leak", 1, NULL);
    char *out, spec[64];
    gm(&out, "--json", "diff", a, b);
    uint64_t rise = figure(out, "peak_allocated", "change"), base = figure(out, "peak_allocated", "a");
    uint64_t rise_res = figure(out, "peak_reserved", "change");
    free(out);
    struct {
        const char *fmt;
        uint64_t v;
        int want;
    } cases[] = {
        {"%" PRIu64, rise - 1, 1},
        {"%" PRIu64, rise, 0},
        {"%" PRIu64 "%%", rise * 100 / base - 1, 1},
        {"%" PRIu64 "%%", rise * 100 / base + 1, 0},
        {"reserved:%" PRIu64, rise_res - 1, 1},
        {"reserved:%" PRIu64, rise_res, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(spec, sizeof spec, cases[i].fmt, cases[i].v);
        int rc = gm(&out, "--color=never", "diff", "--fail-above", spec, a, b);
        ck_assert_msg(rc == cases[i].want && strstr(out, cases[i].want ? "fail: device 0: " : "pass: "),
                      "--fail-above %s (peak allocated +%" PRIu64 " of %" PRIu64 ", reserved +%" PRIu64
                      "): exit %d, want %d:\n%s", spec, rise, base, rise_res, rc, cases[i].want, out);
        free(out);
    }
}
END_TEST

/* Under the plan with the CPU waiting for fences (not own mode) a slot whose fence the fake's
 * worker has not completed goes to the pool: two runs alike then reserve 120 or 176 MiB, a real
 * difference diff rightly shows; the classic pool's runs are alike to the byte. */
START_TEST(test_two_runs_without_the_leak_show_no_change_and_exit_0)
{
    classic_pool_test();
    const char *dir = temp_dir();
    const char *a = record(dir, "a.gmlog", "steady", 1, NULL), *b = record(dir, "b.gmlog", "steady", 1, NULL);
    char *out;
    int rc = gm(&out, "--color=never", "diff", "--fail-above", "0", a, b);
    ck_assert_msg(rc == 0 && strstr(out, "no change between A and B") && !strstr(out, "call sites changed"),
                  "two runs alike: exit %d:\n%s", rc, out);
    free(out);
    rc = gm(&out, "--json", "diff", a, b);
    ck_assert_msg(rc == 0 && strstr(out, "\"changed\":false") && strstr(out, "\"sites_changed\":0"),
                  "two runs alike, JSON: exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_one_log_is_bad_input_exit_2)
{
    const char *dir = temp_dir();
    const char *a = record(dir, "a.gmlog", "steady", 1, NULL);
    char *out;
    int rc = gm(&out, "diff", a);
    ck_assert_msg(rc == 2 && strstr(out, "two runs to compare"), "one log: exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

/* A --fail-above that names no figure, or no amount, is bad input too: never a pass. */
START_TEST(test_a_bad_fail_above_is_bad_input_exit_2)
{
    const char *dir = temp_dir();
    const char *a = record(dir, "a.gmlog", "steady", 1, NULL);
    const char *bad[] = {"pink:3%", "allocated:", "reserved:x%", "ooms:1G", "-5%"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *out;
        int rc = gm(&out, "diff", "--fail-above", bad[i], a, a);
        ck_assert_msg(rc == 2 && strstr(out, "is not [FIGURE:]AMOUNT"), "--fail-above %s: exit %d:\n%s", bad[i], rc, out);
        free(out);
    }
}
END_TEST

/* A log cut short inside its records (read in part) and a file that is no log: exit 2, the
 * problem named, no report. */
START_TEST(test_damaged_or_unreadable_log_is_bad_input_exit_2)
{
    const char *dir = temp_dir();
    const char *a = record(dir, "a.gmlog", "steady", 1, NULL);
    size_t len;
    uint8_t *bytes = gm_slurp(a, &len);
    char cut[512], junk[512];
    snprintf(cut, sizeof cut, "%s/cut.gmlog", dir);
    snprintf(junk, sizeof junk, "%s/junk.gmlog", dir);
    ck_assert_msg(len > 8192, "the log is only %zu bytes", len);
    gm_spew(cut, bytes, 8192);
    gm_spew(junk, "not a log\n", 10);
    free(bytes);
    char *out;
    int rc = gm(&out, "diff", a, cut);
    ck_assert_msg(rc == 2 && strstr(out, "cut.gmlog: damaged") && !strstr(out, "device 0"),
                  "a log cut short: exit %d:\n%s", rc, out);
    free(out);
    rc = gm(&out, "diff", junk, a);
    ck_assert_msg(rc == 2 && strstr(out, "junk.gmlog: byte 0: not a gmshim log") && !strstr(out, "device 0"),
                  "a file that is no log: exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

/* Two devices, the leak on device 1: device 0 shows no change, device 1 names the line. */
START_TEST(test_each_device_is_compared_on_its_own)
{
    classic_pool_test(); /* why: test_two_runs_without_the_leak_show_no_change_and_exit_0 */
    const char *dir = temp_dir();
    const char *a = record(dir, "a.gmlog", "steady", 2, NULL), *b = record(dir, "b.gmlog", "leak", 2, NULL);
    char *out;
    int rc = gm(&out, "--color=never", "diff", a, b);
    const char *d0 = strstr(out, "device 0 ("), *d1 = strstr(out, "device 1 (");
    ck_assert_msg(rc == 0 && d0 && d1 && d0 < d1, "no section per device: exit %d:\n%s", rc, out);
    const char *none = strstr(d0, "call sites: no change");
    ck_assert_msg(none && none < d1, "device 0 changed:\n%s", out);
    char *row = first_row(d1);
    ck_assert_msg(strstr(row, leak_key()), "device 1's first site is not %s: '%s'", leak_key(), row);
    free(row);
    free(out);
}
END_TEST

/* Without marks, growth is per step found from the repeating allocations (each of the 12 steps),
 * and it is `leaks`' own figure for the site. */
START_TEST(test_without_marks_growth_is_per_step_as_leaks_gives_it)
{
    const char *dir = temp_dir();
    const char *a = record_steps(dir, "a.gmlog", "steady", 1, "troughs", NULL);
    const char *b = record_steps(dir, "b.gmlog", "leak", 1, "troughs", NULL);
    char *diff, *leaks, *py, both[8192 * 4];
    int rc = gm(&diff, "--json", "diff", a, b);
    ck_assert_msg(rc == 0, "diff --json exited %d:\n%s", rc, diff);
    rc = gm(&leaks, "--json", "leaks", b);
    ck_assert_msg(rc == 0, "leaks --json exited %d:\n%s", rc, leaks);
    ck_assert_msg(strlen(diff) + strlen(leaks) + 2 < sizeof both, "outputs too long");
    snprintf(both, sizeof both, "%s\n%s", diff, leaks);
    rc = py_json(both,
                 "import json,sys\n"
                 "d,l=[json.loads(x) for x in open(sys.argv[1]) if x.strip()]\n"
                 "dev=d['pairs'][0]['devices'][0]\n"
                 "assert dev['steps']['b']['per']=='step' and dev['steps']['b']['count']==12, dev['steps']\n"
                 "g=l['logs'][0]['leaks'][0]\n"
                 "assert g['epochs']=='steps' and len(g['growing'])==1, g\n"
                 "s=dev['sites'][0]\n"
                 "assert s['growth_per_step']['b']==g['growing'][0]['bytes_per_epoch']>0, (s, g['growing'])\n"
                 "print('same', s['site'])\n",
                 &py);
    ck_assert_msg(rc == 0 && strstr(py, leak_key()), "diff's growth is not leaks' (python %d):\n%s\n%s", rc, py, both);
    free(py);
    free(leaks);
    free(diff);
}
END_TEST

/* Job directories: logs paired by RANK, not by name (A's are named in the other order). */
START_TEST(test_job_directories_pair_logs_by_rank)
{
    classic_pool_test(); /* why: test_two_runs_without_the_leak_show_no_change_and_exit_0 */
    const char *da = temp_dir(), *db = temp_dir();
    record(da, "x-first.gmlog", "steady", 1, "RANK=1");
    record(da, "y-second.gmlog", "steady", 1, "RANK=0");
    record(db, "gm-rank0.gmlog", "steady", 1, "RANK=0");
    record(db, "gm-rank1.gmlog", "leak", 1, "RANK=1");
    char *out;
    int rc = gm(&out, "--color=never", "diff", da, db);
    const char *r0 = strstr(out, "== rank 0 =="), *r1 = strstr(out, "== rank 1 ==");
    ck_assert_msg(rc == 0 && r0 && r1 && r0 < r1, "no section per rank: exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(r0, "y-second.gmlog") < r1 && strstr(r0, "gm-rank0.gmlog") < r1,
                  "rank 0 is not A's y-second against B's gm-rank0:\n%s", out);
    const char *none = strstr(r0, "call sites: no change");
    ck_assert_msg(none && none < r1, "rank 0 changed:\n%s", out);
    char *row = first_row(r1);
    ck_assert_msg(strstr(row, leak_key()), "rank 1's first site is not %s: '%s'", leak_key(), row);
    free(row);
    free(out);
}
END_TEST

/* ---- logs written record by record: sites whose ids, strings and native frames differ ---------- */

static void string_rec(tlog_t *b, uint32_t id, const char *text)
{
    uint8_t rec[80] = {0};
    size_t n = strlen(text);
    gmlog_string_t h = {{GMLOG_STRING, 0, GMLOG_NO_DEVICE, 0, 0}, id, (uint32_t)n};
    memcpy(rec, &h, sizeof h);
    memcpy(rec + sizeof h, text, n);
    tlog_rec(b, rec, sizeof h + (n + 8) / 8 * 8, 0);
}

/* A site of one native frame (an absolute address) under one Python frame. */
static void py_site(tlog_t *b, uint32_t id, uint64_t addr, uint32_t file, uint32_t function, uint32_t line)
{
    uint8_t rec[40] = {0};
    gmlog_site_t h = {{GMLOG_SITE, 0, GMLOG_NO_DEVICE, 0, 0}, id, 1, 1};
    uint64_t frame = (uint64_t)GMLOG_FRAME_UNKNOWN_MODULE << 48 | addr;
    gmlog_pyframe_t py = {file, function, line, 0};
    memcpy(rec, &h, sizeof h);
    memcpy(rec + sizeof h, &frame, 8);
    memcpy(rec + sizeof h + 8, &py, sizeof py);
    tlog_rec(b, rec, sizeof rec, 0);
}

/* A run of train.py: init (line 10) keeps 2 MiB, forward (line 40) `fwd` MiB, loss_fn (line 50)
 * `loss` MiB, each site under its own id, string ids and native address shifted by `shift`. */
static void train_log(const char *path, unsigned shift, unsigned fwd, unsigned loss)
{
    tlog_t b = {0};
    tlog_begin(&b, 0);
    tlog_chunk(&b, 1, 0, 0, 0);
    tlog_device(&b, 0, "GPU", 80 * 1024 * TLOG_MiB);
    string_rec(&b, 1 + shift, shift ? "/elsewhere/checkout/train.py" : "/src/train.py");
    string_rec(&b, 2 + shift, "init");
    string_rec(&b, 3 + shift, "forward");
    string_rec(&b, 4 + shift, "loss_fn");
    for (uint32_t i = 0; i < 3; i++)
        py_site(&b, 7 + shift + i, 0x1000 + 0x100 * (shift + i), 1 + shift, 2 + shift + i,
                (uint32_t[]){10, 40, 50}[i]);
    tlog_segment(&b, 10, GMLOG_SEGMENT_ALLOC, TLOG_SEG, 1024 * TLOG_MiB);
    uint64_t at = TLOG_SEG, t = 20;
    unsigned mib[3] = {2, fwd, loss};
    for (uint32_t i = 0; i < 3; i++)
        for (unsigned k = 0; k < mib[i]; k++, at += TLOG_MiB, t += 10)
            tlog_alloc(&b, t, at, TLOG_MiB, GMLOG_KIND_POOL << GMLOG_KIND_SHIFT, 7 + shift + i);
    tlog_end_chunk(&b);
    ck_assert_msg(tlog_write(&b, path) == 0, "cannot write %s", path);
    tlog_free_buf(&b);
}

/* Sites whose ids, strings, file paths and native addresses all differ are matched by their
 * Python line and function; the changed ones come largest change first. */
START_TEST(test_sites_match_by_python_line_and_come_largest_change_first)
{
    const char *dir = temp_dir();
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/a.gmlog", dir);
    snprintf(b, sizeof b, "%s/b.gmlog", dir);
    train_log(a, 0, 8, 4);
    train_log(b, 100, 24, 8);
    char *out;
    int rc = gm(&out, "--color=never", "diff", a, b);
    char *first = site_row(out, 0), *second = site_row(out, 1);
    ck_assert_msg(rc == 0 && strstr(first, "forward (train.py:40)") && strstr(first, "+16.0 MiB") &&
                  strstr(second, "loss_fn (train.py:50)") && strstr(second, "+4.00 MiB"),
                  "not forward (+16 MiB) then loss_fn (+4 MiB): exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "2 of 3 call sites changed"), "init (unchanged) was not matched:\n%s", out);
    free(first);
    free(second);
    free(out);
}
END_TEST

Suite *analyzer_diff_suite(void)
{
    Suite *s = suite_create("analyzer_diff");
    TCase *tc = tcase_create("diff");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_diff_of_two_runs_names_the_leaking_line_first);
    tcase_add_test(tc, test_diff_json_parses_with_the_leaking_line_first);
    tcase_add_test(tc, test_fail_above_exits_1_only_when_b_rises_by_more);
    tcase_add_test(tc, test_two_runs_without_the_leak_show_no_change_and_exit_0);
    tcase_add_test(tc, test_one_log_is_bad_input_exit_2);
    tcase_add_test(tc, test_a_bad_fail_above_is_bad_input_exit_2);
    tcase_add_test(tc, test_damaged_or_unreadable_log_is_bad_input_exit_2);
    tcase_add_test(tc, test_each_device_is_compared_on_its_own);
    tcase_add_test(tc, test_job_directories_pair_logs_by_rank);
    tcase_add_test(tc, test_without_marks_growth_is_per_step_as_leaks_gives_it);
    tcase_add_test(tc, test_sites_match_by_python_line_and_come_largest_change_first);
    suite_add_tcase(s, tc);
    return s;
}
