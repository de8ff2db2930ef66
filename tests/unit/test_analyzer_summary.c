/* gmshim summary (analyzer/summary.c): the GPU-order advice only when allocations waited;
 * PyTorch's exact segments named as such, never as the pool being off. */
#include "gmlog.h"
#include "suites.h"
#include "test_analyzer_cli.h"
#include "testlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Waits for fences in a log point at the option that removes them; a log without any does not. */
START_TEST(test_summary_suggests_gpu_order_only_when_allocations_waited)
{
    char *out;
    int rc = gm(&out, "summary", H200_TORCH_LEAK, NULL, NULL, NULL, NULL);
    ck_assert_msg(rc == 0 && strstr(out, "5,631 waits") && strstr(out, "GMSHIM_GPU_ORDER=1"),
                  "summary of a log with fence waits: %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "summary", FIXTURE, NULL, NULL, NULL, NULL);
    ck_assert_msg(rc == 0 && strstr(out, "0 waits") && !strstr(out, "GMSHIM_GPU_ORDER"),
                  "summary of a log without fence waits: %d\n%s", rc, out);
    free(out);
}
END_TEST

/* A caching allocator's segments (the libc10_cuda.so stand-in, PyTorch's cache kept) are the
 * driver's at their exact size: the summary counts them as such and does not say the pool was
 * off, in the text and the JSON; `dump` flags them. */
START_TEST(test_summary_names_pytorchs_exact_segments_not_a_pool_turned_off)
{
    char log[600], logenv[700], prog[4096];
    snprintf(log, sizeof log, "%s/caching_release.gmlog", temp_dir());
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
    snprintf(prog, sizeof prog, "%s", build_path("tests/integration/caching_release"));
    const char *argv[] = {prog, NULL};
    const char *env[] = {logenv, "FAKECUDA_MEM=2G", NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0, "caching_release exited %d:\n%s", rc, out);
    free(out);
    rc = gm(&out, "--color=never", "summary", log);
    ck_assert_msg(rc == 0 && strstr(out, "2 of PyTorch's cache taken from the driver at their exact size") &&
                      !strstr(out, "the pool was off"),
                  "summary: %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "--json", "summary", log);
    ck_assert_msg(rc == 0 && strstr(out, "\"exact_segment_allocs\":2") && strstr(out, "\"pass_through_allocs\":2"),
                  "summary --json: %d\n%s", rc, out);
    free(out);
    rc = gm(&out, "dump", log);
    ck_assert_msg(rc == 0 && gm_count(out, " exact ") == 2, "dump: %d, %zu exact\n%s", rc, gm_count(out, " exact "), out);
    free(out);
}
END_TEST

Suite *analyzer_summary_suite(void)
{
    Suite *s = suite_create("analyzer_summary");
    TCase *tc = tcase_create("summary");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_summary_suggests_gpu_order_only_when_allocations_waited);
    tcase_add_test(tc, test_summary_names_pytorchs_exact_segments_not_a_pool_turned_off);
    suite_add_tcase(s, tc);
    return s;
}
