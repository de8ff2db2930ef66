/* The record builders (shim/logrec.c): each record the pool, captures and CUPTI write, built
 * once, read back by the analyzer's reader with the fields it was given. In this process, with
 * a log of its own. */
#include "common.h"
#include "evlog.h"
#include "logrec.h"
#include "options.h"
#include "reader.h"
#include "suites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[512];

static void setup(void)
{
    snprintf(path, sizeof path, "%s/rec.gmlog", temp_dir());
    setenv("GMSHIM_LOG", path, 1);
    options_reset();
    evlog_open();
    ck_assert_msg(evlog_enabled(), "no log at %s", path);
}

/* The first record of `type` in the log (copied into *out, at most `len` bytes); 0 if none. */
static int find(int type, void *out, size_t len, rd_rec_t *rec_out)
{
    rd_log_t lf;
    ck_assert_msg(rd_open_path(&lf, path) == 0, "the log does not read: %s", lf.ndiags ? lf.diags[0].msg : "?");
    rd_rec_t rec;
    int found = 0;
    while (!found && rd_next(&lf, &rec))
        if (rec.type == type) {
            memcpy(out, rec.p, rec.len < len ? rec.len : len);
            *rec_out = rec;
            found = 1;
        }
    rd_close(&lf);
    return found;
}

START_TEST(test_device_and_oom_records_carry_what_they_were_given)
{
    logrec_device(3, 80ull << 30, 79ull << 30, "Fake H200 with a long name", 12);
    gmlog_oom_t figures;
    memset(&figures, 0, sizeof figures);
    figures.request = 1000;
    figures.segment = 2u << 20;
    figures.driver_free = 5;
    figures.largest_free = 512;
    figures.site = 42;
    logrec_oom(3, GMLOG_OOM_RELEASED | GMLOG_OOM_RETRIED, &figures);
    evlog_close(GMLOG_CLOSE_EXIT);
    struct {
        gmlog_device_t d;
        char name[64];
    } dev;
    rd_rec_t rec;
    ck_assert(find(GMLOG_DEVICE, &dev, sizeof dev, &rec));
    ck_assert_uint_eq(rec.device, 3);
    ck_assert_uint_eq(dev.d.total, 80ull << 30);
    ck_assert_uint_eq(dev.d.free_at_start, 79ull << 30);
    ck_assert_uint_eq(dev.d.name_len, 12);
    ck_assert_int_eq(memcmp(dev.name, "Fake H200 wi", 12), 0);
    gmlog_oom_t oom;
    ck_assert(find(GMLOG_OOM, &oom, sizeof oom, &rec));
    ck_assert_uint_eq(rec.flags, GMLOG_OOM_RELEASED | GMLOG_OOM_RETRIED);
    ck_assert_uint_eq(oom.request, 1000);
    ck_assert_uint_eq(oom.segment, 2u << 20);
    ck_assert_uint_eq(oom.largest_free, 512);
    ck_assert_uint_eq(oom.site, 42);
}
END_TEST

START_TEST(test_pool_records_carry_what_they_were_given)
{
    uint64_t now = gm_now_ns();
    logrec_limit(1, 7u << 20);
    logrec_fence(1, GMLOG_FENCE_BY_ALLOC, 9, 4096, 3, now + 2500, now);
    gm_pool_stats_t st;
    memset(&st, 0, sizeof st);
    st.allocated.current = 1234;
    st.pending.current = 512;
    logrec_stats(1, &st, 10, 2, now);
    logrec_fence_wait(1, 9, now + 1500, now);
    logrec_empty_cache(1, GMLOG_EMPTY_API, 20u << 20, 1, now);
    logrec_reset(1, 40u << 20, 3u << 20);
    evlog_close(GMLOG_CLOSE_EXIT);
    rd_rec_t rec;
    gmlog_limit_t lim;
    ck_assert(find(GMLOG_LIMIT, &lim, sizeof lim, &rec));
    ck_assert_uint_eq(lim.bytes, 7u << 20);
    gmlog_fence_t f;
    ck_assert(find(GMLOG_FENCE, &f, sizeof f, &rec));
    ck_assert_uint_eq(f.seq, 9);
    ck_assert_uint_eq(f.pending_bytes, 4096);
    ck_assert_uint_eq(f.events, 3);
    ck_assert_uint_eq(f.dur_ns, 2500);
    ck_assert_uint_eq(rec.flags, GMLOG_FENCE_BY_ALLOC);
    gmlog_stats_t s;
    ck_assert(find(GMLOG_STATS, &s, sizeof s, &rec));
    ck_assert_uint_eq(s.allocated, 1234);
    ck_assert_uint_eq(s.pending, 512);
    ck_assert_uint_eq(s.hits, 10);
    ck_assert_uint_eq(s.misses, 2);
    gmlog_fence_wait_t w;
    ck_assert(find(GMLOG_FENCE_WAIT, &w, sizeof w, &rec));
    ck_assert_uint_eq(w.seq, 9);
    ck_assert_uint_eq(w.dur_ns, 1500);
    gmlog_empty_cache_t e;
    ck_assert(find(GMLOG_EMPTY_CACHE, &e, sizeof e, &rec));
    ck_assert_uint_eq(rec.flags, GMLOG_EMPTY_API);
    ck_assert_uint_eq(e.bytes, 20u << 20);
    ck_assert_uint_eq(e.segments, 1);
    gmlog_reset_t r;
    ck_assert(find(GMLOG_RESET, &r, sizeof r, &rec));
    ck_assert_uint_eq(r.reserved_bytes, 40u << 20);
    ck_assert_uint_eq(r.live_bytes, 3u << 20);
}
END_TEST

START_TEST(test_a_capture_record_carries_its_stream_graph_and_mode)
{
    logrec_capture(0, GMLOG_CAPTURE_BEGIN, 0x1000, 0x2000, 5, 1);
    evlog_close(GMLOG_CLOSE_EXIT);
    rd_rec_t rec;
    gmlog_capture_t c;
    ck_assert(find(GMLOG_CAPTURE, &c, sizeof c, &rec));
    ck_assert_uint_eq(rec.flags, GMLOG_CAPTURE_BEGIN);
    ck_assert_uint_eq(c.stream, 0x1000);
    ck_assert_uint_eq(c.graph, 0x2000);
    ck_assert_uint_eq(c.id, 5);
    ck_assert_uint_eq(c.mode, 1);
}
END_TEST

Suite *logrec_suite(void)
{
    Suite *s = suite_create("logrec");
    TCase *tc = tcase_create("records");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_device_and_oom_records_carry_what_they_were_given);
    tcase_add_test(tc, test_pool_records_carry_what_they_were_given);
    tcase_add_test(tc, test_a_capture_record_carries_its_stream_graph_and_mode);
    suite_add_tcase(s, tc);
    return s;
}
