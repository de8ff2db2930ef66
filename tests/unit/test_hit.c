/* The hit path (shim/hit.c): frees found in any arena, threads moved off an arena they keep
 * meeting others on, and, under the preload, repeats served without the driver and sixteen
 * threads keeping their blocks apart. In-process tests run on the fake runtime, each forked. */
#include "capheap.h"
#include "devctx.h"
#include "device.h"
#include "fencepol.h"
#include "hit.h"
#include "options.h"
#include "reader.h"
#include "slowpath.h"
#include "suites.h"
#include "trim.h"

#include "../fakecuda.h"
#include "pooltest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

START_TEST(test_a_block_is_freed_from_any_arena)
{
    ck_assert_int_eq(device_add_arena(d), 1);
    void *x = alloc_or_fail(3 << 20);                /* arena 0 */
    job_t j = {.arena = 1, .in = x, .size = 5 << 20}; /* arena 1 frees it and allocates */
    run_in_arena(&j);
    gmshim_stats_t st = stats();
    ck_assert_uint_eq(st.arenas, 2);
    ck_assert_msg(st.allocs == 2 && st.frees == 1, "allocs %llu frees %llu", st.allocs, st.frees);
    ck_assert_uint_eq(st.allocated.current, 5u << 20);
    free_ok(j.out); /* and arena 0's thread frees arena 1's block */
    st = stats();
    ck_assert_uint_eq(st.allocated.current, 0);
    struct fakecuda_stats f;
    fakecuda_get_stats(0, &f);
    ck_assert_msg(st.reserved.current == f.bytes_in_use, "reserved %llu, driver %llu", st.reserved.current,
                  f.bytes_in_use);
}
END_TEST

START_TEST(test_a_thread_that_contends_one_time_in_three_moves)
{
    int moved = 0;
    for (int k = 0; k < 3000 && !moved; k++)
        moved = hit_note_lock(k % 3 == 0);
    ck_assert_msg(moved, "a thread meeting another on every third lock never moved");
}
END_TEST

START_TEST(test_a_thread_that_rarely_contends_stays)
{
    for (int k = 0; k < 100000; k++)
        ck_assert_msg(!hit_note_lock(k % 20 == 0), "moved after %d locks, one in 20 contended", k);
}
END_TEST

static atomic_int turn;

static void *take_turns(void *arg)
{
    int me = (int)(uintptr_t)arg;
    for (int k = 0; k < 200; k++) {
        while (atomic_load(&turn) != me)
            ;
        void *p = alloc_or_fail(4096u * (unsigned)(me + 1));
        free_ok(p);
        atomic_store(&turn, 1 - me);
    }
    return NULL;
}

START_TEST(test_two_threads_taking_turns_on_one_arena_end_in_two)
{
    /* They never find the lock taken, but each turn moves the arena to the other CPU. */
    pthread_t th[2];
    for (int t = 0; t < 2; t++)
        pthread_create(&th[t], NULL, take_turns, (void *)(uintptr_t)t);
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], NULL);
    ck_assert_uint_eq(stats().arenas, 2);
}
END_TEST

START_TEST(test_pool_serves_repeats_without_the_driver)
{
    classic_pool_test();
    RUN_OK("tests/integration/pool_hits", "FAKECUDA_MEM=1G");
}
END_TEST

START_TEST(test_sixteen_threads_keep_blocks_apart_and_intact)
{
    RUN_OK("tests/integration/threads", "FAKECUDA_MEM=4G");
}
END_TEST

/* A time read before the arena's lock was taken (the unordered counter may give one) is raised to
 * the newest time stamped under that lock; a later one is kept and becomes the newest. */
START_TEST(test_a_stamp_read_early_is_raised_to_the_arenas_newest)
{
    gm_arena_t *a = d->arenas[0];
    pthread_mutex_lock(&a->lock);
    uint64_t saved = a->last_stamp;
    a->last_stamp = 1000;
    ck_assert_uint_eq(arena_stamp(a, 900), 1000);
    ck_assert_uint_eq(arena_stamp(a, 1100), 1100);
    ck_assert_uint_eq(a->last_stamp, 1100);
    arena_note_stamp(a, 1050); /* an older ordered time changes nothing */
    ck_assert_uint_eq(arena_stamp(a, 1060), 1100);
    arena_note_stamp(a, 2000);
    ck_assert_uint_eq(arena_stamp(a, 1500), 2000);
    a->last_stamp = saved > 2000 ? saved : 2000;
    pthread_mutex_unlock(&a->lock);
}
END_TEST

/* One thread allocates a block, another frees it, the first reuses it at once: in the log, read in
 * time order as the analyzer reads it, every free comes before the allocation that reused the
 * block. */
START_TEST(test_a_free_is_logged_before_its_blocks_reuse_on_another_thread)
{
    classic_pool_test();
    char log[4200], env_log[4300];
    snprintf(log, sizeof log, "%s/handoff.gmlog", temp_dir());
    snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s", log);
    const char *env[] = {"FAKECUDA_MEM=1G", "GMSHIM_TRUST_STREAM_ORDER=1", "GMSHIM_STACK_DEPTH=0",
                         "GMSHIM_PYTHON_DEPTH=0", env_log, NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/log_handoff", env, "100000", &out);
    ck_assert_msg(rc == 0, "log_handoff exited %d:\n%s", rc, out);
    free(out);
    rd_log_t lf;
    ck_assert_int_eq(rd_open_path(&lf, log), 0);
    rd_rec_t r;
    uint64_t live_ptr = 0, allocs = 0, frees = 0, early = 0;
    int live = 0;
    uint32_t tid_alloc = 0, tid_free = 0;
    while (rd_next(&lf, &r)) {
        if (r.type != GMLOG_ALLOC && r.type != GMLOG_FREE)
            continue;
        uint64_t ptr = r.type == GMLOG_ALLOC ? ((const gmlog_alloc_t *)r.p)->ptr : ((const gmlog_free_t *)r.p)->ptr;
        if (r.type == GMLOG_ALLOC) {
            allocs++;
            tid_alloc = r.tid;
            early += live && ptr == live_ptr; /* reused before its free was read */
            live = 1;
            live_ptr = ptr;
        } else {
            frees++;
            live = 0;
            tid_free = r.tid;
        }
    }
    rd_close(&lf);
    unlink(log);
    ck_assert_uint_eq(allocs, 100000);
    ck_assert_uint_eq(frees, 100000);
    ck_assert_msg(tid_alloc && tid_free && tid_alloc != tid_free, "allocations and frees on one thread");
    ck_assert_msg(early == 0, "%llu allocations of the block were logged before its free",
                  (unsigned long long)early);
}
END_TEST

Suite *hit_suite(void)
{
    Suite *s = suite_create("hit");
    TCase *tc = tcase_create("in process");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_a_block_is_freed_from_any_arena);
    tcase_add_test(tc, test_a_thread_that_contends_one_time_in_three_moves);
    tcase_add_test(tc, test_a_thread_that_rarely_contends_stays);
    tcase_add_test(tc, test_two_threads_taking_turns_on_one_arena_end_in_two);
    tcase_add_test(tc, test_a_stamp_read_early_is_raised_to_the_arenas_newest);
    suite_add_tcase(s, tc);
    tc = tcase_create("preload");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_pool_serves_repeats_without_the_driver);
    tcase_add_test(tc, test_sixteen_threads_keep_blocks_apart_and_intact);
    tcase_add_test(tc, test_a_free_is_logged_before_its_blocks_reuse_on_another_thread);
    suite_add_tcase(s, tc);
    return s;
}
