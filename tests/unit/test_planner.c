/* GMSHIM_PLAN (shim/planner.c) under the preload on the fake runtime: a training loop's steps
 * served from the plan, a departing step served by the pool, no two live blocks overlapping, a
 * capture, a late kernel on a side stream, a fork, refused frees; the log holds every planned
 * allocation and free; other programs run unchanged with the plan on. */
#include "suites.h"
#include "gmlog.h"
#include "model.h"
#include "reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Runs plan_steps MODE with the plan on (GPU order `order`, one more setting `extra` or NULL),
 * logging to `log` (NULL: off); returns its output (the caller frees it). */
static char *plan_steps_with(const char *mode, const char *order, const char *log, const char *extra)
{
    char env_log[4300];
    snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s", log ? log : "off");
    const char *strict = strstr(order, "=1") ? "PLAN_STRICT=1" : NULL;
    const char *env[] = {"FAKECUDA_MEM=1G", "GMSHIM_PLAN=1", order, env_log, extra ? extra : strict,
                         extra ? strict : NULL, NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/plan_steps", env, mode, &out);
    ck_assert_msg(rc == 0, "plan_steps %s (%s) exited %d:\n%s", mode, order, rc, out);
    return out;
}

static char *plan_steps(const char *mode, const char *order, const char *log)
{
    return plan_steps_with(mode, order, log, NULL);
}

static unsigned long long field(const char *out, const char *name)
{
    const char *at = strstr(out, name);
    ck_assert_msg(at != NULL, "no '%s' in:\n%s", name, out);
    return strtoull(at + strlen(name), NULL, 10);
}

static void each_order(const char *mode)
{
    static const char *const orders[] = {"GMSHIM_GPU_ORDER=0", "GMSHIM_GPU_ORDER=1"};
    for (size_t i = 0; i < 2; i++)
        free(plan_steps(mode, orders[i], NULL));
}

START_TEST(test_repeated_steps_are_served_from_the_plan_without_overlap)
{
    each_order("steps");
}
END_TEST

/* gmshim_get_stats' peaks count the plan's live blocks with the pool's once (plan_steps checks
 * them against the program's own peak): not the pool's peak while it learnt plus the plan's. */
START_TEST(test_the_devices_peaks_count_planned_blocks_once)
{
    each_order("steps");
}
END_TEST

/* The job idles (GMSHIM_IDLE_RELEASE=1, and the periodic pass of GMSHIM_EMPTY_CACHE_INTERVAL=1):
 * the trimmer gives back the plan's pages no block needs (their fences complete, no wait for the
 * GPU) with the pool's idle segments, and the plan serves the steps after. */
START_TEST(test_an_idle_plan_gives_back_its_pages_to_the_trimmer)
{
    static const char *const orders[] = {"GMSHIM_GPU_ORDER=0", "GMSHIM_GPU_ORDER=1"};
    static const char *const settings[] = {"GMSHIM_IDLE_RELEASE=1", "GMSHIM_EMPTY_CACHE_INTERVAL=1"};
    for (size_t i = 0; i < 2; i++)
        for (size_t k = 0; k < 2; k++)
            free(plan_steps_with("idle", orders[i], NULL, settings[k]));
}
END_TEST

/* A fence the plan records is polled once complete: its events are used again, not made anew
 * for every fence (under GPU order a slot never asks for a poll: the H100's 1.2 ms fences). */
START_TEST(test_the_plans_fences_use_their_events_again_once_complete)
{
    each_order("recycle");
}
END_TEST

/* A loop of one small allocation freed and wanted again at once shares its fences as the pool does
 * (run on the fake runtime, a fence a pair made such a 512 B pair 16x slower than the pool's). */
START_TEST(test_a_small_blocks_loop_under_the_plan_shares_its_fences)
{
    each_order("loop");
}
END_TEST

START_TEST(test_a_departing_step_goes_to_the_pool_and_the_plan_resumes)
{
    each_order("depart");
}
END_TEST

START_TEST(test_nothing_is_planned_during_a_capture)
{
    each_order("capture");
}
END_TEST

START_TEST(test_a_slot_freed_under_a_late_kernel_waits_for_it_on_every_stream)
{
    each_order("streams");
}
END_TEST

START_TEST(test_a_fork_child_forwards_and_the_plan_goes_on)
{
    each_order("fork");
}
END_TEST

START_TEST(test_double_and_interior_frees_of_planned_blocks_are_refused)
{
    each_order("frees");
}
END_TEST

/* Issue 48's rule: a request that the pool alone serves (its cache released on the driver's OOM)
 * is served with the plan on too: the OOM release gives back the plan's pages no planned block
 * holds, as gmshim_empty_cache does; the plan maps them again as its slots need them. */
START_TEST(test_an_oom_takes_the_plans_idle_pages_and_the_plan_goes_on)
{
    classic_pool_test();
    each_order("oom");
    const char *env[] = {"FAKECUDA_MEM=1G", "GMSHIM_LOG=off", "PLAN_EXPECT_NONE=1", NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/plan_steps", env, "oom", &out);
    ck_assert_msg(rc == 0, "plan_steps oom without GMSHIM_PLAN exited %d:\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_emptying_the_cache_gives_back_the_plans_idle_pages)
{
    each_order("empty");
}
END_TEST

/* Off by default: the same program, no plan. */
START_TEST(test_the_plan_is_off_by_default)
{
    classic_pool_test();
    const char *env[] = {"FAKECUDA_MEM=1G", "GMSHIM_LOG=off", "PLAN_EXPECT_NONE=1", NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/plan_steps", env, "steps", &out);
    ck_assert_msg(rc == 0, "plan_steps without GMSHIM_PLAN exited %d:\n%s", rc, out);
    free(out);
}
END_TEST

/* The log: every planned allocation is an ALLOC with the planned flag and has its FREE, its pages
 * are SEGMENT records, and the model reads it with nothing malformed. */
START_TEST(test_the_log_holds_every_planned_allocation_and_free)
{
    char log[4200];
    snprintf(log, sizeof log, "%s/plan-steps.gmlog", temp_dir());
    unlink(log);
    char *out = plan_steps("steps", "GMSHIM_GPU_ORDER=1", log);
    unsigned long long planned = field(out, "planned "), allocs = field(out, "allocs ");
    free(out);
    rd_log_t lf;
    ck_assert_msg(rd_open_path(&lf, log) == 0, "the log does not read");
    rd_rec_t rec;
    unsigned long long flagged = 0, alloc_recs = 0, free_recs = 0;
    while (rd_next(&lf, &rec)) {
        if (rec.type == GMLOG_ALLOC) {
            alloc_recs++;
            flagged += (rec.flags & GMLOG_A_PLANNED) != 0;
        } else if (rec.type == GMLOG_FREE) {
            free_recs++;
        }
    }
    rd_close(&lf);
    ck_assert_msg(flagged == planned && planned > 0, "%llu planned ALLOC records, the stats say %llu", flagged,
                  planned);
    ck_assert_msg(alloc_recs == allocs && free_recs == allocs, "%llu ALLOC and %llu FREE records for %llu allocations",
                  alloc_recs, free_recs, allocs);
    model_t m;
    memset(&m, 0, sizeof m);
    ck_assert_msg(rd_open_path(&lf, log) == 0, "the log does not read again");
    model_build(&m, &lf, MODEL_ALL);
    model_dev_t *d0 = m.dev[0];
    ck_assert_ptr_nonnull(d0);
    ck_assert_uint_eq(m.malformed, 0);
    ck_assert_uint_eq(d0->bad_segment_frees, 0);
    ck_assert_uint_eq(d0->allocated, 0);
    ck_assert_uint_ge(d0->peak_reserved, d0->peak_allocated);
    model_free(&m);
    rd_close(&lf);
    unlink(log);
}
END_TEST

/* A bounded log that wraps while the plan serves: each checkpoint repeats the plan's mapped pages
 * and its live blocks beside the pool's, so that the log read from its newest checkpoint frees
 * no page it never saw mapped (before, one of the plan's pages was unknown to the reader), and no
 * block: the cut holds the plan's lock before it reads its time (before, a planned free between the
 * two was timed after the cut while its block was already gone from it: under ThreadSanitizer one
 * block lost in 1 run of 3). */
START_TEST(test_a_wrapped_log_repeats_the_plans_pages_and_blocks)
{
    const char *env[] = {"GMSHIM_PLAN=1", "PAIRS=2000000", "THREADS=1", "FAKECUDA_MEM=4G", NULL};
    rd_log_t lf;
    model_t m;
    const char *log = wrapped_log_model("plan-ckpt.gmlog", env, 0, &lf, &m);
    model_free(&m);
    rd_rec_t rec;
    unsigned long long planned = 0;
    rd_rewind(&lf);
    while (rd_next(&lf, &rec))
        planned += rec.type == GMLOG_ALLOC && (rec.flags & GMLOG_A_PLANNED);
    ck_assert_msg(planned > 0, "nothing planned after the checkpoint: the test proves nothing");
    rd_close(&lf);
    unlink(log);
}
END_TEST

/* A field of the run labelled `label` in whatif's JSON (its first after the label). */
static unsigned long long run_field(const char *json, const char *label, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "\"label\":\"%s\"", label);
    const char *at = strstr(json, key);
    ck_assert_msg(at != NULL, "no run '%s' in:\n%s", label, json);
    return field(at, name);
}

/* `gmshim --json whatif LOG`'s output (the caller frees it). */
static char *whatif_json(const char *log)
{
    char gmshim[4096];
    snprintf(gmshim, sizeof gmshim, "%s", build_path("gmshim"));
    const char *argv[] = {gmshim, "--json", "whatif", log, NULL};
    char *out = NULL;
    int rc = run_program(argv, NULL, 0, &out);
    ck_assert_msg(rc == 0, "whatif %s exited %d:\n%s", log, rc, out);
    return out;
}

/* The analyzer's planned replay (analyzer/replay_plan.c) of the shim's own planned run, under
 * GPU order (a slot's fence answers at once, the replay's rule): the same step, the same
 * allocations served from the plan, the same bytes of its range mapped, the same peak. */
START_TEST(test_the_replay_of_a_planned_log_plans_as_the_shim_did)
{
    char log[4200];
    snprintf(log, sizeof log, "%s/plan-replay.gmlog", temp_dir());
    unlink(log);
    char *out = plan_steps("steps", "GMSHIM_GPU_ORDER=1", log);
    unsigned long long planned = field(out, "planned "), bytes = field(out, "bytes "), period = field(out, "period ");
    free(out);
    char *j = whatif_json(log);
    unsigned long long r_planned = run_field(j, "as recorded", "\"planned_allocs\":");
    unsigned long long r_bytes = run_field(j, "as recorded", "\"range_mapped\":");
    unsigned long long r_period = run_field(j, "as recorded", "\"period\":");
    unsigned long long r_peak = run_field(j, "as recorded", "\"peak_reserved\":");
    unsigned long long rec_peak = field(j, "\"recorded_peak_reserved\":");
    ck_assert_msg(r_period == period && r_planned == planned && r_bytes == bytes,
                  "the replay planned a step of %llu, %llu allocations, %llu bytes mapped; the shim %llu, %llu, %llu",
                  r_period, r_planned, r_bytes, period, planned, bytes);
    ck_assert_msg(r_peak == rec_peak, "the planned replay's peak %llu, the recording's %llu", r_peak, rec_peak);
    free(j);
    unlink(log);
}
END_TEST

/* A log's FENCE_REUSABLE records, checked against its own frees and allocations: the seq only
 * rises, every record is `ordered` under GPU order and none is without it, and no address freed
 * under fence S is handed out again before a record has said S became reusable. The shim
 * before these records: none at all. */
typedef struct {
    uint64_t ptr, seq;
} pending_free_t;

static void expect_reuse_after_its_record(const char *log, int gpu_order)
{
    rd_log_t lf;
    ck_assert_int_eq(rd_open_path(&lf, log), 0);
    static pending_free_t pend[8192];
    size_t npend = 0;
    uint64_t fence = 0, reusable = 0, records = 0, ordered = 0, reused = 0;
    rd_rec_t r;
    while (rd_next(&lf, &r)) {
        if (r.device != 0)
            continue;
        if (r.type == GMLOG_FENCE) {
            uint64_t seq = ((const gmlog_fence_t *)r.p)->seq;
            fence = seq > fence ? seq : fence;
        } else if (r.type == GMLOG_FENCE_REUSABLE) {
            uint64_t seq = ((const gmlog_fence_wait_t *)r.p)->seq;
            ck_assert_msg(seq > reusable, "%s: reusable went from %llu to %llu", log, (unsigned long long)reusable,
                          (unsigned long long)seq);
            reusable = seq;
            records++;
            ordered += (r.flags & GMLOG_REUSABLE_ORDERED) != 0;
        } else if (r.type == GMLOG_FREE || r.type == GMLOG_ALLOC) {
            uint64_t ptr = r.type == GMLOG_FREE ? ((const gmlog_free_t *)r.p)->ptr : ((const gmlog_alloc_t *)r.p)->ptr;
            size_t i = 0;
            while (i < npend && pend[i].ptr != ptr)
                i++;
            if (i < npend && r.type == GMLOG_ALLOC) {
                ck_assert_msg(reusable >= pend[i].seq,
                              "%s: %#llx, freed under fence %llu, handed out again at %llu ns with %llu said reusable",
                              log, (unsigned long long)ptr, (unsigned long long)pend[i].seq,
                              (unsigned long long)r.t, (unsigned long long)reusable);
                reused++;
            }
            if (i < npend)
                pend[i] = pend[--npend];
            if (r.type == GMLOG_FREE && (r.flags & GMLOG_F_DEFERRED) && npend < sizeof pend / sizeof *pend)
                pend[npend++] = (pending_free_t){ptr, fence + 1};
        }
    }
    rd_close(&lf);
    ck_assert_msg(records > 0 && reused > 0, "%s: %llu FENCE_REUSABLE records, %llu addresses reused after a fence",
                  log, (unsigned long long)records, (unsigned long long)reused);
    ck_assert_msg(ordered == (gpu_order ? records : 0), "%s: %llu of %llu records by GPU order (GPU order %s)", log,
                  (unsigned long long)ordered, (unsigned long long)records, gpu_order ? "on" : "off");
}

START_TEST(test_the_log_says_when_freed_memory_became_reusable_before_any_reuse)
{
    static const struct {
        const char *order, *plan;
    } runs[] = {{"GMSHIM_GPU_ORDER=1", "GMSHIM_PLAN=1"}, {"GMSHIM_GPU_ORDER=0", "GMSHIM_PLAN=1"},
                {"GMSHIM_GPU_ORDER=0", "GMSHIM_PLAN=0"}, {"GMSHIM_GPU_ORDER=1", "GMSHIM_PLAN=0"}};
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        char log[4200], env_log[4300];
        snprintf(log, sizeof log, "%s/reusable-%zu.gmlog", temp_dir(), i);
        snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s", log);
        unlink(log);
        const char *env[] = {"FAKECUDA_MEM=1G", runs[i].order, runs[i].plan, env_log,
                             strstr(runs[i].plan, "=0") ? "PLAN_EXPECT_NONE=1" : NULL, NULL};
        char *out = NULL;
        int rc = run_built("tests/integration/plan_steps", env, "steps", &out);
        ck_assert_msg(rc == 0, "plan_steps (%s, %s) exited %d:\n%s", runs[i].order, runs[i].plan, rc, out);
        free(out);
        expect_reuse_after_its_record(log, strstr(runs[i].order, "=1") != NULL);
        unlink(log);
    }
}
END_TEST

/* whatif's replay as recorded of fixture `path` reaches its recorded peak; its JSON (the caller
 * frees it). */
static char *expect_the_recorded_peak(const char *path)
{
    char *j = whatif_json(path);
    unsigned long long r_peak = run_field(j, "as recorded", "\"peak_reserved\":");
    unsigned long long rec_peak = field(j, "\"recorded_peak_reserved\":");
    ck_assert_msg(r_peak == rec_peak, "%s: the replay's peak %llu, the recording's %llu", path, r_peak, rec_peak);
    return j;
}

/* A planned run under GPU order recorded on a loaded machine (three such runs side by side),
 * where its early steps' fences came later than the replay's old rule put them (the replay's
 * peak was 6 MiB above the recording's): the replay as recorded takes the log's word for when
 * freed memory became reusable and reproduces the recorded peak, and needs no guided pass. */
START_TEST(test_the_replay_reuses_freed_memory_where_the_log_says_it_became_reusable)
{
    char *j = expect_the_recorded_peak("tests/fixtures/plan_gpu_order.gmlog");
    unsigned long long divergences = field(strstr(j, "\"followed\""), "\"divergences\":");
    ck_assert_msg(divergences == 0, "the replay as recorded diverged %llu times", divergences);
    free(j);
}
END_TEST

/* A planned run with the CPU waiting for fences (GMSHIM_GPU_ORDER=0), recorded beside two
 * others: its allocations that the plan refused and the pool then waited for (FENCE_WAIT, and
 * FENCE_REUSABLE `waited`, logged before the allocation's own record) are decided by the replay
 * before what the wait made reusable, as the shim decided them; replayed as if the wait came
 * first, the plan took slots the shim had refused and the peak was 4 MiB low. */
START_TEST(test_a_wait_inside_an_allocation_counts_after_what_the_allocation_decided)
{
    free(expect_the_recorded_peak("tests/fixtures/plan_cpu_order.gmlog"));
}
END_TEST

/* The replay gives the plan's idle pages back on its OOM release as the shim does: the large
 * block the shim served after the steps is served in the replay of its log too. */
START_TEST(test_the_replay_gives_the_plans_idle_pages_back_on_oom)
{
    char log[4200];
    snprintf(log, sizeof log, "%s/plan-oom.gmlog", temp_dir());
    unlink(log);
    free(plan_steps("oom", "GMSHIM_GPU_ORDER=1", log));
    char *j = whatif_json(log);
    unsigned long long failures = run_field(j, "as recorded", "\"failures\":");
    unsigned long long mapped = run_field(j, "as recorded", "\"range_mapped\":");
    ck_assert_msg(failures == 0, "the replay of the recording failed %llu allocations", failures);
    ck_assert_msg(mapped > 0, "the plan mapped nothing again after the large block");
    free(j);
    unlink(log);
}
END_TEST

/* A log of the same program without the plan (classic segments), replayed with GMSHIM_PLAN=1:
 * the plan is made and serves, and its peak lies between the live floor and the classic peak. */
START_TEST(test_a_classic_log_replayed_with_the_plan_peaks_between_floor_and_classic)
{
    classic_pool_test();
    char log[4200], env_log[4300];
    snprintf(log, sizeof log, "%s/plan-classic.gmlog", temp_dir());
    snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s", log);
    unlink(log);
    const char *env[] = {"FAKECUDA_MEM=1G", env_log, "PLAN_EXPECT_NONE=1", NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/plan_steps", env, "steps", &out);
    ck_assert_msg(rc == 0, "plan_steps without GMSHIM_PLAN exited %d:\n%s", rc, out);
    free(out);
    char *j = whatif_json(log);
    unsigned long long classic = run_field(j, "as recorded", "\"peak_reserved\":");
    unsigned long long planned = run_field(j, "GMSHIM_PLAN=1", "\"peak_reserved\":");
    unsigned long long served = run_field(j, "GMSHIM_PLAN=1", "\"planned_allocs\":");
    unsigned long long floor = field(j, "\"peak\":{\"floor\":");
    ck_assert_msg(served >= 6 * (2 * 24 + 1), "the replay's plan served %llu allocations", served);
    ck_assert_msg(planned <= classic && planned >= floor, "planned peak %llu, classic %llu, floor %llu", planned,
                  classic, floor);
    free(j);
    unlink(log);
}
END_TEST

#define PLAN "GMSHIM_PLAN=1", "GMSHIM_LOG=off"

/* Programs that know nothing of the plan behave as without it (as under growable ranges, which
 * the plan turns on: driver call counts are pages there). */
START_TEST(test_other_programs_run_unchanged_with_the_plan_on)
{
    RUN_OK("tests/integration/odd_args", "FAKECUDA_MEM=1G", PLAN);
    RUN_OK("tests/integration/capture", "FAKECUDA_MEM=1G", PLAN);
    RUN_OK("tests/integration/threads", "FAKECUDA_MEM=4G", PLAN);
    RUN_OK("tests/integration/two_devices", "FAKECUDA_MEM=1G", "FAKECUDA_DEVICES=2", PLAN);
    RUN_OK("tests/integration/fork_child", "FAKECUDA_MEM=1G", PLAN);
    RUN_OK("tests/integration/device_reset", "FAKECUDA_MEM=1G", PLAN);
    RUN_OK("tests/integration/reuse_order", "FAKECUDA_MEM=1G", PLAN);
    RUN_OK("tests/integration/demo_train", "FAKECUDA_MEM=1G", PLAN);
}
END_TEST

Suite *planner_suite(void)
{
    Suite *s = suite_create("planner");
    TCase *tc = tcase_create("under the preload");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_repeated_steps_are_served_from_the_plan_without_overlap);
    tcase_add_test(tc, test_a_small_blocks_loop_under_the_plan_shares_its_fences);
    tcase_add_test(tc, test_a_departing_step_goes_to_the_pool_and_the_plan_resumes);
    tcase_add_test(tc, test_the_plans_fences_use_their_events_again_once_complete);
    tcase_add_test(tc, test_the_devices_peaks_count_planned_blocks_once);
    tcase_add_test(tc, test_an_idle_plan_gives_back_its_pages_to_the_trimmer);
    tcase_add_test(tc, test_nothing_is_planned_during_a_capture);
    tcase_add_test(tc, test_a_slot_freed_under_a_late_kernel_waits_for_it_on_every_stream);
    tcase_add_test(tc, test_a_fork_child_forwards_and_the_plan_goes_on);
    tcase_add_test(tc, test_double_and_interior_frees_of_planned_blocks_are_refused);
    tcase_add_test(tc, test_the_plan_is_off_by_default);
    tcase_add_test(tc, test_an_oom_takes_the_plans_idle_pages_and_the_plan_goes_on);
    tcase_add_test(tc, test_emptying_the_cache_gives_back_the_plans_idle_pages);
    tcase_add_test(tc, test_the_log_holds_every_planned_allocation_and_free);
    tcase_add_test(tc, test_a_wrapped_log_repeats_the_plans_pages_and_blocks);
    tcase_add_test(tc, test_other_programs_run_unchanged_with_the_plan_on);
    tcase_add_test(tc, test_the_replay_of_a_planned_log_plans_as_the_shim_did);
    tcase_add_test(tc, test_the_log_says_when_freed_memory_became_reusable_before_any_reuse);
    tcase_add_test(tc, test_the_replay_reuses_freed_memory_where_the_log_says_it_became_reusable);
    tcase_add_test(tc, test_a_wait_inside_an_allocation_counts_after_what_the_allocation_decided);
    tcase_add_test(tc, test_the_replay_gives_the_plans_idle_pages_back_on_oom);
    tcase_add_test(tc, test_a_classic_log_replayed_with_the_plan_peaks_between_floor_and_classic);
    suite_add_tcase(s, tc);
    return s;
}
