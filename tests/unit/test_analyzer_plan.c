/* The floor and the offline plan (analyzer/plan.c): a packing never overlaps two lives in time and
 * address and packs a known case tightly; on every fixture and on generated logs the planned
 * peak lies between the floor and every replayed peak of a run that got through; a 20 M-event
 * log is planned within its window's bound, narrowed where packing it whole would cost too much;
 * the packing is the plain search's, block for block, whatever it skips. */
#include "plan.h"
#include "suites.h"
#include "whatif.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MiB ((uint64_t)1 << 20)

/* Whether two placed intervals overlap in time and in address. */
static int clash(const uint64_t *s, const uint64_t *e, const uint64_t *z, const uint64_t *o, size_t i, size_t j)
{
    return s[i] < e[j] && s[j] < e[i] && o[i] < o[j] + z[j] && o[j] < o[i] + z[i];
}

START_TEST(test_a_packing_never_overlaps_two_lives_and_packs_a_known_case_tightly)
{
    /* Two 4 MiB lives one after the other share an offset; a 2 MiB life across both sits above:
     * 6 MiB, the floor. */
    uint64_t s[] = {0, 10, 0}, e[] = {10, 20, 20}, z[] = {4 * MiB, 4 * MiB, 2 * MiB}, o[3];
    uint64_t peak = plan_pack(s, e, z, o, 3);
    ck_assert_msg(peak == 6 * MiB, "peak %llu, want 6 MiB", (unsigned long long)peak);
    ck_assert_msg(o[0] == o[1], "lives one after the other got offsets %llu and %llu", (unsigned long long)o[0],
                  (unsigned long long)o[1]);
    /* Random lives: every pair placed apart, the peak at least the largest live sum. */
    enum { N = 3000 };
    uint64_t *rs = malloc(N * sizeof *rs), *re = malloc(N * sizeof *re), *rz = malloc(N * sizeof *rz),
             *ro = malloc(N * sizeof *ro);
    ck_assert(rs && re && rz && ro);
    srand(7);
    for (size_t i = 0; i < N; i++) {
        rs[i] = (uint64_t)(rand() % 5000);
        re[i] = rs[i] + 1 + (uint64_t)(rand() % (i % 10 ? 50 : 3000));
        rz[i] = (uint64_t)(1 + rand() % 4096) * 512;
    }
    peak = plan_pack(rs, re, rz, ro, N);
    uint64_t most = 0;
    for (uint64_t t = 0; t < 8100; t += 7) {
        uint64_t live = 0;
        for (size_t i = 0; i < N; i++)
            live += rs[i] <= t && t < re[i] ? rz[i] : 0;
        most = live > most ? live : most;
    }
    ck_assert_msg(peak != UINT64_MAX && peak >= most, "peak %llu below the live %llu", (unsigned long long)peak,
                  (unsigned long long)most);
    for (size_t i = 0; i < N; i++)
        for (size_t j = i + 1; j < N; j++)
            ck_assert_msg(!clash(rs, re, rz, ro, i, j), "lives %zu and %zu overlap in time and address", i, j);
    free(rs), free(re), free(rz), free(ro);
}
END_TEST

/* Planned between the floor and every replayed peak of a run with no failure, at the peak and at
 * each recorded OOM. */
static void check_bounds(const char *path)
{
    rd_log_t lf;
    ck_assert_msg(rd_open_path(&lf, path) == 0, "%s does not open", path);
    rp_log_t log;
    ck_assert_msg(rp_load(&log, &lf, 0) == 0, "%s: not decoded", path);
    wi_opts_t o;
    wi_opts_default(&o);
    o.threads = 2;
    wi_plan_t p;
    ck_assert_msg(wi_plan_make(&log, NULL, &o, &p) == 0, "%s: no what-if plan", path);
    plan_point_t peak;
    ck_assert_msg(plan_at_peak(&log, &peak) == 0 && peak.valid, "%s: no plan at the peak", path);
    int fixture = strstr(path, "fixtures/") != NULL; /* the packing's budget never touches these */
    ck_assert_msg(!fixture || !peak.narrowed, "%s: a fixture's window narrowed", path);
    ck_assert_msg(peak.planned >= peak.floor, "%s: planned %llu below the floor %llu", path,
                  (unsigned long long)peak.planned, (unsigned long long)peak.floor);
    for (size_t i = 0; i < p.nruns; i++) {
        if (p.runs[i].res.failures)
            continue;
        ck_assert_msg(peak.planned <= p.runs[i].res.peak_reserved, "%s: planned %llu above run '%s' (%llu)", path,
                      (unsigned long long)peak.planned, p.runs[i].label,
                      (unsigned long long)p.runs[i].res.peak_reserved);
        for (size_t k = 0; k < log.nooms; k++) {
            plan_point_t at;
            if (log.ooms[k].recovered)
                continue;
            ck_assert_msg(plan_at_oom(&log, k, &at) == 0, "%s: OOM %zu not planned", path, k);
            ck_assert_msg(!fixture || !at.narrowed, "%s: OOM %zu: a fixture's window narrowed", path, k);
            ck_assert_msg(at.floor <= at.planned && at.planned <= p.runs[i].res.peak_reserved,
                          "%s: OOM %zu: floor %llu, planned %llu, run '%s' %llu", path, k,
                          (unsigned long long)at.floor, (unsigned long long)at.planned, p.runs[i].label,
                          (unsigned long long)p.runs[i].res.peak_reserved);
        }
    }
    wi_plan_free(&p);
    rp_log_free(&log);
    rd_close(&lf);
}

START_TEST(test_the_plan_lies_between_the_floor_and_every_replayed_peak)
{
    glob_t g;
    ck_assert_msg(glob("tests/fixtures/*.gmlog", 0, NULL, &g) == 0 && g.gl_pathc >= 11,
                  "the fixtures are not where the tests run");
    for (size_t i = 0; i < g.gl_pathc; i++)
        check_bounds(g.gl_pathv[i]);
    globfree(&g);
    static const char *const modes[] = {"steps", "random", "loop"};
    for (size_t i = 0; i < 3; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/plan-%s.gmlog", temp_dir(), modes[i]);
        const char *argv[] = {build_path("fuzz/genlog"), path, "30000", "2", modes[i], NULL};
        char *out = NULL;
        int rc = run_program(argv, NULL, 0, &out);
        ck_assert_msg(rc == 0, "genlog %s exited %d:\n%s", modes[i], rc, out);
        free(out);
        check_bounds(path);
    }
}
END_TEST

/* The reference packing: every placed block looked at for each new one (no buckets, no long list,
 * no shortcut), in one order; returns the peak. */
static uint64_t ref_place(const uint64_t *s, const uint64_t *e, const uint64_t *z, uint64_t *o, size_t n, int born)
{
    size_t *ord = malloc(n * sizeof *ord), *seen = malloc(n * sizeof *seen);
    ck_assert(ord && seen);
    for (size_t i = 0; i < n; i++)
        ord[i] = i;
    for (size_t a = 1; a < n; a++) /* insertion sort: largest first (or born first), ties by start/size, index */
        for (size_t b = a; b > 0; b--) {
            size_t x = ord[b - 1], y = ord[b];
            int after = born ? (s[x] != s[y] ? s[x] > s[y] : z[x] != z[y] ? z[x] < z[y] : x > y)
                             : (z[x] != z[y] ? z[x] < z[y] : s[x] != s[y] ? s[x] > s[y] : x > y);
            if (!after)
                break;
            ord[b - 1] = y, ord[b] = x;
        }
    uint64_t peak = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = ord[k], m = 0;
        for (size_t q = 0; q < k; q++)
            if (s[ord[q]] < e[i] && e[ord[q]] > s[i])
                seen[m++] = ord[q];
        uint64_t at = 0;
        for (int moved = 1; moved;) { /* up past every block in the way until none is */
            moved = 0;
            for (size_t q = 0; q < m; q++)
                if (o[seen[q]] < at + z[i] && at < o[seen[q]] + z[seen[q]])
                    at = o[seen[q]] + z[seen[q]], moved = 1;
        }
        o[i] = at;
        peak = at + z[i] > peak ? at + z[i] : peak;
    }
    free(ord), free(seen);
    return peak;
}

START_TEST(test_the_packing_is_the_reference_one_whatever_it_skips)
{
    /* Random sets, short and long lives, some across the whole set: plan_pack places every block
     * where the plain search (best-fit-decreasing, then the born order where it packs lower) does,
     * though it skips the born order where largest-first reaches the floor and sweeps long lives
     * apart. Both cases come up: sets packed to the floor largest first, sets the born order wins. */
    enum { N = 400 };
    uint64_t s[N], e[N], z[N], o[N], r[N], rb[N];
    int at_floor = 0, born_won = 0;
    srand(11);
    for (int trial = 0; trial < 60; trial++) {
        size_t n = 20 + (size_t)(rand() % (N - 20));
        for (size_t i = 0; i < n; i++) {
            int kind = rand() % 10;
            s[i] = kind == 0 ? 0 : (uint64_t)(rand() % 1000);
            e[i] = kind == 0 ? 1000 : s[i] + 1 + (uint64_t)(rand() % (kind < 4 ? 600 : 20));
            e[i] = e[i] > 1000 ? 1000 : e[i];
            z[i] = (uint64_t)(1 + rand() % (trial % 2 ? 4 : 64)) * 512;
        }
        uint64_t peak = plan_pack(s, e, z, o, n);
        uint64_t want = ref_place(s, e, z, r, n, 0), born = ref_place(s, e, z, rb, n, 1), most = 0;
        for (uint64_t t = 0; t < 1000; t++) {
            uint64_t live = 0;
            for (size_t i = 0; i < n; i++)
                live += s[i] <= t && t < e[i] ? z[i] : 0;
            most = live > most ? live : most;
        }
        at_floor += want == most;
        born_won += born < want;
        if (born < want)
            memcpy(r, rb, n * sizeof *r), want = born;
        ck_assert_msg(peak == want, "trial %d: peak %llu, the reference %llu", trial, (unsigned long long)peak,
                      (unsigned long long)want);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(o[i] == r[i], "trial %d: block %zu at %llu, the reference %llu", trial, i,
                          (unsigned long long)o[i], (unsigned long long)r[i]);
    }
    ck_assert_msg(at_floor && born_won, "the sets did not try both: %d at the floor, %d won by the born order",
                  at_floor, born_won);
}
END_TEST

START_TEST(test_a_long_log_is_planned_within_its_window)
{
    char path[600];
    snprintf(path, sizeof path, "%s/plan-long.gmlog", temp_dir());
    const char *argv[] = {build_path("fuzz/genlog"), path, "2000000", "4", "steps", NULL};
    char *out = NULL;
    int rc = run_program(argv, NULL, 0, &out);
    ck_assert_msg(rc == 0, "genlog exited %d:\n%s", rc, out);
    free(out);
    rd_log_t lf;
    rp_log_t log;
    ck_assert(rd_open_path(&lf, path) == 0 && rp_load(&log, &lf, 0) == 0);
    plan_point_t p;
    ck_assert(plan_at_peak(&log, &p) == 0);
    /* About 4 000 blocks live at once, most across many buckets: the full window's packing would
     * sweep the long list for every block, so the window narrows to keep it within its budget. */
    ck_assert_msg(p.windowed && p.narrowed && p.placed < PLAN_WINDOW_ALLOCS && p.planned >= p.floor,
                  "windowed %d, narrowed %d, placed %llu, planned %llu, floor %llu", p.windowed, p.narrowed,
                  (unsigned long long)p.placed, (unsigned long long)p.planned, (unsigned long long)p.floor);
    rp_log_free(&log);
    rd_close(&lf);
}
END_TEST

Suite *analyzer_plan_suite(void)
{
    Suite *s = suite_create("analyzer_plan");
    TCase *tc = tcase_create("plan");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_a_packing_never_overlaps_two_lives_and_packs_a_known_case_tightly);
    tcase_add_test(tc, test_the_plan_lies_between_the_floor_and_every_replayed_peak);
    tcase_add_test(tc, test_the_packing_is_the_reference_one_whatever_it_skips);
    tcase_add_test(tc, test_a_long_log_is_planned_within_its_window);
    suite_add_tcase(s, tc);
    return s;
}
