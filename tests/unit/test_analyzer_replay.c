/* Unit tests of the replay (analyzer/replay*.c): replaying a log under its recorded settings
 * reproduces its recorded peak reserved and its recorded OOM point exactly — on the OOM workloads
 * run under the preload, the fixtures, logs written by hand (testlog) and by genlog, and the real
 * PyTorch traces of ../shared/traces replayed through the pool — and other settings change what
 * they must. */
#include "replay_run.h"
#include "suites.h"
#include "testlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB ((uint64_t)1 << 20)

/* Runs build/tests/integration/<prog> (or any build/ program with args) under the preload with
 * extra environment; returns the log's path; *printed (if asked): what the program printed. */
static const char *record_printing(const char *prog, const char *const *args, const char *const *extra,
                                   char **printed)
{
    static char log[8][512];
    static int next;
    char *path = log[next++ % 8];
    snprintf(path, sizeof log[0], "%s/%s.gmlog", temp_dir(), strrchr(prog, '/') ? strrchr(prog, '/') + 1 : prog);
    char logenv[600], bin[4096];
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", path);
    snprintf(bin, sizeof bin, "%s", build_path(prog));
    const char *argv[8] = {bin};
    for (int i = 0; args && args[i] && i < 6; i++)
        argv[i + 1] = args[i];
    const char *env[8] = {logenv, "FAKECUDA_MEM=1G"};
    int n = 2;
    for (int i = 0; extra && extra[i] && n < 7; i++)
        env[n++] = extra[i];
    char *out = NULL;
    int rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0 || rc == 1, "%s exited %d:\n%s", prog, rc, out);
    if (printed)
        *printed = out;
    else
        free(out);
    return path;
}

static const char *record(const char *prog, const char *const *args, const char *const *extra)
{
    return record_printing(prog, args, extra, NULL);
}

static void load(const char *path, rp_log_t *log, rd_log_t *lf)
{
    ck_assert_msg(rd_open_path(lf, path) == 0, "%s does not open", path);
    ck_assert_msg(rp_load(log, lf, 0) == 0, "%s: rp_load failed", path);
}

static size_t failed_ooms(const rp_log_t *log, int *first)
{
    size_t n = 0;
    *first = -1;
    for (size_t i = 0; i < log->nooms; i++)
        if (!log->ooms[i].recovered && n++ == 0)
            *first = (int)i;
    return n;
}

/* The recorded settings, simulated: the peak and the first OOM of the recording, and (for logs
 * from the pool) every OOM failing again with no new one. `slack`: bytes the peak may be off by
 * (0: none). */
static void expect_faithful_within(const char *what, const char *path, int every_oom, uint64_t slack)
{
    rd_log_t lf;
    rp_log_t log;
    load(path, &log, &lf);
    rp_cfg_t cfg;
    rp_cfg_recorded(&cfg);
    rp_result_t sim = replay_once(&log, &cfg);
    uint64_t off = sim.peak_reserved > log.peak_reserved_recorded ? sim.peak_reserved - log.peak_reserved_recorded
                                                                  : log.peak_reserved_recorded - sim.peak_reserved;
    ck_assert_msg(off <= slack, "%s: replayed peak reserved %llu, recorded %llu", what,
                  (unsigned long long)sim.peak_reserved, (unsigned long long)log.peak_reserved_recorded);
    ck_assert_msg(log.recorded.peak_reserved == sim.peak_reserved, "%s: the recorded run replays as %llu, once as %llu",
                  what, (unsigned long long)log.recorded.peak_reserved, (unsigned long long)sim.peak_reserved);
    int first;
    size_t n = failed_ooms(&log, &first);
    if (n) {
        ck_assert_msg(sim.failures && sim.first.oom == first && sim.first.t == log.ooms[first].t,
                      "%s: the first failure is not the recorded OOM %d (failures %llu, at OOM %d)", what, first,
                      (unsigned long long)sim.failures, sim.first.oom);
        ck_assert_msg(sim.first.reserved == log.ooms[first].rec.reserved || log.ooms[first].by_limit,
                      "%s: reserved %llu at the OOM, recorded %llu", what, (unsigned long long)sim.first.reserved,
                      (unsigned long long)log.ooms[first].rec.reserved);
        ck_assert_msg(sim.first.live == log.ooms[first].rec.allocated, "%s: live %llu at the OOM, recorded %llu", what,
                      (unsigned long long)sim.first.live, (unsigned long long)log.ooms[first].rec.allocated);
    }
    if (every_oom)
        ck_assert_msg(sim.recorded_failed == n && sim.new_failures == 0,
                      "%s: %llu of %zu recorded OOMs failed again, %llu new", what,
                      (unsigned long long)sim.recorded_failed, n, (unsigned long long)sim.new_failures);
    else
        ck_assert_msg(n || !sim.failures, "%s: %llu failures in a log without OOMs", what,
                      (unsigned long long)sim.failures);
    rp_log_free(&log);
    rd_close(&lf);
}

static void expect_faithful(const char *what, const char *path, int every_oom)
{
    expect_faithful_within(what, path, every_oom, 0);
}

START_TEST(test_replay_reproduces_each_workloads_peak_and_ooms)
{
    static const char *const limit512[] = {"GMSHIM_DEVICE_LIMIT=512M", NULL};
    static const struct {
        const char *prog;
        const char *const *env;
    } w[] = {
        {"oom_capacity", NULL},           {"oom_fragmentation", NULL},       {"oom_leak", NULL},
        {"oom_outside", NULL},            {"oom_transient", NULL},           {"oom_split", NULL},
        {"oom_weights_after_mark", NULL}, {"oom_keep_slice", NULL},          {"oom_transient_troughs", NULL},
        {"oom_capped_fragmentation", limit512}, {"oom_capacity", limit512}, {"demo_train", NULL},
    };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        char prog[128];
        snprintf(prog, sizeof prog, "tests/integration/%s", w[i].prog);
        expect_faithful(w[i].prog, record(prog, NULL, w[i].env), 1);
    }
}
END_TEST

/* Under GMSHIM_PLAN the OOM record counts the planned step's live blocks with the pool's: the
 * replay (which plans as the shim did) finds the live bytes the record says (before, the record
 * left out the plan's 96 MiB of temporaries of oom_keep_slice). */
START_TEST(test_an_oom_under_the_plan_records_the_planned_blocks_as_live)
{
    static const char *const plan[] = {"GMSHIM_PLAN=1", NULL};
    static const char *const progs[] = {"oom_keep_slice", "oom_leak", "oom_transient_troughs"};
    for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
        char prog[128];
        snprintf(prog, sizeof prog, "tests/integration/%s", progs[i]);
        expect_faithful(progs[i], record(prog, NULL, plan), 1);
    }
}
END_TEST

START_TEST(test_replay_reproduces_each_fixtures_peak_and_oom)
{
    static const char *const fx[] = {"tests/fixtures/demo.gmlog", "tests/fixtures/h200_torch_leak_oom.gmlog",
                                     "tests/fixtures/h200_cupti_static_inject.gmlog"};
    for (size_t i = 0; i < sizeof fx / sizeof fx[0]; i++)
        expect_faithful(fx[i], fx[i], 1);
}
END_TEST

/* Counts a log's ALLOC and FREE records by their cache flags, the returns handed out or not. */
static void count_cache_records(const char *path, int returns, unsigned long long n[4])
{
    rd_log_t lf;
    ck_assert_int_eq(rd_open_path(&lf, path), 0);
    lf.returns = returns;
    rd_rec_t r;
    memset(n, 0, 4 * sizeof *n);
    while (rd_next(&lf, &r)) {
        if (r.type == GMLOG_ALLOC)
            n[(r.flags & GMLOG_A_CACHED) ? 1 : 0]++;
        else if (r.type == GMLOG_FREE)
            n[(r.flags & GMLOG_F_RETURNED) ? 3 : 2]++;
    }
    rd_close(&lf);
}

/* A thread's cache serves the repeats of pool_hits' small sizes: the log says which allocations
 * it served; a reader sees the program's frees only (5005), a reader that asks sees the cache's
 * returns too; the replay follows the blocks through the cache to the recorded peak. */
START_TEST(test_the_log_tells_a_thread_caches_hits_and_the_replay_follows_them)
{
    classic_pool_test();
    const char *path = record("tests/integration/pool_hits", NULL, NULL);
    unsigned long long plain[4], all[4];
    count_cache_records(path, 0, plain);
    count_cache_records(path, 1, all);
    ck_assert_msg(plain[0] + plain[1] == 5005 && plain[2] == 5005 && plain[3] == 0,
                  "allocations %llu + %llu from caches, frees %llu, returns %llu", plain[0], plain[1], plain[2],
                  plain[3]);
    ck_assert_msg(plain[1] >= 3 * 990, "only %llu of the small sizes' 3000 repeats came from the cache", plain[1]);
    ck_assert_uint_eq(all[2], 5005);
    expect_faithful("pool_hits", path, 1);
}
END_TEST

/* PyTorch's cache kept: its segments come from the driver at their exact size (a 2 MiB one
 * included, which the pool would have cut from 20 MiB), and every replay gives them their own
 * segment; the recorded peak and the OOM by the cap replay exactly. */
START_TEST(test_replay_reproduces_a_caching_allocators_exact_segments)
{
    static const char *const big[] = {"FAKECUDA_MEM=2G", NULL};
    expect_faithful("caching_release", record("tests/integration/caching_release", NULL, big), 1);
    static const char *const limit[] = {"FAKECUDA_MEM=2G", "GMSHIM_DEVICE_LIMIT=1G", NULL};
    static const char *const args[] = {"limit", NULL};
    const char *path = record("tests/integration/caching_release", args, limit);
    expect_faithful("caching_release limit", path, 1);
    rd_log_t lf;
    rp_log_t log;
    load(path, &log, &lf);
    ck_assert_msg(log.nooms == 1 && log.ooms[0].exact && log.ooms[0].by_limit, "%zu OOMs, exact %d", log.nooms,
                  log.nooms ? log.ooms[0].exact : -1);
    /* 300 MiB more device under the cap and the exact segment fits. */
    rp_cfg_t cfg;
    rp_cfg_recorded(&cfg);
    cfg.limit = 1500 * MiB;
    rp_result_t wider = replay_once(&log, &cfg);
    ck_assert_msg(wider.failures == 0 && wider.recorded_passed == 1, "under 1.5 GiB: %llu failures",
                  (unsigned long long)wider.failures);
    rp_log_free(&log);
    rd_close(&lf);
}
END_TEST

/* The shim's outcome of a grow_paths run: its failed allocations and peak reserved. */
typedef struct shim_outcome {
    unsigned long long ooms, peak;
} shim_outcome_t;

static const char *record_grow_paths(const char *const *env, shim_outcome_t *o)
{
    char *out = NULL;
    const char *path = record_printing("tests/integration/grow_paths", NULL, env, &out);
    const char *line = strstr(out, "ooms ");
    ck_assert_msg(line && sscanf(line, "ooms %llu peak_reserved %llu", &o->ooms, &o->peak) == 2,
                  "grow_paths printed no outcome:\n%s", out);
    free(out);
    return path;
}

static void expect_shims_outcome(const char *what, const rp_log_t *log, const rp_cfg_t *cfg, const shim_outcome_t *o)
{
    rp_result_t sim = replay_once(log, cfg);
    ck_assert_msg(sim.failures == o->ooms && sim.peak_reserved == o->peak,
                  "%s: the replay failed %llu allocations at a peak of %llu, the shim %llu at %llu", what,
                  (unsigned long long)sim.failures, (unsigned long long)sim.peak_reserved, o->ooms, o->peak);
}

/* The same allocations through the shim and through the replay come to the same outcomes on
 * every turn of the grow sequence (common/grow.c): the driver's OOM released and retried, reused,
 * the tight segment, an exact segment retried or not; the device cap's release, its tight
 * segment, its failures. Each run's log replays as recorded, and under the other run's setting
 * as that run went. */
START_TEST(test_the_shim_and_the_replay_agree_on_every_turn_of_the_grow_sequence)
{
    classic_pool_test();
    static const char *const drv_env[] = {"FAKECUDA_MEM=1G", NULL};
    static const char *const cap_env[] = {"FAKECUDA_MEM=2G", "GMSHIM_DEVICE_LIMIT=1G", NULL};
    shim_outcome_t drv, cap;
    const char *drv_path = record_grow_paths(drv_env, &drv);
    const char *cap_path = record_grow_paths(cap_env, &cap);
    ck_assert_msg(drv.ooms == 2 && cap.ooms == 2 && drv.peak == 1024 * MiB && cap.peak == 1024 * MiB,
                  "the shim: %llu and %llu failures, peaks %llu and %llu", drv.ooms, cap.ooms, drv.peak, cap.peak);
    rd_log_t lf[2];
    rp_log_t log[2];
    load(drv_path, &log[0], &lf[0]);
    load(cap_path, &log[1], &lf[1]);
    /* The turns the shim took: recovered by a retry (twice, one the tight 4 MiB segment) and by
     * an exact retry; failed by the driver and, its cache empty, for an exact segment. */
    unsigned recovered = 0, tight = 0, exact = 0, limit = 0;
    for (size_t i = 0; i < log[0].nooms; i++) {
        const rp_oom_t *o = &log[0].ooms[i];
        recovered += o->recovered;
        tight += o->recovered && o->rec.segment == 4 * MiB;
        exact += o->exact;
    }
    ck_assert_msg(log[0].nooms == 5 && recovered == 3 && tight == 1 && exact == 2,
                  "driver: %zu OOMs, %u recovered, %u by the tight segment, %u exact", log[0].nooms, recovered, tight,
                  exact);
    for (size_t i = 0; i < log[1].nooms; i++)
        limit += log[1].ooms[i].by_limit && !log[1].ooms[i].recovered;
    ck_assert_msg(log[1].nooms == 2 && limit == 2, "cap: %zu OOMs, %u by the cap", log[1].nooms, limit);
    rp_cfg_t cfg;
    rp_cfg_recorded(&cfg);
    expect_shims_outcome("driver, as recorded", &log[0], &cfg, &drv);
    expect_shims_outcome("cap, as recorded", &log[1], &cfg, &cap);
    expect_faithful("grow_paths", drv_path, 1);
    expect_faithful("grow_paths under the cap", cap_path, 1);
    cfg.device_bytes = 2048 * MiB, cfg.limit = 1024 * MiB;
    expect_shims_outcome("driver's log under the cap", &log[0], &cfg, &cap);
    cfg.device_bytes = 1024 * MiB, cfg.limit = 0;
    expect_shims_outcome("cap's log on the 1 GiB device", &log[1], &cfg, &drv);
    for (int i = 0; i < 2; i++) {
        rp_log_free(&log[i]);
        rd_close(&lf[i]);
    }
}
END_TEST

/* Each recovered driver OOM's figure of what the driver could give holds up to the allocation
 * that followed it, an exact segment's too: two in a row before any pool allocation move the
 * replay's capacity on twice (100 MiB, then 900 MiB), and the recording replays without failing. */
START_TEST(test_recovered_ooms_before_exact_segments_move_the_drivers_capacity_on)
{
    rp_log_t L;
    memset(&L, 0, sizeof L);
    L.pending_wait = 1;
    L.total = L.base_cap = 1000 * MiB;
    uint64_t caps[2] = {100 * MiB, 900 * MiB};
    L.drv_cap = caps, L.ndrv = 2;
    rp_oom_t ooms[2];
    memset(ooms, 0, sizeof ooms);
    for (int i = 0; i < 2; i++)
        ooms[i].rec.request = 60 * MiB, ooms[i].recovered = 1, ooms[i].exact = 1;
    L.ooms = ooms, L.nooms = 2;
    size_t n = 0;
#define EV(T, X, ID)                                                                              \
    do {                                                                                          \
        ck_assert_int_eq(rp_append(&L, &(rp_ev_t){(uint64_t)(n + 1) | (uint64_t)(T) << 56, (X), (ID), 0, \
                                                  0x7f0000000000ull + n * 256 * MiB, 0}), 0);      \
        n++;                                                                                      \
    } while (0)
    EV(RP_EXACT_ALLOC, 60 * MiB, 0);
    EV(RP_OOM, 1, 0);
    EV(RP_EXACT_ALLOC, 20 * MiB, 1);
    EV(RP_OOM, 1, 1);
    EV(RP_EXACT_ALLOC, 60 * MiB, 2);
    EV(RP_EXACT_ALLOC, 200 * MiB, 3);
#undef EV
    L.nids = 4;
    ck_assert_uint_eq(L.nev, n);
    rp_cfg_t cfg;
    rp_cfg_recorded(&cfg);
    rp_result_t res = replay_once(&L, &cfg);
    free(L.packed);
    ck_assert_msg(res.failures == 0 && res.new_failures == 0, "%llu failures, %llu new",
                  (unsigned long long)res.failures, (unsigned long long)res.new_failures);
    ck_assert_uint_eq(res.peak_reserved, 340 * MiB);
}
END_TEST

/* A log written by hand: a 64 MiB segment, a block filling it, a failed 600 MiB request with
 * 512 MiB free in the driver: it fails again, and on a device 100 MiB larger it fits. */
START_TEST(test_replay_of_a_hand_written_log_fails_where_it_failed)
{
    tlog_t b;
    tlog_begin(&b, 0);
    tlog_chunk(&b, 1, 0, 0, 0);
    tlog_device(&b, 1, "Test", 80 * 1024 * MiB);
    tlog_segment(&b, 2, GMLOG_SEGMENT_ALLOC, 0x7f0000000000ull, 64 * MiB);
    tlog_alloc(&b, 3, 0x7f0000000000ull, 64 * MiB, GMLOG_A_MISS, 0);
    tlog_oom(&b, 4, 600 * MiB, 64 * MiB, 0);
    tlog_end_chunk(&b);
    char path[512];
    snprintf(path, sizeof path, "%s/hand.gmlog", temp_dir());
    ck_assert(tlog_write(&b, path) == 0);
    tlog_free_buf(&b);
    expect_faithful("hand-written", path, 1);
    rd_log_t lf;
    rp_log_t log;
    load(path, &log, &lf);
    rp_cfg_t cfg;
    rp_cfg_recorded(&cfg);
    cfg.device_bytes = log.total + 100 * MiB;
    rp_result_t r = replay_once(&log, &cfg);
    ck_assert_msg(!r.failures && r.recorded_passed == 1, "100 MiB more device: %llu failures",
                  (unsigned long long)r.failures);
    cfg.device_bytes = log.total + 10 * MiB;
    r = replay_once(&log, &cfg);
    ck_assert_msg(r.failures == 1, "10 MiB more device: %llu failures", (unsigned long long)r.failures);
    rp_log_free(&log);
    rd_close(&lf);
}
END_TEST

/* genlog's segments are not the pool's (no GMSHIM_* settings): followed, as recorded. */
START_TEST(test_replay_follows_a_generated_logs_segments)
{
    char path[512];
    snprintf(path, sizeof path, "%s/gen.gmlog", temp_dir());
    const char *gen[] = {build_path("fuzz/genlog"), path, "200000", "4", NULL};
    char *out = NULL;
    int rc = run_program(gen, NULL, 0, &out);
    ck_assert_msg(rc == 0, "genlog exited %d:\n%s", rc, out);
    free(out);
    rd_log_t lf;
    rp_log_t log;
    load(path, &log, &lf);
    ck_assert_msg(log.recorded.peak_reserved == log.peak_reserved_recorded && !log.recorded.failures,
                  "followed peak %llu, recorded %llu, failures %llu", (unsigned long long)log.recorded.peak_reserved,
                  (unsigned long long)log.peak_reserved_recorded, (unsigned long long)log.recorded.failures);
    rp_cfg_t cfg;
    rp_cfg_recorded(&cfg);
    rp_result_t sim = replay_once(&log, &cfg);
    ck_assert_msg(sim.events == log.nev && !sim.failures && sim.peak_allocated > 0,
                  "simulated: %llu of %zu events, %llu failures", (unsigned long long)sim.events, log.nev,
                  (unsigned long long)sim.failures);
    rp_log_free(&log);
    rd_close(&lf);
}
END_TEST

/* The real PyTorch traces (../shared/traces, outside the clone: only where $GMSHIM_TEST_TRACES
 * names their folder), replayed through the pool by bench/replay: as they ran, and under a 4 GiB
 * cap that makes them fail. */
START_TEST(test_replay_reproduces_the_real_traces)
{
    const char *dir = getenv("GMSHIM_TEST_TRACES");
    if (!dir || !*dir) {
        fputs("note: GMSHIM_TEST_TRACES unset: trace replay not checked\n", stderr);
        return;
    }
    static const char *const names[] = {"trace-resnet50", "trace-gpt2"};
    for (size_t i = 0; i < 2; i++) {
        char xz[600], txt[600], cmd[1400];
        snprintf(xz, sizeof xz, "%s/%s.txt.xz", dir, names[i]);
        if (access(xz, R_OK) != 0 || system("command -v xz >/dev/null 2>&1") != 0) {
            fprintf(stderr, "note: %s or xz missing: trace replay not checked\n", xz);
            continue;
        }
        snprintf(txt, sizeof txt, "%s/%s.txt", temp_dir(), names[i]);
        snprintf(cmd, sizeof cmd, "xz -dc '%s' > '%s'", xz, txt);
        ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
        const char *args[] = {txt, NULL};
        const char *big[] = {"FAKECUDA_MEM=64G", NULL};
        const char *capped[] = {"FAKECUDA_MEM=64G", "GMSHIM_DEVICE_LIMIT=4G", NULL};
        /* The fake's fences complete on a worker thread: a run's frees become reusable a little
         * earlier or later than the last run's, and the log does not say when (only how much
         * was pending at each fence): ResNet-50's peak differs by one 2 MiB segment between
         * recordings, and so may the replay's from its recording. */
        expect_faithful_within(names[i], record("bench/replay", args, big), 1, i == 0 ? 2 * MiB : 0);
        expect_faithful(names[i], record("bench/replay", args, capped), 0);
        unlink(txt);
    }
}
END_TEST

START_TEST(test_frees_at_once_never_reserve_more_than_waiting_for_fences)
{
    const char *path = record("tests/integration/demo_train", NULL, NULL);
    rd_log_t lf;
    rp_log_t log;
    load(path, &log, &lf);
    rp_cfg_t cfg;
    rp_cfg_recorded(&cfg);
    rp_result_t waited = replay_once(&log, &cfg);
    cfg.frees_at_once = 1;
    rp_result_t at_once = replay_once(&log, &cfg);
    ck_assert_msg(at_once.peak_reserved <= waited.peak_reserved, "at once %llu > waiting %llu",
                  (unsigned long long)at_once.peak_reserved, (unsigned long long)waited.peak_reserved);
    rp_log_free(&log);
    rd_close(&lf);
}
END_TEST

START_TEST(test_parallel_replays_give_what_one_at_a_time_gives)
{
    classic_pool_test();
    const char *path = record("tests/integration/oom_split", NULL, NULL);
    rd_log_t lf;
    rp_log_t log;
    load(path, &log, &lf);
    rp_cfg_t cfgs[6];
    rp_result_t par[6];
    for (int i = 0; i < 6; i++) {
        rp_cfg_recorded(&cfgs[i]);
        cfgs[i].max_split = i ? (32 * MiB) << i : 0;
    }
    replay_many(&log, cfgs, par, 6, 3, NULL, NULL);
    for (int i = 0; i < 6; i++) {
        rp_result_t one = replay_once(&log, &cfgs[i]);
        ck_assert_msg(one.peak_reserved == par[i].peak_reserved && one.failures == par[i].failures,
                      "config %d: alone %llu/%llu, in parallel %llu/%llu", i, (unsigned long long)one.peak_reserved,
                      (unsigned long long)one.failures, (unsigned long long)par[i].peak_reserved,
                      (unsigned long long)par[i].failures);
    }
    ck_assert_msg(par[0].failures && !par[1].failures, "a 64 MiB split limit should get oom_split past its OOM");
    rp_log_free(&log);
    rd_close(&lf);
}
END_TEST

static void expect_same_result(const char *what, const rp_result_t *a, const rp_result_t *b)
{
    ck_assert_msg(a->events == b->events && a->peak_reserved == b->peak_reserved &&
                      a->peak_allocated == b->peak_allocated && a->frag_at_peak == b->frag_at_peak &&
                      a->failures == b->failures && a->recorded_failed == b->recorded_failed &&
                      a->new_failures == b->new_failures && a->divergences == b->divergences &&
                      (!a->failures || (a->first.record == b->first.record && a->first.live == b->first.live &&
                                        a->last.record == b->last.record)),
                  "%s: fresh peak %llu, %llu failures; on reused storage peak %llu, %llu failures", what,
                  (unsigned long long)a->peak_reserved, (unsigned long long)a->failures,
                  (unsigned long long)b->peak_reserved, (unsigned long long)b->failures);
}

/* Replays reuse the storage of the ones before (their arrays and block structs): what one
 * leaves behind, another log's included, must not change the next one's result. */
START_TEST(test_a_replay_on_reused_storage_gives_what_a_fresh_one_gives)
{
    static const char *const logs[] = {"tests/fixtures/h200_scen_leak_own.gmlog",
                                       "tests/fixtures/h200_scen_frag_own.gmlog",
                                       "tests/fixtures/h200_scen_transient_keep.gmlog"};
    rd_log_t lf[3];
    rp_log_t log[3];
    for (int i = 0; i < 3; i++)
        load(logs[i], &log[i], &lf[i]);
    replay_stash_free();
    replay_t *prev = NULL;
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 3; i++) {
            rp_cfg_t cfg;
            rp_cfg_recorded(&cfg);
            cfg.frees_at_once = round == 1;
            if (round == 2) /* most allocations fail: their frees must find no block left over */
                cfg.device_bytes = log[i].total - log[i].base_cap + 64 * MiB;
            replay_t fresh;
            ck_assert(replay_init(&fresh, &log[i], &cfg) == 0);
            replay_run(&fresh, log[i].nev);
            replay_t *r = replay_start(&log[i], &cfg);
            ck_assert_msg(r != NULL, "replay_start failed");
            ck_assert_msg(!prev || r == prev, "%s: the last replay's storage was not reused", logs[i]);
            replay_run(r, log[i].nev);
            expect_same_result(logs[i], &fresh.res, &r->res);
            replay_free(&fresh);
            replay_end(r);
            prev = r;
        }
    replay_stash_free();
    for (int i = 0; i < 3; i++) {
        rp_log_free(&log[i]);
        rd_close(&lf[i]);
    }
}
END_TEST

Suite *analyzer_replay_suite(void)
{
    Suite *s = suite_create("analyzer_replay");
    TCase *tc = tcase_create("fidelity");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_replay_reproduces_each_workloads_peak_and_ooms);
    tcase_add_test(tc, test_an_oom_under_the_plan_records_the_planned_blocks_as_live);
    tcase_add_test(tc, test_replay_reproduces_each_fixtures_peak_and_oom);
    tcase_add_test(tc, test_the_log_tells_a_thread_caches_hits_and_the_replay_follows_them);
    tcase_add_test(tc, test_replay_of_a_hand_written_log_fails_where_it_failed);
    tcase_add_test(tc, test_replay_reproduces_a_caching_allocators_exact_segments);
    tcase_add_test(tc, test_recovered_ooms_before_exact_segments_move_the_drivers_capacity_on);
    tcase_add_test(tc, test_the_shim_and_the_replay_agree_on_every_turn_of_the_grow_sequence);
    tcase_add_test(tc, test_replay_follows_a_generated_logs_segments);
    tcase_add_test(tc, test_replay_reproduces_the_real_traces);
    tcase_add_test(tc, test_frees_at_once_never_reserve_more_than_waiting_for_fences);
    tcase_add_test(tc, test_parallel_replays_give_what_one_at_a_time_gives);
    tcase_add_test(tc, test_a_replay_on_reused_storage_gives_what_a_fresh_one_gives);
    suite_add_tcase(s, tc);
    return s;
}
