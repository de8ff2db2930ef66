/* OOM causes (analyzer/causes.c) on logs PyTorch wrote on the H200 (tests/gpu/torch_scenarios.py
 * under GMSHIM_DEVICE_LIMIT=2G, run 53 in bench/results/gpu-runs.md; the *_keep ones with PyTorch's cache
 * kept and its bridge's tensor events, read as tensors): each program ran out of memory for
 * a known reason, and the cause found by replay must be that one, with figures that add up. */
#include "causes.h"
#include "commands.h"
#include "suites.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* The cause of a fixture's last OOM, checked by causes_check and reproduced by the replay. */
static void expect_fixture_cause(const char *path, const char *want)
{
    rd_log_t lf;
    ck_assert_msg(rd_open_path(&lf, path) == 0, "%s does not open", path);
    model_t m;
    model_build(&m, &lf, MODEL_SITES | MODEL_EPOCHS);
    ck_assert_msg(m.nooms > 0, "%s holds no OOM", path);
    cause_t c;
    ck_assert_msg(causes_of(&m, &m.ooms[m.nooms - 1], &c) == 0, "%s: the last OOM was not replayed", path);
    const char *bad = causes_check(&c);
    ck_assert_msg(!bad, "%s: %s: %s", path, bad, c.why);
    ck_assert_msg(c.reproduced, "%s: the OOM did not fail in the replay", path);
    ck_assert_msg(!strcmp(oom_cause_name(c.cause), want), "%s: cause %s, the program was written for %s: %s", path,
                  oom_cause_name(c.cause), want, c.why);
    model_free(&m);
    rd_close(&lf);
    causes_reset();
}

START_TEST(test_a_kept_activation_per_iteration_is_a_leak)
{
    expect_fixture_cause("tests/fixtures/h200_scen_leak_own.gmlog", "leak");
}
END_TEST

START_TEST(test_a_leak_seen_through_pytorchs_segments_is_a_leak)
{
    expect_fixture_cause("tests/fixtures/h200_scen_leak_keep.gmlog", "leak");
}
END_TEST

START_TEST(test_a_block_cut_into_holes_is_fragmentation)
{
    expect_fixture_cause("tests/fixtures/h200_scen_frag_own.gmlog", "fragmentation");
}
END_TEST

START_TEST(test_holes_inside_pytorchs_segment_are_fragmentation)
{
    expect_fixture_cause("tests/fixtures/h200_scen_frag_keep.gmlog", "fragmentation");
}
END_TEST

START_TEST(test_weights_loaded_after_a_mark_until_full_are_capacity)
{
    expect_fixture_cause("tests/fixtures/h200_scen_weights_own.gmlog", "capacity");
    expect_fixture_cause("tests/fixtures/h200_scen_weights_keep.gmlog", "capacity");
}
END_TEST

START_TEST(test_temporaries_that_outgrow_the_device_are_a_transient_peak)
{
    expect_fixture_cause("tests/fixtures/h200_scen_transient_own.gmlog", "transient");
}
END_TEST

START_TEST(test_temporaries_seen_as_pytorchs_tensors_are_a_transient_peak)
{
    expect_fixture_cause("tests/fixtures/h200_scen_transient_keep.gmlog", "transient");
}
END_TEST

/* With the bridge's tensor events the replay drives the pool's policy over PyTorch's tensors. */
START_TEST(test_the_replay_of_a_log_with_tensor_events_reads_tensors)
{
    rd_log_t lf;
    ck_assert(rd_open_path(&lf, "tests/fixtures/h200_scen_frag_keep.gmlog") == 0);
    model_t m;
    model_build(&m, &lf, MODEL_SITES | MODEL_EPOCHS);
    ck_assert(m.nooms > 0);
    cause_t c;
    ck_assert(causes_of(&m, &m.ooms[m.nooms - 1], &c) == 0);
    ck_assert_msg(c.torch_tensors && !c.torch_cache_kept, "tensors %d, segments %d", c.torch_tensors,
                  c.torch_cache_kept);
    ck_assert_msg(c.live < c.reserved, "live %llu of reserved %llu: the segment counted as a block",
                  (unsigned long long)c.live, (unsigned long long)c.reserved);
    /* PyTorch's allocator placed the tensors: the setting is its own, as the model of it ran it */
    ck_assert_msg(!strcmp(c.env_name, "PYTORCH_CUDA_ALLOC_CONF") && !strcmp(c.env_value, "expandable_segments:True"),
                  "remedy %s=%s", c.env_name, c.env_value);
    model_free(&m);
    rd_close(&lf);
    causes_reset();
}
END_TEST

static const char *const fixtures[] = {
    "tests/fixtures/h200_scen_leak_own.gmlog",      "tests/fixtures/h200_scen_leak_keep.gmlog",
    "tests/fixtures/h200_scen_frag_own.gmlog",      "tests/fixtures/h200_scen_frag_keep.gmlog",
    "tests/fixtures/h200_scen_weights_own.gmlog",   "tests/fixtures/h200_scen_weights_keep.gmlog",
    "tests/fixtures/h200_scen_transient_own.gmlog", "tests/fixtures/h200_scen_transient_keep.gmlog",
};
#define NFIX (sizeof fixtures / sizeof fixtures[0])

typedef struct job {
    const char *path;
    cause_t c;
    int rc;
} job_t;

static void *cause_job(void *p)
{
    job_t *j = p;
    rd_log_t lf;
    j->rc = -1;
    if (rd_open_path(&lf, j->path))
        return NULL;
    model_t m;
    model_build(&m, &lf, MODEL_SITES | MODEL_EPOCHS);
    if (m.nooms)
        j->rc = causes_of(&m, &m.ooms[m.nooms - 1], &j->c);
    model_free(&m);
    rd_close(&lf);
    return NULL;
}

static pthread_mutex_t hook_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hook_cond = PTHREAD_COND_INITIALIZER;
static unsigned hook_loading, hook_want;
static int hook_other_done;
static const char *hook_slow; /* the log whose decoding waits for the other's causes */

/* Waits (up to 20 s) until `want` fn(): a wait that a single lock over every log would time out. */
static int hook_wait(int (*ready)(void))
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 20;
    int ok = 1;
    while (!ready() && ok)
        ok = pthread_cond_timedwait(&hook_cond, &hook_lock, &until) == 0 || ready();
    return ready();
}

static int all_loading(void) { return hook_loading >= hook_want; }
static int other_done(void) { return hook_other_done; }

static void hook_all_at_once(const char *name)
{
    (void)name;
    pthread_mutex_lock(&hook_lock);
    hook_loading++;
    pthread_cond_broadcast(&hook_cond);
    hook_wait(all_loading);
    pthread_mutex_unlock(&hook_lock);
}

static int slow_saw_other;
static void hook_slow_one(const char *name)
{
    if (!strstr(name, hook_slow))
        return;
    pthread_mutex_lock(&hook_lock);
    hook_loading = 1;
    pthread_cond_broadcast(&hook_cond);
    slow_saw_other = hook_wait(other_done);
    pthread_mutex_unlock(&hook_lock);
}

/* More logs than the cache holds, all decoded at once (each waits for the others to start, and
 * two ask for the same log): every cause as one at a time found it. */
START_TEST(test_causes_of_many_logs_at_once_match_one_at_a_time)
{
    job_t one[NFIX], par[NFIX + 2];
    for (size_t i = 0; i < NFIX; i++) {
        one[i].path = fixtures[i];
        cause_job(&one[i]);
        ck_assert_msg(one[i].rc == 0, "%s: no cause", fixtures[i]);
        causes_reset();
    }
    hook_loading = 0;
    hook_want = NFIX; /* the two repeats wait for their log's load, not in the hook */
    causes_load_hook = hook_all_at_once;
    pthread_t tid[NFIX + 2];
    for (size_t i = 0; i < NFIX + 2; i++) {
        par[i].path = fixtures[i % NFIX];
        ck_assert(pthread_create(&tid[i], NULL, cause_job, &par[i]) == 0);
    }
    for (size_t i = 0; i < NFIX + 2; i++)
        pthread_join(tid[i], NULL);
    causes_load_hook = NULL;
    causes_reset();
    ck_assert_msg(hook_loading >= NFIX, "%u of %zu logs were being decoded at once", hook_loading, NFIX);
    for (size_t i = 0; i < NFIX + 2; i++) {
        const cause_t *a = &one[i % NFIX].c, *b = &par[i].c;
        ck_assert_msg(par[i].rc == 0 && a->cause == b->cause && a->live == b->live && a->cap == b->cap &&
                          !strcmp(a->why, b->why) && !strcmp(a->env_name, b->env_name),
                      "%s: alone %s (%s), among others %s (%s)", fixtures[i % NFIX], oom_cause_name(a->cause), a->why,
                      par[i].rc ? "none" : oom_cause_name(b->cause), b->why);
    }
}
END_TEST

/* One log's decoding and replays never hold up another's causes (a lock per cached log). */
START_TEST(test_a_slow_log_does_not_hold_up_another_logs_causes)
{
    hook_loading = 0;
    hook_other_done = 0;
    slow_saw_other = 0;
    hook_slow = "h200_scen_leak_own";
    causes_load_hook = hook_slow_one;
    job_t slow = {fixtures[0], {0}, 0}, other = {fixtures[2], {0}, 0};
    pthread_t t;
    ck_assert(pthread_create(&t, NULL, cause_job, &slow) == 0);
    pthread_mutex_lock(&hook_lock);
    hook_want = 1;
    hook_wait(all_loading);
    pthread_mutex_unlock(&hook_lock);
    cause_job(&other);
    pthread_mutex_lock(&hook_lock);
    hook_other_done = 1;
    pthread_cond_broadcast(&hook_cond);
    pthread_mutex_unlock(&hook_lock);
    pthread_join(t, NULL);
    causes_load_hook = NULL;
    causes_reset();
    ck_assert_msg(slow.rc == 0 && other.rc == 0, "causes: %d and %d", slow.rc, other.rc);
    ck_assert_msg(slow_saw_other, "the other log's causes waited for the slow log's decoding");
}
END_TEST

Suite *analyzer_causes_suite(void)
{
    Suite *s = suite_create("analyzer_causes");
    TCase *tc = tcase_create("h200");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_a_kept_activation_per_iteration_is_a_leak);
    tcase_add_test(tc, test_a_leak_seen_through_pytorchs_segments_is_a_leak);
    tcase_add_test(tc, test_a_block_cut_into_holes_is_fragmentation);
    tcase_add_test(tc, test_weights_loaded_after_a_mark_until_full_are_capacity);
    tcase_add_test(tc, test_temporaries_that_outgrow_the_device_are_a_transient_peak);
    tcase_add_test(tc, test_holes_inside_pytorchs_segment_are_fragmentation);
    tcase_add_test(tc, test_temporaries_seen_as_pytorchs_tensors_are_a_transient_peak);
    tcase_add_test(tc, test_the_replay_of_a_log_with_tensor_events_reads_tensors);
    suite_add_tcase(s, tc);
    TCase *tp = tcase_create("parallel");
    tcase_set_timeout(tp, 120);
    tcase_add_test(tp, test_causes_of_many_logs_at_once_match_one_at_a_time);
    tcase_add_test(tp, test_a_slow_log_does_not_hold_up_another_logs_causes);
    suite_add_tcase(s, tp);
    return s;
}
