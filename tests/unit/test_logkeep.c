/* What a bounded log's checkpoints repeat (shim/logkeep.c): definitions kept in order, marks and
 * OOMs in a ring of the most recent, each device's last LEDGER sample; a mark timed before a checkpoint that already copied the
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

START_TEST(test_each_devices_last_ledger_sample_is_kept)
{
    uint64_t a[8], b[8];
    rec_of((gmlog_rec_t *)a, GMLOG_LEDGER, sizeof a);
    rec_of((gmlog_rec_t *)b, GMLOG_LEDGER, sizeof b);
    gmlog_rec_t h;
    memcpy(&h, a, sizeof h);
    h.device = 2;
    memcpy(a, &h, sizeof h);
    memcpy(b, &h, sizeof h);
    a[1] = 111, b[1] = 222;
    logkeep_add(a, sizeof a, NULL, 0, sizeof a, 100);
    logkeep_add(b, sizeof b, NULL, 0, sizeof b, 200);
    logkeep_lock();
    const kept_t *k = logkeep_ledger(2);
    uint64_t second = 0; /* the kept bytes need not be 8-aligned: copied out */
    if (k)
        memcpy(&second, k->bytes + sizeof second, sizeof second);
    ck_assert_msg(k && k->at == 200 && second == 222 && !logkeep_ledger(0),
                  "device 2's last sample (at 200) is not the one kept: %p", (const void *)k);
    size_t len;
    logkeep_defs(&len);
    ck_assert_msg(len == 0 && logkeep_history_count() == 0, "a sample went among the definitions or the history");
    logkeep_unlock();
    logkeep_forget();
    ck_assert_msg(!logkeep_ledger(2), "a fork child still has the parent's sample");
}
END_TEST

Suite *logkeep_suite(void)
{
    Suite *s = suite_create("logkeep");
    TCase *tc = tcase_create("copies");
    tcase_add_test(tc, test_definitions_are_kept_in_order);
    tcase_add_test(tc, test_a_mark_before_copied_history_moves_after_it);
    tcase_add_test(tc, test_each_devices_last_ledger_sample_is_kept);
    suite_add_tcase(s, tc);
    return s;
}
