/* End-to-end tests of the gmshim CLI (analyzer/cli.c, main.c: what every command shares): help
 * and exit statuses, two logs recorded on the H200, one log per rank, colour, write errors,
 * damaged, cut and empty logs (every command), and the fuzz target. The commands' own tests
 * are in their modules' files (test_analyzer_report.c, _leaks, _summary, _dump, _run, _timeline);
 * the helpers they share are in test_analyzer_cli.h. */
#include "gmlog.h"
#include "suites.h"
#include "testlog.h"
#include "test_analyzer_cli.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int gm_cli(char **out, const char *const *args)
{
    const char *argv[16] = {build_path("gmshim")};
    for (int i = 0; args[i] && i < 14; i++)
        argv[i + 1] = args[i];
    return run_program(argv, NULL, 0, out);
}

static char *record(const char *prog, const char *log, const char *env1)
{
    char logenv[600], path[600];
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
    snprintf(path, sizeof path, "tests/integration/%s", prog);
    snprintf(path, sizeof path, "%s", build_path(path));
    const char *argv[] = {path, NULL};
    const char *env[] = {logenv, "FAKECUDA_MEM=1G", env1, NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0, "%s exited %d:\n%s", prog, rc, out);
    return out;
}

char gm_last_log[512];

char *gm_oom_report(const char *prog, const char *extra_env, int json)
{
    const char *dir = temp_dir();
    char *log = gm_last_log, logenv[600], path[4096];
    snprintf(gm_last_log, sizeof gm_last_log, "%s/%s.gmlog", dir, prog);
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
    snprintf(path, sizeof path, "tests/integration/%s", prog);
    snprintf(path, sizeof path, "%s", build_path(path));
    const char *argv[] = {path, NULL};
    const char *env[] = {logenv, "FAKECUDA_MEM=1G", extra_env, NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0 && strstr(out, "expected OOM"), "%s exited %d:\n%s", prog, rc, out);
    free(out);
    const char *gargv[] = {build_path("gmshim"), json ? "--json" : "--color=never", "oom", log, NULL};
    rc = run_program(gargv, NULL, 0, &out);
    ck_assert_msg(rc == 0, "gmshim oom %s exited %d:\n%s", log, rc, out);
    return out;
}

/* The text with each run of spaces and newlines made one space: what a wrapped line says. */
static char *flat(const char *s)
{
    char *o = malloc(strlen(s) + 1), *p = o;
    ck_assert_msg(o != NULL, "out of memory");
    for (; *s; s++)
        if ((*s != ' ' && *s != '\n') || p == o || p[-1] != ' ')
            *p++ = *s == '\n' ? ' ' : *s;
    *p = 0;
    return o;
}

size_t gm_count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

START_TEST(test_help_lists_every_command_and_each_has_its_own)
{
    static const char *const cmds[] = {"report", "summary", "leaks", "frag", "oom", "timeline", "dump", "run"};
    char *out;
    int rc = gm(&out, "--help", NULL, NULL, NULL, NULL, NULL);
    ck_assert_msg(rc == 0, "--help exited %d", rc);
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        ck_assert_msg(strstr(out, cmds[i]), "--help does not list %s:\n%s", cmds[i], out);
    free(out);
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char *a, *b;
        int ra = gm(&a, "help", cmds[i], NULL, NULL, NULL, NULL);
        int rb = gm(&b, cmds[i], "--help", NULL, NULL, NULL, NULL);
        ck_assert_msg(ra == 0 && rb == 0 && !strcmp(a, b) && strstr(a, "usage: gmshim "),
                      "help %s (%d) and %s --help (%d) differ:\n%s\n---\n%s", cmds[i], ra, cmds[i], rb, a, b);
        free(a);
        free(b);
    }
    rc = gm(&out, "--version", NULL, NULL, NULL, NULL, NULL);
    ck_assert_msg(rc == 0 && strstr(out, "gmshim ") && strstr(out, "log format 1"), "--version: %d %s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_usage_errors_exit_1_with_a_message)
{
    char *out;
    int rc = gm(&out, "nosuchcommand", NULL, NULL, NULL, NULL, NULL);
    ck_assert_msg(rc == 1 && strstr(out, "no command 'nosuchcommand'"), "unknown command: %d %s", rc, out);
    free(out);
    rc = gm(&out, "summary", NULL, NULL, NULL, NULL, NULL);
    ck_assert_msg(rc == 1 && strstr(out, "no log given"), "no log: %d %s", rc, out);
    free(out);
    rc = gm(&out, "--color=sometimes", "summary", FIXTURE, NULL, NULL, NULL);
    ck_assert_msg(rc == 1 && strstr(out, "--color"), "bad --color: %d %s", rc, out);
    free(out);
    rc = gm(&out, "timeline", FIXTURE, NULL, NULL, NULL, NULL);
    ck_assert_msg(rc == 1 && strstr(out, "--svg FILE, --html FILE or --json"), "timeline without a file: %d %s", rc, out);
    free(out);
}
END_TEST

/* Logs recorded on the H200 (bench/results/gpu-runs.md): PyTorch with PYTORCH_NO_CUDA_MEMORY_CACHING=1
 * keeping a tensor per iteration until it dies of OOM, and a static-cudart program seen only
 * through CUPTI injection that never frees 3 x 64 MiB. */

START_TEST(test_h200_fixtures_name_the_python_leak_and_the_static_cudart_leak)
{
    char *out;
    int rc = gm(&out, "--json", "oom", H200_TORCH_LEAK, NULL, NULL, NULL);
    ck_assert_msg(rc == 0 && gm_count(out, "\"cause\":\"leak\"") == 1 && strstr(out, "\"requested\":134217728"),
                  "oom --json on the H200 log: %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "--json", "leaks", H200_TORCH_LEAK, NULL, NULL, NULL);
    ck_assert_msg(rc == 0 && strstr(out, "\"growing\":[{\"bytes_per_epoch\":134217728,") &&
                  strstr(out, "\"file\":\"/work/main/tests/gpu/torch_leak_oom.py\",\"line\":21}"),
                  "leaks --json on the H200 log does not point at torch_leak_oom.py:21: %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "summary", H200_TORCH_LEAK, NULL, NULL, NULL, NULL);
    ck_assert_msg(rc == 0 && strstr(out, "NVIDIA H200") && strstr(out, "closed at exit"), "summary: %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "--json", "leaks", H200_CUPTI_STATIC, NULL, NULL, NULL);
    ck_assert_msg(rc == 0 && strstr(out, "\"live_bytes\":201326592,\"live_count\":3,"),
                  "leaks --json on the CUPTI log does not show 3 x 64 MiB: %d\n%s", rc, out);
    free(out);
}
END_TEST

/* report, leaks and oom read a large log in parallel windows applied in order: the output must be
 * the ordered replay's, byte for byte, on generated logs of 4 threads (training-like steps with
 * marks and a live set, and random interleaving). */
START_TEST(test_site_reports_in_parallel_equal_the_ordered_replay)
{
    const char *dir = temp_dir();
    static const char *const kinds[] = {"steps", "random"};
    static const char *const cmds[] = {"report", "leaks", "oom"};
    for (size_t k = 0; k < 2; k++) {
        char log[512];
        snprintf(log, sizeof log, "%s/%s.gmlog", dir, kinds[k]);
        const char *gen[] = {build_path("fuzz/genlog"), log, "600000", "4", kinds[k], NULL};
        char *out = NULL;
        int rc = run_program(gen, NULL, 0, &out);
        ck_assert_msg(rc == 0, "genlog exited %d:\n%s", rc, out);
        free(out);
        for (size_t c = 0; c < 3; c++) {
            char *res[2];
            for (int t = 0; t < 2; t++) {
                const char *argv[] = {build_path("gmshim"), cmds[c], "--json", log, NULL};
                const char *env[] = {t ? "GMSHIM_ANALYZER_THREADS=4" : "GMSHIM_ANALYZER_THREADS=0", NULL};
                rc = run_program(argv, env, 0, &res[t]);
                ck_assert_msg(rc == 0, "%s on the %s log exited %d:\n%s", cmds[c], kinds[k], rc, res[t]);
            }
            ck_assert_msg(!strcmp(res[0], res[1]), "%s on the %s log: in order and in parallel differ:\n%.600s\n--\n%.600s",
                          cmds[c], kinds[k], res[0], res[1]);
            free(res[0]);
            free(res[1]);
        }
        unlink(log);
    }
    rmdir(dir);
}
END_TEST

START_TEST(test_one_log_per_rank_gives_sections_and_a_combined_line)
{
    const char *dir = temp_dir();
    char l0[512], l1[512];
    snprintf(l0, sizeof l0, "%s/r0.gmlog", dir);
    snprintf(l1, sizeof l1, "%s/r1.gmlog", dir);
    free(record("log_roundtrip", l0, "RANK=0"));
    free(record("log_roundtrip", l1, "RANK=1"));
    char *out;
    int rc = gm(&out, "summary", l0, l1, NULL, NULL, NULL);
    ck_assert_msg(rc == 0 && strstr(out, "== rank 0") && strstr(out, "== rank 1") && strstr(out, "combined: 2 logs, 30 allocs"),
                  "two ranks: %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "--json", "summary", l0, l1, NULL, NULL);
    ck_assert_msg(rc == 0 && strstr(out, "\"rank\":0") && strstr(out, "\"rank\":1") && strstr(out, "\"combined\":{") &&
                  strstr(out, "\"allocs\":30"), "two ranks, JSON: %d\n%s", rc, out);
    free(out);
    /* the parallel summary (windows of time, stitched) says exactly what reading in order says */
    const char *seq_argv[] = {build_path("gmshim"), "--json", "summary", l0, NULL};
    const char *seq_env[] = {"GMSHIM_ANALYZER_THREADS=0", NULL}, *par_env[] = {"GMSHIM_ANALYZER_THREADS=3", NULL};
    char *seq, *par;
    int rs = run_program(seq_argv, seq_env, 0, &seq), rp = run_program(seq_argv, par_env, 0, &par);
    ck_assert_msg(rs == 0 && rp == 0 && !strcmp(seq, par), "in order (%d) and in parallel (%d) differ:\n%s\n---\n%s",
                  rs, rp, seq, par);
    free(seq);
    free(par);
    /* one unreadable log among readable ones: the rest is reported, the exit status says so */
    rc = gm(&out, "summary", l0, "/nonexistent.gmlog", NULL, NULL, NULL);
    ck_assert_msg(rc == 1 && strstr(out, "== rank 0") && strstr(out, "/nonexistent.gmlog: byte 0: cannot open"),
                  "a missing log among others: %d\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_damaged_logs_exit_nonzero_with_the_offset)
{
    const char *dir = temp_dir();
    char path[512];
    snprintf(path, sizeof path, "%s/cut.gmlog", dir);
    FILE *in = fopen(FIXTURE, "rb");
    ck_assert_msg(in != NULL, "no fixture at %s", FIXTURE);
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, in);
    fclose(in);
    FILE *o = fopen(path, "wb");
    fwrite(buf, 1, 4096 + 3000, o);
    fclose(o);
    char *out;
    int rc = gm(&out, "report", path, NULL, NULL, NULL, NULL);
    ck_assert_msg(rc == 2 && strstr(out, "Summary") && strstr(out, "byte 7096: the file ends inside chunk 0") &&
                  strstr(out, "partial"), "a cut log: exit %d\n%.3000s", rc, out);
    free(out);
    uint32_t v = 7;
    memcpy(buf + 8, &v, 4);
    o = fopen(path, "wb");
    fwrite(buf, 1, n, o);
    fclose(o);
    rc = gm(&out, "summary", path, NULL, NULL, NULL, NULL);
    ck_assert_msg(rc == 1 && strstr(out, "byte 8: log format version 7 is newer than this gmshim reads (1); upgrade gmshim"),
                  "a newer version: exit %d\n%.3000s", rc, out);
    free(out);
    rc = gm(&out, "oom", "Makefile", NULL, NULL, NULL, NULL);
    ck_assert_msg(rc == 1 && strstr(out, "Makefile: byte 0: not a gmshim log"), "a foreign file: exit %d\n%.3000s", rc, out);
    free(out);
    rc = gm(&out, "dump", "/nonexistent.gmlog", NULL, NULL, NULL, NULL);
    ck_assert_msg(rc == 1 && strstr(out, "cannot open: No such file"), "a missing file: exit %d\n%.3000s", rc, out);
    free(out);
}
END_TEST

static char *dump_json(const char *log);

uint8_t *gm_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    size_t cap = 1 << 20, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t r; buf && (r = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    ck_assert_msg(buf != NULL, "out of memory reading %s", path);
    *len = n;
    return buf;
}

void gm_spew(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f && fwrite(data, 1, len, f) == len && fclose(f) == 0, "cannot write %s", path);
}

/* The commands that read logs, each given the log after these words. */
static const char *const reading[][3] = {
    {"summary"}, {"--json", "summary"}, {"report"}, {"--json", "report"}, {"leaks"}, {"frag"}, {"oom"},
    {"timeline", "--json"}, {"dump"}, {"--json", "dump"}, {"whatif"}, {"--json", "whatif"},
};
#define NREADING (sizeof reading / sizeof reading[0])

static int gm_reading(size_t i, const char *log, char **out)
{
    const char *args[5] = {NULL};
    int k = 0;
    for (int w = 0; w < 3 && reading[i][w]; w++)
        args[k++] = reading[i][w];
    args[k] = log;
    return gm_cli(out, args);
}

/* Cut copies: a new writer's log at a chunk boundary says how many chunks it lacks; an older
 * writer's log closed at exit (the fixture) that lost its END record says so. Exit 2 from every
 * command, never a clean-looking report. */
START_TEST(test_logs_cut_at_a_chunk_boundary_exit_2_saying_what_is_missing)
{
    const char *dir = temp_dir();
    char log[512], cut[520];
    snprintf(log, sizeof log, "%s/rt.gmlog", dir);
    snprintf(cut, sizeof cut, "%s/cut.gmlog", dir);
    free(record("log_roundtrip", log, NULL));
    size_t len, flen;
    uint8_t *data = gm_slurp(log, &len), *fix = gm_slurp(FIXTURE, &flen);
    const gmlog_file_header_t *h = (const gmlog_file_header_t *)data;
    ck_assert_msg(h->chunks_at_close >= 2 && len == h->header_size + h->chunks_at_close * GMLOG_CHUNK_SIZE,
                  "the writer's chunks_at_close %llu in %zu bytes", (unsigned long long)h->chunks_at_close, len);
    char want[160];
    snprintf(want, sizeof want, "byte %zu: the file holds 1 of the %llu chunks the log was closed with",
             (size_t)h->header_size + GMLOG_CHUNK_SIZE, (unsigned long long)h->chunks_at_close);
    gm_spew(cut, data, h->header_size + GMLOG_CHUNK_SIZE);
    for (size_t i = 0; i < NREADING; i++) {
        char *out;
        int rc = gm_reading(i, cut, &out);
        ck_assert_msg(rc == 2 && strstr(out, want), "gmshim %s %s of a new log cut after a chunk: exit %d\n%.3000s",
                      reading[i][0], reading[i][1] ? reading[i][1] : "", rc, out);
        free(out);
    }
    gm_spew(cut, fix, ((const gmlog_file_header_t *)fix)->header_size);
    for (size_t i = 0; i < NREADING; i++) {
        char *out;
        int rc = gm_reading(i, cut, &out);
        ck_assert_msg(rc == 2 && strstr(out, "byte 4096: the log was closed at exit but its end record is missing"),
                      "gmshim %s %s of an old log cut to its header: exit %d\n%.3000s", reading[i][0],
                      reading[i][1] ? reading[i][1] : "", rc, out);
        free(out);
    }
    free(data);
    free(fix);
}
END_TEST

/* A kill in a process's first milliseconds leaves an empty file or a header without chunks:
 * an unclosed run that recorded nothing, exit 0 like any unclosed log. */
START_TEST(test_logs_of_a_process_killed_at_its_start_read_as_empty_runs)
{
    const char *dir = temp_dir();
    char path[512];
    size_t flen;
    uint8_t *fix = gm_slurp(FIXTURE, &flen);
    gmlog_file_header_t *h = (gmlog_file_header_t *)fix;
    h->flags = 0, h->end_ns = 0, h->close_reason = 0;
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s.gmlog", dir, k ? "header-only" : "empty");
        gm_spew(path, fix, k ? h->header_size : 0);
        for (size_t i = 0; i < NREADING; i++) {
            char *out;
            int rc = gm_reading(i, path, &out);
            /* dump --json has no line for it: its header record says the state */
            int json_dump = reading[i][1] && !strcmp(reading[i][1], "dump");
            const char *state = k ? "not closed: the process was killed" : "not closed: the process ended before "
                                                                           "writing its header";
            ck_assert_msg(rc == 0 && !strstr(out, "gmshim: ") && strstr(out, state) &&
                          (json_dump || strstr(out, "no records: the process ended before recording anything")),
                          "gmshim %s %s of %s: exit %d\n%.3000s", reading[i][0], reading[i][1] ? reading[i][1] : "",
                          path, rc, out);
            free(out);
        }
    }
    free(fix);
}
END_TEST

/* A damaged record among the last ones read: every command names it (the report used to exit 2
 * with no word of why), and dump rejects what the reports reject while printing the rest. */
START_TEST(test_a_damaged_record_at_the_end_is_named_by_every_command)
{
    const char *dir = temp_dir();
    char path[512];
    snprintf(path, sizeof path, "%s/bad-mark.gmlog", dir);
    char *dump = dump_json(FIXTURE);
    const char *last = NULL;
    for (const char *p = dump; (p = strstr(p, "\"type\":\"mark\"")); p++)
        last = p;
    unsigned long off = 0;
    ck_assert_msg(last && strstr(last, "\"offset\":") && sscanf(strstr(last, "\"offset\":"), "\"offset\":%lu", &off) == 1,
                  "no mark in the fixture's dump");
    free(dump);
    size_t flen;
    uint8_t *fix = gm_slurp(FIXTURE, &flen);
    uint32_t huge = 0xffff;
    memcpy(fix + off + 12, &huge, 4); /* gmlog_mark_t.len */
    gm_spew(path, fix, flen);
    char want[128];
    snprintf(want, sizeof want, "byte %lu: a mark's label of 65535 bytes does not fit in its", off);
    for (size_t i = 0; i < NREADING; i++) {
        char *out;
        int rc = gm_reading(i, path, &out);
        ck_assert_msg(rc == 2 && strstr(out, want), "gmshim %s %s of a log with a damaged last mark: exit %d\n%.3000s",
                      reading[i][0], reading[i][1] ? reading[i][1] : "", rc, out);
        if (!strcmp(reading[i][0], "dump"))
            ck_assert_msg(strstr(out, "label=\"iteration 12\"") && strstr(out, "id=13 malformed"),
                          "dump does not print what it could:\n%.3000s", out);
        free(out);
    }
    free(fix);
}
END_TEST

/* An allocation whose type byte reads as a checkpoint's (too short for one): dump reported it
 * while every report dropped it silently and exited 0. Each command says so and exits 2. */
START_TEST(test_a_record_damaged_into_a_checkpoint_is_damage_to_every_command)
{
    char path[512];
    snprintf(path, sizeof path, "%s/bad-ckpt.gmlog", temp_dir());
    char *dump = dump_json(FIXTURE);
    const char *alloc = dump;
    for (int i = 0; i < 30 && alloc; i++)
        alloc = strstr(alloc + 1, "\"type\":\"alloc\"");
    unsigned long off = 0;
    ck_assert_msg(alloc && strstr(alloc, "\"offset\":") &&
                  sscanf(strstr(alloc, "\"offset\":"), "\"offset\":%lu", &off) == 1, "no 30th alloc in the dump");
    free(dump);
    size_t flen;
    uint8_t *fix = gm_slurp(FIXTURE, &flen);
    ck_assert_msg(off < flen && fix[off] == GMLOG_ALLOC && fix[off + 1] * 8 < sizeof(gmlog_checkpoint_t),
                  "byte %lu is no short alloc record", off);
    fix[off] = GMLOG_CHECKPOINT;
    gm_spew(path, fix, flen);
    free(fix);
    char want[128];
    snprintf(want, sizeof want, "byte %lu: a checkpoint record of", off);
    for (size_t i = 0; i < NREADING; i++) {
        char *out;
        int rc = gm_reading(i, path, &out);
        ck_assert_msg(rc == 2 && strstr(out, want), "gmshim %s %s of a log with an alloc read as a checkpoint: exit "
                      "%d\n%.3000s", reading[i][0], reading[i][1] ? reading[i][1] : "", rc, out);
        free(out);
    }
}
END_TEST

/* `gmshim --json dump LOG`, which must succeed. */
static char *dump_json(const char *log)
{
    char *out;
    int rc = gm(&out, "--json", "dump", log, NULL, NULL, NULL);
    ck_assert_msg(rc == 0, "dump of %s exited %d:\n%.2000s", log, rc, out);
    return out;
}

/* What tests/integration/fence_loop says of its run, recorded into dir/name. */
typedef struct fence_loop_run {
    char log[512];
    unsigned long long fences, elapsed_ns, fence_ns; /* the last by the stats API */
} fence_loop_run_t;

static fence_loop_run_t run_fence_loop(const char *dir, const char *name)
{
    fence_loop_run_t r;
    snprintf(r.log, sizeof r.log, "%s/%s", dir, name);
    char *out = record("fence_loop", r.log, NULL);
    ck_assert_msg(sscanf(out, "fences=%llu elapsed_ns=%llu fence_ns=%llu", &r.fences, &r.elapsed_ns, &r.fence_ns) == 3,
                  "fence_loop: %s", out);
    free(out);
    return r;
}

/* A loop that records a fence per pair logs every fence but at most one stats snapshot per 10 ms. */
START_TEST(test_the_log_keeps_every_fence_and_few_stats_snapshots)
{
    classic_pool_test();
    const char *dir = temp_dir();
    fence_loop_run_t r = run_fence_loop(dir, "fences.gmlog");
    const char *log = r.log;
    unsigned long long fences = r.fences, elapsed_ns = r.elapsed_ns;
    char *out = dump_json(log);
    size_t logged = gm_count(out, "\"type\":\"fence\""), snapshots = gm_count(out, "\"type\":\"stats\"");
    free(out);
    ck_assert_msg(fences >= 2000 && logged == fences, "%llu fences, %zu in the log", fences, logged);
    ck_assert_msg(snapshots >= 1 && snapshots <= elapsed_ns / 10000000 + 1,
                  "%zu stats snapshots in %llu ns (%llu fences)", snapshots, elapsed_ns, fences);
    unlink(log);
    rmdir(dir);
}
END_TEST

/* Each fence's record says why it was recorded, how long its runtime calls took and how many events
 * it recorded; the summary adds them up, the times as the stats API counts them. */
START_TEST(test_the_fences_reasons_and_times_add_up)
{
    classic_pool_test();
    const char *dir = temp_dir();
    fence_loop_run_t r = run_fence_loop(dir, "fence-times.gmlog");
    const char *log = r.log;
    unsigned long long fences = r.fences, api_ns = r.fence_ns;
    ck_assert_msg(fences > 0 && api_ns > 0, "%llu fences taking %llu ns by the API", fences, api_ns);
    char *out = dump_json(log);
    unsigned long long logged = 0, sum = 0, events = 0, by[5] = {0};
    static const char *const whys[5] = {"\"why\":\"?\"", "\"why\":\"frees\"", "\"why\":\"alloc\"",
                                        "\"why\":\"need\"", "\"why\":\"trim\""};
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strstr(line, "\"type\":\"fence\""))
            continue;
        logged++;
        const char *dur = strstr(line, "\"dur_ns\":");
        ck_assert_msg(dur, "a fence without its time: %s", line);
        sum += strtoull(dur + 9, NULL, 10);
        const char *ev = strstr(line, "\"events\":");
        ck_assert_msg(ev, "a fence without its events: %s", line);
        events += strtoull(ev + 9, NULL, 10);
        for (int k = 0; k < 5; k++)
            by[k] += strstr(line, whys[k]) != NULL;
    }
    free(out);
    ck_assert_msg(by[0] == 0 && by[1] + by[2] + by[3] + by[4] == logged, "reasons: ? %llu, frees %llu, alloc %llu, "
                  "need %llu, trim %llu of %llu", by[0], by[1], by[2], by[3], by[4], logged);
    ck_assert_msg(by[1] > 0 && by[2] > 0, "the loop's frees and its allocations both record fences: %llu, %llu",
                  by[1], by[2]);
    /* The API's figure was read before the program's exit, whose fences the log has as well. */
    ck_assert_msg(logged >= fences && sum >= api_ns, "%llu fences taking %llu ns in the log, %llu taking %llu by the API",
                  logged, sum, fences, api_ns);
    char *json;
    ck_assert_int_eq(gm(&json, "--json", "summary", log), 0);
    char want[256];
    snprintf(want, sizeof want, "\"fence_ns\":%llu,", sum);
    ck_assert_msg(strstr(json, want), "the summary does not add the fences' times to %llu ns:\n%.3000s", sum, json);
    snprintf(want, sizeof want, "\"fences_by\":{\"unknown\":0,\"frees\":%llu,\"alloc\":%llu,\"need\":%llu,"
             "\"trim\":%llu}", by[1], by[2], by[3], by[4]);
    ck_assert_msg(strstr(json, want), "no %s in the summary:\n%.3000s", want, json);
    ck_assert_msg(events >= logged, "%llu fences recorded %llu events", logged, events);
    snprintf(want, sizeof want, "\"fence_events\":%llu,", events);
    ck_assert_msg(strstr(json, want), "no %s in the summary:\n%.3000s", want, json);
    free(json);
    char *text;
    ck_assert_int_eq(gm(&text, "summary", log), 0);
    char *w = text; /* the text wraps its lines: runs of blanks read as one space */
    for (const char *c = text; *c; c++)
        if (!(*c == ' ' || *c == '\n') || (w > text && w[-1] != ' '))
            *w++ = *c == '\n' ? ' ' : *c;
    *w = 0;
    ck_assert_msg(strstr(text, "after enough frees") && strstr(text, "by allocations finding no reusable block") &&
                  strstr(text, "their runtime calls"), "the summary's fences line:\n%.3000s", text);
    char per[64];
    snprintf(per, sizeof per, ", %.1f events a fence", (double)events / (double)logged);
    ck_assert_msg(strstr(text, per), "no '%s' in the summary:\n%.3000s", per, text);
    free(text);
    unlink(log);
    rmdir(dir);
}
END_TEST

/* Room for one extent but not the one the writer maps ahead: the log is whole, and quiet. */
START_TEST(test_a_log_without_room_ahead_keeps_writing_in_the_extent_it_has)
{
    const char *dir = temp_dir();
    char log[512];
    snprintf(log, sizeof log, "%s/near-full.gmlog", dir);
    char *out = record("log_near_full", log, NULL);
    int skipped = strstr(out, "skipped") != NULL;
    ck_assert_msg(!strstr(out, "stopped"), "the log stopped:\n%s", out);
    free(out);
    if (!skipped) {
        out = dump_json(log);
        /* The program's frees; a thread cache's returns of blocks to the pool are no frees. */
        size_t allocs = gm_count(out, "\"type\":\"alloc\""),
               frees = gm_count(out, "\"type\":\"free\"") - gm_count(out, "\"returned\":true");
        free(out);
        ck_assert_msg(allocs == 1000 && frees == 1000, "%zu allocations and %zu frees in the log", allocs, frees);
        unlink(log);
        /* Filling the one extent it has room for stops the log with one warning; the program
         * goes on to its end. */
        out = record("log_near_full", log, "PAIRS=700000");
        ck_assert_msg(gm_count(out, "stopped") == 1 && strstr(out, "ok: 700000 pairs"), "a full log:\n%s", out);
        free(out);
    }
    unlink(log);
    rmdir(dir);
}
END_TEST

START_TEST(test_colour_only_when_asked_and_write_errors_fail)
{
    char *out;
    int rc = gm(&out, "--color=always", "summary", FIXTURE, NULL, NULL, NULL);
    ck_assert_msg(rc == 0 && strstr(out, "\033["), "--color=always has no escapes");
    free(out);
    rc = gm(&out, "summary", FIXTURE, NULL, NULL, NULL, NULL);
    ck_assert_msg(rc == 0 && !strstr(out, "\033["), "colour into a pipe without --color=always");
    free(out);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s summary %s > /dev/full", build_path("gmshim"), FIXTURE);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    rc = run_program(argv, NULL, 0, &out);
    ck_assert_msg(rc == 1 && strstr(out, "error writing"), "writing to /dev/full: exit %d\n%.3000s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_a_uniquely_named_allocator_is_named_with_its_line)
{
    const char *dir = temp_dir();
    char log[512];
    snprintf(log, sizeof log, "%s/sym.gmlog", dir);
    free(record("sym_unique", log, NULL));
    char *out;
    int rc = gm(&out, "--json", "leaks", log, NULL, NULL, NULL);
    int line = 0;
    FILE *src = fopen("tests/integration/sym_unique.c", "r");
    char buf[512];
    for (int n = 1; src && fgets(buf, sizeof buf, src); n++)
        if (strstr(buf, "SYM_UNIQUE_LINE") && strstr(buf, "cudaMalloc"))
            line = n;
    if (src)
        fclose(src);
    char want[64];
    snprintf(want, sizeof want, "\"line\":%d", line);
    const char *first = strstr(out, "\"frames\":[{");
    ck_assert_msg(rc == 0 && first && strstr(first, "\"function\":\"gmshim_test_unique_allocator_7f3a") &&
                  strstr(first, "sym_unique.c") && strstr(first, want) && strstr(out, "\"bytes\":3145728"),
                  "leaks does not name the allocator at sym_unique.c:%d: %d\n%s", line, rc, out);
    free(out);
}
END_TEST

START_TEST(test_fuzz_target_survives_the_corpus)
{
    const char *bin = getenv("GMSHIM_FUZZ_BIN");
    if (!bin || !*bin || access(bin, X_OK) != 0)
        return; /* not built in this configuration (make test-asan passes none) */
    /* libFuzzer adds what it finds to its first directory: a scratch one, not the seeds. */
    const char *argv[] = {bin, "-runs=300", temp_dir(), "tests/fuzz/corpus", NULL};
    char *out;
    int rc = run_program(argv, NULL, 0, &out);
    ck_assert_msg(rc == 0, "%s exited %d:\n%s", bin, rc, out);
    free(out);
}
END_TEST

/* ---- bounded logs ----------------------------------------------------------------------------------- */

/* The example wrapped log of testlog.h, written to a fresh file. */
static const char *wrapped_file(int wrapped, int end_ckpt)
{
    static char path[8][512];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, sizeof path[0], "%s/wrapped.gmlog", temp_dir());
    tlog_t b;
    tlog_wrapped_example(&b, wrapped, end_ckpt);
    ck_assert_msg(tlog_write(&b, p) == 0, "cannot write %s", p);
    tlog_free_buf(&b);
    return p;
}

/* Early chunks gone: every report says from when it has per-event detail and what the checkpoint
 * summarised; the totals, the peak and the leak by site still cover the whole run. */
START_TEST(test_a_wrapped_log_says_what_its_checkpoint_summarised)
{
    const char *log = wrapped_file(1, 1);
    static const char line[] = "the log reached its size limit (GMSHIM_LOG_LIMIT): events before 1.000 s were "
                               "summarised in a checkpoint (15 allocations, 13 frees); per-event detail starts at "
                               "1.001 s ";
    char *out, *text;
    int rc = gm(&text, "report", log);
    out = flat(text); /* the line is wrapped at 100 columns */
    free(text);
    ck_assert_msg(rc == 0 && strstr(out, line) && strstr(out, "17 allocs, 16 frees; 1 live at the end (1.00 MiB)") &&
                  strstr(out, "allocated 81.5 MiB") && strstr(out, "1 x 0x1007") && !strstr(out, "x 0x1009"),
                  "report: exit %d\n%s", rc, out);
    ck_assert_msg(strstr(out, line) < strstr(out, "Summary"), "the checkpoint's line comes after the summary:\n%s", out);
    free(out);
    rc = gm(&out, "--json", "summary", log);
    ck_assert_msg(rc == 0 && strstr(out, "\"wrapped\":true,\"checkpoint\":1,\"summarised_before_ns\":1000000000,"
                                         "\"detail_from_ns\":1001000000,\"dropped\":{\"allocs\":15,\"frees\":13}") &&
                  strstr(out, "\"allocs\":17,\"frees\":16") && strstr(out, "\"peak_allocated\":85458944") &&
                  strstr(out, "\"marks\":2"), "summary --json: exit %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "oom", log);
    ck_assert_msg(rc == 0 && strstr(out, "OOM 1 on device 0 at 0.350 s: 1.00 GiB asked for") &&
                  strstr(out, "(before the log's checkpoint: its record was kept, not the live blocks and sites of then)"),
                  "oom: exit %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "--json", "summary", wrapped_file(0, 1));
    ck_assert_msg(rc == 0 && strstr(out, "\"wrapped\":false") && !strstr(out, "dropped") &&
                  strstr(out, "\"allocs\":17,\"frees\":16") && strstr(out, "\"records\":42"),
                  "the same run unwrapped: exit %d\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_a_wrapped_log_without_a_complete_checkpoint_exits_2)
{
    const char *log = wrapped_file(1, 0);
    char *out;
    int rc = gm(&out, "summary", log);
    ck_assert_msg(rc == 2 && gm_count(out, "gmshim: ") == 1 &&
                  strstr(out, "byte 44: the log reached its size limit (GMSHIM_LOG_LIMIT) and reused the space of its "
                              "oldest records, but holds no complete checkpoint") && !strstr(out, "were summarised"),
                  "exit %d\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_dump_shows_checkpoints_as_they_are)
{
    const char *log = wrapped_file(1, 1);
    char *out;
    int rc = gm(&out, "dump", log);
    ck_assert_msg(rc == 0 && strstr(out, " wrapped checkpoint=1 detail_from_ns=1001000000") &&
                  strstr(out, "checkpoint          in_checkpoint event=begin seq=1 at_ns=1000000000") &&
                  strstr(out, "at                  in_checkpoint at_ns=400000000") &&
                  strstr(out, "cut           dev=0 in_checkpoint cut_ns=1001000000 requested=1572864") &&
                  strstr(out, "allocs=15 frees=13") && gm_count(out, "in_checkpoint") == 14 &&
                  gm_count(out, " mark ") == 3, "dump: exit %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "--json", "dump", log);
    ck_assert_msg(rc == 0 && gm_count(out, "\"in_checkpoint\":true") == 14 && strstr(out, "\"type\":\"cut\"") &&
                  strstr(out, "\"event\":\"end\""), "dump --json: exit %d\n%s", rc, out);
    free(out);
}
END_TEST

/* The writer's own bounded log, past its limit: read from its newest checkpoint, the run's totals
 * and its leak by site are whole, and nothing reads as damage. `extra`: one more setting or NULL. */
static void bounded_log_reports_the_whole_run(const char *extra)
{
    char log[600], env_log[700];
    snprintf(log, sizeof log, "%s/bounded.gmlog", temp_dir());
    snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s", log);
    char path[600];
    snprintf(path, sizeof path, "%s", build_path("tests/integration/log_bounded"));
    const char *argv[] = {path, NULL};
    const char *env[] = {env_log, "GMSHIM_LOG_LIMIT=64M", "PAIRS=600000", "THREADS=4", "LEAK_EVERY=50000",
                         "FAKECUDA_MEM=1G", extra, NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0, "log_bounded exited %d:\n%s", rc, out);
    free(out);
    rc = gm(&out, "--json", "summary", log);
    ck_assert_msg(rc == 0 && strstr(out, "\"wrapped\":true,\"checkpoint\":") && strstr(out, "\"partial\":false") &&
                  strstr(out, "\"allocs\":2400012,\"frees\":2400000") && strstr(out, "\"marks\":6"),
                  "summary --json of the bounded log: exit %d\n%.4000s", rc, out);
    free(out);
    char *text;
    rc = gm(&text, "leaks", log);
    out = flat(text);
    free(text);
    ck_assert_msg(rc == 0 && strstr(out, "were summarised in a checkpoint") &&
                  strstr(out, "12 allocations (12.0 MiB) live at the end, from 1 call site") && strstr(out, "leak_one"),
                  "leaks of the bounded log: exit %d\n%.4000s", rc, out);
    free(out);
}

START_TEST(test_a_bounded_log_past_its_limit_reports_the_whole_run)
{
    bounded_log_reports_the_whole_run(NULL);
}
END_TEST

/* The same under GMSHIM_PLAN: a checkpoint's totals count the planned step's allocations and
 * frees (they left out the ~3 200 the plan served, so the run's totals came out short). */
START_TEST(test_a_bounded_log_under_the_plan_counts_its_planned_allocations)
{
    bounded_log_reports_the_whole_run("GMSHIM_PLAN=1");
}
END_TEST

Suite *analyzer_cli_suite(void)
{
    Suite *s = suite_create("analyzer_cli");
    TCase *tc = tcase_create("commands");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_help_lists_every_command_and_each_has_its_own);
    tcase_add_test(tc, test_usage_errors_exit_1_with_a_message);
    tcase_add_test(tc, test_site_reports_in_parallel_equal_the_ordered_replay);
    tcase_add_test(tc, test_h200_fixtures_name_the_python_leak_and_the_static_cudart_leak);
    tcase_add_test(tc, test_one_log_per_rank_gives_sections_and_a_combined_line);
    tcase_add_test(tc, test_damaged_logs_exit_nonzero_with_the_offset);
    tcase_add_test(tc, test_logs_cut_at_a_chunk_boundary_exit_2_saying_what_is_missing);
    tcase_add_test(tc, test_logs_of_a_process_killed_at_its_start_read_as_empty_runs);
    tcase_add_test(tc, test_a_damaged_record_at_the_end_is_named_by_every_command);
    tcase_add_test(tc, test_a_record_damaged_into_a_checkpoint_is_damage_to_every_command);
    tcase_add_test(tc, test_the_log_keeps_every_fence_and_few_stats_snapshots);
    tcase_add_test(tc, test_the_fences_reasons_and_times_add_up);
    tcase_add_test(tc, test_a_log_without_room_ahead_keeps_writing_in_the_extent_it_has);
    tcase_add_test(tc, test_colour_only_when_asked_and_write_errors_fail);
    tcase_add_test(tc, test_a_uniquely_named_allocator_is_named_with_its_line);
    tcase_add_test(tc, test_fuzz_target_survives_the_corpus);
    suite_add_tcase(s, tc);
    TCase *ck = tcase_create("checkpoints");
    tcase_set_timeout(ck, 300);
    tcase_add_test(ck, test_a_wrapped_log_says_what_its_checkpoint_summarised);
    tcase_add_test(ck, test_a_bounded_log_under_the_plan_counts_its_planned_allocations);
    tcase_add_test(ck, test_a_wrapped_log_without_a_complete_checkpoint_exits_2);
    tcase_add_test(ck, test_dump_shows_checkpoints_as_they_are);
    tcase_add_test(ck, test_a_bounded_log_past_its_limit_reports_the_whole_run);
    suite_add_tcase(s, ck);
    return s;
}
