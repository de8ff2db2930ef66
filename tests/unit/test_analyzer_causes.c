/* OOM causes (analyzer/causes.c) on logs PyTorch wrote on the H200 (tests/gpu/torch_scenarios.py
 * under GMSHIM_DEVICE_LIMIT=2G, run 53 in docs/gpu-results.md; the *_keep ones with PyTorch's cache
 * kept and its bridge's tensor events, read as tensors): each program ran out of memory for
 * a known reason, and the cause found by replay must be that one, with figures that add up. */
#include "causes.h"
#include "commands.h"
#include "suites.h"

#include <stdio.h>
#include <string.h>

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
    /* PyTorch's allocator placed the tensors: the setting to try is its own split limit */
    ck_assert_msg(!strcmp(c.env_name, "PYTORCH_CUDA_ALLOC_CONF") && !strncmp(c.env_value, "max_split_size_mb:", 18),
                  "remedy %s=%s", c.env_name, c.env_value);
    model_free(&m);
    rd_close(&lf);
    causes_reset();
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
    return s;
}
