/* The steps of an unmarked run (analyzer/model_steps.c): training loops written record by
 * record — leaking, with an eval every few steps, with marks — and a program with no repeating
 * structure; their steps counted, their leak's bytes and its one rate in leaks, oom and report. */
#include "model.h"
#include "reader.h"
#include "suites.h"
#include "testlog.h"
#include "test_analyzer_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB ((uint64_t)1 << 20)
#define KEEP (16 * MiB)
#define WEIGHTS (256 * MiB)
#define OPT_STATE (64 * MiB)

typedef struct loop {
    unsigned steps;                /* the last one fails (an OOM) when oom is set */
    unsigned eval_every;           /* every n-th step ends with an eval (0: never) */
    int marks;                     /* gmshim_mark at each step's start */
    int oom;
    int random;                    /* no loop: bursts of random sizes at random sites */
    int varying;                   /* each step's activations sized by its own sequence length */
} loop_t;

/* A writer that starts a new chunk when the open one is full; a record every microsecond (the
 * model keeps times to 256 ns). */
typedef struct w {
    tlog_t b;
    uint64_t t, next_ptr, index;
    uint64_t live;
    uint64_t rng;
} w_t;

static void room(w_t *w, size_t len)
{
    if (w->b.len + len + 64 > w->b.chunk + GMLOG_CHUNK_SIZE) {
        w->index++;
        tlog_chunk(&w->b, 1, w->index, (uint32_t)w->index, w->t);
    }
}

static uint64_t w_alloc(w_t *w, uint64_t size, uint32_t site)
{
    room(w, 32);
    uint64_t p = w->next_ptr;
    w->next_ptr += (size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
    tlog_alloc(&w->b, w->t += 1000, p, size, 0, site);
    w->live += (size + 511) / 512 * 512;
    return p;
}

static void w_free(w_t *w, uint64_t p, uint64_t size)
{
    room(w, 24);
    tlog_free(&w->b, w->t += 1000, p);
    w->live -= (size + 511) / 512 * 512;
}

static uint64_t w_rand(w_t *w)
{
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    return w->rng;
}

/* A failed allocation of `request` with the live bytes then, as if others held the rest. */
static void w_oom(w_t *w, uint64_t request, uint32_t site)
{
    room(w, sizeof(gmlog_oom_t));
    gmlog_oom_t o = {.h = {GMLOG_OOM, 0, 0, GMLOG_OOM_RELEASED | GMLOG_OOM_RETRIED, 0}, .request = request,
                     .segment = request, .driver_free = 0, .driver_total = w->live + 8 * MiB,
                     .reserved = w->live + 8 * MiB, .allocated = w->live, .requested = w->live,
                     .largest_free = 2 * MiB, .free_blocks = 4, .site = site};
    tlog_rec(&w->b, &o, sizeof o, w->t += 1000);
}

/* One training step: a forward whose 16 MiB output is kept (the leak), the loss, a backward,
 * the optimizer; the first step also makes the optimizer's state (a warm-up unlike the others).
 * 0, or 1 when the OOM came (at the third activation of the last step). */
static int w_step(w_t *w, const loop_t *l, unsigned k)
{
    if (l->marks) {
        char label[32];
        snprintf(label, sizeof label, "step %u", k);
        room(w, 80);
        tlog_mark(&w->b, w->t += 1000, k, label);
    }
    static const uint64_t act_size[] = {8 * MiB, 8 * MiB, 4 * MiB, 4 * MiB, 4 * MiB, 1 * MiB};
    static const uint32_t act_site[] = {2, 3, 4, 4, 4, 5};
    uint64_t act[6], size[6];
    for (unsigned i = 0; i < 6; i++) {
        size[i] = l->varying ? act_size[i] / 4 * (1 + (k * 2654435761u >> 13) % 5) : act_size[i];
        if (l->oom && k == l->steps && i == 2) {
            w_oom(w, size[i], act_site[i]);
            return 1;
        }
        act[i] = w_alloc(w, size[i], act_site[i]);
    }
    w_alloc(w, KEEP, 6); /* kept in a list: never freed */
    uint64_t loss = w_alloc(w, 512, 7);
    uint64_t g1 = w_alloc(w, 8 * MiB, 8), g2 = w_alloc(w, 8 * MiB, 8);
    for (unsigned i = 6; i-- > 0;)
        w_free(w, act[i], size[i]);
    w_free(w, loss, 512);
    if (k == 1)
        w_alloc(w, OPT_STATE, 11);
    uint64_t tmp = w_alloc(w, 2 * MiB, 9);
    w_free(w, tmp, 2 * MiB);
    w_free(w, g2, 8 * MiB);
    w_free(w, g1, 8 * MiB);
    if (l->eval_every && k % l->eval_every == 0) { /* an eval: the forward's first key again, and more */
        uint64_t e[6];
        e[0] = w_alloc(w, 8 * MiB, 2);
        for (unsigned i = 1; i < 6; i++)
            e[i] = w_alloc(w, 4 * MiB, 10);
        for (unsigned i = 6; i-- > 0;)
            w_free(w, e[i], i ? 4 * MiB : 8 * MiB);
    }
    return 0;
}

/* Bursts of allocations of random sizes at random sites, each freed at the burst's end: troughs
 * between bursts, no sequence that repeats. */
static void w_random(w_t *w, unsigned bursts)
{
    for (unsigned k = 0; k < bursts; k++) {
        uint64_t p[40], sz[40];
        unsigned n = 5 + (unsigned)(w_rand(w) % 30);
        for (unsigned i = 0; i < n; i++) {
            sz[i] = (1 + w_rand(w) % 64) * MiB / 4;
            p[i] = w_alloc(w, sz[i], 2 + (uint32_t)(w_rand(w) % 9));
        }
        for (unsigned i = n; i-- > 0;)
            w_free(w, p[i], sz[i]);
    }
}

static void write_loop(const char *path, const loop_t *l)
{
    w_t w;
    memset(&w, 0, sizeof w);
    w.rng = 0x2545F4914F6CDD1Dull;
    w.next_ptr = 0x7f0000000000ull;
    tlog_begin(&w.b, 0);
    tlog_chunk(&w.b, 1, 0, 0, 0);
    tlog_device(&w.b, ++w.t, "Test", 8192 * MiB); /* room for the replay's own segments */
    for (uint32_t s = 1; s <= 11; s++)
        tlog_site(&w.b, ++w.t, s);
    w_alloc(&w, WEIGHTS, 1);
    if (l->random)
        w_random(&w, l->steps);
    else
        for (unsigned k = 1; k <= l->steps && !w_step(&w, l, k); k++)
            ;
    tlog_end_chunk(&w.b);
    ck_assert(tlog_write(&w.b, path) == 0);
    tlog_free_buf(&w.b);
}

/* The number after "key": at or after `from` in json; the test fails when there is none. */
static unsigned long long num_after(const char *json, const char *from, const char *key)
{
    const char *p = from ? strstr(json, from) : json;
    ck_assert_msg(p, "no %s in:\n%.4000s", from, json);
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    p = strstr(p, k);
    ck_assert_msg(p, "no %s after %s in:\n%.4000s", key, from ? from : "the start", json);
    return strtoull(p + strlen(k), NULL, 10);
}

static void build_model(const char *path, model_t *m, rd_log_t *lf)
{
    ck_assert_msg(rd_open_path(lf, path) == 0, "%s does not open", path);
    memset(m, 0, sizeof *m);
    model_build(m, lf, MODEL_SITES | MODEL_EPOCHS);
}

static int within_5_percent(unsigned long long got, unsigned long long want)
{
    return got * 100 >= want * 95 && got * 100 <= want * 105;
}

/* 219 steps, each keeping its 16 MiB output, the OOM in the 219th: 219 steps (218 whole and the
 * one that failed), 218 x 16 MiB leaked, the same 16 MiB per step in leaks, oom and report. */
START_TEST(test_unmarked_leaking_loop_counts_every_step_and_its_leak)
{
    char path[512];
    snprintf(path, sizeof path, "%s/unmarked_leak.gmlog", temp_dir());
    loop_t l = {.steps = 219, .oom = 1};
    write_loop(path, &l);
    const unsigned long long leaked = 218 * KEEP;

    char *out = NULL;
    int rc = gm(&out, "--json", "leaks", path);
    ck_assert_msg(rc == 0 && strstr(out, "\"epochs\":\"steps\""), "not counted in steps: rc %d\n%.4000s", rc, out);
    ck_assert_msg(num_after(out, NULL, "epoch_count") == 219, "steps counted:\n%.4000s", out);
    unsigned long long rate = num_after(out, "\"growing\":[", "bytes_per_epoch");
    ck_assert_msg(rate == KEEP, "leaks: %llu per step, want %llu", rate, (unsigned long long)KEEP);
    unsigned long long kept = num_after(out, "\"growing\":[", "kept_bytes");
    ck_assert_msg(within_5_percent(kept, leaked), "leaks: %llu kept, want about %llu", kept, leaked);
    free(out);

    rc = gm(&out, "--json", "oom", path);
    ck_assert_msg(rc == 0 && strstr(out, "\"cause\":\"leak\""), "oom: not a leak: rc %d\n%.6000s", rc, out);
    ck_assert_msg(strstr(out, "\"epochs\":\"steps\"") && num_after(out, "\"evidence\":", "epoch") == 219,
                  "the OOM's step is not 219:\n%.6000s", out);
    unsigned long long oom_rate = num_after(out, "\"replay\":", "leak_per_epoch");
    unsigned long long oom_leaked = num_after(out, "\"replay\":", "leaked");
    ck_assert_msg(oom_rate == rate, "oom: %llu per step, leaks: %llu", oom_rate, rate);
    ck_assert_msg(within_5_percent(oom_leaked, leaked), "oom: %llu leaked, want about %llu", oom_leaked, leaked);
    ck_assert_msg(num_after(out, "\"growing_sites\":[", "bytes_per_epoch") == rate, "oom's site rate:\n%.6000s", out);
    free(out);

    rc = gm(&out, "--json", "report", path);
    ck_assert_msg(rc == 0, "report: rc %d\n%.4000s", rc, out);
    ck_assert_msg(num_after(out, "\"growing\":[", "bytes_per_epoch") == rate &&
                      num_after(out, "\"replay\":", "leak_per_epoch") == rate,
                  "report: the rates differ from %llu:\n%.8000s", rate, out);
    free(out);
    unlink(path);
}
END_TEST

/* The parallel replay (windows read by threads) opens the same steps as the ordered one. */
START_TEST(test_steps_are_the_same_in_the_parallel_replay)
{
    char path[512];
    snprintf(path, sizeof path, "%s/unmarked_parallel.gmlog", temp_dir());
    loop_t l = {.steps = 219, .oom = 0};
    write_loop(path, &l);
    char *a = NULL, *b = NULL;
    setenv("GMSHIM_ANALYZER_THREADS", "0", 1);
    int ra = gm(&a, "--json", "leaks", path);
    setenv("GMSHIM_ANALYZER_THREADS", "4", 1);
    int rb = gm(&b, "--json", "leaks", path);
    unsetenv("GMSHIM_ANALYZER_THREADS");
    ck_assert_msg(ra == 0 && rb == 0 && num_after(a, NULL, "epoch_count") == 219, "in order: rc %d\n%.3000s", ra, a);
    const char *ja = strstr(a, "\"leaks\":"), *jb = strstr(b, "\"leaks\":");
    ck_assert_msg(ja && jb && !strcmp(ja, jb), "in order:\n%.3000s\nin parallel:\n%.3000s", a, b);
    free(a);
    free(b);
    unlink(path);
}
END_TEST

/* Every 10th step also runs an eval whose first allocation is the forward's: still one step each. */
START_TEST(test_an_eval_every_tenth_step_is_no_step_of_its_own)
{
    char path[512];
    snprintf(path, sizeof path, "%s/unmarked_eval.gmlog", temp_dir());
    loop_t l = {.steps = 219, .eval_every = 10, .oom = 1};
    write_loop(path, &l);
    char *out = NULL;
    int rc = gm(&out, "--json", "leaks", path);
    ck_assert_msg(rc == 0 && strstr(out, "\"epochs\":\"steps\"") && num_after(out, NULL, "epoch_count") == 219,
                  "steps with evals: rc %d\n%.4000s", rc, out);
    ck_assert_msg(num_after(out, "\"growing\":[", "bytes_per_epoch") == KEEP, "the rate:\n%.4000s", out);
    free(out);
    rc = gm(&out, "--json", "oom", path);
    ck_assert_msg(rc == 0 && num_after(out, "\"evidence\":", "epoch") == 219, "the OOM's step:\n%.6000s", out);
    free(out);
    unlink(path);
}
END_TEST

/* Sequences of other lengths: each step's activations differ in size, not in line; the steps are
 * found by call site alone. */
START_TEST(test_steps_whose_sizes_vary_are_found_by_their_lines)
{
    char path[512];
    snprintf(path, sizeof path, "%s/unmarked_varying.gmlog", temp_dir());
    loop_t l = {.steps = 219, .oom = 1, .varying = 1};
    write_loop(path, &l);
    rd_log_t lf;
    model_t m;
    build_model(path, &m, &lf);
    ck_assert_msg(m.stepkeys && m.stepkeys[0].any_size && m.dev[0]->epoch[EPOCH_TROUGHS] == 219,
                  "steps by line: %u (period %u)", m.dev[0]->epoch[EPOCH_TROUGHS], m.stepkeys ? m.stepkeys[0].period : 0);
    model_free(&m);
    rd_close(&lf);
    char *out = NULL;
    int rc = gm(&out, "--json", "leaks", path);
    ck_assert_msg(rc == 0 && num_after(out, "\"growing\":[", "bytes_per_epoch") == KEEP &&
                      within_5_percent(num_after(out, "\"growing\":[", "kept_bytes"), 218 * KEEP),
                  "leaks: rc %d\n%.4000s", rc, out);
    free(out);
    unlink(path);
}
END_TEST

/* Bursts with nothing that repeats: no period; the low-water troughs count the iterations. */
START_TEST(test_no_repeating_structure_falls_back_to_troughs)
{
    char path[512];
    snprintf(path, sizeof path, "%s/unmarked_random.gmlog", temp_dir());
    loop_t l = {.steps = 200, .random = 1};
    write_loop(path, &l);
    rd_log_t lf;
    model_t m;
    build_model(path, &m, &lf);
    ck_assert_msg(!m.stepkeys, "a period found in random bursts: %u allocations a step",
                  m.stepkeys ? m.stepkeys[0].period : 0);
    ck_assert_msg(m.dev[0] && m.dev[0]->epoch[EPOCH_TROUGHS] >= 3, "no troughs: %u",
                  m.dev[0] ? m.dev[0]->epoch[EPOCH_TROUGHS] : 0);
    ck_assert_str_eq(model_epoch_noun(&m, 0, EPOCH_TROUGHS, 1), "troughs");
    model_free(&m);
    rd_close(&lf);
    unlink(path);
}
END_TEST

/* Marks win: the same loop with a mark per step is counted by its marks, the period left unsought. */
START_TEST(test_a_marked_loop_is_counted_by_its_marks)
{
    char path[512];
    snprintf(path, sizeof path, "%s/marked_leak.gmlog", temp_dir());
    loop_t l = {.steps = 219, .marks = 1, .oom = 1};
    write_loop(path, &l);
    rd_log_t lf;
    model_t m;
    build_model(path, &m, &lf);
    ck_assert_msg(!m.stepkeys && model_epoch_system(&m, 0, 3) == EPOCH_MARKS && m.dev[0]->epoch[EPOCH_MARKS] == 219,
                  "marks: %u, system %d, period sought: %d", m.dev[0]->epoch[EPOCH_MARKS], model_epoch_system(&m, 0, 3),
                  m.stepkeys != NULL);
    model_free(&m);
    rd_close(&lf);
    char *out = NULL;
    int rc = gm(&out, "--json", "leaks", path);
    ck_assert_msg(rc == 0 && strstr(out, "\"epochs\":\"marks\"") && num_after(out, NULL, "epoch_count") == 219 &&
                      num_after(out, "\"growing\":[", "bytes_per_epoch") == KEEP,
                  "marked: rc %d\n%.4000s", rc, out);
    free(out);
    unlink(path);
}
END_TEST

/* Under the preload against the fake runtime: an unmarked loop that keeps each step's output
 * until the 1 GiB device is full (tests/integration/oom_unmarked_leak.c prints its steps). */
START_TEST(test_an_unmarked_leaking_program_under_the_preload)
{
    char *out = gm_oom_report("oom_unmarked_leak", NULL, 1);
    ck_assert_msg(strstr(out, "\"cause\":\"leak\"") && strstr(out, "\"epochs\":\"steps\""), "oom:\n%.6000s", out);
    unsigned long long step = num_after(out, "\"evidence\":", "epoch");
    unsigned long long rate = num_after(out, "\"replay\":", "leak_per_epoch");
    unsigned long long leaked = num_after(out, "\"replay\":", "leaked");
    free(out);
    /* the program: step n fails at its output after keeping n - 1 outputs of 16 MiB */
    ck_assert_msg(rate == KEEP, "oom: %llu per step, want %llu", rate, (unsigned long long)KEEP);
    ck_assert_msg(step >= 3 && within_5_percent(leaked, (step - 1) * KEEP), "oom: step %llu, %llu leaked", step, leaked);
    int rc = gm(&out, "--json", "leaks", gm_last_log);
    ck_assert_msg(rc == 0 && num_after(out, NULL, "epoch_count") == step &&
                      num_after(out, "\"growing\":[", "bytes_per_epoch") == rate &&
                      within_5_percent(num_after(out, "\"growing\":[", "kept_bytes"), (step - 1) * KEEP),
                  "leaks (the OOM in step %llu):\n%.4000s", step, out);
    free(out);
}
END_TEST

/* A loop whose kept block is not its first allocation (a scratch buffer, then the kept output,
 * then the scratch freed: PyTorch's `scratch = empty(); kept.append(empty()); del scratch`): the
 * steps open at the scratch, whatever the two sizes, so the OOM at the kept block of the n-th
 * step is in step n (the kept bytes are no step's low point). */
START_TEST(test_a_step_that_keeps_its_second_allocation_opens_at_its_first)
{
    static const uint64_t scratch[] = {32 * MiB, 4 * MiB, 96 * MiB};
    for (unsigned v = 0; v < sizeof scratch / sizeof *scratch; v++) {
        char path[512];
        snprintf(path, sizeof path, "%s/unmarked_second.gmlog", temp_dir());
        w_t w;
        memset(&w, 0, sizeof w);
        w.next_ptr = 0x7f0000000000ull;
        tlog_begin(&w.b, 0);
        tlog_chunk(&w.b, 1, 0, 0, 0);
        tlog_device(&w.b, ++w.t, "Test", 8192 * MiB);
        for (uint32_t s = 1; s <= 3; s++)
            tlog_site(&w.b, ++w.t, s);
        const unsigned steps = 101;
        for (unsigned k = 1; k <= steps; k++) {
            uint64_t sp = w_alloc(&w, scratch[v], 1);
            if (k == steps) {
                w_oom(&w, 64 * MiB, 2);
                break;
            }
            w_alloc(&w, 64 * MiB, 2);
            w_free(&w, sp, scratch[v]);
        }
        tlog_end_chunk(&w.b);
        ck_assert(tlog_write(&w.b, path) == 0);
        tlog_free_buf(&w.b);
        char *out = NULL;
        int rc = gm(&out, "--json", "oom", path);
        ck_assert_msg(rc == 0 && strstr(out, "\"cause\":\"leak\"") && strstr(out, "\"epochs\":\"steps\""),
                      "scratch %llu MiB: rc %d\n%.3000s", (unsigned long long)(scratch[v] / MiB), rc, out);
        unsigned long long step = num_after(out, "\"evidence\":", "epoch");
        ck_assert_msg(step == steps, "scratch %llu MiB: the OOM in step %llu, want %u",
                      (unsigned long long)(scratch[v] / MiB), step, steps);
        free(out);
        unlink(path);
    }
}
END_TEST

/* The real logs of runs 113 and 117 (H100, tests/gpu/torch_configs.py leak 64 0 nomark): under
 * PyTorch's default cache the program ran 1258 whole steps and failed in its 1259th; under
 * expandable segments 1257 and its 1258th. */
START_TEST(test_the_h100_unmarked_leaks_fail_in_the_programs_own_step)
{
    static const struct {
        const char *path;
        unsigned long long step;
    } runs[] = {{"tests/fixtures/ledger/h100_torch_nomark_leak.gmlog", 1259},
                {"tests/fixtures/steps/h100_torch_nomark_leak_expandable.gmlog", 1258}};
    for (unsigned i = 0; i < sizeof runs / sizeof *runs; i++) {
        char *out = NULL;
        int rc = gm(&out, "--json", "oom", runs[i].path);
        ck_assert_msg(rc == 0 && strstr(out, "\"cause\":\"leak\"") && strstr(out, "\"epochs\":\"steps\""),
                      "%s: rc %d\n%.3000s", runs[i].path, rc, out);
        unsigned long long step = num_after(out, "\"evidence\":", "epoch");
        ck_assert_msg(step == runs[i].step, "%s: the OOM in step %llu, want %llu", runs[i].path, step, runs[i].step);
        free(out);
    }
}
END_TEST

/* Real training runs without marks (run 121, H100, tests/gpu/torch_configs.py, 20 steps each):
 * ViT-B/16's twelve identical blocks are no steps of their own (a key once per block cuts each
 * step into blocks alike and one long unlike rest), nor is the GPT-like stack's first optimizer
 * step, which makes its states one parameter after another (a burst of two keys alternating). */
START_TEST(test_real_training_runs_count_their_own_steps)
{
    static const char *const runs[] = {"tests/fixtures/h100_vit_keep.gmlog", "tests/fixtures/steps/h100_gpt_keep.gmlog"};
    for (unsigned i = 0; i < sizeof runs / sizeof *runs; i++) {
        char *out = NULL;
        int rc = gm(&out, "--json", "top", "--once", runs[i]);
        const char *st = out ? strstr(out, "\"steps\":") : NULL;
        ck_assert_msg(rc == 0 && st && !strncmp(st, "\"steps\":{\"by\":\"steps\"", strlen("\"steps\":{\"by\":\"steps\"")), "%s: rc %d\n%.2000s", runs[i],
                      rc, out);
        unsigned long long n = num_after(st, NULL, "count");
        ck_assert_msg(n == 20, "%s: %llu steps, the program ran 20", runs[i], n);
        free(out);
    }
}
END_TEST

Suite *analyzer_steps_suite(void)
{
    Suite *s = suite_create("analyzer_steps");
    TCase *tc = tcase_create("steps");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_unmarked_leaking_loop_counts_every_step_and_its_leak);
    tcase_add_test(tc, test_steps_are_the_same_in_the_parallel_replay);
    tcase_add_test(tc, test_an_eval_every_tenth_step_is_no_step_of_its_own);
    tcase_add_test(tc, test_steps_whose_sizes_vary_are_found_by_their_lines);
    tcase_add_test(tc, test_no_repeating_structure_falls_back_to_troughs);
    tcase_add_test(tc, test_a_marked_loop_is_counted_by_its_marks);
    tcase_add_test(tc, test_an_unmarked_leaking_program_under_the_preload);
    tcase_add_test(tc, test_a_step_that_keeps_its_second_allocation_opens_at_its_first);
    tcase_add_test(tc, test_the_h100_unmarked_leaks_fail_in_the_programs_own_step);
    tcase_add_test(tc, test_real_training_runs_count_their_own_steps);
    suite_add_tcase(s, tc);
    return s;
}
