/* The test runner: every suite, one Check summary at the end (the last line `make test` prints). */
#include "suites.h"

#include <stdlib.h>

int main(void)
{
    /* Logs the integration programs write (tests/unit/helpers.c) from an earlier run go. */
    if (system("rm -rf /tmp/gmshim-tests") != 0)
        return EXIT_FAILURE;
    SRunner *sr = srunner_create(pool_suite());
    srunner_add_suite(sr, policy_suite());
    srunner_add_suite(sr, grow_suite());
    srunner_add_suite(sr, vmm_suite());
    srunner_add_suite(sr, planpack_suite());
    srunner_add_suite(sr, steprec_suite());
    srunner_add_suite(sr, stepplan_suite());
    srunner_add_suite(sr, clock_suite());
    srunner_add_suite(sr, ranges_suite());
    srunner_add_suite(sr, planner_suite());
    srunner_add_suite(sr, options_suite());
    srunner_add_suite(sr, device_suite());
    srunner_add_suite(sr, hit_suite());
    srunner_add_suite(sr, tcache_suite());
    srunner_add_suite(sr, fencepol_suite());
    srunner_add_suite(sr, slowpath_suite());
    srunner_add_suite(sr, segments_suite());
    srunner_add_suite(sr, devctx_suite());
    srunner_add_suite(sr, capheap_suite());
    srunner_add_suite(sr, capture_suite());
    srunner_add_suite(sr, fence_suite());
    srunner_add_suite(sr, alloc_suite());
    srunner_add_suite(sr, api_suite());
    srunner_add_suite(sr, init_suite());
    srunner_add_suite(sr, inject_suite());
    srunner_add_suite(sr, state_suite());
    srunner_add_suite(sr, fallback_suite());
    srunner_add_suite(sr, failtest_suite());
    srunner_add_suite(sr, real_suite());
    srunner_add_suite(sr, hooks_suite());
    srunner_add_suite(sr, diag_suite());
    srunner_add_suite(sr, logrec_suite());
    srunner_add_suite(sr, logstate_suite());
    srunner_add_suite(sr, logkeep_suite());
    srunner_add_suite(sr, logring_suite());
    srunner_add_suite(sr, checkpoint_suite());
    srunner_add_suite(sr, stacks_suite());
    srunner_add_suite(sr, stackwalk_suite());
    srunner_add_suite(sr, cfi_suite());
    srunner_add_suite(sr, pyframes_suite());
    srunner_add_suite(sr, modules_suite());
    srunner_add_suite(sr, objects_suite());
    srunner_add_suite(sr, requester_suite());
    srunner_add_suite(sr, trim_suite());
    srunner_add_suite(sr, warn_suite());
    srunner_add_suite(sr, leakwarn_suite());
    srunner_add_suite(sr, warntensor_suite());
    srunner_add_suite(sr, cupti_suite());
    srunner_add_suite(sr, evlog_suite());
    srunner_add_suite(sr, cut_suite());
    srunner_add_suite(sr, analyzer_reader_suite());
    srunner_add_suite(sr, analyzer_reader_edges_suite());
    srunner_add_suite(sr, analyzer_model_suite());
    srunner_add_suite(sr, analyzer_symbolize_suite());
    srunner_add_suite(sr, analyzer_json_suite());
    srunner_add_suite(sr, analyzer_oom_suite());
    srunner_add_suite(sr, analyzer_ledger_suite());
    srunner_add_suite(sr, analyzer_cli_suite());
    srunner_add_suite(sr, analyzer_args_suite());
    srunner_add_suite(sr, analyzer_ranks_suite());
    srunner_add_suite(sr, analyzer_ranks_job_suite());
    srunner_add_suite(sr, analyzer_ranks_runs_suite());
    srunner_add_suite(sr, analyzer_export_suite());
    srunner_add_suite(sr, analyzer_golden_suite());
    srunner_add_suite(sr, analyzer_table_suite());
    srunner_add_suite(sr, analyzer_vec_suite());
    srunner_add_suite(sr, analyzer_commands_suite());
    srunner_add_suite(sr, analyzer_output_suite());
    srunner_add_suite(sr, analyzer_sites_suite());
    srunner_add_suite(sr, analyzer_frag_suite());
    srunner_add_suite(sr, analyzer_report_suite());
    srunner_add_suite(sr, analyzer_summary_suite());
    srunner_add_suite(sr, analyzer_leaks_suite());
    srunner_add_suite(sr, analyzer_steps_suite());
    srunner_add_suite(sr, analyzer_dump_suite());
    srunner_add_suite(sr, analyzer_run_suite());
    srunner_add_suite(sr, analyzer_replay_suite());
    srunner_add_suite(sr, analyzer_timeline_suite());
    srunner_add_suite(sr, analyzer_whatif_suite());
    srunner_add_suite(sr, analyzer_replay_torch_suite());
    srunner_add_suite(sr, analyzer_diff_suite());
    srunner_add_suite(sr, analyzer_top_suite());
    srunner_add_suite(sr, torchev_suite());
    srunner_add_suite(sr, torchload_suite());
    srunner_add_suite(sr, torch_configs_suite());
    srunner_add_suite(sr, torchbuild_suite());
    srunner_add_suite(sr, layers_suite());
    srunner_add_suite(sr, analyzer_causes_suite());
    srunner_add_suite(sr, analyzer_plan_suite());
    srunner_add_suite(sr, analyzer_split_suite());
    srunner_add_suite(sr, analyzer_advice_suite());
    srunner_add_suite(sr, analyzer_tensors_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
