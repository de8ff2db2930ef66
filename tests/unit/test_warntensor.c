/* GMSHIM_WARN's figures of PyTorch's tensors (shim/warntensor.c): nothing counted until the
 * warning's thread starts; live bytes and their low-water mark (the least they came to since the
 * last reading) follow ALLOC and FREE_REQUESTED
 * through gmshim_torch_event; while armed, the tensors that outlived a step's low are summed by
 * site, those made since counting only once they are two steps old, and disarming forgets them. */
#include "suites.h"
#include "gmshim.h"
#include "torchtest.h"
#include "warntensor.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void event(int action, int dev, unsigned long long addr, unsigned long long bytes)
{
    gmshim_torch_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.size = sizeof ev;
    ev.action = action;
    ev.device = dev;
    ev.addr = addr;
    ev.bytes = bytes;
    ck_assert_msg(gmshim_torch_event(&ev) == 0, "event %d refused", action);
}

static void expect_low(int dev, uint64_t low, uint64_t now, const char *when)
{
    uint64_t l, n;
    warntensor_take_low(dev, &l, &n);
    ck_assert_msg(l == low && n == now, "%s: low %llu now %llu, expected %llu and %llu", when, (unsigned long long)l,
                  (unsigned long long)n, (unsigned long long)low, (unsigned long long)now);
}

START_TEST(test_nothing_is_counted_before_the_warning_starts)
{
    open_log();
    event(GMSHIM_TORCH_ALLOC, 1, 0x1000, 4096);
    ck_assert_msg(!warntensor_seen(1) && warntensor_devs[1].live == 0, "counted while off: seen %d live %lld",
                  warntensor_seen(1), (long long)warntensor_devs[1].live);
}
END_TEST

START_TEST(test_live_bytes_and_their_low_follow_the_events)
{
    open_log();
    warntensor_enable();
    event(GMSHIM_TORCH_ALLOC, 1, 0x1000, 100);
    event(GMSHIM_TORCH_ALLOC, 1, 0x2000, 200);
    event(GMSHIM_TORCH_ALLOC, 1, 0x3000, 300);
    ck_assert_msg(warntensor_seen(1) && !warntensor_seen(0), "seen: dev 1 %d, dev 0 %d", warntensor_seen(1),
                  warntensor_seen(0));
    event(GMSHIM_TORCH_FREE_REQUESTED, 1, 0x2000, 200);
    event(GMSHIM_TORCH_FREE_COMPLETED, 1, 0x2000, 200); /* PyTorch's reuse: not the program's bytes */
    expect_low(1, 100, 400, "after a free"); /* the least the count came to: its first tensor's */
    event(GMSHIM_TORCH_ALLOC, 1, 0x4000, 50);
    expect_low(1, 450, 450, "an allocation alone"); /* the mark started again at the reading */
    event(GMSHIM_TORCH_FREE_REQUESTED, 1, 0x3000, 300);
    event(GMSHIM_TORCH_ALLOC, 1, 0x5000, 500);
    expect_low(1, 150, 650, "a dip between readings");
    /* a free of a tensor made before counting began never reads below nothing */
    event(GMSHIM_TORCH_FREE_REQUESTED, 1, 0x9000, 1000);
    expect_low(1, 0, 0, "more freed than counted");
}
END_TEST

/* A trace PyTorch recorded (tests/fixtures/torch_trace.txt): the counter ends at the bytes of the
 * tensors left live, its low at the least they came to, as the test reckons them by address. */
START_TEST(test_a_recorded_trace_leaves_its_live_tensors_counted)
{
    open_log();
    warntensor_enable();
    FILE *f = fopen("tests/fixtures/torch_trace.txt", "r");
    ck_assert_msg(f != NULL, "the fixture is missing (run from the repository root)");
    static unsigned long long addr[4096], size[4096];
    size_t n = 0;
    long long live = 0, least = LLONG_MAX;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        int action, dev;
        unsigned long long a, b;
        if (line[0] == '#' || sscanf(line, "%d %d %llx %llu", &action, &dev, &a, &b) != 4 || dev != 0)
            continue;
        if (action == GMSHIM_TORCH_ALLOC && n < 4096) {
            addr[n] = a, size[n++] = b;
            live += (long long)b;
        } else if (action == GMSHIM_TORCH_FREE_REQUESTED) {
            for (size_t i = n; i-- > 0;)
                if (addr[i] == a) {
                    live -= (long long)size[i];
                    addr[i] = size[i] = 0;
                    break;
                }
        }
        if ((action == GMSHIM_TORCH_ALLOC || action == GMSHIM_TORCH_FREE_REQUESTED) && live < least)
            least = live;
        event(action, dev, a, b);
    }
    fclose(f);
    ck_assert_msg(n > 100 && n < 4096, "%zu tensors in the fixture", n);
    expect_low(0, (uint64_t)(least < live ? least : live), (uint64_t)live, "the trace's end");
}
END_TEST

/* Two sites, one tensor each step; A's of step 0 and B's of step 1 kept, the rest freed. */
START_TEST(test_armed_sites_count_tensors_that_outlived_a_step)
{
    warntensor_enable();
    warntensor_alloc(0, 0xa000, 1 << 20, 7); /* before arming: never in the table */
    warntensor_arm(0);
    warntensor_alloc(0, 0xb000, 10 << 20, 7);
    warntensor_alloc(0, 0xc000, 64 << 20, 9); /* an activation of step 0, freed at its end */
    warntensor_free(0, 0xc000, 64 << 20);
    warntensor_step(0);
    warntensor_alloc(0, 0xd000, 20 << 20, 8);
    warntensor_alloc(1, 0xe000, 30 << 20, 8); /* another device, not armed */
    warntensor_step(0);
    gm_site_bytes_t *v;
    size_t n = warntensor_site_bytes(0, &v);
    ck_assert_msg(n == 1 && v[0].site == 7 && v[0].bytes == 10 << 20, "after two steps: %zu sites, first %u %llu", n,
                  n ? v[0].site : 0, n ? (unsigned long long)v[0].bytes : 0);
    free(v);
    warntensor_step(0);
    n = warntensor_site_bytes(0, &v);
    ck_assert_msg(n == 2 && v[0].site == 7 && v[1].site == 8 && v[1].bytes == 20 << 20,
                  "after three steps: %zu sites", n);
    free(v);
    warntensor_free(0, 0xb000, 10 << 20);
    n = warntensor_site_bytes(0, &v);
    ck_assert_msg(n == 1 && v[0].site == 8, "after A's free: %zu sites, first %u", n, n ? v[0].site : 0);
    free(v);
    warntensor_disarm(0);
    warntensor_alloc(0, 0xf000, 5 << 20, 7);
    warntensor_step(0);
    warntensor_step(0);
    n = warntensor_site_bytes(0, &v);
    ck_assert_msg(n == 0 && !v, "disarmed: %zu sites", n);
}
END_TEST

Suite *warntensor_suite(void)
{
    Suite *s = suite_create("warntensor");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, new_scratch, NULL);
    tcase_add_test(tc, test_nothing_is_counted_before_the_warning_starts);
    tcase_add_test(tc, test_live_bytes_and_their_low_follow_the_events);
    tcase_add_test(tc, test_a_recorded_trace_leaves_its_live_tensors_counted);
    tcase_add_test(tc, test_armed_sites_count_tensors_that_outlived_a_step);
    suite_add_tcase(s, tc);
    return s;
}
