/* Unit tests of the OOM causes (analyzer/oom.c, causes.c): each cause on workloads built to
 * produce it (tests/integration/oom_*.c, a real OOM against FAKECUDA_MEM=1G), the arithmetic of
 * every cause on every fixture and workload, each recommended setting applied to the program it
 * came from, and the snapshot rules used where no replay is possible. `gmshim whatif`'s answers
 * and exit codes are tested in test_analyzer_whatif.c. */
#include "causes.h"
#include "output.h"
#include "pool.h"
#include "commands.h"
#include "suites.h"
#include "testlog.h"
#include "test_analyzer_cli.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((uint64_t)1 << 20)

/* The cause of the last failed OOM in a JSON report. */
static const char *last_cause(const char *json, char *buf, size_t len)
{
    const char *at = NULL, *p = json;
    while ((p = strstr(p, "\"cause\":\"")))
        at = p, p++;
    buf[0] = 0;
    if (at)
        sscanf(at + 9, "%63[^\"]", buf);
    (void)len;
    return buf;
}

static void expect_last_cause(const char *prog, const char *env, const char *cause)
{
    char *out = gm_oom_report(prog, env, 1), got[64];
    ck_assert_msg(!strcmp(last_cause(out, got, sizeof got), cause), "%s: cause %s, want %s:\n%s", prog, got, cause, out);
    free(out);
}

static void expect_cause(const char *prog, const char *cause, const char *remedy)
{
    char *out = gm_oom_report(prog, NULL, 1);
    char want[64];
    snprintf(want, sizeof want, "\"cause\":\"%s\"", cause);
    ck_assert_msg(strstr(out, want), "%s: want %s in:\n%s", prog, want, out);
    ck_assert_msg(!strstr(strstr(out, want) + 1, "\"cause\":"), "%s: more than one failed OOM:\n%s", prog, out);
    ck_assert_msg(strstr(strstr(out, "\"remedies\":"), remedy), "%s: the remedies do not mention '%s':\n%s", prog,
                  remedy, out);
    free(out);
}

START_TEST(test_persistent_memory_beyond_the_device_is_capacity)
{
    expect_cause("oom_capacity", "capacity", "sharding");
}
END_TEST

START_TEST(test_one_iterations_growing_activations_are_transient)
{
    expect_cause("oom_transient", "transient", "gradient accumulation");
}
END_TEST

START_TEST(test_an_output_kept_every_step_is_a_leak_with_its_site)
{
    expect_cause("oom_leak", "leak", "loss.item()");
    char *out = gm_oom_report("oom_leak", NULL, 0);
    ck_assert_msg(strstr(out, "growing sites") && strstr(out, "remember_output"),
                  "the leak's growing site is not named:\n%s", out);
    free(out);
}
END_TEST

/* Reruns tests/integration/<prog> with the recommended setting; returns its output. */
static char *rerun_with(const char *prog, const char *setting, const char *extra)
{
    char path[4096];
    snprintf(path, sizeof path, "tests/integration/%s", prog);
    snprintf(path, sizeof path, "%s", build_path(path));
    const char *argv[] = {path, NULL};
    const char *env[] = {"GMSHIM_LOG=off", "FAKECUDA_MEM=1G", setting, extra, NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0, "%s with %s exited %d:\n%s", prog, setting, rc, out);
    return out;
}

/* The setting the report recommends ("GMSHIM_X=V"), or "" when none. */
static const char *recommended(const char *json, char *buf, size_t len)
{
    const char *r = strstr(json, "\"recommendation\":{\"env\":{\"");
    buf[0] = 0;
    if (r) {
        char name[64], value[64];
        if (sscanf(r + strlen("\"recommendation\":{\"env\":{\""), "%63[^\"]\":\"%63[^\"]", name, value) == 2)
            snprintf(buf, len, "%s=%s", name, value);
    }
    return buf;
}

START_TEST(test_holes_in_every_segment_are_fragmentation)
{
    classic_pool_test();
    /* No setting of classic segments gets this one past (the holes are the program's own): no
     * split limit may be suggested; growable ranges are (their idle pages given back, the holes
     * cost no memory), and must get the program past when run. The planned step's replay gets
     * past too, but it is never recommended (at a cap it thrashes: docs/performance.md). */
    expect_cause("oom_fragmentation", "fragmentation", "allocate large, long-lived buffers first");
    char *out = gm_oom_report("oom_fragmentation", NULL, 1), set[160];
    ck_assert_msg(!strstr(out, "GMSHIM_MAX_SPLIT="), "an untested setting is suggested:\n%s", out);
    recommended(out, set, sizeof set);
    ck_assert_msg(!strcmp(set, "GMSHIM_SEGMENTS=vmm"), "recommended '%s', not growable ranges:\n%s", set, out);
    free(out);
    { /* this program exits 1 where it meets no OOM, saying so */
        char path[4096];
        snprintf(path, sizeof path, "%s", build_path("tests/integration/oom_fragmentation"));
        const char *argv[] = {path, NULL}, *env[] = {"GMSHIM_LOG=off", "FAKECUDA_MEM=1G", set, NULL};
        run_program(argv, env, 1, &out);
        ck_assert_msg(strstr(out, "no OOM (0)") && !strstr(out, "expected OOM"), "with %s:\n%s", set, out);
        free(out);
    }
}
END_TEST

START_TEST(test_weights_loaded_after_one_mark_are_capacity)
{
    expect_cause("oom_weights_after_mark", "capacity", "sharding");
    char *out = gm_oom_report("oom_weights_after_mark", NULL, 1);
    ck_assert_msg(strstr(out, "\"cannot_tell\":\"the log holds only one iteration"),
                  "a one-iteration log does not say what it cannot tell:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_a_slice_kept_every_step_without_marks_is_a_leak)
{
    expect_last_cause("oom_keep_slice", NULL, "leak");
    char *out = gm_oom_report("oom_keep_slice", NULL, 1);
    const char *site = strstr(out, "\"leak_site\":");
    ck_assert_msg(site && strstr(site, "\"function\":\"keep_slice\""), "the leaking line is not named:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_growing_temporaries_without_marks_are_transient)
{
    expect_cause("oom_transient_troughs", "transient", "activation checkpointing");
}
END_TEST

START_TEST(test_a_block_cut_by_small_ones_is_fragmentation_growable_ranges_cure)
{
    classic_pool_test();
    char *out = gm_oom_report("oom_split", NULL, 1), set[160], got[64];
    ck_assert_msg(!strcmp(last_cause(out, got, sizeof got), "fragmentation"), "oom_split: %s", got);
    recommended(out, set, sizeof set);
    ck_assert_msg(!strcmp(set, "GMSHIM_SEGMENTS=vmm"), "recommended '%s', not growable ranges:\n%s", set, out);
    free(out);
    out = rerun_with("oom_split", set, NULL);
    ck_assert_msg(strstr(out, "no OOM") && !strstr(out, "expected OOM"), "with %s:\n%s", set, out);
    free(out);
}
END_TEST

START_TEST(test_holes_under_a_cap_are_fragmentation_and_the_tested_cap_avoids_them)
{
    classic_pool_test();
    char *out = gm_oom_report("oom_capped_fragmentation", "GMSHIM_DEVICE_LIMIT=512M", 1), set[160], got[64];
    ck_assert_msg(!strcmp(last_cause(out, got, sizeof got), "fragmentation"), "capped holes: %s\n%s", got, out);
    recommended(out, set, sizeof set);
    ck_assert_msg(!strcmp(set, "GMSHIM_SEGMENTS=vmm"), "recommended '%s', not growable ranges:\n%s", set, out);
    free(out);
    out = rerun_with("oom_capped_fragmentation", set, "GMSHIM_DEVICE_LIMIT=512M"); /* under the same cap */
    ck_assert_msg(strstr(out, "no OOM") && !strstr(out, "expected OOM"), "with %s:\n%s", set, out);
    free(out);
}
END_TEST

/* The workloads; `fixed`: the same allocations whatever the device (the others allocate until
 * memory runs out, so that more memory only moves their failure). */
static const struct workload {
    const char *prog, *env;
    int fixed;
} workloads[] = {
    {"oom_capacity", NULL, 0},           {"oom_fragmentation", NULL, 0}, {"oom_leak", NULL, 0},
    {"oom_outside", NULL, 0},            {"oom_transient", NULL, 1},     {"oom_split", NULL, 1},
    {"oom_weights_after_mark", NULL, 0}, {"oom_keep_slice", NULL, 0},    {"oom_transient_troughs", NULL, 0},
    {"oom_capped_fragmentation", "GMSHIM_DEVICE_LIMIT=512M", 1},         {"oom_capacity", "GMSHIM_DEVICE_LIMIT=512M", 0},
};

START_TEST(test_every_recommendation_applied_to_a_fixed_workload_avoids_the_failure)
{
    classic_pool_test();
    unsigned applied = 0;
    for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; i++) {
        if (!workloads[i].fixed)
            continue;
        char *out = gm_oom_report(workloads[i].prog, workloads[i].env, 1), set[160];
        recommended(out, set, sizeof set);
        free(out);
        if (!set[0])
            continue;
        /* The setting recommended replaces the one it was recorded with. */
        int same = workloads[i].env && !strncmp(set, workloads[i].env, strcspn(set, "=") + 1);
        out = rerun_with(workloads[i].prog, set, same ? NULL : workloads[i].env);
        ck_assert_msg(!strstr(out, "expected OOM"), "%s with %s still fails:\n%s", workloads[i].prog, set, out);
        free(out);
        applied++;
    }
    ck_assert_msg(applied >= 2, "only %u workloads got a recommendation", applied);
}
END_TEST

static void check_arithmetic(const char *path)
{
    rd_log_t lf;
    ck_assert_msg(rd_open_path(&lf, path) == 0, "%s does not open", path);
    model_t m;
    model_build(&m, &lf, MODEL_SITES | MODEL_EPOCHS);
    for (size_t i = 0; i < m.nooms; i++) {
        cause_t c;
        ck_assert_msg(causes_of(&m, &m.ooms[i], &c) == 0, "%s: OOM %zu was not replayed", path, i);
        const char *bad = causes_check(&c);
        ck_assert_msg(!bad, "%s: OOM %zu (%s): %s: %s", path, i, oom_cause_name(c.cause), bad, c.why);
        ck_assert_msg(c.reproduced, "%s: OOM %zu did not fail in the replay", path, i);
    }
    model_free(&m);
    rd_close(&lf);
    causes_reset();
}

START_TEST(test_every_cause_adds_up_on_every_fixture_and_workload)
{
    classic_pool_test();
    glob_t g;
    ck_assert_msg(glob("tests/fixtures/*.gmlog", 0, NULL, &g) == 0 && g.gl_pathc >= 11,
                  "the fixtures are not where the tests run");
    for (size_t i = 0; i < g.gl_pathc; i++)
        check_arithmetic(g.gl_pathv[i]);
    globfree(&g);
    for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; i++) {
        free(gm_oom_report(workloads[i].prog, workloads[i].env, 1));
        check_arithmetic(gm_last_log);
    }
}
END_TEST

START_TEST(test_the_arithmetic_check_catches_figures_that_contradict_the_cause)
{
    cause_t c;
    memset(&c, 0, sizeof c);
    c.cause = OOM_FRAGMENTATION;
    c.cap = 1024 * MiB, c.live = c.persistent = 1000 * MiB, c.request = 64 * MiB, c.reserved = 1000 * MiB;
    ck_assert_msg(causes_check(&c) != NULL, "fragmentation with live + request over the cap passed");
    c.cause = OOM_CAPACITY;
    ck_assert_msg(causes_check(&c) == NULL, "capacity: %s", causes_check(&c));
    c.cause = OOM_TRANSIENT, c.epoch_index = 3, c.persistent = 990 * MiB, c.transient = 10 * MiB;
    ck_assert_msg(causes_check(&c) != NULL, "a transient peak whose persistent part does not fit passed");
    c.cause = OOM_LEAK, c.leaked = 20 * MiB;
    ck_assert_msg(causes_check(&c) != NULL, "a leak too small to decide passed");
    c.leaked = 500 * MiB;
    ck_assert_msg(causes_check(&c) == NULL, "a leak that decides: %s", causes_check(&c));
    c.transient = 0;
    ck_assert_msg(causes_check(&c) != NULL, "persistent + transient != live passed");
}
END_TEST

START_TEST(test_memory_taken_around_the_pool_is_outside)
{
    expect_cause("oom_outside", "outside", "GMSHIM_CUPTI=1");
}
END_TEST

START_TEST(test_a_device_limit_is_what_the_device_gives)
{
    char *out = gm_oom_report("oom_capacity", "GMSHIM_DEVICE_LIMIT=512M", 1);
    ck_assert_msg(strstr(out, "\"cause\":\"capacity\"") && strstr(out, "\"under_limit\":true") &&
                  strstr(out, "\"available\":536870912"), "under a 512 MiB cap:\n%s", out);
    free(out);
}
END_TEST

/* ---- the rules on hand-made snapshots ----------------------------------------------------------- */

static model_t m0;

static model_oom_t base_oom(void)
{
    model_oom_t o;
    memset(&o, 0, sizeof o);
    o.rec.request = 64 * MiB;
    o.rec.segment = 64 * MiB;
    o.rec.driver_total = 1024 * MiB;
    o.rec.driver_free = 16 * MiB;
    o.rec.reserved = 1000 * MiB;
    o.rec.allocated = 1000 * MiB;
    o.rec.largest_free = 0;
    o.persistent = 400 * MiB;
    o.transient = 600 * MiB;
    o.epoch_system = EPOCH_MARKS;
    o.epoch_index = 2;
    return o;
}

START_TEST(test_rules_split_capacity_from_transient_at_the_epoch_start)
{
    model_oom_t o = base_oom();
    oom_verdict_t v;
    oom_classify(&m0, &o, &v);
    ck_assert_msg(v.cause == OOM_TRANSIENT, "400 MiB persistent + 64 MiB in 1 GiB: %s (%s)", oom_cause_name(v.cause), v.why);
    o.persistent = 990 * MiB, o.transient = 10 * MiB;
    oom_classify(&m0, &o, &v);
    ck_assert_msg(v.cause == OOM_CAPACITY, "990 MiB persistent: %s", oom_cause_name(v.cause));
    o = base_oom();
    o.epoch_system = -1;
    o.persistent = 1000 * MiB, o.transient = 0;
    oom_classify(&m0, &o, &v);
    ck_assert_msg(v.cause == OOM_CAPACITY, "no epochs at all: %s", oom_cause_name(v.cause));
}
END_TEST

START_TEST(test_rules_need_a_real_share_of_free_pool_for_fragmentation)
{
    model_oom_t o = base_oom();
    o.rec.allocated = 900 * MiB, o.rec.largest_free = 8 * MiB; /* 100 MiB free, 10% of reserved */
    oom_verdict_t v;
    oom_classify(&m0, &o, &v);
    ck_assert_msg(v.cause == OOM_FRAGMENTATION, "100 MiB free in 8 MiB pieces: %s", oom_cause_name(v.cause));
    o.rec.allocated = 930 * MiB; /* 70 MiB free: enough for the request but under a tenth of the pool */
    oom_classify(&m0, &o, &v);
    ck_assert_msg(v.cause != OOM_FRAGMENTATION, "7%% of the pool free: %s", oom_cause_name(v.cause));
    o.rec.allocated = 900 * MiB, o.rec.largest_free = 64 * MiB; /* a block that fits: not fragmentation */
    oom_classify(&m0, &o, &v);
    ck_assert_msg(v.cause != OOM_FRAGMENTATION, "a large enough free block: %s", oom_cause_name(v.cause));
}
END_TEST

START_TEST(test_rules_count_the_cache_released_before_the_driver_was_asked)
{
    model_oom_t o = base_oom();
    /* The driver saw 100 MiB free before gmshim released 300 MiB of cache; the pool holds 600 MiB
     * after: nothing is outside. */
    o.rec.driver_free = 100 * MiB, o.rec.reserved = 624 * MiB, o.rec.allocated = 624 * MiB;
    o.released_before = 300 * MiB;
    oom_verdict_t v;
    oom_classify(&m0, &o, &v);
    ck_assert_msg(v.outside == 0 && v.cause != OOM_OUTSIDE, "outside %llu, cause %s", (unsigned long long)v.outside,
                  oom_cause_name(v.cause));
    o.released_before = 0; /* without that record the same figures would blame 300 MiB outside */
    oom_classify(&m0, &o, &v);
    ck_assert_msg(v.cause == OOM_OUTSIDE && v.outside == 300 * MiB, "outside %llu, cause %s",
                  (unsigned long long)v.outside, oom_cause_name(v.cause));
    o = base_oom();
    o.rec.reserved = o.rec.allocated = 950 * MiB, o.rec.driver_free = 24 * MiB; /* 50 MiB outside: < 10% */
    oom_classify(&m0, &o, &v);
    ck_assert_msg(v.cause != OOM_OUTSIDE, "a small context is not the cause: %s", oom_cause_name(v.cause));
}
END_TEST

START_TEST(test_rules_call_steady_growth_a_leak_only_when_it_is_large)
{
    model_oom_t o = base_oom();
    o.lowwater = (model_series_t){6, 5, 0, 200 * MiB, 450 * MiB}; /* +250 MiB: a quarter of what is live */
    oom_verdict_t v;
    oom_classify(&m0, &o, &v);
    ck_assert_msg(v.cause == OOM_LEAK && v.growth_per_epoch == 50 * MiB, "growth of 250 MiB: %s, %llu per epoch",
                  oom_cause_name(v.cause), (unsigned long long)v.growth_per_epoch);
    o.lowwater = (model_series_t){6, 5, 0, 400 * MiB, 450 * MiB}; /* +50 MiB: 5% */
    oom_classify(&m0, &o, &v);
    ck_assert_msg(v.cause != OOM_LEAK, "growth of 50 MiB of 1000: %s", oom_cause_name(v.cause));
    o.lowwater = (model_series_t){6, 1, 0, 200 * MiB, 450 * MiB}; /* one step up: a warm-up, not a leak */
    oom_classify(&m0, &o, &v);
    ck_assert_msg(v.cause != OOM_LEAK, "one rise in five steps: %s", oom_cause_name(v.cause));
}
END_TEST

START_TEST(test_rules_use_the_limit_when_it_refused)
{
    model_oom_t o = base_oom();
    o.rec.h.flags = GMLOG_OOM_LIMIT;
    o.rec.driver_total = o.rec.driver_free = 0;
    o.limit = 512 * MiB;
    o.rec.reserved = o.rec.allocated = 500 * MiB;
    o.persistent = 480 * MiB, o.transient = 20 * MiB;
    oom_verdict_t v;
    oom_classify(&m0, &o, &v);
    ck_assert_msg(v.under_limit && v.available == 512 * MiB && v.cause == OOM_CAPACITY, "limit: %s, available %llu",
                  oom_cause_name(v.cause), (unsigned long long)v.available);
}
END_TEST

/* A log of PyTorch with its cache on, written by hand: libc10_cuda loaded, 200 MiB of weights,
 * then every marked iteration one more 100 MiB segment at the same line, never given back, until
 * a segment does not fit in the 1 GiB device. */
static void write_cache_kept_log(const char *path)
{
    tlog_t b;
    tlog_begin(&b, 0);
    tlog_chunk(&b, 1, 0, 0, 0);
    tlog_device(&b, 1, "Test", 1024 * MiB);
    uint8_t mod[128] = {0};
    static const char lib[] = "/venv/torch/lib/libc10_cuda.so";
    gmlog_module_t md = {{GMLOG_MODULE, 0, GMLOG_NO_DEVICE, 0, 0}, 0x7000, 0x7000, 0x9000, 1, sizeof lib - 1, 0, 0};
    memcpy(mod, &md, sizeof md);
    memcpy(mod + sizeof md, lib, sizeof lib - 1);
    tlog_rec(&b, mod, sizeof md + (sizeof lib + 7) / 8 * 8, 1);
    tlog_site(&b, 1, 7);
    tlog_site(&b, 1, 8);
    uint64_t base = 0x7f0000000000ull, t = 10;
    tlog_segment(&b, t, GMLOG_SEGMENT_ALLOC, base, 200 * MiB);
    tlog_alloc(&b, t + 1, base, 200 * MiB, GMLOG_A_MISS, 8);
    base += 200 * MiB;
    for (uint32_t k = 1; k <= 9; k++) {
        t += 100;
        tlog_mark(&b, t, k, "iteration");
        if (k == 9)
            break;
        tlog_segment(&b, t + 10, GMLOG_SEGMENT_ALLOC, base, 100 * MiB);
        tlog_alloc(&b, t + 11, base, 100 * MiB, GMLOG_A_MISS, 7);
        base += 100 * MiB;
    }
    gmlog_oom_t o = {.h = {GMLOG_OOM, 0, 0, GMLOG_OOM_RELEASED | GMLOG_OOM_RETRIED, 0}, .request = 100 * MiB,
                     .segment = 100 * MiB, .driver_free = 24 * MiB, .driver_total = 1024 * MiB,
                     .reserved = 1000 * MiB, .allocated = 1000 * MiB, .requested = 1000 * MiB, .site = 7};
    tlog_rec(&b, &o, sizeof o, t + 20);
    tlog_end_chunk(&b);
    ck_assert(tlog_write(&b, path) == 0);
    tlog_free_buf(&b);
}

START_TEST(test_pytorch_segments_growing_at_one_line_are_a_probable_leak)
{
    char path[512];
    snprintf(path, sizeof path, "%s/cache_kept.gmlog", temp_dir());
    write_cache_kept_log(path);
    char *out = NULL;
    int rc = gm(&out, "--color=never", "oom", path, NULL);
    const char *note = strstr(out, "gmshim saw PyTorch's segments, not tensors"), *first = strstr(out, "OOM 1");
    ck_assert_msg(rc == 0 && note && first && note < first && strstr(out, "GMSHIM_TORCH=own"),
                  "the segment-level note does not come first (rc %d):\n%s", rc, out);
    free(out);
    rc = gm(&out, "--json", "oom", path, NULL);
    char got[64];
    ck_assert_msg(!strcmp(last_cause(out, got, sizeof got), "leak"), "cache-kept growth: %s, not leak:\n%s", got, out);
    ck_assert_msg(strstr(out, "\"torch_cache_kept\":true"), "not seen as PyTorch's segments:\n%s", out);
    free(out);
}
END_TEST

/* oom_retry: a failure the cache release recovered (a retry), then 100 MiB beside 200 MiB live on
 * a 256 MiB device: capacity, the retry listed apart, and nothing any setting fixes. */
START_TEST(test_a_retry_is_not_a_failure_and_what_follows_is_capacity)
{
    classic_pool_test();
    char log[600], logenv[700];
    snprintf(log, sizeof log, "%s/oom_retry.gmlog", temp_dir());
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
    const char *argv[] = {build_path("tests/integration/oom_retry"), NULL};
    const char *env[] = {logenv, "FAKECUDA_MEM=256M", NULL};
    char *out = NULL, got[64];
    int rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0, "oom_retry exited %d:\n%s", rc, out);
    free(out);
    rc = gm(&out, "--json", "oom", log, NULL);
    ck_assert_msg(rc == 0 && !strcmp(last_cause(out, got, sizeof got), "capacity") &&
                  strstr(out, "\"retries_total\":1"), "oom_retry (%s):\n%s", got, out);
    free(out);
    rc = gm(&out, "whatif", log, NULL, NULL);
    ck_assert_msg(rc == 3, "whatif on oom_retry: rc %d:\n%s", rc, out);
    free(out);
}
END_TEST

/* Each OOM's explanation names the bytes the program asked for, as the OOM's first line does,
 * and the pool's rounded size only as such: never "4 B asked for" above "the 512 B request". */
START_TEST(test_an_ooms_request_is_stated_once_with_its_rounding_labelled)
{
    glob_t g;
    ck_assert_msg(glob("tests/fixtures/*.gmlog", 0, NULL, &g) == 0 && g.gl_pathc >= 11,
                  "the fixtures are not where the tests run");
    int rounded_seen = 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        char *out = NULL;
        gm(&out, "--json", "oom", g.gl_pathv[i]);
        for (const char *p = out; (p = strstr(p, "\"requested\":"));) {
            unsigned long long asked = strtoull(p + 12, NULL, 10);
            const char *why = strstr(p, "\"why\":\"");
            p += 12;
            if (!why)
                break;
            char a[32], r[32], want[128], bad[128];
            rep_bytes(asked, a);
            rep_bytes(pool_round((size_t)asked), r);
            if (pool_round((size_t)asked) != asked) {
                rounded_seen++;
                snprintf(want, sizeof want, "the %s request (%s as the pool rounds it)", a, r);
            } else {
                snprintf(want, sizeof want, "the %s request", a);
            }
            snprintf(bad, sizeof bad, "the %s request =", r);
            const char *end = strchr(why + 7, '"');
            size_t len = end ? (size_t)(end - why) : strlen(why);
            char text[4096];
            snprintf(text, sizeof text, "%.*s", (int)len, why);
            ck_assert_msg(strstr(text, want) && (!strcmp(a, r) || !strstr(text, bad)),
                          "%s: %llu bytes asked for, the cause says:\n%s\nwant \"%s\"", g.gl_pathv[i], asked, text, want);
        }
        free(out);
    }
    globfree(&g);
    ck_assert_msg(rounded_seen > 0, "no fixture's OOM asks for a size the pool rounds: the test tests nothing");
}
END_TEST

Suite *analyzer_oom_suite(void)
{
    Suite *s = suite_create("analyzer_oom");
    TCase *tc = tcase_create("workloads");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_persistent_memory_beyond_the_device_is_capacity);
    tcase_add_test(tc, test_one_iterations_growing_activations_are_transient);
    tcase_add_test(tc, test_an_output_kept_every_step_is_a_leak_with_its_site);
    tcase_add_test(tc, test_holes_in_every_segment_are_fragmentation);
    tcase_add_test(tc, test_memory_taken_around_the_pool_is_outside);
    tcase_add_test(tc, test_a_device_limit_is_what_the_device_gives);
    tcase_add_test(tc, test_weights_loaded_after_one_mark_are_capacity);
    tcase_add_test(tc, test_a_slice_kept_every_step_without_marks_is_a_leak);
    tcase_add_test(tc, test_growing_temporaries_without_marks_are_transient);
    tcase_add_test(tc, test_a_block_cut_by_small_ones_is_fragmentation_growable_ranges_cure);
    tcase_add_test(tc, test_holes_under_a_cap_are_fragmentation_and_the_tested_cap_avoids_them);
    tcase_add_test(tc, test_every_recommendation_applied_to_a_fixed_workload_avoids_the_failure);
    tcase_add_test(tc, test_every_cause_adds_up_on_every_fixture_and_workload);
    tcase_add_test(tc, test_the_arithmetic_check_catches_figures_that_contradict_the_cause);
    tcase_add_test(tc, test_pytorch_segments_growing_at_one_line_are_a_probable_leak);
    tcase_add_test(tc, test_a_retry_is_not_a_failure_and_what_follows_is_capacity);
    suite_add_tcase(s, tc);
    TCase *rules = tcase_create("rules");
    tcase_add_test(rules, test_rules_split_capacity_from_transient_at_the_epoch_start);
    tcase_add_test(rules, test_rules_need_a_real_share_of_free_pool_for_fragmentation);
    tcase_add_test(rules, test_rules_count_the_cache_released_before_the_driver_was_asked);
    tcase_add_test(rules, test_rules_call_steady_growth_a_leak_only_when_it_is_large);
    tcase_add_test(rules, test_rules_use_the_limit_when_it_refused);
    tcase_add_test(rules, test_an_ooms_request_is_stated_once_with_its_rounding_labelled);
    suite_add_tcase(s, rules);
    return s;
}
