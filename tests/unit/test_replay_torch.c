/* Unit tests of the model of PyTorch's caching allocator (analyzer/replay_torch*.c, whatif_torch.c):
 * each rule on a small log written by hand (rounding, the two pools' segments, splitting, oversize
 * blocks, expandable segments' pages, their unmapping and OOM retry, garbage collection under a
 * fraction), then fidelity: under its own settings the model reserves exactly what PyTorch
 * reserved in every keep-mode fixture, and whatif prints PyTorch's settings and the grid. */
#include "replay.h"
#include "replay_torch.h"
#include "replay_torch_set.h"
#include "suites.h"
#include "test_analyzer_cli.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB ((uint64_t)1 << 20)

static rt_log_t hand_log(uint64_t cap)
{
    rt_log_t log;
    memset(&log, 0, sizeof log);
    log.cap = cap;
    log.total = cap;
    return log;
}

static void alloc(rt_log_t *l, uint32_t id, uint64_t size, unsigned stream)
{
    ck_assert_msg(replay_torch_append(l, RT_ALLOC, size, id, stream) == 0, "append");
}

static void release(rt_log_t *l, uint32_t id)
{
    ck_assert_msg(replay_torch_append(l, RT_FREE, 0, id, 0) == 0, "append");
}

static rt_result_t run(const rt_log_t *l, int expandable, uint64_t max_split)
{
    rt_conf_t c;
    memset(&c, 0, sizeof c);
    c.expandable = expandable;
    c.max_split = max_split;
    return replay_torch_run(l, &c);
}

/* The chunked set keeps (size, address) order through thousands of inserts and erases, across
 * chunk splits and emptied chunks, and finds the first block not below a key. */
/* A recommended PYTORCH_CUDA_ALLOC_CONF keeps the job's own keys that the model does not decide
 * (PyTorch rejects no key it knows; dropping per_process_memory_fraction would lift the job's
 * cap): the model's keys first, the job's others after in their order, a key both name the
 * model's, a list of roundup_power2_divisions (which the model does not follow) kept. */
START_TEST(test_a_recommended_conf_keeps_the_jobs_other_keys)
{
    static const struct {
        const char *raw, *text, *want;
    } cases[] = {
        {"", "expandable_segments:True", "expandable_segments:True"},
        {"per_process_memory_fraction:0.5", "expandable_segments:True",
         "expandable_segments:True,per_process_memory_fraction:0.5"},
        {"max_split_size_mb:512, pinned_use_cuda_host_register:True,garbage_collection_threshold:0.6",
         "max_split_size_mb:128", "max_split_size_mb:128,pinned_use_cuda_host_register:True"},
        {"per_process_memory_fraction:0.5,expandable_segments:False", "per_process_memory_fraction:0.6",
         "per_process_memory_fraction:0.6"},
        {"roundup_power2_divisions:[256:1,512:2,>:4]", "expandable_segments:True",
         "expandable_segments:True,roundup_power2_divisions:[256:1,512:2,>:4]"},
        {"backend:native,release_lock_on_cudamalloc:True", "", "release_lock_on_cudamalloc:True"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char buf[256];
        const char *got = replay_torch_conf_merge(cases[i].raw, cases[i].text, buf, sizeof buf);
        ck_assert_msg(got && !strcmp(got, cases[i].want), "'%s' run as '%s': '%s', want '%s'", cases[i].raw,
                      cases[i].text, got ? got : "(null)", cases[i].want);
    }
    char small[16];
    ck_assert_msg(!replay_torch_conf_merge("per_process_memory_fraction:0.5", "expandable_segments:True", small,
                                           sizeof small),
                  "a value too long to hold was cut");
}
END_TEST

START_TEST(test_the_free_block_set_stays_ordered)
{
    enum { N = 5000 };
    static rt_blk_t b[N];
    rt_set_t s;
    memset(&s, 0, sizeof s);
    srand(3);
    for (int i = 0; i < N; i++) {
        b[i].size = (uint64_t)(rand() % 64) * 512, b[i].addr = (uint64_t)i * 4096;
        ck_assert(rt_set_insert(&s, &b[i]) == 0);
    }
    for (int i = 0; i < N; i += 3)
        rt_set_erase(&s, &b[i]);
    rt_set_erase(&s, &b[0]); /* gone already: nothing */
    size_t n = 0;
    rt_blk_t **all = rt_set_list(&s, &n);
    ck_assert_msg(n == s.n && n == N - (N + 2) / 3, "%zu blocks listed, %zu counted", n, s.n);
    for (size_t i = 1; i < n; i++)
        ck_assert_msg(all[i - 1]->size < all[i]->size ||
                          (all[i - 1]->size == all[i]->size && all[i - 1]->addr < all[i]->addr),
                      "out of order at %zu", i);
    rt_blk_t *first = rt_set_get(&s, rt_set_lower(&s, 10 * 512, 0));
    for (size_t i = 0; i < n; i++)
        if (all[i]->size >= 10 * 512) {
            ck_assert_msg(first == all[i], "lower bound: %p, first not below %p", (void *)first, (void *)all[i]);
            break;
        }
    ck_assert(rt_set_last(&s) == all[n - 1] && !rt_set_get(&s, rt_set_lower(&s, 1ull << 40, 0)));
    for (size_t i = 0; i < n; i++)
        rt_set_erase(&s, all[i]);
    ck_assert_msg(s.n == 0 && s.nc == 0 && !rt_set_last(&s), "%zu left in %zu chunks", s.n, s.nc);
    free(all);
    rt_set_free(&s);
}
END_TEST

START_TEST(test_sizes_round_to_512_bytes_or_power2_divisions)
{
    ck_assert_uint_eq(replay_torch_round(1, 0), 512);
    ck_assert_uint_eq(replay_torch_round(513, 0), 1024);
    ck_assert_uint_eq(replay_torch_round(1258291, 0), 1258496);          /* 1.2 MiB: to 512 bytes */
    ck_assert_uint_eq(replay_torch_round(1258291, 4), 1310720);          /* ...to a quarter step: 1.25 MiB */
    ck_assert_uint_eq(replay_torch_round(4 * MiB, 4), 4 * MiB);          /* a power of two stays */
    ck_assert_uint_eq(replay_torch_round(5 * MiB + 1, 2), 6 * MiB);      /* halves between 4 and 8 MiB */
    ck_assert_uint_eq(replay_torch_round(1000, 4), 1024);                /* small: 512-byte steps */
    ck_assert_uint_eq(replay_torch_round(1258291, 1), 1258496);          /* one division: 512 bytes too */
}
END_TEST

/* Small requests share 2 MiB segments, 1-10 MiB ones take 20 MiB, larger ones their own size. */
START_TEST(test_segments_are_2_mib_20_mib_or_the_request)
{
    rt_log_t l = hand_log(1ull << 34);
    alloc(&l, 0, 1000, 0);
    alloc(&l, 1, 1000, 0);
    alloc(&l, 2, 12 * MiB + 1, 0); /* 14 MiB, 1.5 MiB of it left free */
    alloc(&l, 3, 3 * MiB, 0);
    rt_result_t r = run(&l, 0, 0);
    ck_assert_msg(r.peak_reserved == 2 * MiB + 20 * MiB + 14 * MiB && r.segments == 3,
                  "reserved %llu in %llu segments", (unsigned long long)r.peak_reserved, (unsigned long long)r.segments);
    replay_torch_free(&l);
}
END_TEST

/* A freed 20 MiB segment is split for the next request; an oversize block (max_split_size_mb) is
 * not: a smaller request takes a new segment. */
START_TEST(test_oversize_blocks_are_not_split_under_max_split)
{
    rt_log_t l = hand_log(1ull << 34);
    alloc(&l, 0, 32 * MiB, 0);
    release(&l, 0);
    alloc(&l, 1, 12 * MiB, 0);
    rt_result_t plain = run(&l, 0, 0), capped = run(&l, 0, 16 * MiB);
    ck_assert_msg(plain.peak_reserved == 32 * MiB, "split: %llu", (unsigned long long)plain.peak_reserved);
    ck_assert_msg(capped.peak_reserved == 32 * MiB + 12 * MiB, "oversize kept whole: %llu",
                  (unsigned long long)capped.peak_reserved);
    replay_torch_free(&l);
}
END_TEST

/* Streams do not share blocks. */
START_TEST(test_a_free_block_serves_only_its_stream)
{
    rt_log_t l = hand_log(1ull << 34);
    alloc(&l, 0, 32 * MiB, 0);
    release(&l, 0);
    alloc(&l, 1, 32 * MiB, 1);
    rt_result_t r = run(&l, 0, 0);
    ck_assert_msg(r.peak_reserved == 64 * MiB, "reserved %llu", (unsigned long long)r.peak_reserved);
    replay_torch_free(&l);
}
END_TEST

/* Expandable segments map 2 MiB pages for the small pool and 20 MiB pages for the large, and a
 * request is served from the mapped free end before more is mapped. */
START_TEST(test_expandable_segments_map_2_and_20_mib_pages)
{
    rt_log_t l = hand_log(1ull << 34);
    alloc(&l, 0, 1000, 0);
    alloc(&l, 1, 21 * MiB, 0);
    alloc(&l, 2, 5 * MiB, 0);  /* in the 19 MiB left mapped */
    alloc(&l, 3, 15 * MiB, 0); /* 14 MiB left: one more page */
    rt_result_t r = run(&l, 1, 0);
    ck_assert_msg(r.peak_reserved == 2 * MiB + 60 * MiB, "reserved %llu", (unsigned long long)r.peak_reserved);
    replay_torch_free(&l);
}
END_TEST

/* At empty_cache the pages wholly inside free blocks are unmapped; a page that also holds a live
 * tensor stays. */
START_TEST(test_expandable_pages_unmap_only_when_wholly_free)
{
    rt_log_t l = hand_log(1ull << 34);
    alloc(&l, 0, 30 * MiB, 0); /* [0, 30): pages 0-1 */
    alloc(&l, 1, 20 * MiB, 0); /* [30, 50): page 2 */
    release(&l, 0);
    ck_assert(replay_torch_append(&l, RT_EMPTY, 0, 0, 0) == 0);
    rt_result_t r = run(&l, 1, 0);
    ck_assert_msg(r.peak_reserved == 60 * MiB && r.reserved == 40 * MiB, "peak %llu, after empty_cache %llu",
                  (unsigned long long)r.peak_reserved, (unsigned long long)r.reserved);
    release(&l, 1);
    ck_assert(replay_torch_append(&l, RT_EMPTY, 0, 0, 0) == 0);
    r = run(&l, 1, 0);
    ck_assert_msg(r.reserved == 0, "all free, still mapped %llu", (unsigned long long)r.reserved);
    replay_torch_free(&l);
}
END_TEST

/* Out of device memory, expandable segments unmap the free pages and map them where the request
 * needs them: the request fits where the classic allocator, whose free segment is too small,
 * raises OutOfMemoryError. */
START_TEST(test_expandable_oom_retry_unmaps_free_pages_first)
{
    rt_log_t l = hand_log(60 * MiB);
    l.total = 1ull << 30; /* the segment's range spans 1.125 x the device, not the room left */
    alloc(&l, 0, 40 * MiB, 0);
    alloc(&l, 1, 5 * MiB, 0);
    release(&l, 0);
    ck_assert(replay_torch_append(&l, RT_OOM, 50 * MiB, 0, 0) == 0);
    rt_result_t classic = run(&l, 0, 0), exp = run(&l, 1, 0);
    ck_assert_msg(classic.recorded_failed == 1 && classic.failures == 1, "classic: %llu failed",
                  (unsigned long long)classic.failures);
    ck_assert_msg(exp.recorded_passed == 1 && exp.failures == 0 && exp.peak_reserved == 60 * MiB,
                  "expandable: %llu failed, peak %llu", (unsigned long long)exp.failures,
                  (unsigned long long)exp.peak_reserved);
    replay_torch_free(&l);
}
END_TEST

/* garbage_collection_threshold under a memory fraction: above it, whole free segments go back
 * before a new one is made; without it they stay cached. */
START_TEST(test_garbage_collection_frees_old_segments_above_the_threshold)
{
    rt_log_t l = hand_log(1ull << 34);
    ck_assert(replay_torch_append(&l, RT_LIMIT, 200 * MiB, 0, 0) == 0);
    alloc(&l, 0, 60 * MiB, 0);
    release(&l, 0);
    alloc(&l, 1, 70 * MiB, 1);
    rt_conf_t c;
    memset(&c, 0, sizeof c);
    rt_result_t plain = replay_torch_run(&l, &c);
    c.gc_threshold = 0.25;
    rt_result_t gc = replay_torch_run(&l, &c);
    ck_assert_msg(plain.peak_reserved == 130 * MiB && gc.peak_reserved == 70 * MiB, "peaks %llu / %llu",
                  (unsigned long long)plain.peak_reserved, (unsigned long long)gc.peak_reserved);
    replay_torch_free(&l);
}
END_TEST

/* PyTorch's memory fraction, logged at its OOM, is in force from the start: a segment that would
 * pass it is made only after the cache is released. */
START_TEST(test_the_memory_fraction_holds_from_the_start)
{
    rt_log_t l = hand_log(1ull << 34);
    l.torch_limit = 60 * MiB;
    alloc(&l, 0, 40 * MiB, 0);
    release(&l, 0);
    alloc(&l, 1, 50 * MiB, 1);
    ck_assert(replay_torch_append(&l, RT_LIMIT, 60 * MiB, 0, 0) == 0);
    rt_result_t r = run(&l, 0, 0);
    ck_assert_msg(r.peak_reserved == 50 * MiB && r.failures == 0, "peak %llu, %llu failures",
                  (unsigned long long)r.peak_reserved, (unsigned long long)r.failures);
    replay_torch_free(&l);
}
END_TEST

START_TEST(test_alloc_conf_parses_and_prints_back)
{
    rt_conf_t c;
    memset(&c, 0, sizeof c);
    ck_assert(replay_torch_conf_parse("max_split_size_mb:128,expandable_segments:True,pinned_use_cuda_host_register:True,"
                                      "roundup_power2_divisions:4,garbage_collection_threshold:0.6", &c) == 0);
    char buf[200];
    ck_assert_str_eq(replay_torch_conf_text(&c, buf, sizeof buf), "expandable_segments:True,max_split_size_mb:128,"
                     "roundup_power2_divisions:4,garbage_collection_threshold:0.6");
    memset(&c, 0, sizeof c);
    ck_assert(replay_torch_conf_parse("pinned_use_cuda_host_register:True", &c) == -1);
    ck_assert_str_eq(replay_torch_conf_text(&c, buf, sizeof buf), "");
}
END_TEST

/* A damaged log: frees of unknown ids, ids out of range, a double allocation, a request no device
 * holds: no crash, no overflow. */
START_TEST(test_damaged_events_are_skipped)
{
    rt_log_t l = hand_log(1ull << 34);
    release(&l, 7);
    alloc(&l, 0, 4 * MiB, 0);
    alloc(&l, 0, 4 * MiB, 0);
    l.ev[l.nev - 1].id = 1u << 30; /* beyond nids */
    alloc(&l, 1, 0, 40);
    alloc(&l, 2, UINT64_MAX, 0); /* no device holds it: a failure, no overflow */
    release(&l, 0);
    release(&l, 0);
    rt_result_t r = run(&l, 1, 0);
    ck_assert_msg(r.failures == 1 && r.reserved == 20 * MiB + 2 * MiB, "failures %llu, reserved %llu",
                  (unsigned long long)r.failures, (unsigned long long)r.reserved);
    replay_torch_free(&l);
}
END_TEST

/* Fidelity: the model under each keep-mode fixture's own settings reserves exactly PyTorch's
 * max_memory_reserved and fails at its OutOfMemoryError; the log recorded without the bridge
 * (PyTorch's segments only) replays to its recorded peak through the pool. */
START_TEST(test_native_model_reproduces_every_keep_fixtures_peak_exactly)
{
    glob_t g;
    ck_assert_msg(glob("tests/fixtures/*keep*.gmlog", 0, NULL, &g) == 0 && g.gl_pathc >= 4, "no keep fixtures");
    for (size_t i = 0; i < g.gl_pathc; i++) {
        rd_log_t lf;
        rt_log_t l;
        ck_assert_msg(rd_open_path(&lf, g.gl_pathv[i]) == 0, "%s", g.gl_pathv[i]);
        ck_assert_msg(replay_torch_load(&l, &lf, 0) == 0, "%s: no tensors", g.gl_pathv[i]);
        rt_result_t r = replay_torch_run(&l, &l.conf);
        ck_assert_msg(l.peak_reserved_recorded && r.peak_reserved == l.peak_reserved_recorded,
                      "%s: modelled %llu, PyTorch reserved %llu", g.gl_pathv[i], (unsigned long long)r.peak_reserved,
                      (unsigned long long)l.peak_reserved_recorded);
        ck_assert_msg(r.recorded_failed == l.nooms && r.new_failures == 0, "%s: %llu of %llu OOMs, %llu new",
                      g.gl_pathv[i], (unsigned long long)r.recorded_failed, (unsigned long long)l.nooms,
                      (unsigned long long)r.new_failures);
        replay_torch_free(&l);
        rd_close(&lf);
    }
    globfree(&g);
    rd_log_t lf;
    rt_log_t l;
    rp_log_t rl;
    const char *segs = "tests/fixtures/h200_torch_leak_oom.gmlog";
    ck_assert(rd_open_path(&lf, segs) == 0);
    ck_assert_msg(replay_torch_load(&l, &lf, 0) == 1, "%s has no tensors", segs);
    ck_assert(rp_load(&rl, &lf, 0) == 0);
    ck_assert_msg(rl.recorded.peak_reserved == rl.peak_reserved_recorded, "%s: replayed %llu, recorded %llu", segs,
                  (unsigned long long)rl.recorded.peak_reserved, (unsigned long long)rl.peak_reserved_recorded);
    rp_log_free(&rl);
    rd_close(&lf);
}
END_TEST

/* A trace of ../shared/traces (a <t> <tid> <ptr> <bytes> / f <t> <tid> <ptr>, every tensor of a
 * run without PyTorch's cache) as the model's events: allocations and frees by tensor id. */
static void trace_load(const char *xz, rt_log_t *l)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "xz -dc '%s'", xz);
    FILE *f = popen(cmd, "r");
    ck_assert_msg(f != NULL, "%s", cmd);
    enum { CAP = 1 << 20 };
    uint64_t *key = calloc(CAP, sizeof *key);
    uint32_t *val = calloc(CAP, sizeof *val), *spare = malloc(CAP * sizeof *spare);
    ck_assert(key && val && spare);
    uint32_t next = 0, nspare = 0;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        char c;
        unsigned long long t, tid, ptr, bytes = 0;
        if (sscanf(line, "%c %llu %llu %llx %llu", &c, &t, &tid, &ptr, &bytes) < 4 || !ptr)
            continue;
        size_t i = (size_t)((ptr * 0x9E3779B97F4A7C15ull) >> 44);
        while (key[i] && key[i] != ptr)
            i = (i + 1) & (CAP - 1);
        if (c == 'a') {
            uint32_t id = nspare ? spare[--nspare] : next++;
            key[i] = ptr, val[i] = id;
            ck_assert(replay_torch_append_at(l, RT_ALLOC, bytes, id, 0, t, 0) == 0);
        } else if (key[i] == ptr) {
            spare[nspare++] = val[i];
            ck_assert(replay_torch_append_at(l, RT_FREE, 0, val[i], 0, t, 0) == 0);
            key[i] = 0; /* the entries after it, put back where a search finds them */
            for (size_t j = (i + 1) & (CAP - 1); key[j]; j = (j + 1) & (CAP - 1)) {
                uint64_t k = key[j];
                uint32_t v = val[j];
                key[j] = 0;
                size_t h = (size_t)((k * 0x9E3779B97F4A7C15ull) >> 44);
                while (key[h])
                    h = (h + 1) & (CAP - 1);
                key[h] = k, val[h] = v;
            }
        }
    }
    pclose(f);
    free(key);
    free(val);
    free(spare);
}

/* The real traces (../shared/traces, only where $GMSHIM_TEST_TRACES names their folder): the
 * model with PyTorch's defaults reserves and allocates what PyTorch's own allocator did on the same
 * loops (ResNet-50 7.53 / 6.19 GB, GPT-2 26.25 / 25.39 GB, as measured to 10 MB), and
 * max_split_size_mb with expandable segments reserves far more than expandable segments alone,
 * as PyTorch's own report saw. */
START_TEST(test_native_model_reproduces_pytorchs_reserved_on_the_real_traces)
{
    const char *dir = getenv("GMSHIM_TEST_TRACES");
    if (!dir || !*dir || system("command -v xz >/dev/null 2>&1") != 0) {
        fputs("note: GMSHIM_TEST_TRACES unset or no xz: the model on the real traces not checked\n", stderr);
        return;
    }
    static const struct {
        const char *name;
        double reserved, allocated; /* GB, PyTorch's max_memory_reserved / allocated (README) */
    } tr[] = {{"trace-resnet50", 7.53, 6.19}, {"trace-gpt2", 26.25, 25.39}};
    for (size_t i = 0; i < 2; i++) {
        char xz[600];
        snprintf(xz, sizeof xz, "%s/%s.txt.xz", dir, tr[i].name);
        if (access(xz, R_OK) != 0) {
            fprintf(stderr, "note: %s missing: not checked\n", xz);
            continue;
        }
        rt_log_t l = hand_log(140ull << 30);
        trace_load(xz, &l);
        rt_result_t r = run(&l, 0, 0), exp = run(&l, 1, 0), both = run(&l, 1, 128 * MiB);
        double res = (double)r.peak_reserved / 1e9, alloc = (double)r.peak_allocated / 1e9;
        ck_assert_msg(res > tr[i].reserved - 0.005 && res < tr[i].reserved + 0.005 && alloc > tr[i].allocated - 0.005 &&
                          alloc < tr[i].allocated + 0.005,
                      "%s: modelled %.3f / %.3f GB, PyTorch %.2f / %.2f GB", tr[i].name, res, alloc, tr[i].reserved,
                      tr[i].allocated);
        ck_assert_msg(both.peak_reserved > exp.peak_reserved + exp.peak_reserved / 2, "%s: with max_split %llu, without %llu",
                      tr[i].name, (unsigned long long)both.peak_reserved, (unsigned long long)exp.peak_reserved);
        replay_torch_free(&l);
    }
}
END_TEST

/* whatif on a keep-mode log prints PyTorch's settings by name, the grid its combinations, marks
 * the one the recommendation names, and flags the pair PyTorch's own report saw misbehave (never
 * recommended). */
START_TEST(test_whatif_prints_pytorch_settings_and_the_grid)
{
    char *out = NULL;
    int rc = gm(&out, "--color=never", "whatif", "tests/fixtures/h200_scen_frag_keep.gmlog");
    ck_assert_msg(strstr(out, "  expandable_segments:True") && strstr(out, "  max_split_size_mb:128") &&
                      strstr(out, "(PyTorch's defaults) (as run)") &&
                      strstr(out, "recommendation: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True:") &&
                      strstr(out, "  expandable_segments:True  <- recommended"),
                  "whatif %d:\n%s", rc, out);
    free(out);
    rc = gm(&out, "--color=never", "whatif", "--grid", "tests/fixtures/h200_scen_frag_keep.gmlog");
    ck_assert_msg(strstr(out, "expandable_segments:True,max_split_size_mb:128,roundup_power2_divisions:4") &&
                      strstr(out, "known to misbehave") &&
                      strstr(out, "  expandable_segments:True,roundup_power2_divisions:4  <- recommended"),
                  "whatif --grid %d:\n%s", rc, out);
    free(out);
    rc = gm(&out, "--json", "whatif", "tests/fixtures/h200_scen_frag_keep.gmlog");
    ck_assert_msg(strstr(out, "\"torch_replays\":[") && strstr(out, "\"as_recorded\":true") &&
                      strstr(out, "\"torch_recorded_peak_reserved\":1610612736"),
                  "whatif --json %d:\n%s", rc, out);
    free(out);
}
END_TEST

Suite *analyzer_replay_torch_suite(void)
{
    Suite *s = suite_create("analyzer_replay_torch");
    TCase *tc = tcase_create("rules");
    tcase_add_test(tc, test_the_free_block_set_stays_ordered);
    tcase_add_test(tc, test_a_recommended_conf_keeps_the_jobs_other_keys);
    tcase_add_test(tc, test_sizes_round_to_512_bytes_or_power2_divisions);
    tcase_add_test(tc, test_segments_are_2_mib_20_mib_or_the_request);
    tcase_add_test(tc, test_oversize_blocks_are_not_split_under_max_split);
    tcase_add_test(tc, test_a_free_block_serves_only_its_stream);
    tcase_add_test(tc, test_expandable_segments_map_2_and_20_mib_pages);
    tcase_add_test(tc, test_expandable_pages_unmap_only_when_wholly_free);
    tcase_add_test(tc, test_expandable_oom_retry_unmaps_free_pages_first);
    tcase_add_test(tc, test_garbage_collection_frees_old_segments_above_the_threshold);
    tcase_add_test(tc, test_the_memory_fraction_holds_from_the_start);
    tcase_add_test(tc, test_alloc_conf_parses_and_prints_back);
    tcase_add_test(tc, test_damaged_events_are_skipped);
    suite_add_tcase(s, tc);
    tc = tcase_create("fidelity");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_native_model_reproduces_every_keep_fixtures_peak_exactly);
    tcase_add_test(tc, test_whatif_prints_pytorch_settings_and_the_grid);
    tcase_add_test(tc, test_native_model_reproduces_pytorchs_reserved_on_the_real_traces);
    suite_add_tcase(s, tc);
    return s;
}
