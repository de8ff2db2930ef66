/* The recommendation rule (analyzer/advice.c): memory that grows is never "fixed" by a setting or
 * a cap — the growing line, its rate and a device lasting 100 steps more are given instead — on
 * the H200 leak fixtures and a leak run under the preload, with and without a cap, and on a
 * transient whose peak grows every step; a
 * fragmentation OOM gets a setting that still gets past it with the headroom taken away; a
 * failure that asked for more than the job had ever held gets no larger cap; a
 * keep-mode log gets PyTorch's settings, an own-mode log gmshim's. */
#include "advice.h"
#include "causes.h"
#include "oom_classify.h"
#include "whatif_torch.h"
#include "suites.h"
#include "test_analyzer_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every failed OOM of the log: its cause's recommendation. */
static void each_cause(const char *path, void (*check)(const char *path, const cause_t *c))
{
    rd_log_t lf;
    ck_assert_msg(rd_open_path(&lf, path) == 0, "%s does not open", path);
    model_t m;
    model_build(&m, &lf, MODEL_SITES | MODEL_EPOCHS);
    ck_assert_msg(m.nooms > 0, "%s holds no OOM", path);
    for (size_t i = 0; i < m.nooms; i++) {
        cause_t c;
        ck_assert_msg(causes_of(&m, &m.ooms[i], &c) == 0, "%s: OOM %zu not replayed", path, i);
        check(path, &c);
    }
    model_free(&m);
    rd_close(&lf);
    causes_reset();
}

static void growth_stated(const char *path, const cause_t *c)
{
    ck_assert_msg(!c->env_name[0], "%s: a leak got %s=%s as its remedy", path, c->env_name, c->env_value);
    ck_assert_msg(c->growing && c->growth_per_step > 0, "%s: the growth is not stated", path);
    ck_assert_msg(c->lasting_device_bytes >= c->min_device_bytes + ADVICE_STEPS_PAST * c->growth_per_step,
                  "%s: a device of %llu does not last %d steps of %llu past the recording (min %llu)", path,
                  (unsigned long long)c->lasting_device_bytes, ADVICE_STEPS_PAST,
                  (unsigned long long)c->growth_per_step, (unsigned long long)c->min_device_bytes);
}

static void no_setting_for_growth(const char *path, const cause_t *c)
{
    ck_assert_msg(c->cause == OOM_LEAK, "%s: cause %s, want leak: %s", path, oom_cause_name(c->cause), c->why);
    growth_stated(path, c);
}

/* torch_scenarios.py transient: 2 + it temporaries of 64 MiB a step, each step's peak 64 MiB higher. */
static void no_setting_for_a_growing_transient(const char *path, const cause_t *c)
{
    ck_assert_msg(c->cause == OOM_TRANSIENT, "%s: cause %s: %s", path, oom_cause_name(c->cause), c->why);
    growth_stated(path, c);
    ck_assert_msg(c->growth_peaks && c->growth_per_step == 64ull << 20, "%s: peaks %d growing by %llu, want 64 MiB",
                  path, c->growth_peaks, (unsigned long long)c->growth_per_step);
}

START_TEST(test_a_leak_never_gets_a_setting_or_a_cap_as_its_remedy)
{
    each_cause("tests/fixtures/h200_torch_leak_oom.gmlog", no_setting_for_growth);
    each_cause("tests/fixtures/h200_scen_leak_own.gmlog", no_setting_for_growth);
    each_cause("tests/fixtures/h200_scen_leak_keep.gmlog", no_setting_for_growth);
    free(gm_oom_report("oom_leak", NULL, 1));
    each_cause(gm_last_log, no_setting_for_growth);
    char *out = gm_oom_report("oom_leak", "GMSHIM_DEVICE_LIMIT=512M", 1);
    ck_assert_msg(!strstr(out, "\"recommendation\":{\"env\":{\"") && strstr(out, "\"growing\":true") &&
                      strstr(out, "\"lasting_device_bytes\":"), "a capped leak got a setting:\n%s", out);
    free(out);
    each_cause(gm_last_log, no_setting_for_growth);
    out = gm_oom_report("oom_leak", "GMSHIM_DEVICE_LIMIT=512M", 0);
    ck_assert_msg(strstr(out, "none is a remedy") && strstr(out, "100 ") && strstr(out, "runs out"),
                  "the text does not give the rate, when it runs out and the lasting device:\n%s", out);
    free(out);
    /* whatif answers the same, by the same rule */
    free(gm_oom_report("oom_leak", "GMSHIM_DEVICE_LIMIT=512M", 1));
    char *w = NULL;
    int rc = gm(&w, "--json", "whatif", gm_last_log, NULL);
    ck_assert_msg(rc == 3 && strstr(w, "\"env\":{}") && strstr(w, "\"growing\":true"),
                  "whatif on a capped leak: rc %d:\n%s", rc, w);
    free(w);
}
END_TEST

START_TEST(test_a_transient_that_grows_every_step_gets_no_cap_either)
{
    each_cause("tests/fixtures/h200_scen_transient_own.gmlog", no_setting_for_a_growing_transient);
    each_cause("tests/fixtures/h200_scen_transient_keep.gmlog", no_setting_for_a_growing_transient);
}
END_TEST

/* A keep-mode log's recommendation is the model of PyTorch's allocator's: its best setting, run
 * by the model again with the headroom taken from what PyTorch could reserve. */
static void model_passes_with_headroom(const char *path, const cause_t *c, rd_log_t *lf)
{
    rt_log_t tl;
    ck_assert_msg(replay_torch_load(&tl, lf, 0) == 0, "%s: no tensors", path);
    wt_plan_t wt;
    ck_assert(wt_plan_make(&tl, 0, 1, &wt) == 0 && wt.best > 0);
    ck_assert_msg(!strcmp(c->env_value, wt.runs[wt.best].text), "%s: recommended %s, the model's best %s", path,
                  c->env_value, wt.runs[wt.best].text);
    rt_conf_t conf;
    memset(&conf, 0, sizeof conf);
    ck_assert(replay_torch_conf_parse(c->env_value, &conf) == 0);
    conf.less = c->headroom;
    rt_result_t r = replay_torch_run(&tl, &conf);
    ck_assert_msg(!r.failures, "%s: the model under %s fails with %llu bytes less to reserve", path, c->env_value,
                  (unsigned long long)c->headroom);
    conf.less = 0;
    r = replay_torch_run(&tl, &conf);
    ck_assert_msg(!r.failures && r.peak_reserved == wt.runs[wt.best].res.peak_reserved, "%s: %llu failures", path,
                  (unsigned long long)r.failures);
    wt_plan_free(&wt);
    replay_torch_free(&tl);
}

/* The recommended setting replayed with the headroom taken from what it may reserve (by the
 * model of PyTorch's allocator where the log kept PyTorch's cache). */
static void passes_with_headroom(const char *path, const cause_t *c)
{
    ck_assert_msg(c->cause == OOM_FRAGMENTATION && c->env_name[0], "%s: %s, recommendation '%s'", path,
                  oom_cause_name(c->cause), c->env_name);
    ck_assert_msg(c->headroom >= c->cap / 100 * ADVICE_HEADROOM_PCT, "%s: headroom %llu under 5%% of %llu", path,
                  (unsigned long long)c->headroom, (unsigned long long)c->cap);
    rd_log_t lf;
    rp_log_t log;
    ck_assert(rd_open_path(&lf, path) == 0 && rp_load(&log, &lf, 0) == 0);
    ck_assert_msg(advice_for_allocator(&log, c->env_name), "%s: %s is not the job's allocator's", path, c->env_name);
    ck_assert_msg(log.torch_tensors ? !strcmp(c->env_name, "PYTORCH_CUDA_ALLOC_CONF") : !strncmp(c->env_name, "GMSHIM_", 7),
                  "%s: %s for a log %s PyTorch's cache", path, c->env_name, log.torch_tensors ? "with" : "without");
    if (log.torch_tensors) {
        model_passes_with_headroom(path, c, &lf);
    } else {
        rp_cfg_t cfg;
        rp_cfg_recorded(&cfg);
        ck_assert_msg(strcmp(c->env_name, "GMSHIM_PLAN"), "%s: the planned step recommended", path);
        if (!strcmp(c->env_name, "GMSHIM_SEGMENTS"))
            cfg.vmm = !strcmp(c->env_value, "vmm") ? RP_ON : RP_OFF;
        else
            cfg.max_split = strtoull(c->env_value, NULL, 10) << 20; /* "32M": mebibytes */
        cfg.limit = c->cap - c->headroom;
        rp_result_t r = replay_once(&log, &cfg);
        ck_assert_msg(!r.failures, "%s: %s=%s fails with %llu bytes less to reserve", path, c->env_name,
                      c->env_value, (unsigned long long)c->headroom);
    }
    rp_log_free(&log);
    rd_close(&lf);
}

START_TEST(test_a_fragmentation_oom_gets_a_setting_that_passes_with_headroom)
{
    each_cause("tests/fixtures/h200_scen_frag_own.gmlog", passes_with_headroom);
    each_cause("tests/fixtures/h200_scen_frag_keep.gmlog", passes_with_headroom);
}
END_TEST

static unsigned count(const char *s, const char *what)
{
    unsigned n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

/* A keep-mode log: whatif, oom and report state the one setting, the model's, once each; the
 * model's table is the evidence, marked where the recommendation is; a leak gets none. */
START_TEST(test_a_keep_log_gets_one_recommendation_from_the_model)
{
    const char *frag = "tests/fixtures/h200_scen_frag_keep.gmlog", *set = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True";
    char *out = NULL;
    int rc = gm(&out, "--json", "whatif", frag);
    ck_assert_msg(rc == 0 && strstr(out, "\"recommendation\":{\"env\":{\"PYTORCH_CUDA_ALLOC_CONF\":\"expandable_segments:True\"}") &&
                      strstr(out, "\"torch_best\":\"expandable_segments:True\"") && count(out, "\"recommended\":true") == 1 &&
                      !strstr(out, "max_split_size_mb:32"),
                  "whatif --json: rc %d:\n%s", rc, out);
    free(out);
    rc = gm(&out, "whatif", frag);
    ck_assert_msg(rc == 0 && count(out, "recommendation: ") == 1 && count(out, "<- recommended") == 1 &&
                      strstr(out, set) && !strstr(out, "\nbest:") && strstr(out, "PyTorch's allocator, modelled:"),
                  "whatif: rc %d:\n%s", rc, out);
    free(out);
    const char *cmds[] = {"oom", "report"};
    for (int i = 0; i < 2; i++) {
        gm(&out, cmds[i], frag);
        ck_assert_msg(strstr(out, set) && !strstr(out, "max_split_size_mb:32"), "%s:\n%s", cmds[i], out);
        free(out);
    }
    /* the cap that refused, raised, is the model's run too (not recommended: the job was still
     * loading weights when it failed, below) */
    rc = gm(&out, "--json", "whatif", "tests/fixtures/h200_scen_weights_keep.gmlog");
    ck_assert_msg(strstr(out, "\"also\":\"GMSHIM_DEVICE_LIMIT=2407M\"") && !strstr(out, "\"recommended\":true"),
                  "whatif on a keep-mode log refused by gmshim's cap: rc %d:\n%s", rc, out);
    free(out);
    rc = gm(&out, "--json", "whatif", "tests/fixtures/h200_scen_leak_keep.gmlog");
    ck_assert_msg(rc == 3 && strstr(out, "\"recommendation\":{\"env\":{}") && strstr(out, "\"growing\":true") &&
                      !strstr(out, "\"recommended\":true"),
                  "whatif on a keep-mode leak: rc %d:\n%s", rc, out);
    free(out);
}
END_TEST

/* The failure asked for more than the job had ever held (torch_scenarios.py weights: 256 MiB
 * weights loaded in a loop that never ends; oom_weights_after_mark: 48 MiB ones until the device
 * is full): the recording ends inside that climb, so no larger cap or device is a remedy — the
 * cap that got past the recorded failure (2407M for the H200 fixtures) fails at the next weight.
 * The failure is stated with what the job held and asked for. Where the job had held as much
 * before (oom_capped_fragmentation under its cap), the rule does not fire. */
static void no_cap_for_a_climb(const char *path, const cause_t *c)
{
    ck_assert_msg(!c->env_name[0], "%s: %s=%s recommended for a failure past all the job held", path, c->env_name,
                  c->env_value);
    ck_assert_msg(strstr(c->tested, "more than it had ever held") && strstr(c->tested, "unknown"),
                  "%s: the climb is not stated: %s", path, c->tested);
}

START_TEST(test_a_failure_past_all_the_job_held_gets_no_larger_cap)
{
    classic_pool_test(); /* the control's fragmentation is the classic pool's (growable ranges have none) */
    const char *fx[] = {"tests/fixtures/h200_scen_weights_own.gmlog", "tests/fixtures/h200_scen_weights_keep.gmlog"};
    for (int i = 0; i < 2; i++) {
        each_cause(fx[i], no_cap_for_a_climb);
        char *out = NULL;
        gm(&out, "--json", "whatif", fx[i]);
        ck_assert_msg(strstr(out, "\"recommendation\":{\"env\":{}") && strstr(out, "\"climbing\":true") &&
                          strstr(out, "\"climb_need\":2415919104") && strstr(out, "\"climb_held\":2147483648"),
                      "%s: whatif --json:\n%s", fx[i], out);
        free(out);
    }
    char *out = gm_oom_report("oom_weights_after_mark", "GMSHIM_DEVICE_LIMIT=512M", 1);
    ck_assert_msg(strstr(out, "\"recommendation\":{\"env\":{}") && strstr(out, "more than it had ever held"),
                  "a capped load got a cap:\n%s", out);
    free(out);
    each_cause(gm_last_log, no_cap_for_a_climb);
    out = gm_oom_report("oom_capped_fragmentation", "GMSHIM_DEVICE_LIMIT=512M", 1);
    ck_assert_msg(strstr(out, "\"climbing\":false") && !strstr(out, "more than it had ever held"),
                  "a failure below what the job held was taken for a climb:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_the_headroom_is_the_larger_of_5_percent_and_3_steps)
{
    uint64_t G = 1ull << 30, M = 1ull << 20;
    ck_assert_msg(advice_headroom(2 * G, 0) == 103 * M, "2 GiB: %llu", (unsigned long long)advice_headroom(2 * G, 0));
    ck_assert_msg(advice_headroom(2 * G, 64 * M) == 192 * M, "64 MiB a step: %llu",
                  (unsigned long long)advice_headroom(2 * G, 64 * M));
}
END_TEST

Suite *analyzer_advice_suite(void)
{
    Suite *s = suite_create("analyzer_advice");
    TCase *tc = tcase_create("advice");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_the_headroom_is_the_larger_of_5_percent_and_3_steps);
    tcase_add_test(tc, test_a_leak_never_gets_a_setting_or_a_cap_as_its_remedy);
    tcase_add_test(tc, test_a_transient_that_grows_every_step_gets_no_cap_either);
    tcase_add_test(tc, test_a_fragmentation_oom_gets_a_setting_that_passes_with_headroom);
    tcase_add_test(tc, test_a_keep_log_gets_one_recommendation_from_the_model);
    tcase_add_test(tc, test_a_failure_past_all_the_job_held_gets_no_larger_cap);
    suite_add_tcase(s, tc);
    return s;
}
