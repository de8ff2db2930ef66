/* Unit tests of the grow sequence (common/grow.c) that the shim and the replay share: each turn
 * driven by a scripted caller (the driver's answers, what a release gives back, the cap, a
 * capture), the calls it made written down in order with the OOM's flags. */
#include "grow.h"
#include "gmlog.h"
#include "heaptest.h"
#include "suites.h"

#include <stdio.h>

/* The script: the driver's answers in turn (GROW_OK once they run out), the cap, the bytes the
 * pool holds and what a release takes off them, whether a release waits and a capture runs. */
typedef struct script {
    int answers[4];
    int nanswers, asked;
    size_t limit, reserved, releasable;
    int waits, capturing, pending; /* pending: a release makes a free block of this many MiB */
    char trace[256];
} script_t;

static script_t sc;

static void note(const char *fmt, size_t a, unsigned b)
{
    size_t n = strlen(sc.trace);
    snprintf(sc.trace + n, sizeof sc.trace - n, fmt, a, b);
}

static size_t limit_cb(void *arg)
{
    return sc.limit;
}

static size_t reserved_cb(void *arg)
{
    return sc.reserved;
}

static int capturing_cb(void *arg)
{
    return sc.capturing;
}

static int segment_cb(void *arg, size_t seg, size_t rounded, size_t size, gm_block_t **bp)
{
    int answer = sc.asked < sc.nanswers ? sc.answers[sc.asked] : GROW_OK;
    sc.asked++;
    note("seg %zu:%u ", seg / MiB, (unsigned)answer);
    if (answer == GROW_OK) {
        uintptr_t base = BASE + (uintptr_t)sc.asked * 64 * MiB;
        gm_segment_t *s = pool_add_segment(&heap, base, seg, pool_is_small(rounded), 1);
        *bp = pool_alloc_fresh(&heap, s, rounded, size);
        sc.reserved += seg;
    }
    return answer;
}

static size_t release_cb(void *arg, int reason, int *waited)
{
    note("rel %zu:%u ", sc.releasable / MiB, (unsigned)reason);
    size_t bytes = sc.releasable;
    sc.reserved -= bytes;
    sc.releasable = 0;
    *waited = sc.waits;
    if (sc.pending) { /* the room a released fence made, in a segment kept */
        gm_segment_t *s = pool_add_segment(&heap, BASE + 60 * 64 * MiB, (size_t)sc.pending * MiB, 0, 1);
        ck_assert_ptr_nonnull(s);
        sc.pending = 0;
    }
    return bytes;
}

static void oom_seen_cb(void *arg, size_t seg)
{
    note("seen %zu ", seg / MiB, 0);
}

static void oom_end_cb(void *arg, unsigned flags, size_t seg)
{
    note("end %zu:0x%x", seg / MiB, flags);
}

static const grow_ops_t ops = {limit_cb, reserved_cb, capturing_cb, segment_cb, release_cb, oom_seen_cb, oom_end_cb};

static void script_setup(void)
{
    setup();
    memset(&sc, 0, sizeof sc);
}

/* Grows for a request of `mib` MiB (its pool segment), on the script given; the trace. */
static gm_block_t *grow_mib(size_t mib, int *fresh)
{
    size_t rounded = pool_round(mib * MiB);
    return grow_alloc(&ops, NULL, &heap, pool_segment_size(rounded), rounded, mib * MiB, fresh);
}

#define EXPECT_TRACE(want) ck_assert_msg(!strcmp(sc.trace, want), "calls: \"%s\", expected \"%s\"", sc.trace, want)

START_TEST(test_a_segment_the_driver_gives_ends_the_grow_with_no_oom)
{
    int fresh;
    gm_block_t *b = grow_mib(5, &fresh);
    EXPECT_TRACE("seg 20:0 ");
    ck_assert_msg(b && fresh && b->size == 5 * MiB, "block %p fresh %d", (void *)b, fresh);
}
END_TEST

START_TEST(test_a_driver_oom_releases_then_asks_the_same_segment_again)
{
    sc.answers[0] = GROW_OOM, sc.nanswers = 1, sc.reserved = 100 * MiB, sc.releasable = 40 * MiB;
    int fresh;
    gm_block_t *b = grow_mib(5, &fresh);
    EXPECT_TRACE("seg 20:1 seen 20 rel 40:1 seg 20:0 end 20:0x23");
    ck_assert_msg(b && fresh, "recovered by a new segment: block %p fresh %d", (void *)b, fresh);
}
END_TEST

START_TEST(test_a_driver_oom_reuses_the_room_the_release_made_before_asking_again)
{
    sc.answers[0] = GROW_OOM, sc.nanswers = 1, sc.pending = 8, sc.waits = 1;
    int fresh;
    gm_block_t *b = grow_mib(5, &fresh);
    EXPECT_TRACE("seg 20:1 seen 20 rel 0:1 end 20:0x25");
    ck_assert_msg(b && !fresh && b->seg->size == 8 * MiB, "block %p fresh %d", (void *)b, fresh);
}
END_TEST

START_TEST(test_a_second_driver_oom_tries_the_tight_segment)
{
    sc.answers[0] = sc.answers[1] = GROW_OOM, sc.nanswers = 2;
    int fresh;
    gm_block_t *b = grow_mib(5, &fresh);
    EXPECT_TRACE("seg 20:1 seen 20 rel 0:1 seg 20:1 seg 6:0 end 6:0x23");
    ck_assert_msg(b && fresh && b->seg->size == 6 * MiB, "block %p fresh %d", (void *)b, fresh);
}
END_TEST

START_TEST(test_a_small_request_has_no_tight_segment_to_fall_back_to)
{
    sc.answers[0] = sc.answers[1] = sc.answers[2] = GROW_OOM, sc.nanswers = 3;
    int fresh;
    /* Asked for more than its 2 MiB segment (as a growable range may be), still no fall back. */
    gm_block_t *b = grow_alloc(&ops, NULL, &heap, 8 * MiB, 4096, 4096, &fresh);
    EXPECT_TRACE("seg 8:1 seen 8 rel 0:1 seg 8:1 end 8:0x3");
    ck_assert_msg(!b && !fresh, "block %p fresh %d", (void *)b, fresh);
}
END_TEST

START_TEST(test_another_driver_error_ends_the_grow_without_an_oom)
{
    sc.answers[0] = GROW_FAILED, sc.nanswers = 1;
    int fresh;
    gm_block_t *b = grow_mib(5, &fresh);
    EXPECT_TRACE("seg 20:2 ");
    ck_assert_msg(!b && !fresh, "block %p fresh %d", (void *)b, fresh);
}
END_TEST

START_TEST(test_under_the_cap_the_tight_segment_comes_before_any_release)
{
    sc.limit = 100 * MiB, sc.reserved = 90 * MiB, sc.releasable = 50 * MiB;
    int fresh;
    gm_block_t *b = grow_mib(5, &fresh);
    EXPECT_TRACE("seg 6:0 ");
    ck_assert_msg(b && fresh, "block %p fresh %d", (void *)b, fresh);
}
END_TEST

START_TEST(test_under_the_cap_the_cache_goes_back_once_then_the_cap_decides_again)
{
    sc.limit = 100 * MiB, sc.reserved = 98 * MiB, sc.releasable = 30 * MiB;
    int fresh;
    gm_block_t *b = grow_mib(5, &fresh);
    EXPECT_TRACE("rel 30:6 seg 20:0 ");
    ck_assert_msg(b && fresh, "block %p fresh %d", (void *)b, fresh);
}
END_TEST

START_TEST(test_the_cap_refuses_after_the_release_unless_its_room_serves)
{
    sc.limit = 100 * MiB, sc.reserved = 98 * MiB, sc.releasable = 2 * MiB, sc.pending = 8;
    int fresh;
    gm_block_t *b = grow_mib(5, &fresh);
    EXPECT_TRACE("rel 2:6 ");
    ck_assert_msg(b && !fresh && b->seg->size == 8 * MiB, "the room the release made: block %p", (void *)b);
    memset(&sc, 0, sizeof sc);
    sc.limit = 100 * MiB, sc.reserved = 98 * MiB;
    b = grow_mib(50, &fresh);
    EXPECT_TRACE("rel 0:6 end 50:0x9");
    ck_assert_msg(!b && !fresh, "block %p fresh %d", (void *)b, fresh);
}
END_TEST

START_TEST(test_no_release_during_a_capture)
{
    sc.limit = 100 * MiB, sc.reserved = 98 * MiB, sc.releasable = 30 * MiB, sc.capturing = 1;
    int fresh;
    gm_block_t *b = grow_mib(5, &fresh);
    EXPECT_TRACE("end 20:0x9");
    ck_assert_msg(!b, "block %p", (void *)b);
}
END_TEST

START_TEST(test_an_exact_segment_is_asked_again_only_when_the_release_gave_some_back)
{
    gm_block_t *b;
    sc.answers[0] = sc.answers[1] = GROW_OOM, sc.nanswers = 2;
    ck_assert_int_eq(grow_exact(&ops, NULL, 3 * MiB, &b), GROW_OOM);
    EXPECT_TRACE("seg 3:1 seen 3 rel 0:1 end 3:0x41");
    memset(&sc, 0, sizeof sc);
    sc.answers[0] = GROW_OOM, sc.nanswers = 1, sc.reserved = 50 * MiB, sc.releasable = 40 * MiB, sc.waits = 1;
    ck_assert_int_eq(grow_exact(&ops, NULL, 3 * MiB, &b), GROW_OK);
    EXPECT_TRACE("seg 3:1 seen 3 rel 40:1 seg 3:0 end 3:0x67");
    ck_assert_msg(b && b->seg->size == 3 * MiB, "a segment of exactly the size: %p", (void *)b);
}
END_TEST

START_TEST(test_an_exact_segment_under_a_capture_or_the_cap)
{
    gm_block_t *b;
    sc.answers[0] = GROW_OOM, sc.nanswers = 1, sc.capturing = 1, sc.releasable = 40 * MiB;
    ck_assert_int_eq(grow_exact(&ops, NULL, 3 * MiB, &b), GROW_OOM);
    EXPECT_TRACE("seg 3:1 seen 3 end 3:0x50");
    memset(&sc, 0, sizeof sc);
    sc.limit = 100 * MiB, sc.reserved = 99 * MiB, sc.releasable = 4 * MiB;
    ck_assert_int_eq(grow_exact(&ops, NULL, 3 * MiB, &b), GROW_OK);
    EXPECT_TRACE("rel 4:6 seg 3:0 ");
    memset(&sc, 0, sizeof sc);
    sc.limit = 100 * MiB, sc.reserved = 99 * MiB, sc.releasable = 1 * MiB;
    ck_assert_int_eq(grow_exact(&ops, NULL, 3 * MiB, &b), GROW_OOM);
    EXPECT_TRACE("rel 1:6 end 3:0x49");
    ck_assert_ptr_null(b);
}
END_TEST

Suite *grow_suite(void)
{
    Suite *s = suite_create("grow");
    TCase *tc = tcase_create("sequence");
    tcase_add_checked_fixture(tc, script_setup, teardown);
    tcase_add_test(tc, test_a_segment_the_driver_gives_ends_the_grow_with_no_oom);
    tcase_add_test(tc, test_a_driver_oom_releases_then_asks_the_same_segment_again);
    tcase_add_test(tc, test_a_driver_oom_reuses_the_room_the_release_made_before_asking_again);
    tcase_add_test(tc, test_a_second_driver_oom_tries_the_tight_segment);
    tcase_add_test(tc, test_a_small_request_has_no_tight_segment_to_fall_back_to);
    tcase_add_test(tc, test_another_driver_error_ends_the_grow_without_an_oom);
    tcase_add_test(tc, test_under_the_cap_the_tight_segment_comes_before_any_release);
    tcase_add_test(tc, test_under_the_cap_the_cache_goes_back_once_then_the_cap_decides_again);
    tcase_add_test(tc, test_the_cap_refuses_after_the_release_unless_its_room_serves);
    tcase_add_test(tc, test_no_release_during_a_capture);
    tcase_add_test(tc, test_an_exact_segment_is_asked_again_only_when_the_release_gave_some_back);
    tcase_add_test(tc, test_an_exact_segment_under_a_capture_or_the_cap);
    suite_add_tcase(s, tc);
    return s;
}
