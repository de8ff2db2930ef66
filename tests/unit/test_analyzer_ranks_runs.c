/* Unit tests of how the logs given to `gmshim report` are told apart into runs
 * (analyzer/ranks_runs.c), on generated logs: by the torchrun and Slurm variables in their
 * headers, by a rank seen twice, and by start times; each run gets its own verdict. */
#include "suites.h"
#include "rankstest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DAY_MS (24ull * 3600 * 1000)

/* The number of "== Run k of N" headings in a verdict. */
static int run_headings(const char *v, int n)
{
    char want[64];
    int found = 0;
    for (int k = 1; k <= n; k++) {
        snprintf(want, sizeof want, "== Run %d of %d:", k, n);
        found += strstr(v, want) != NULL;
    }
    return found;
}

START_TEST(test_runs_days_apart_are_reported_as_separate_runs)
{
    const spec_t s[] = {
        /* run A: rank 0 runs out of memory, rank 1 aborts 5 s later */
        {0, END_EXIT, 0, 0, 300, 210, 200, 0, {"WORLD_SIZE=2"}, NULL},
        {1, END_SIGNAL, 6, 0, 5200, 100, -1, 0, {"WORLD_SIZE=2"}, NULL},
        /* run B, two days later: rank 1 is killed by SIGSEGV, rank 0 exits */
        {0, END_EXIT, 0, 2 * DAY_MS, 1000, 900, -1, 0, {"WORLD_SIZE=2"}, NULL},
        {1, END_SIGNAL, 11, 2 * DAY_MS, 800, 700, -1, 0, {"WORLD_SIZE=2"}, NULL},
    };
    const char *dir = ranks_test_job(s, 4);
    char *v = ranks_test_report(dir, 0);
    ck_assert_msg(run_headings(v, 2) == 2, "two runs days apart are not two runs:\n%s", v);
    const char *b = strstr(v, "== Run 2 of 2:");
    ck_assert_msg(b && strstr(v, "first failure  rank 0") < b && strstr(b, "first failure  rank 1") &&
                  strstr(b, "SIGSEGV"), "each run does not have its own first failure:\n%s", v);
    ck_assert_msg(!strstr(v, "ranks          2 of WORLD_SIZE 2") || !strstr(v, "4 logs, 1 host =="),
                  "the four logs are one job:\n%s", v);
    free(v);
    char *js = ranks_test_report(dir, 1);
    const char *runs = strstr(js, "\"runs\":[{");
    ck_assert_msg(runs && strstr(runs, "\"first_failure\":{\"rank\":0,") &&
                  strstr(runs, "\"first_failure\":{\"rank\":1,") && strstr(js, "\"run_count\":2"),
                  "JSON: no two runs with their own first failure:\n%s", js);
    free(js);
}
END_TEST

START_TEST(test_runs_of_other_torchrun_run_ids_at_once_are_separate)
{
    const spec_t s[] = {
        {0, END_EXIT, 0, 0, 900, 800, -1, 0, {"TORCHELASTIC_RUN_ID=aaa", "WORLD_SIZE=2"}, NULL},
        {1, END_EXIT, 0, 5, 900, 210, 200, 0, {"TORCHELASTIC_RUN_ID=aaa", "WORLD_SIZE=2"}, NULL},
        {0, END_EXIT, 0, 10, 900, 800, -1, 0, {"TORCHELASTIC_RUN_ID=bbb", "WORLD_SIZE=1"}, NULL},
    };
    const char *dir = ranks_test_job(s, 3);
    char *v = ranks_test_report(dir, 0);
    ck_assert_msg(run_headings(v, 2) == 2 && strstr(v, "TORCHELASTIC_RUN_ID=aaa") && strstr(v, "TORCHELASTIC_RUN_ID=bbb"),
                  "two torchrun run ids at once are not two runs named by their ids:\n%s", v);
    free(v);
}
END_TEST

START_TEST(test_ranks_of_one_torchrun_run_id_started_minutes_apart_are_one_run)
{
    const spec_t s[] = {
        {0, END_EXIT, 0, 0, 2000, 1000, -1, 0, {"TORCHELASTIC_RUN_ID=xyz", "WORLD_SIZE=2"}, NULL},
        {1, END_EXIT, 0, 600000, 900, 210, 200, 0, {"TORCHELASTIC_RUN_ID=xyz", "WORLD_SIZE=2"}, NULL},
    };
    const char *dir = ranks_test_job(s, 2);
    char *v = ranks_test_report(dir, 0);
    ck_assert_msg(!strstr(v, "== Run ") && strstr(v, "ranks          2 of WORLD_SIZE 2 have a log"),
                  "ranks of one run id, ten minutes apart, are not one run:\n%s", v);
    free(v);
}
END_TEST

START_TEST(test_slurm_steps_are_separate_runs)
{
    const spec_t s[] = {
        {0, END_EXIT, 0, 0, 900, 800, -1, 0, {"SLURM_JOB_ID=77", "SLURM_STEP_ID=0", "SLURM_PROCID=0"}, NULL},
        {-1, END_EXIT, 0, 100, 900, 210, 200, 0, {"SLURM_JOB_ID=77", "SLURM_STEP_ID=1", "SLURM_PROCID=0"}, NULL},
    };
    const char *dir = ranks_test_job(s, 2);
    char *v = ranks_test_report(dir, 0);
    ck_assert_msg(run_headings(v, 2) == 2 && strstr(v, "SLURM_JOB_ID=77") && strstr(v, "SLURM_STEP_ID=1"),
                  "two steps of one Slurm job are not two runs:\n%s", v);
    free(v);
}
END_TEST

START_TEST(test_a_rank_seen_twice_at_once_means_two_runs)
{
    /* two jobs on one host at the same time, no identifying variables: rank 0 twice */
    const spec_t s[] = {
        {0, END_EXIT, 0, 0, 900, 800, -1, 0, {NULL}, NULL},
        {0, END_EXIT, 0, 50, 900, 210, 200, 0, {NULL}, NULL},
    };
    const char *dir = ranks_test_job(s, 2);
    char *v = ranks_test_report(dir, 0);
    ck_assert_msg(run_headings(v, 2) == 2, "rank 0 twice is not two runs:\n%s", v);
    free(v);
}
END_TEST

Suite *analyzer_ranks_runs_suite(void)
{
    Suite *s = suite_create("analyzer_ranks_runs");
    TCase *tc = tcase_create("runs");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_runs_days_apart_are_reported_as_separate_runs);
    tcase_add_test(tc, test_runs_of_other_torchrun_run_ids_at_once_are_separate);
    tcase_add_test(tc, test_ranks_of_one_torchrun_run_id_started_minutes_apart_are_one_run);
    tcase_add_test(tc, test_slurm_steps_are_separate_runs);
    tcase_add_test(tc, test_a_rank_seen_twice_at_once_means_two_runs);
    suite_add_tcase(s, tc);
    return s;
}
