/* A bounded log's checkpoint (shim/checkpoint.c), under the preload: a log that wraps holds a
 * complete checkpoint, which stands for what it dropped (its cuts count the live blocks). */
#include "gmlog.h"
#include "reader.h"
#include "suites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_a_wrapped_log_holds_a_complete_checkpoint)
{
    char log[4200], env_log[4300];
    snprintf(log, sizeof log, "%s/ckpt.gmlog", temp_dir());
    snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s", log);
    const char *env[] = {env_log, "GMSHIM_LOG_LIMIT=64M", "PAIRS=700000", "THREADS=4", NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/log_bounded", env, NULL, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    free(out);
    rd_log_t lf;
    ck_assert_msg(rd_open_path(&lf, log) == 0, "the log does not read: %s", lf.ndiags ? lf.diags[0].msg : "?");
    ck_assert_msg(lf.hdr.flags & GMLOG_F_WRAPPED, "the log did not wrap: the test proves nothing");
    ck_assert_msg(lf.ckpt.seq >= 1, "a wrapped log without a complete checkpoint");
    ck_assert_msg(!lf.partial, "damaged: %s", lf.ndiags ? lf.diags[0].msg : "?");
    int cuts = 0;
    rd_rec_t rec;
    while (rd_next(&lf, &rec))
        cuts += rec.type == GMLOG_CUT;
    ck_assert_int_ge(cuts, 1);
    rd_close(&lf);
}
END_TEST

Suite *checkpoint_suite(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("preload");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_a_wrapped_log_holds_a_complete_checkpoint);
    suite_add_tcase(s, tc);
    return s;
}
