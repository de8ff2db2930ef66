/* gmshim summary (analyzer/summary.c): the GPU-order advice only when allocations waited. */
#include "gmlog.h"
#include "suites.h"
#include "test_analyzer_cli.h"

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

Suite *analyzer_summary_suite(void)
{
    Suite *s = suite_create("analyzer_summary");
    TCase *tc = tcase_create("summary");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_summary_suggests_gpu_order_only_when_allocations_waited);
    suite_add_tcase(s, tc);
    return s;
}
