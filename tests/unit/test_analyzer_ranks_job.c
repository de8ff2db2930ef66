/* Unit tests of how a job's verdict times each rank's end (analyzer/ranks_job.c), on generated
 * logs with explicit start times, closes and file times: a log never closed is not first on the
 * strength of its last record, the order is uncertain (with its reason) where it cannot be known,
 * and every rank's OOM is listed as an OOM. */
#include "suites.h"
#include "rankstest.h"

#include <stdlib.h>
#include <string.h>

/* Rank 0 hangs in a collective and is killed long after its last record; rank 1 runs out of
 * memory at 0.5 s; rank 2 aborts at 4 s (the watchdog). */
static const spec_t hung[] = {
    {0, END_OPEN, 0, 0, 0, 100, -1, 0, {"WORLD_SIZE=3"}, NULL},
    {1, END_EXIT, 0, 10, 600, 520, 500, 0, {"WORLD_SIZE=3"}, NULL},
    {2, END_SIGNAL, 6, 20, 4000, 100, -1, 0, {"WORLD_SIZE=3"}, NULL},
};

START_TEST(test_a_log_never_closed_is_not_first_ahead_of_a_later_oom)
{
    const char *dir = ranks_test_job(hung, 3);
    char *v = ranks_test_report(dir, 0);
    ck_assert_msg(strstr(v, "first failure  rank 1 on host node0, device 0") && strstr(v, "out of memory"),
                  "rank 1's OOM is not the first failure:\n%s", v);
    const char *u = strstr(v, "uncertain");
    ck_assert_msg(u && strstr(u, "rank 0") && strstr(u, "not closed"),
                  "the order is not said uncertain because of rank 0's unclosed log:\n%s", v);
    free(v);
    char *js = ranks_test_report(dir, 1);
    const char *ff = strstr(js, "\"first_failure\":{\"rank\":1,");
    ck_assert_msg(ff && strstr(ff, "\"uncertain\":true") && strstr(ff, "\"uncertain_reason\":\"") &&
                  strstr(strstr(ff, "\"uncertain_reason\":\""), "rank 0"),
                  "JSON: rank 1 first, uncertain, with the reason naming rank 0:\n%s", js);
    free(js);
}
END_TEST

START_TEST(test_a_log_written_after_the_oom_orders_its_rank_after_it)
{
    spec_t s[3];
    memcpy(s, hung, sizeof s);
    s[0].mtime_ms = 3000; /* the file was written at 3 s: rank 0 was alive then */
    const char *dir = ranks_test_job(s, 3);
    char *v = ranks_test_report(dir, 0);
    ck_assert_msg(strstr(v, "first failure  rank 1 on host node0") && !strstr(v, "uncertain"),
                  "rank 1's OOM is not first for certain:\n%s", v);
    ck_assert_msg(strstr(v, "rank 0: not closed") && strstr(v, "alive 2.49 s later (the file's last write)"),
                  "rank 0 is not said alive at its file's last write, 2.49 s after the OOM:\n%s", v);
    free(v);
    char *js = ranks_test_report(dir, 1);
    const char *r0 = strstr(js, "\"ranks\":[{\"rank\":0,");
    ck_assert_msg(strstr(js, "\"uncertain\":false") && r0 && strstr(r0, "\"end_realtime_ns\":null") &&
                  strstr(r0, "\"alive_until_source\":\"file_mtime\"") &&
                  strstr(r0, "\"alive_after_first_failure_ns\":2490000000"),
                  "JSON: certain, rank 0's end unknown, alive until its file's write:\n%s", js);
    free(js);
}
END_TEST

START_TEST(test_every_ranks_oom_is_listed_as_an_oom)
{
    const spec_t s[] = {
        {0, END_EXIT, 0, 0, 500, 310, 300, 0, {NULL}, NULL},
        {1, END_EXIT, 0, 0, 500, 210, 200, 0, {NULL}, NULL},
        {2, END_EXIT, 0, 0, 500, 410, 400, 0, {NULL}, NULL},
    };
    const char *dir = ranks_test_job(s, 3);
    char *v = ranks_test_report(dir, 0);
    ck_assert_msg(strstr(v, "first failure  rank 1") && strstr(v, "the others     ranks 0, 2: out of memory (cause ") &&
                  strstr(v, " 0.10–0.20 s later"),
                  "ranks 0 and 2's OOMs are not listed as OOMs, 0.1 and 0.2 s after rank 1's:\n%s", v);
    free(v);
    char *js = ranks_test_report(dir, 1);
    const char *r0 = strstr(js, "\"ranks\":[{\"rank\":0,");
    ck_assert_msg(r0 && strstr(r0, "\"failure\":\"oom\"") && strstr(r0, "\"failure_after_first_failure_ns\":100000000"),
                  "JSON: rank 0's OOM, 100 ms after the first:\n%s", js);
    free(js);
}
END_TEST

START_TEST(test_ranks_ended_at_unknown_times_give_no_first_failure)
{
    const spec_t s[] = {
        {0, END_OPEN, 0, 0, 0, 100, -1, 0, {NULL}, NULL},
        {1, END_OPEN, 0, 0, 0, 200, -1, 0, {NULL}, NULL},
    };
    const char *dir = ranks_test_job(s, 2);
    char *v = ranks_test_report(dir, 0);
    ck_assert_msg(strstr(v, "first failure  unknown") && strstr(v, "ranks 0, 1") && !strstr(v, "first failure  rank"),
                  "two logs never closed name a first failure:\n%s", v);
    free(v);
    char *js = ranks_test_report(dir, 1);
    ck_assert_msg(strstr(js, "\"first_failure\":null") && strstr(js, "\"uncertain\":true") &&
                  strstr(js, "\"uncertain_reason\":\""), "JSON: no first failure, uncertain with a reason:\n%s", js);
    free(js);
}
END_TEST

START_TEST(test_the_only_rank_not_closed_is_the_failure_at_an_unknown_time)
{
    const spec_t s[] = {
        {0, END_OPEN, 0, 0, 0, 100, -1, 0, {NULL}, NULL},
        {1, END_EXIT, 0, 0, 900, 800, -1, 0, {NULL}, NULL},
    };
    const char *dir = ranks_test_job(s, 2);
    char *v = ranks_test_report(dir, 0);
    ck_assert_msg(strstr(v, "first failure  rank 0") && strstr(v, "at or after") && !strstr(v, "uncertain"),
                  "the one rank killed is not the failure, ended at or after its last sign of life:\n%s", v);
    free(v);
}
END_TEST

START_TEST(test_a_log_never_closed_on_another_host_alive_just_after_the_oom_is_uncertain)
{
    /* rank 0's file was written 50 ms after rank 1's OOM, by another host's clock */
    const spec_t s[] = {
        {0, END_OPEN, 0, 0, 0, 100, -1, 560, {NULL}, "node1"},
        {1, END_EXIT, 0, 10, 600, 520, 500, 0, {NULL}, "node0"},
    };
    const char *dir = ranks_test_job(s, 2);
    char *v = ranks_test_report(dir, 0);
    ck_assert_msg(strstr(v, "first failure  rank 1 on host node0") && strstr(v, "  uncertain    rank 0's log was not closed") &&
                  strstr(v, "0.05 s after this failure, within the clock skew assumed between hosts"),
                  "rank 0, alive on another host within the clock skew after the OOM, is not a maybe-first:\n%s", v);
    free(v);
}
END_TEST

/* Ranks 1 and 2 made contexts on rank 0's GPU (their pids among its card's other processes);
 * pid 103 there is rank 3's pid but rank 3 runs on another host, and pid 999 is no rank. */
START_TEST(test_a_rank_whose_gpu_held_other_ranks_contexts_is_named)
{
    static const spec_t s[] = {
        {0, END_EXIT, 0, 0, 600, 500, -1, 0, {"WORLD_SIZE=4"}, NULL},
        {1, END_EXIT, 0, 0, 600, 500, -1, 0, {"WORLD_SIZE=4"}, NULL},
        {2, END_EXIT, 0, 0, 600, 500, -1, 0, {"WORLD_SIZE=4"}, NULL},
        {3, END_EXIT, 0, 0, 600, 500, -1, 0, {"WORLD_SIZE=4"}, "node1"},
    };
    ranks_test_guests[0] = "101:200,102:210,103:220,999:50";
    const char *dir = ranks_test_job(s, 4);
    ranks_test_guests[0] = NULL;
    char *v = ranks_test_report(dir, 0);
    const char *c = strstr(v, "crowded        rank 0 (pid 100): its GPU also held 2 other ranks' processes (410 MiB in all)");
    ck_assert_msg(c && strstr(c, "(pid 101) 200 MiB, rank 2 (pid 102) 210 MiB\n") &&
                      strstr(c, "torch.cuda.set_device(LOCAL_RANK)") && !strstr(v, "(pid 103)"),
                  "rank 0's GPU is not named crowded by ranks 1 and 2 alone:\n%s", v);
    ck_assert_msg(!strstr(c + 1, "crowded "), "only rank 0's GPU was crowded:\n%s", v);
    free(v);
    char *js = ranks_test_report(dir, 1);
    const char *cj = strstr(js, "\"crowded\":[{\"rank\":0,\"pid\":100,\"bytes\":429916160,\"others\":[{\"rank\":1,"
                                "\"pid\":101,\"bytes\":209715200},{\"rank\":2,\"pid\":102,\"bytes\":220200960}]}]");
    ck_assert_msg(cj && strstr(cj, "\"crowded_remedy\":\""), "JSON: rank 0 crowded by ranks 1 and 2:\n%s", js);
    free(js);
}
END_TEST

Suite *analyzer_ranks_job_suite(void)
{
    Suite *s = suite_create("analyzer_ranks_job");
    TCase *tc = tcase_create("ends");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_a_log_never_closed_is_not_first_ahead_of_a_later_oom);
    tcase_add_test(tc, test_a_log_written_after_the_oom_orders_its_rank_after_it);
    tcase_add_test(tc, test_every_ranks_oom_is_listed_as_an_oom);
    tcase_add_test(tc, test_ranks_ended_at_unknown_times_give_no_first_failure);
    tcase_add_test(tc, test_the_only_rank_not_closed_is_the_failure_at_an_unknown_time);
    tcase_add_test(tc, test_a_log_never_closed_on_another_host_alive_just_after_the_oom_is_uncertain);
    tcase_add_test(tc, test_a_rank_whose_gpu_held_other_ranks_contexts_is_named);
    suite_add_tcase(s, tc);
    return s;
}
