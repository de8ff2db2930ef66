/* The split of each OOM (analyzer/split.c): reserved as run = needed + what even the plan needs
 * + only by planning + by a setting, and what the pool lacked = its three parts, exactly, on
 * every fixture and on the OOM workloads run under the preload; split_check catches a sum that
 * does not hold. */
#include "causes.h"
#include "suites.h"
#include "test_analyzer_cli.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned check_log(const char *path)
{
    rd_log_t lf;
    ck_assert_msg(rd_open_path(&lf, path) == 0, "%s does not open", path);
    model_t m;
    model_build(&m, &lf, MODEL_SITES | MODEL_EPOCHS);
    unsigned n = 0;
    for (size_t i = 0; i < m.nooms; i++) {
        cause_t c;
        if (causes_of(&m, &m.ooms[i], &c))
            continue;
        const split_t *s = &c.split;
        const char *bad = split_check(s);
        ck_assert_msg(!bad, "%s: OOM %zu: %s (needed %llu, plan %llu, with a setting %llu, reserved %llu, cap %llu)",
                      path, i, bad, (unsigned long long)s->floor, (unsigned long long)s->planned,
                      (unsigned long long)s->with_setting, (unsigned long long)s->reserved, (unsigned long long)s->cap);
        ck_assert_msg(s->floor + s->plan_over + s->only_by_planning + s->by_setting == s->reserved &&
                          s->lacked_setting + s->lacked_planning + s->lacked_capacity == s->lacked,
                      "%s: OOM %zu: the parts do not add up", path, i);
        ck_assert_msg(c.plan.valid && s->planned_known, "%s: OOM %zu was not planned", path, i);
        n++;
    }
    model_free(&m);
    rd_close(&lf);
    causes_reset();
    return n;
}

START_TEST(test_the_split_adds_up_on_every_fixture_and_workload)
{
    classic_pool_test();
    glob_t g;
    ck_assert_msg(glob("tests/fixtures/*.gmlog", 0, NULL, &g) == 0 && g.gl_pathc >= 11,
                  "the fixtures are not where the tests run");
    unsigned n = 0;
    for (size_t i = 0; i < g.gl_pathc; i++)
        n += check_log(g.gl_pathv[i]);
    globfree(&g);
    ck_assert_msg(n >= 9, "only %u OOMs of the fixtures were split", n);
    static const char *const progs[] = {"oom_capacity", "oom_fragmentation", "oom_leak", "oom_outside",
                                        "oom_transient", "oom_split", "oom_keep_slice", "oom_capped_fragmentation"};
    for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
        free(gm_oom_report(progs[i], strstr(progs[i], "capped") ? "GMSHIM_DEVICE_LIMIT=512M" : NULL, 1));
        ck_assert_msg(check_log(gm_last_log) >= 1, "%s: no OOM split", progs[i]);
    }
}
END_TEST

START_TEST(test_the_split_check_catches_parts_that_do_not_add_up)
{
    split_t s;
    split_make(&s, 100, 120, 1, 200, 150, 160, "GMSHIM_MAX_SPLIT", "64M");
    ck_assert_msg(!split_check(&s) && s.plan_over == 20 && s.only_by_planning == 30 && s.by_setting == 50 &&
                      s.lacked == 40 && s.lacked_setting == 40 && !s.lacked_planning && !s.lacked_capacity,
                  "100/120/150/200 under 160: %llu %llu %llu lacked %llu = %llu + %llu + %llu",
                  (unsigned long long)s.plan_over, (unsigned long long)s.only_by_planning,
                  (unsigned long long)s.by_setting, (unsigned long long)s.lacked,
                  (unsigned long long)s.lacked_setting, (unsigned long long)s.lacked_planning,
                  (unsigned long long)s.lacked_capacity);
    /* A plan above the cap: that part is capacity; no setting: nothing is by a setting. */
    split_make(&s, 100, 130, 1, 200, 0, 110, NULL, NULL);
    ck_assert_msg(!split_check(&s) && !s.by_setting && s.lacked_capacity == 20 && s.lacked_planning == 70 &&
                      !s.setting[0], "capacity %llu, planning %llu", (unsigned long long)s.lacked_capacity,
                  (unsigned long long)s.lacked_planning);
    s.by_setting += 1;
    ck_assert_msg(split_check(&s) != NULL, "a part one byte too large passed the check");
}
END_TEST

Suite *analyzer_split_suite(void)
{
    Suite *s = suite_create("analyzer_split");
    TCase *tc = tcase_create("split");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_the_split_check_catches_parts_that_do_not_add_up);
    tcase_add_test(tc, test_the_split_adds_up_on_every_fixture_and_workload);
    suite_add_tcase(s, tc);
    return s;
}
