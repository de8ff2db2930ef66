/* A device's pool as a whole (shim/device.c): a reset forgets every arena, contending threads
 * spread over the arenas that exist; under the preload, cudaDeviceReset and two devices' pools. */
#include "capheap.h"
#include "devctx.h"
#include "device.h"
#include "fencepol.h"
#include "hit.h"
#include "options.h"
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

START_TEST(test_reset_forgets_every_arena)
{
    ck_assert_int_eq(device_add_arena(d), 1);
    (void)alloc_or_fail(1 << 20);
    job_t j = {.arena = 1, .size = 7 << 20};
    run_in_arena(&j);
    device_forget(d);
    ck_assert_int_eq(cudaDeviceReset(), cudaSuccess);
    gmshim_stats_t st = stats();
    ck_assert_msg(st.reserved.current == 0 && st.allocated.current == 0, "reserved %llu allocated %llu",
                  st.reserved.current, st.allocated.current);
    cudaError_t e;
    ck_assert_int_eq(hit_free(d, j.out, 0, &e), GM_FREE_NOT_FOUND);
    void *p = alloc_or_fail(1 << 20);
    free_ok(p);
}
END_TEST

START_TEST(test_contending_threads_spread_over_existing_arenas_at_the_maximum)
{
    d->max_arenas = 3;
    ck_assert_int_eq(device_move_arena(d, 0), 1); /* new arenas while there is room */
    ck_assert_int_eq(device_move_arena(d, 0), 2);
    int seen[3] = {0};
    for (int k = 0; k < 6; k++) {
        int from = k % 3, to = device_move_arena(d, from);
        ck_assert_msg(to != from && to >= 0 && to < 3, "from %d to %d", from, to);
        seen[to]++;
    }
    ck_assert_msg(seen[0] && seen[1] && seen[2], "moves %d %d %d", seen[0], seen[1], seen[2]);
    ck_assert_uint_eq(stats().arenas, 3);
}
END_TEST

START_TEST(test_device_reset_forgets_the_device_segments)
{
    RUN_OK("tests/integration/device_reset", "FAKECUDA_MEM=1G");
}
END_TEST

START_TEST(test_two_devices_have_separate_pools)
{
    RUN_OK("tests/integration/two_devices", "FAKECUDA_MEM=1G", "FAKECUDA_DEVICES=2");
}
END_TEST

Suite *device_suite(void)
{
    Suite *s = suite_create("device");
    TCase *tc = tcase_create("in process");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_reset_forgets_every_arena);
    tcase_add_test(tc, test_contending_threads_spread_over_existing_arenas_at_the_maximum);
    suite_add_tcase(s, tc);
    tc = tcase_create("preload");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_device_reset_forgets_the_device_segments);
    tcase_add_test(tc, test_two_devices_have_separate_pools);
    suite_add_tcase(s, tc);
    return s;
}
