/* Unit tests of a device's cut for a bounded log's checkpoint (shim/cut.c) in this process,
 * against the fake CUDA runtime: every segment and live block with its site, and a consistent
 * instant even while threads contend for the arenas. */
#include "cut.h"
#include "capheap.h"
#include "devctx.h"
#include "device.h"
#include "fencepol.h"
#include "hit.h"
#include "slowpath.h"
#include "evlog.h"
#include "options.h"
#include "reader.h"
#include "suites.h"

#include "../fakecuda.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static gm_device_t *d;

static void setup(void)
{
    setenv("FAKECUDA_MEM", "512M", 1);
    unsetenv("GMSHIM_LOG");
    unsetenv("GMSHIM_PLAN"); /* the pool's cut, not the plan's (pooltest.h) */
    options_reset();
    d = device_get(0);
    ck_assert_ptr_nonnull(d);
    hit_use_arena(0);
}

START_TEST(test_a_cut_counts_every_segment_and_live_block)
{
    void *p[5];
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(hit_alloc(d, (size_t)(1 + i) << 20, 7, &p[i]), cudaSuccess);
    cudaError_t err;
    ck_assert_int_eq(hit_free(d, p[0], 0, &err), GM_FREE_DONE);
    /* 1 CUT, the segments (one per large request here), 4 live blocks. */
    uint64_t n = cut_all_devices(0);
    ck_assert_msg(n >= 1 + 1 + 4 && n <= 1 + 5 + 4, "the cut wrote %llu records", (unsigned long long)n);
}
END_TEST

/* The hit path's records, timed by the unordered counter through the arena's newest stamp, come
 * after a cut: the cut leaves every arena's newest stamp past its own time. */
START_TEST(test_the_hit_paths_records_after_a_cut_are_timed_after_it)
{
    void *p;
    ck_assert_int_eq(hit_alloc(d, 4096, 7, &p), cudaSuccess);
    uint64_t before = gm_now_ns();
    cut_all_devices(0);
    pthread_mutex_lock(&d->arenas[0]->lock);
    uint64_t newest = d->arenas[0]->last_stamp;
    pthread_mutex_unlock(&d->arenas[0]->lock);
    ck_assert_uint_gt(newest, before);
    cudaError_t err;
    ck_assert_int_eq(hit_free(d, p, 0, &err), GM_FREE_DONE);
}
END_TEST

static unsigned long long bytes_in_use(void)
{
    struct fakecuda_stats st;
    fakecuda_get_stats(0, &st);
    return st.bytes_in_use;
}

/* A caching allocator's segment (device_alloc_exact): the driver's memory of exactly its size,
 * live in the pool's map until its free goes to the driver, and repeated by a cut with its
 * EXACT flag (else a wrapped log would read it as the pool being off). */
START_TEST(test_an_exact_segment_is_the_drivers_and_a_cut_keeps_it_exact)
{
    char log[4200];
    snprintf(log, sizeof log, "%s/exact.gmlog", temp_dir());
    setenv("GMSHIM_LOG", log, 1);
    options_reset();
    evlog_open();
    unsigned long long before = bytes_in_use();
    void *p = NULL;
    ck_assert_int_eq(device_alloc_exact(d, 2u << 20, 9, &p), cudaSuccess);
    ck_assert_uint_eq(bytes_in_use() - before, 2u << 20);
    cut_all_devices(0);
    cudaError_t err;
    ck_assert_int_eq(hit_free(d, p, 0, &err), GM_FREE_DONE);
    ck_assert_int_eq(err, cudaSuccess);
    ck_assert_uint_eq(bytes_in_use(), before);
    evlog_close(GMLOG_CLOSE_EXIT);
    rd_log_t lf;
    ck_assert_int_eq(rd_open_path(&lf, log), 0);
    rd_rec_t r;
    int exact = 0;
    while (rd_next(&lf, &r))
        if (r.type == GMLOG_ALLOC && r.len >= 16) {
            uint64_t ptr;
            memcpy(&ptr, r.p + 8, 8);
            exact += ptr == (uintptr_t)p && (r.flags & GMLOG_A_EXACT) &&
                     ((r.flags & GMLOG_KIND_MASK) >> GMLOG_KIND_SHIFT) == GMLOG_KIND_PASS;
        }
    rd_close(&lf);
    ck_assert_msg(exact == 2, "%d exact ALLOC records of the segment (the event and the cut's)", exact);
}
END_TEST

static uint64_t added_ns;
static pthread_mutex_t *arena0;

static void *cutter(void *arg)
{
    (void)arg;
    cut_all_devices(0);
    return NULL;
}

static void *adder(void *arg)
{
    (void)arg;
    int n = device_add_arena(d); /* a thread that contended moves to a new arena */
    added_ns = gm_now_ns();
    if (n > 0) {
        hit_use_arena(n);
        void *p;
        hit_alloc(d, 1 << 20, 0, &p);
    }
    return NULL;
}

/* A cut waiting for a busy arena must not miss an arena added meanwhile: the new arena (and the
 * allocation in it, timed before the cut's instant) would be in neither the cut nor after it. */
START_TEST(test_a_cut_sees_an_arena_added_while_it_waits)
{
    arena0 = &d->arenas[0]->lock;
    pthread_mutex_lock(arena0); /* a thread inside a call on arena 0 */
    pthread_t c, a;
    pthread_create(&c, NULL, cutter, NULL);
    usleep(50000); /* the cut now waits for arena 0 */
    pthread_create(&a, NULL, adder, NULL);
    usleep(50000);
    uint64_t released_ns = gm_now_ns();
    pthread_mutex_unlock(arena0);
    pthread_join(c, NULL);
    pthread_join(a, NULL);
    /* Until arena 0 is free the cut is under way: an arena added before then is one it missed. */
    ck_assert_msg(added_ns > released_ns, "an arena was added %lld ns before the cut could go on (it cannot see it)",
                  (long long)(released_ns - added_ns));
}
END_TEST

Suite *cut_suite(void)
{
    Suite *s = suite_create("cut");
    TCase *tc = tcase_create("cut");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_a_cut_counts_every_segment_and_live_block);
    tcase_add_test(tc, test_the_hit_paths_records_after_a_cut_are_timed_after_it);
    tcase_add_test(tc, test_an_exact_segment_is_the_drivers_and_a_cut_keeps_it_exact);
    tcase_add_test(tc, test_a_cut_sees_an_arena_added_while_it_waits);
    suite_add_tcase(s, tc);
    return s;
}
