/* What a bounded log's checkpoints repeat (shim/logkeep.c): definitions kept in order, marks and
 * OOMs in a ring of the most recent; a mark timed before a checkpoint that already copied the
 * history is moved just after it, so that it is in the one or the other. */
#include "gmlog.h"
#include "../../shim/logkeep.h"
#include "suites.h"

#include <string.h>

static void rec_of(gmlog_rec_t *h, int type, size_t len)
{
    memset(h, 0, len);
    h->type = (uint8_t)type;
    h->len8 = (uint8_t)(len / 8);
}

START_TEST(test_definitions_are_kept_in_order)
{
    uint64_t r[2][2];
    rec_of((gmlog_rec_t *)r[0], GMLOG_STRING, 16);
    rec_of((gmlog_rec_t *)r[1], GMLOG_SITE, 16);
    ck_assert_uint_eq(logkeep_add(r[0], 16, NULL, 0, 16, 100), 100);
    ck_assert_uint_eq(logkeep_add(r[1], 16, NULL, 0, 16, 200), 200);
    logkeep_lock();
    size_t len;
    const uint8_t *defs = logkeep_defs(&len);
    ck_assert_uint_gt(len, 0);
    const kept_t *k = (const kept_t *)defs;
    ck_assert_uint_eq(((const gmlog_rec_t *)k->bytes)->type, GMLOG_STRING);
    ck_assert_uint_eq(k->at, 100);
    k = (const kept_t *)(defs + ((sizeof(kept_t) + k->len + 7) / 8 * 8));
    ck_assert_uint_eq(((const gmlog_rec_t *)k->bytes)->type, GMLOG_SITE);
    ck_assert_uint_eq(logkeep_history_count(), 0);
    logkeep_unlock();
    logkeep_forget();
    logkeep_lock();
    logkeep_defs(&len);
    ck_assert_uint_eq(len, 0);
    logkeep_unlock();
}
END_TEST

START_TEST(test_a_mark_before_copied_history_moves_after_it)
{
    uint64_t m[2];
    rec_of((gmlog_rec_t *)m, GMLOG_MARK, 16);
    ck_assert_uint_eq(logkeep_add(m, 16, NULL, 0, 16, 50), 50);
    logkeep_lock();
    ck_assert_uint_eq(logkeep_history_count(), 1);
    ck_assert_uint_eq(logkeep_history(0)->at, 50);
    logkeep_copied_history(1000);
    logkeep_unlock();
    ck_assert_uint_eq(logkeep_add(m, 16, NULL, 0, 16, 900), 1001);
    ck_assert_uint_eq(logkeep_add(m, 16, NULL, 0, 16, 2000), 2000);
}
END_TEST

Suite *logkeep_suite(void)
{
    Suite *s = suite_create("logkeep");
    TCase *tc = tcase_create("copies");
    tcase_add_test(tc, test_definitions_are_kept_in_order);
    tcase_add_test(tc, test_a_mark_before_copied_history_moves_after_it);
    suite_add_tcase(s, tc);
    return s;
}
