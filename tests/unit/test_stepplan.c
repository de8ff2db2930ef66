/* The planned step (common/stepplan.c): later steps served from the plan, a departure sent to
 * the online pool and the plan's place found again, a freed slot reused only once its fence
 * completed, a block kept past its planned life never overlapped; the plan's live blocks never
 * overlap, checked after every event. */
#include "stepplan.h"
#include "steptest.h"
#include "suites.h"

#include <string.h>

#define TAGS 8192

/* The loop's side of the pool: the recogniser until the plan exists, then the plan. */
typedef struct harness {
    steprec_t *rec;
    stepplan_t *plan;
    uint64_t fence;          /* the fence a free waits for (0: free at once) */
    uint64_t done;           /* fences completed */
    struct {
        uint8_t used, planned;
        uint64_t off;
        uint32_t rtag;
    } t[TAGS];
    uint32_t next;
    uint64_t online;
    uint64_t keep_key;       /* the first planned block of this key is never freed */
    uint64_t kept_off;
    int kept;
} harness_t;

static void check(harness_t *h)
{
    if (!h->plan)
        return;
    const char *why = stepplan_check(h->plan);
    ck_assert_msg(why == NULL, "stepplan_check: %s", why);
}

static uint32_t h_alloc(void *arg, uint64_t key, uint64_t size)
{
    harness_t *h = arg;
    uint32_t tag = h->next++ % TAGS;
    ck_assert_msg(!h->t[tag].used, "the harness ran out of tags");
    memset(&h->t[tag], 0, sizeof h->t[tag]);
    h->t[tag].used = 1;
    if (h->plan) {
        int32_t s = stepplan_next(h->plan, key);
        uint64_t off;
        if (s >= 0 && stepplan_claim(h->plan, s, h->done, &off) == 0)
            h->t[tag].planned = 1, h->t[tag].off = off;
        else if (s >= 0)
            stepplan_unclaimed(h->plan);
        if (!h->t[tag].planned)
            h->online++;
    } else {
        h->t[tag].rtag = steprec_alloc(h->rec, key, size);
        if (steprec_state(h->rec) == STEPREC_READY) {
            steprec_step_t st;
            steprec_step(h->rec, &st);
            h->plan = stepplan_build(&st, 512);
            ck_assert_ptr_nonnull(h->plan);
        }
    }
    check(h);
    return tag;
}

static void h_free(void *arg, uint32_t tag)
{
    harness_t *h = arg;
    ck_assert(h->t[tag].used);
    if (h->t[tag].planned && h->keep_key && !h->kept && stepplan_live_at(h->plan, h->t[tag].off, NULL)) {
        uint64_t size = 0;
        stepplan_live_at(h->plan, h->t[tag].off, &size);
        if (size == h->keep_key) {
            h->kept = 1, h->kept_off = h->t[tag].off;
            h->t[tag].used = 0;
            return;
        }
    }
    if (h->t[tag].planned)
        ck_assert_int_eq(stepplan_free(h->plan, h->t[tag].off, h->fence), 0);
    else if (!h->plan)
        steprec_free(h->rec, h->t[tag].rtag);
    h->t[tag].used = 0;
    check(h);
}

static harness_t H;

static void hsetup(void)
{
    memset(&H, 0, sizeof H);
    H.rec = steprec_create(1 << 16);
}

static void hteardown(void)
{
    stepplan_destroy(H.plan);
    steprec_destroy(H.rec);
}

/* Weights, the first step, then steps until the plan is made. */
static st_loop_t learn(int layers)
{
    st_loop_t l = {layers, h_alloc, h_free, &H, 0};
    st_weights(&l);
    st_step(&l, 1, 0);
    for (int s = 0; s < 8 && !H.plan; s++)
        st_step(&l, 0, 0);
    ck_assert_ptr_nonnull(H.plan);
    return l;
}

START_TEST(test_later_steps_are_served_from_the_plan)
{
    st_loop_t l = learn(12);
    ck_assert_uint_eq(stepplan_nplanned(H.plan), stepplan_period(H.plan));
    ck_assert_uint_ge(stepplan_top(H.plan), stepplan_floor(H.plan));
    stepplan_stats_t before, st;
    stepplan_stats(H.plan, &before);
    for (int s = 0; s < 5; s++)
        st_step(&l, 0, 0);
    stepplan_stats(H.plan, &st);
    ck_assert_uint_eq(st.planned - before.planned, 5ull * stepplan_period(H.plan));
    ck_assert_uint_eq(H.online, 0);
    ck_assert_uint_eq(st.departures, 0);
}
END_TEST

START_TEST(test_a_departing_step_falls_back_and_finds_its_place_again)
{
    st_loop_t l = learn(12);
    st_step(&l, 0, 0);
    st_step(&l, 0, 4); /* an allocation no step makes, after layer 3's forward */
    stepplan_stats_t st;
    stepplan_stats(H.plan, &st);
    ck_assert_uint_eq(st.departures, 1);
    ck_assert_uint_ge(st.resyncs, 1);
    uint64_t online = H.online;
    ck_assert_uint_ge(online, 1);
    ck_assert_msg(online <= 1 + STEPPLAN_SYNC, "%llu allocations went online", (unsigned long long)online);
    st_step(&l, 0, 0);
    ck_assert_uint_eq(H.online, online); /* the next step is the plan's again */
}
END_TEST

START_TEST(test_a_freed_slot_is_reused_only_once_its_fence_completed)
{
    st_loop_t l = learn(6);
    H.fence = 5; /* every free of this step waits for fence 5, not complete */
    H.done = 4;
    stepplan_stats_t before, st;
    stepplan_stats(H.plan, &before);
    st_step(&l, 0, 0);
    stepplan_stats(H.plan, &st);
    ck_assert_msg(st.busy > before.busy, "no slot waited for a fence (planned %llu)", (unsigned long long)st.planned);
    /* A slot whose addresses a block freed on fence 5 holds answers with that fence. */
    uint64_t off = 0, wait = 0;
    uint32_t s = 0;
    for (; s < stepplan_period(H.plan) && wait != 5; s++) {
        wait = stepplan_claim(H.plan, (int32_t)s, H.done, &off);
        if (!wait)
            stepplan_free(H.plan, off, 0); /* a free slot: given back as it was */
    }
    ck_assert_uint_eq(wait, 5);
    ck_assert_uint_eq(stepplan_claim(H.plan, (int32_t)(s - 1), 5, &off), 0);
    stepplan_free(H.plan, off, 0);
    /* Fence 5 complete, frees at once again: the whole next step is the plan's. */
    H.fence = 0;
    H.done = 5;
    uint64_t online = H.online;
    st_step(&l, 0, 0);
    stepplan_stats_t after;
    stepplan_stats(H.plan, &after);
    ck_assert_uint_eq(after.busy, st.busy);
    ck_assert_uint_eq(H.online, online);
}
END_TEST

START_TEST(test_a_block_kept_past_its_life_is_never_overlapped)
{
    st_loop_t l = learn(6);
    H.keep_key = 3 << 20; /* the step's input: kept by the program past its step */
    st_step(&l, 0, 0);
    st_step(&l, 0, 0);
    ck_assert(H.kept);
    stepplan_stats_t st;
    stepplan_stats(H.plan, &st);
    ck_assert_uint_ge(st.busy, 1);
    ck_assert_uint_ge(H.online, 1);
    uint64_t size = 0;
    ck_assert(stepplan_live_at(H.plan, H.kept_off, &size));
    ck_assert_uint_eq(size, 3 << 20);
    ck_assert_int_eq(stepplan_free(H.plan, H.kept_off, 0), 0);
    ck_assert_int_eq(stepplan_free(H.plan, H.kept_off, 0), -1); /* no live block of the plan there now */
}
END_TEST

/* Which pages the plan's blocks still need (the pages the plan may give back are the others):
 * none between steps; a block kept past its step holds its own pages, and once freed, until its
 * fence completed. */
START_TEST(test_only_the_pages_of_blocks_still_needed_are_held)
{
    st_loop_t l = learn(6);
    const uint64_t page = 2u << 20;
    uint64_t n = (stepplan_top(H.plan) + page - 1) / page;
    uint8_t held[256];
    ck_assert_uint_le(n, sizeof held);
    memset(held, 0, sizeof held);
    stepplan_held_pages(H.plan, page, H.done, held);
    for (uint64_t i = 0; i < n; i++)
        ck_assert_msg(!held[i], "page %llu held between steps", (unsigned long long)i);
    H.keep_key = 3 << 20;
    st_step(&l, 0, 0);
    ck_assert(H.kept);
    uint64_t lo = H.kept_off / page, hi = (H.kept_off + (3 << 20) - 1) / page;
    memset(held, 0, sizeof held);
    stepplan_held_pages(H.plan, page, H.done, held);
    for (uint64_t i = 0; i < n; i++)
        ck_assert_msg(held[i] == (i >= lo && i <= hi), "page %llu: held %u (the kept block spans %llu..%llu)",
                      (unsigned long long)i, held[i], (unsigned long long)lo, (unsigned long long)hi);
    ck_assert_int_eq(stepplan_free(H.plan, H.kept_off, 7), 0);
    memset(held, 0, sizeof held);
    stepplan_held_pages(H.plan, page, 6, held); /* its fence still to complete */
    ck_assert(held[lo] && held[hi]);
    memset(held, 0, sizeof held);
    stepplan_held_pages(H.plan, page, 7, held);
    for (uint64_t i = 0; i < n; i++)
        ck_assert_msg(!held[i], "page %llu held once every fence completed", (unsigned long long)i);
}
END_TEST

Suite *stepplan_suite(void)
{
    Suite *s = suite_create("stepplan");
    TCase *tc = tcase_create("plan");
    tcase_add_checked_fixture(tc, hsetup, hteardown);
    tcase_add_test(tc, test_later_steps_are_served_from_the_plan);
    tcase_add_test(tc, test_a_departing_step_falls_back_and_finds_its_place_again);
    tcase_add_test(tc, test_a_freed_slot_is_reused_only_once_its_fence_completed);
    tcase_add_test(tc, test_a_block_kept_past_its_life_is_never_overlapped);
    tcase_add_test(tc, test_only_the_pages_of_blocks_still_needed_are_held);
    suite_add_tcase(s, tc);
    return s;
}
