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

/* The records of a hit on a thread's cache, written the short way at the counter's time (or the
 * general way where they cannot be), read back as the general writer's: the same fields, the
 * times in the cache's order, a time past the chunk's 4.29 s through a clock record. */
START_TEST(test_a_cache_hits_records_read_back_as_the_general_writers)
{
    uint64_t last = 0, t0 = gm_now_ns() + 1000;
    const uint64_t P = 0x7f0000001000ull;
    evlog_cached_alloc_at(t0, 2, &last, P, 700, 1024, 11);               /* the short way */
    evlog_cached_free_at(t0 + 50, 2, &last, GMLOG_F_DEFERRED, P, 12);
    evlog_cached_alloc_at(t0 + 40, 2, &last, P, 512, 1024, 13);          /* before the last stamp */
    evlog_cached_alloc_at(t0 + 60, 2, &last, P + 4096, 512, 64ull << 30, 14); /* extra too large */
    evlog_cached_free_at(t0 + 6000000000ull, 2, &last, 0, P, 15);        /* past the chunk's 4.29 s */
    evlog_cached_free_at(0, 2, &last, 0, P + 4096, 16);                  /* no counter: the clock */
    evlog_close(GMLOG_CLOSE_EXIT);

    rd_log_t lf;
    ck_assert(rd_open_path(&lf, path) == 0);
    rd_rec_t rec;
    uint64_t start = lf.hdr.start_mono_ns;
    struct {
        int type;
        unsigned flags;
        uint64_t ptr, t;
        uint32_t site;
    } want[] = {
        {GMLOG_ALLOC, GMLOG_A_CACHED, P, t0, 11},
        {GMLOG_FREE, GMLOG_F_CACHED | GMLOG_F_DEFERRED, P, t0 + 50, 12},
        {GMLOG_ALLOC, GMLOG_A_CACHED, P, t0 + 50, 13},
        {GMLOG_ALLOC, GMLOG_A_CACHED, P + 4096, t0 + 60, 14},
        {GMLOG_FREE, GMLOG_F_CACHED, P, t0 + 6000000000ull, 15},
        {GMLOG_FREE, GMLOG_F_CACHED, P + 4096, t0 + 6000000000ull, 16},
    };
    size_t n = 0;
    while (rd_next(&lf, &rec)) {
        if (rec.type != GMLOG_ALLOC && rec.type != GMLOG_FREE)
            continue;
        ck_assert_uint_lt(n, GM_ARRAY_LEN(want));
        ck_assert_int_eq(rec.type, want[n].type);
        ck_assert_uint_eq(rec.device, 2);
        ck_assert_uint_eq(rec.flags, want[n].flags);
        ck_assert_msg(rec.t == want[n].t - start, "record %zu at %llu, not %llu", n, (unsigned long long)rec.t, (unsigned long long)(want[n].t - start));
        if (rec.type == GMLOG_ALLOC) {
            const gmlog_alloc_t *a = (const gmlog_alloc_t *)rec.p;
            ck_assert_uint_eq(a->ptr, want[n].ptr);
            ck_assert_uint_eq(a->site, want[n].site);
            ck_assert_uint_eq(a->dur_ns, 0);
            ck_assert_uint_eq(a->size & GMLOG_SIZE_MASK, n == 0 ? 700 : 512);
            if (n == 3) { /* the block's size in a record of its own length */
                ck_assert_uint_eq(rec.len, 40);
                ck_assert_uint_eq(a->block, 64ull << 30);
            } else {
                ck_assert_uint_eq(rec.len, 32);
                /* 1024: 700 rounded, or 512 rounded and one 512 more */
                ck_assert_uint_eq(a->size >> GMLOG_SIZE_BITS, n == 0 ? 0 : 1);
            }
        } else {
            const gmlog_free_t *f = (const gmlog_free_t *)rec.p;
            ck_assert_uint_eq(rec.len, 24);
            ck_assert_uint_eq(f->ptr, want[n].ptr);
            ck_assert_uint_eq(f->site, want[n].site);
            ck_assert_uint_eq(f->dur_ns, 0);
        }
        n++;
    }
    rd_close(&lf);
    ck_assert_uint_eq(n, GM_ARRAY_LEN(want));
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
    tcase_add_test(tc, test_a_cache_hits_records_read_back_as_the_general_writers);
    suite_add_tcase(s, tc);
    return s;
}
