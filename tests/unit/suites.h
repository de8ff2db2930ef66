/* Every Check suite of the runner; one test file per module defines one. */
#ifndef GM_TEST_SUITES_H
#define GM_TEST_SUITES_H

#include <check.h>

/* The shim's suites (and common/pool.c's, common/policy.c's and common/grow.c's), one per module. */
Suite *pool_suite(void);
Suite *policy_suite(void);
Suite *grow_suite(void);
Suite *vmm_suite(void);
Suite *planpack_suite(void);
Suite *steprec_suite(void);
Suite *stepplan_suite(void);
Suite *clock_suite(void);
Suite *ranges_suite(void);
Suite *planner_suite(void);
Suite *options_suite(void);
Suite *device_suite(void);
Suite *hit_suite(void);
Suite *tcache_suite(void);
Suite *fencepol_suite(void);
Suite *slowpath_suite(void);
Suite *segments_suite(void);
Suite *devctx_suite(void);
Suite *capheap_suite(void);
Suite *capture_suite(void);
Suite *fence_suite(void);
Suite *alloc_suite(void);
Suite *api_suite(void);
Suite *init_suite(void);
Suite *inject_suite(void);
Suite *state_suite(void);
Suite *fallback_suite(void);
Suite *failtest_suite(void);
Suite *real_suite(void);
Suite *hooks_suite(void);
Suite *diag_suite(void);
Suite *logrec_suite(void);
Suite *logstate_suite(void);
Suite *logkeep_suite(void);
Suite *logring_suite(void);
Suite *checkpoint_suite(void);
Suite *stacks_suite(void);
Suite *stackwalk_suite(void);
Suite *cfi_suite(void);
Suite *pyframes_suite(void);
Suite *modules_suite(void);
Suite *objects_suite(void);
Suite *requester_suite(void);
Suite *trim_suite(void);
Suite *warn_suite(void);
Suite *leakwarn_suite(void);
Suite *warntensor_suite(void);
Suite *cupti_suite(void);
Suite *evlog_suite(void);
Suite *cut_suite(void);
Suite *analyzer_reader_suite(void);
Suite *analyzer_reader_edges_suite(void);
Suite *analyzer_model_suite(void);
Suite *analyzer_symbolize_suite(void);
Suite *analyzer_json_suite(void);
Suite *analyzer_oom_suite(void);
Suite *analyzer_ledger_suite(void);
Suite *analyzer_plan_suite(void);
Suite *analyzer_split_suite(void);
Suite *analyzer_advice_suite(void);
Suite *analyzer_cli_suite(void);
Suite *analyzer_args_suite(void);
Suite *analyzer_ranks_suite(void);
Suite *analyzer_ranks_job_suite(void);
Suite *analyzer_ranks_runs_suite(void);
Suite *analyzer_export_suite(void);
Suite *analyzer_golden_suite(void);
Suite *analyzer_table_suite(void);
Suite *analyzer_vec_suite(void);
Suite *analyzer_commands_suite(void);
Suite *analyzer_output_suite(void);
Suite *analyzer_sites_suite(void);
Suite *analyzer_frag_suite(void);
Suite *analyzer_report_suite(void);
Suite *analyzer_summary_suite(void);
Suite *analyzer_leaks_suite(void);
Suite *analyzer_steps_suite(void);
Suite *analyzer_dump_suite(void);
Suite *analyzer_run_suite(void);
Suite *analyzer_replay_suite(void);
Suite *analyzer_timeline_suite(void);
Suite *analyzer_whatif_suite(void);
Suite *analyzer_replay_torch_suite(void);
Suite *analyzer_diff_suite(void);
Suite *analyzer_top_suite(void);
Suite *torchev_suite(void);
Suite *torchload_suite(void);
Suite *torch_configs_suite(void);
Suite *torchbuild_suite(void);
Suite *layers_suite(void);
Suite *analyzer_causes_suite(void);
Suite *analyzer_tensors_suite(void);

/* Helpers shared by the suites (tests/unit/helpers.c). */
/* Absolute path of a file under the build directory (GMSHIM_BUILD). */
const char *build_path(const char *rel);
/* Runs argv with extra environment entries ("K=V", NULL-terminated) and the preload; captures
 * stdout+stderr into *out (malloc'd). Returns the exit status, or 128+signal. */
/* The running test is about the classic pool's own behaviour (its segment sizes, driver calls,
 * fragmentation built to make it fail, fence counts): the programs it runs do not get TEST_ENV's
 * GMSHIM_PLAN and GMSHIM_SEGMENTS (`make test TEST_ENV=GMSHIM_PLAN=1` runs everything else with
 * the plan). Each test runs in a process of its own, so this lasts for the test. */
void classic_pool_test(void);
int run_program(const char *const *argv, const char *const *env, int preload, char **out);
/* As run_program, started in the directory cwd (NULL: this one) from the file at path, whatever
 * argv[0] says; an LD_PRELOAD in env replaces the preload's. */
int run_program_from(const char *cwd, const char *path, const char *const *argv, const char *const *env, int preload,
                     char **out);
/* Starts build/<prog> under the preload with extra environment entries ("K=V", NULL-terminated),
 * its stdout on a pipe whose reading end is *out_fd; returns its pid (the caller waits). */
int spawn_preloaded(const char *prog, const char *const *env, int *out_fd);
/* A fresh empty directory under /tmp for a test. */
const char *temp_dir(void);
/* A CPython whose frames gmshim reads (3.11-3.13 where the tests look), or NULL. */
const char *frames_python(void);
/* What fn printed on stderr (at most 8 KiB; a static buffer, overwritten by the next call). */
const char *stderr_of(void (*fn)(void));
/* Runs build/<prog> [arg] under the preload with extra environment entries; as run_program. */
int run_built(const char *prog, const char *const *env, const char *arg, char **out);
/* tests/integration/log_bounded under `extra` (NULL-terminated, at most 13) with a 64 MiB bounded
 * log `name` in a temporary directory; fails the test unless it wrapped and its model agrees with
 * itself (no segment or page and at most `stray` blocks freed that the log never made, nothing
 * malformed, reserved >= allocated, now and at the peaks). *lf open and *m built (the caller frees
 * both); the log's path. */
struct rd_log;
struct model;
const char *wrapped_log_model(const char *name, const char *const *extra, unsigned long long stray, struct rd_log *lf,
                              struct model *m);
/* Runs build/<prog> under the preload with the environment entries given; fails the test with
 * its output unless it exits 0. */
#define RUN_OK(prog, ...)                                                                         \
    do {                                                                                          \
        const char *env_[] = {__VA_ARGS__, NULL};                                                 \
        char *out_ = NULL;                                                                        \
        int rc_ = run_built(prog, env_, NULL, &out_);                                             \
        ck_assert_msg(rc_ == 0, "%s exited %d:\n%s", prog, rc_, out_);                           \
        free(out_);                                                                               \
    } while (0)

#endif
