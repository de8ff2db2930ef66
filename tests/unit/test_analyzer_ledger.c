/* The card's ledger end to end: tests/integration/ledger_card under the preload with the fake
 * NVML (another process holding 1.5 GiB, a 300 MiB context) and a library taking memory through
 * the driver; `gmshim summary` and `gmshim oom` must name every term and add up to the card. */
#include "suites.h"
#include "test_analyzer_cli.h"
#include "testlog.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1ull << 20)

static char logpath[4096];

/* Runs ledger_card in `mode` with `extra` in its environment; its stdout and stderr. */
static char *run_card(const char *mode, const char *extra)
{
    static char logenv[4200], libpath[4200];
    snprintf(logpath, sizeof logpath, "%s/card.gmlog", temp_dir());
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", logpath);
    snprintf(libpath, sizeof libpath, "LD_LIBRARY_PATH=%s", build_path("fake_nvml"));
    const char *argv[] = {build_path("tests/integration/ledger_card"), mode, NULL};
    const char *env[] = {logenv, libpath, "FAKECUDA_MEM=4G", "FAKECUDA_CONTEXT=300M", extra, NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0 && strstr(out, "expected OOM"), "ledger_card %s exited %d:\n%s", mode, rc, out);
    return out;
}

static char *analyze(const char *cmd, int json)
{
    const char *argv[] = {build_path("gmshim"), json ? "--json" : "--color=never", cmd, logpath, NULL};
    char *out = NULL;
    int rc = run_program(argv, NULL, 0, &out);
    ck_assert_msg(rc == 0, "gmshim %s exited %d:\n%s", cmd, rc, out);
    return out;
}

/* The JSON ledger object named `key` (its first one): its total and the sum of its terms. */
static void ledger_sums(const char *json, const char *key, uint64_t *total, uint64_t *sum, unsigned *terms)
{
    char want[64];
    snprintf(want, sizeof want, "\"%s\":{", key);
    const char *l = strstr(json, want);
    ck_assert_msg(l != NULL, "no %s in:\n%s", key, json);
    const char *t = strstr(l, "\"total\":"), *end = strstr(l, "]");
    ck_assert_msg(t && end, "a ledger without total or terms:\n%s", l);
    *total = strtoull(t + 8, NULL, 10);
    *sum = 0;
    *terms = 0;
    for (const char *b = strstr(l, "\"bytes\":"); b && b < end; b = strstr(b + 1, "\"bytes\":")) {
        *sum += strtoull(b + 8, NULL, 10);
        (*terms)++;
    }
}

/* The bytes of the first term whose JSON object holds `needle` in the ledger named key. */
static uint64_t term_bytes(const char *json, const char *key, const char *needle)
{
    char want[64];
    snprintf(want, sizeof want, "\"%s\":{", key);
    const char *l = strstr(json, want), *end = l ? strstr(l, "]") : NULL;
    const char *n = l ? strstr(l, needle) : NULL;
    if (!n || n > end)
        return 0;
    const char *b = strstr(n, "\"bytes\":");
    return b && b < end ? strtoull(b + 8, NULL, 10) : 0;
}

/* The card of the last run_card "oom": every term adds up to the device, each measured where
 * it can be. */
static void check_card_terms(void)
{
    const char *keys[] = {"ledger_at_peak", "ledger"};
    const char *cmds[] = {"summary", "oom"};
    for (int k = 0; k < 2; k++) {
        char *j = analyze(cmds[k], 1);
        uint64_t total, sum;
        unsigned n;
        ledger_sums(j, keys[k], &total, &sum, &n);
        ck_assert_msg(total == 4096 * MiB && sum == total && n >= 5,
                      "%s: %u terms add up to %" PRIu64 " of %" PRIu64 ":\n%s", cmds[k], n, sum, total, j);
        uint64_t lib = term_bytes(j, keys[k], "\"name\":\"libfakenccl.so\"");
        uint64_t ctx = term_bytes(j, keys[k], "\"term\":\"context\"");
        uint64_t proc = term_bytes(j, keys[k], "\"command\":\"sleep 60\"");
        ck_assert_msg(lib == 640 * MiB, "%s: the library's term is %" PRIu64 ":\n%s", cmds[k], lib, j);
        ck_assert_msg(ctx == 300 * MiB && strstr(strstr(j, "\"term\":\"context\""), "\"measured\":true"),
                      "%s: the context is %" PRIu64 ", measured at its creation:\n%s", cmds[k], ctx, j);
        ck_assert_msg(proc == 1536 * MiB, "%s: the other process held %" PRIu64 ":\n%s", cmds[k], proc, j);
        free(j);
    }
}

START_TEST(test_every_term_of_the_card_adds_up_to_the_device_total)
{
    free(run_card("oom", NULL));
    check_card_terms();
}
END_TEST

/* Under growable ranges each 2 MiB page run is logged as a segment of its own: a block holds every
 * page it covers, not only its first (the card counted the rest as 1.49 GiB of cache, squeezing
 * the context to 0 and the other process to an inference). */
START_TEST(test_the_card_of_growable_ranges_counts_a_block_in_every_page_it_covers)
{
    free(run_card("oom", "GMSHIM_SEGMENTS=vmm"));
    check_card_terms();
    char *j = analyze("summary", 1);
    ck_assert_msg(term_bytes(j, "ledger_at_peak", "\"term\":\"cache_reusable\"") == 0,
                  "a cache at the peak of a run that freed nothing:\n%s", j);
    free(j);
}
END_TEST

START_TEST(test_an_oom_another_process_decides_names_it_with_its_remedy)
{
    free(run_card("oom", NULL));
    char *t = analyze("oom", 0);
    ck_assert_msg(strstr(t, "outside  another process, pid ") && strstr(t, "`sleep 60` held 1.50 GiB") &&
                      strstr(t, "stop or move the other process"),
                  "the OOM does not name the other process:\n%s", t);
    ck_assert_msg(!strstr(t, "GMSHIM_CUPTI=1"), "the ledger names the term, yet the CUPTI hint is still given:\n%s", t);
    free(t);
}
END_TEST

/* The card's program in `mode` ends in an OOM whose deciding term is the fake NCCL's buffers. */
static void library_decides(const char *mode)
{
    free(run_card(mode, NULL));
    char *j = analyze("oom", 1);
    const char *d = strstr(j, "\"deciding_term\":");
    ck_assert_msg(d && strstr(d, "library libfakenccl.so") && strstr(d, "NCCL_BUFFSIZE"),
                  "%s: the library is not the deciding term:\n%s", mode, j);
    free(j);
}

START_TEST(test_an_oom_a_librarys_buffers_decide_names_the_library)
{
    library_decides("libheavy");
}
END_TEST

/* Newer NCCL maps its buffers: physical memory created once, mapped at two addresses. The card
 * names the library for it once, and the buffer it gave back (released, then unmapped) is gone. */
START_TEST(test_a_librarys_mapped_buffers_are_named_once)
{
    free(run_card("vmm", NULL));
    const char *keys[] = {"ledger_at_peak", "ledger"};
    const char *cmds[] = {"summary", "oom"};
    for (int k = 0; k < 2; k++) {
        char *j = analyze(cmds[k], 1);
        uint64_t total, sum;
        unsigned n;
        ledger_sums(j, keys[k], &total, &sum, &n);
        uint64_t lib = term_bytes(j, keys[k], "\"name\":\"libfakenccl.so\"");
        ck_assert_msg(total == 4096 * MiB && sum == total, "%s: %u terms add up to %" PRIu64 " of %" PRIu64 ":\n%s",
                      cmds[k], n, sum, total, j);
        ck_assert_msg(lib == 640 * MiB, "%s: the library's mapped buffers are %" PRIu64 ", not 640 MiB:\n%s", cmds[k],
                      lib, j);
        ck_assert_msg(!strstr(j, "\"term\":\"unnamed\""), "%s: memory not named:\n%s", cmds[k], j);
        free(j);
    }
    char *j = analyze("summary", 1);
    /* The pool's buffers are all live at the OOM: the one free is the library's released buffer. */
    ck_assert_msg(strstr(j, "\"frees\":1,") && strstr(j, "\"allocs_by_kind\":{\"pool\":6,\"foreign\":2}"),
                  "the released buffer's free is not in the log:\n%s", j);
    free(j);
}
END_TEST

START_TEST(test_an_oom_a_librarys_mapped_buffers_decide_names_the_library)
{
    library_decides("vmmheavy");
}
END_TEST

START_TEST(test_without_nvml_the_card_still_adds_up_and_nothing_is_printed)
{
    char *out = run_card("oom", "FAKE_NVML_FAIL=1");
    ck_assert_msg(!strstr(out, "gmshim["), "NVML's failure printed something:\n%s", out);
    free(out);
    char *j = analyze("oom", 1);
    uint64_t total, sum;
    unsigned n;
    ledger_sums(j, "ledger", &total, &sum, &n);
    ck_assert_msg(sum == total && total == 4096 * MiB, "%" PRIu64 " of %" PRIu64 ":\n%s", sum, total, j);
    ck_assert_msg(!strstr(j, "\"term\":\"process\"") && strstr(j, "\"term\":\"context\"") &&
                      strstr(strstr(j, "\"term\":\"context\""), "\"measured\":false"),
                  "without NVML: no process, the context inferred:\n%s", j);
    free(j);
}
END_TEST

/* gmshim or python3 with arguments up to NULL: exit status, output in *out. */
static int runv(char **out, const char *const *args)
{
    return run_program(args, NULL, 0, out);
}

static char *read_file(const char *path)
{
    size_t n;
    uint8_t *raw = gm_slurp(path, &n);
    char *b = realloc(raw, n + 1);
    ck_assert_msg(b != NULL, "out of memory reading %s", path);
    b[n] = 0;
    return b;
}

START_TEST(test_the_pictures_carry_the_cards_terms)
{
    free(run_card("oom", NULL));
    char trace[4200], snap[4200], html[4200], svg[4200], *out = NULL;
    snprintf(trace, sizeof trace, "%s/card.json", temp_dir());
    snprintf(snap, sizeof snap, "%s/card.pickle", temp_dir());
    snprintf(html, sizeof html, "%s/card.html", temp_dir());
    snprintf(svg, sizeof svg, "%s/card.svg", temp_dir());
    const char *gm = build_path("gmshim");
    int rc = runv(&out, (const char *const[]){gm, "export", "perfetto", "-o", trace, logpath, NULL});
    ck_assert_msg(rc == 0, "export perfetto exited %d:\n%s", rc, out);
    free(out);
    rc = runv(&out, (const char *const[]){"/usr/bin/env", "python3", "tests/export/check_perfetto.py", trace, "--card",
                                          "another process, pid", NULL});
    ck_assert_msg(rc == 0 && strstr(out, "card samples "), "the trace's card counters:\n%s", out);
    free(out);
    rc = runv(&out, (const char *const[]){gm, "export", "memory-viz", "-o", snap, logpath, NULL});
    ck_assert_msg(rc == 0, "export memory-viz exited %d:\n%s", rc, out);
    free(out);
    rc = runv(&out, (const char *const[]){"/usr/bin/env", "python3", "tests/export/check_memviz.py", snap,
                                          "--expect-ledger", "process", "--expect-ledger", "context", NULL});
    ck_assert_msg(rc == 0, "the snapshot's gmshim_ledger:\n%s", out);
    free(out);
    rc = runv(&out, (const char *const[]){gm, "timeline", "--html", html, logpath, NULL});
    ck_assert_msg(rc == 0, "timeline --html exited %d:\n%s", rc, out);
    free(out);
    rc = runv(&out, (const char *const[]){gm, "timeline", "--svg", svg, logpath, NULL});
    ck_assert_msg(rc == 0, "timeline --svg exited %d:\n%s", rc, out);
    free(out);
    char *page = read_file(html), *image = read_file(svg);
    ck_assert_msg(page && strstr(page, "\"k\":[") && strstr(page, "\"card\":[[") &&
                      strstr(page, "another process, pid ") && strstr(page, "CUDA context and module code"),
                  "the page carries no card band or terms");
    ck_assert_msg(image && strstr(image, "<g class=\"card\"><title>the card's ledger at ") &&
                      strstr(image, "`sleep 60`"),
                  "the SVG draws no card band");
    free(page);
    free(image);
}
END_TEST

/* A wrapped log: its checkpoint repeats the device's last LEDGER sample (an AT, then the copy),
 * from before the space was reused; the summary's ledger still names the other process. */
START_TEST(test_a_wrapped_log_keeps_its_sample_through_the_checkpoint)
{
    const uint64_t ms = 1000000;
    tlog_t b;
    tlog_begin(&b, GMLOG_F_WRAPPED);
    tlog_chunk(&b, 1002, 0, 0, 1000 * ms);
    tlog_checkpoint(&b, 1000 * ms, GMLOG_CKPT_BEGIN, 1, 1000 * ms);
    tlog_device(&b, 1000 * ms, "Fake GPU", 4096 * MiB);
    tlog_at(&b, 1000 * ms, 5 * ms);
    struct {
        gmlog_ledger_t l;
        gmlog_ledger_proc_t p[1];
    } r;
    memset(&r, 0, sizeof r);
    r.l.h.type = GMLOG_LEDGER;
    r.l.h.flags = GMLOG_LEDGER_START;
    r.l.total = 4096 * MiB;
    r.l.driver_free = 2048 * MiB;
    r.l.context = 300 * MiB;
    r.l.self_used = 300 * MiB;
    r.l.others = 1024 * MiB;
    r.l.nprocs = 1;
    r.l.status = GMLOG_LEDGER_NVML | GMLOG_LEDGER_CTX_CREATED;
    r.p[0].pid = 4242;
    r.p[0].used = 1024 * MiB;
    tlog_rec(&b, &r, sizeof r, 1000 * ms);
    gmlog_cut_t cut = {.h = {GMLOG_CUT, 0, 0, 0, 0}, .cut_ns = 1001 * ms, .requested = MiB, .allocated = MiB,
                       .reserved = 64 * MiB, .cached = 63 * MiB, .peak_requested = MiB, .peak_allocated = MiB,
                       .peak_reserved = 64 * MiB, .allocs = 1, .segments = 1, .blocks = 1};
    tlog_cut(&b, 1001 * ms, &cut);
    tlog_segment(&b, 1001 * ms, GMLOG_SEGMENT_ALLOC, TLOG_SEG, 64 * MiB);
    tlog_alloc(&b, 1001 * ms, TLOG_A, MiB, 0, 0);
    tlog_checkpoint(&b, 1002 * ms, GMLOG_CKPT_END, 1, 1000 * ms);
    tlog_end_chunk(&b);
    tlog_chunk(&b, 7, 1, 0, 1100 * ms);
    tlog_alloc(&b, 1100 * ms, TLOG_D, 2 * MiB, 0, 0);
    tlog_end_chunk(&b);
    snprintf(logpath, sizeof logpath, "%s/wrapped.gmlog", temp_dir());
    ck_assert_msg(tlog_write(&b, logpath) == 0, "cannot write %s", logpath);
    tlog_free_buf(&b);
    char *j = analyze("summary", 1);
    uint64_t total, sum;
    unsigned n;
    ledger_sums(j, "ledger_at_peak", &total, &sum, &n);
    ck_assert_msg(total == 4096 * MiB && sum == total, "%" PRIu64 " of %" PRIu64 ":\n%s", sum, total, j);
    ck_assert_msg(term_bytes(j, "ledger_at_peak", "\"pid\":4242") == 1024 * MiB &&
                      term_bytes(j, "ledger_at_peak", "\"term\":\"context\"") == 300 * MiB,
                  "the checkpoint's sample (pid 4242, a 300 MiB context) is not in the ledger:\n%s", j);
    free(j);
}
END_TEST

/* A real log (H100, PyTorch's cache, an unmarked loop keeping 64 MiB a step until OOM): the cause is
 * the leak, so no term outside the pool is named as deciding it, though the 518 MiB context alone
 * would have made room for the 64 MiB request. */
START_TEST(test_a_leak_oom_names_no_outside_term_as_its_cause)
{
    snprintf(logpath, sizeof logpath, "tests/fixtures/ledger/h100_torch_nomark_leak.gmlog");
    char *t = analyze("oom", 0), *j = analyze("oom", 1);
    ck_assert_msg(strstr(t, "cause    leak") && strstr(t, "  card     "), "not a leak with the card:\n%s", t);
    ck_assert_msg(!strstr(t, "  outside  ") && !strstr(t, "CUDA_MODULE_LOADING"),
                  "a leak's OOM names an outside term as deciding it:\n%s", t);
    ck_assert_msg(strstr(j, "\"ledger\":{") && !strstr(j, "\"deciding_term\""),
                  "the JSON names a deciding term for a leak:\n%s", j);
    free(t);
    free(j);
}
END_TEST

Suite *analyzer_ledger_suite(void)
{
    Suite *s = suite_create("analyzer_ledger");
    TCase *tc = tcase_create("card");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_every_term_of_the_card_adds_up_to_the_device_total);
    tcase_add_test(tc, test_the_card_of_growable_ranges_counts_a_block_in_every_page_it_covers);
    tcase_add_test(tc, test_an_oom_another_process_decides_names_it_with_its_remedy);
    tcase_add_test(tc, test_an_oom_a_librarys_buffers_decide_names_the_library);
    tcase_add_test(tc, test_a_librarys_mapped_buffers_are_named_once);
    tcase_add_test(tc, test_an_oom_a_librarys_mapped_buffers_decide_names_the_library);
    tcase_add_test(tc, test_without_nvml_the_card_still_adds_up_and_nothing_is_printed);
    tcase_add_test(tc, test_the_pictures_carry_the_cards_terms);
    tcase_add_test(tc, test_a_wrapped_log_keeps_its_sample_through_the_checkpoint);
    tcase_add_test(tc, test_a_leak_oom_names_no_outside_term_as_its_cause);
    suite_add_tcase(s, tc);
    return s;
}
