/* Unit tests of the OOM causes (analyzer/oom.c): each cause on a workload built to produce it
 * (tests/integration/oom_<cause>.c, a real OOM against FAKECUDA_MEM=1G), and the edges of each
 * rule on hand-made failure snapshots. */
#include "commands.h"
#include "suites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((uint64_t)1 << 20)

/* Records tests/integration/<prog> and returns `gmshim [--json] oom` of its log. */
static char *oom_report(const char *prog, const char *extra_env, int json)
{
    const char *dir = temp_dir();
    char log[512], logenv[600], path[4096];
    snprintf(log, sizeof log, "%s/%s.gmlog", dir, prog);
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

static void expect_cause(const char *prog, const char *cause, const char *remedy)
{
    char *out = oom_report(prog, NULL, 1);
    char want[64];
    snprintf(want, sizeof want, "\"cause\":\"%s\"", cause);
    ck_assert_msg(strstr(out, want), "%s: want %s in:\n%s", prog, want, out);
    ck_assert_msg(!strstr(strstr(out, want) + 1, "\"cause\":"), "%s: more than one failed OOM:\n%s", prog, out);
    free(out);
    out = oom_report(prog, NULL, 0);
    ck_assert_msg(strstr(out, remedy), "%s: the remedies do not mention '%s':\n%s", prog, remedy, out);
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
    char *out = oom_report("oom_leak", NULL, 0);
    ck_assert_msg(strstr(out, "growing sites") && strstr(out, "remember_output"),
                  "the leak's growing site is not named:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_holes_in_every_segment_are_fragmentation)
{
    expect_cause("oom_fragmentation", "fragmentation", "GMSHIM_MAX_SPLIT");
}
END_TEST

START_TEST(test_memory_taken_around_the_pool_is_outside)
{
    expect_cause("oom_outside", "outside", "GMSHIM_CUPTI=1");
}
END_TEST

START_TEST(test_a_device_limit_is_what_the_device_gives)
{
    char *out = oom_report("oom_capacity", "GMSHIM_DEVICE_LIMIT=512M", 1);
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
    suite_add_tcase(s, tc);
    TCase *rules = tcase_create("rules");
    tcase_add_test(rules, test_rules_split_capacity_from_transient_at_the_epoch_start);
    tcase_add_test(rules, test_rules_need_a_real_share_of_free_pool_for_fragmentation);
    tcase_add_test(rules, test_rules_count_the_cache_released_before_the_driver_was_asked);
    tcase_add_test(rules, test_rules_call_steady_growth_a_leak_only_when_it_is_large);
    tcase_add_test(rules, test_rules_use_the_limit_when_it_refused);
    suite_add_tcase(s, rules);
    return s;
}
