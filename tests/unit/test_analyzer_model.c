/* Unit tests of the replay model (analyzer/model.c) on logs written byte by byte with a small
 * builder: block sizes, peaks, hits, segments and free gaps, epochs from marks and from the
 * troughs of an unmarked run, per-site growth, resets, lost frees, threads out of file order. */
#include "model.h"
#include "sites.h"
#include "suites.h"
#include "testlog.h"

#include <stdlib.h>
#include <string.h>

#define MiB ((uint64_t)1 << 20)
#define SEG ((uint64_t)0x7f0000000000ull)

/* ---- a log builder ------------------------------------------------------------------------------ */

typedef struct lb {
    uint8_t *buf;
    size_t len, cap;
    size_t chunk;              /* offset of the open chunk, 0 = none */
    uint64_t base;
    uint32_t tcount[16];
} lb_t;

static void lb_reserve(lb_t *b, size_t n)
{
    if (b->len + n <= b->cap)
        return;
    while (b->len + n > b->cap)
        b->cap = b->cap ? b->cap * 2 : 1 << 20;
    b->buf = realloc(b->buf, b->cap);
    ck_assert_msg(b->buf != NULL, "out of memory");
}

static void lb_begin(lb_t *b)
{
    memset(b, 0, sizeof *b);
    lb_reserve(b, 4096);
    memset(b->buf, 0, 4096);
    gmlog_file_header_t h = {.version = 1, .byte_order = GMLOG_BYTE_ORDER, .header_size = 4096,
                             .chunk_size = GMLOG_CHUNK_SIZE, .pid = 4242, .flags = GMLOG_F_CLOSED,
                             .close_reason = GMLOG_CLOSE_EXIT};
    memcpy(h.magic, GMLOG_MAGIC, 8);
    memcpy(b->buf, &h, sizeof h);
    b->len = 4096;
}

static void lb_close_chunk(lb_t *b)
{
    if (!b->chunk)
        return;
    size_t end = b->chunk + GMLOG_CHUNK_SIZE;
    lb_reserve(b, end - b->len);
    memset(b->buf + b->len, 0, end - b->len);
    b->len = end;
    b->chunk = 0;
}

/* Starts a chunk of thread `tid` (a small number) with time base `base`. */
static void lb_chunk(lb_t *b, uint32_t tid, uint64_t base)
{
    lb_close_chunk(b);
    lb_reserve(b, GMLOG_CHUNK_SIZE);
    b->chunk = b->len;
    gmlog_chunk_header_t ch = {GMLOG_CHUNK_MAGIC, 1000 + tid, (b->len - 4096) / GMLOG_CHUNK_SIZE, base,
                               b->tcount[tid]++, 0};
    memcpy(b->buf + b->len, &ch, sizeof ch);
    b->len += sizeof ch;
    b->base = base;
}

static void lb_rec(lb_t *b, void *rec, size_t len, uint64_t t)
{
    gmlog_rec_t *h = rec;
    h->len8 = (uint8_t)(len / 8);
    h->dt = (uint32_t)(t - b->base);
    lb_reserve(b, len);
    memcpy(b->buf + b->len, rec, len);
    b->len += len;
}

static void lb_alloc(lb_t *b, uint64_t t, uint64_t ptr, uint64_t req, uint64_t extra512, unsigned flags, uint32_t site)
{
    gmlog_alloc_t a = {{GMLOG_ALLOC, 0, 0, (uint8_t)flags, 0}, ptr, req | extra512 << 48, site, 100, 0};
    lb_rec(b, &a, 32, t);
}

static void lb_free(lb_t *b, uint64_t t, uint64_t ptr)
{
    gmlog_free_t f = {{GMLOG_FREE, 0, 0, GMLOG_F_DEFERRED, 0}, ptr, 0, 0};
    lb_rec(b, &f, sizeof f, t);
}

static void lb_segment(lb_t *b, uint64_t t, int type, uint64_t base, uint64_t size)
{
    gmlog_segment_t s = {{(uint8_t)type, 0, 0, 0, 0}, base, size, 5000, 0};
    lb_rec(b, &s, sizeof s, t);
}

static void lb_mark(lb_t *b, uint64_t t, uint32_t id, const char *label)
{
    uint8_t rec[64] = {0};
    gmlog_mark_t m = {{GMLOG_MARK, 0, GMLOG_NO_DEVICE, 0, 0}, id, (uint32_t)strlen(label)};
    memcpy(rec, &m, sizeof m);
    memcpy(rec + sizeof m, label, strlen(label));
    lb_rec(b, rec, sizeof m + (strlen(label) + 7) / 8 * 8, t);
}

static void lb_site(lb_t *b, uint64_t t, uint32_t id)
{
    uint8_t rec[32] = {0};
    gmlog_site_t s = {{GMLOG_SITE, 0, GMLOG_NO_DEVICE, 0, 0}, id, 1, 0};
    uint64_t frame = (uint64_t)GMLOG_FRAME_UNKNOWN_MODULE << 48 | (0x1000 + id);
    memcpy(rec, &s, sizeof s);
    memcpy(rec + sizeof s, &frame, 8);
    lb_rec(b, rec, 24, t);
}

static void lb_string(lb_t *b, uint64_t t, uint32_t id, const char *str)
{
    uint8_t rec[128] = {0};
    gmlog_string_t st = {{GMLOG_STRING, 0, GMLOG_NO_DEVICE, 0, 0}, id, (uint32_t)strlen(str)};
    memcpy(rec, &st, sizeof st);
    memcpy(rec + sizeof st, str, strlen(str));
    lb_rec(b, rec, sizeof st + (strlen(str) + 7) / 8 * 8, t);
}

static model_t model;
static rd_log_t lf;

static void lb_replay(lb_t *b, unsigned flags)
{
    lb_close_chunk(b);
    int rc = rd_open_mem(&lf, b->buf, b->len, "built");
    ck_assert_msg(rc == 0, "the built log does not open: %s", lf.diags[0].msg);
    model_build(&model, &lf, flags);
    ck_assert_msg(!lf.partial, "the built log reads as partial: %s", lf.ndiags ? lf.diags[0].msg : "");
}

static void lb_done(lb_t *b)
{
    model_free(&model);
    rd_close(&lf);
    free(b->buf);
}

/* ---- tests --------------------------------------------------------------------------------------- */

START_TEST(test_block_sizes_peaks_and_hits_follow_the_records)
{
    lb_t b;
    lb_begin(&b);
    lb_chunk(&b, 1, 0);
    lb_segment(&b, 10, GMLOG_SEGMENT_ALLOC, SEG, 2 * MiB);
    lb_alloc(&b, 11, SEG, 1000, 0, GMLOG_A_MISS, 0);          /* block 1024 */
    lb_alloc(&b, 12, SEG + 1024, 600, 3, 0, 0);                /* block 1024 + 3*512 */
    gmlog_alloc_t big = {{GMLOG_ALLOC, 0, 0, 0, 0}, SEG + 8192, 5000 | 0xffffull << 48, 0, 0, 65536};
    lb_rec(&b, &big, 40, 13);                                  /* block given in full */
    lb_free(&b, 14, SEG + 1024);
    lb_alloc(&b, 15, SEG + 1024, 100, 0, 0, 0);
    lb_replay(&b, 0);
    const model_dev_t *d = model.dev[0];
    ck_assert_msg(d != NULL, "no device 0");
    ck_assert_msg(d->allocs == 4 && d->frees == 1, "allocs %llu frees %llu", (unsigned long long)d->allocs,
                  (unsigned long long)d->frees);
    ck_assert_msg(d->hits == 3 && d->misses == 1, "hits %llu misses %llu", (unsigned long long)d->hits,
                  (unsigned long long)d->misses);
    uint64_t peak_alloc = 1024 + 2560 + 65536;
    ck_assert_msg(d->peak_allocated == peak_alloc, "peak allocated %llu, want %llu",
                  (unsigned long long)d->peak_allocated, (unsigned long long)peak_alloc);
    ck_assert_msg(d->peak_requested == 6600, "peak requested %llu", (unsigned long long)d->peak_requested);
    ck_assert_msg(d->allocated == 1024 + 512 + 65536, "allocated now %llu", (unsigned long long)d->allocated);
    ck_assert_msg(d->peak_reserved == 2 * MiB && d->seg_allocs == 1, "reserved %llu, %llu segments",
                  (unsigned long long)d->peak_reserved, (unsigned long long)d->seg_allocs);
    lb_done(&b);
}
END_TEST

START_TEST(test_free_gaps_come_from_segments_and_live_blocks)
{
    lb_t b;
    lb_begin(&b);
    lb_chunk(&b, 1, 0);
    lb_segment(&b, 10, GMLOG_SEGMENT_ALLOC, SEG, 10 * MiB);
    lb_segment(&b, 11, GMLOG_SEGMENT_ALLOC, SEG + 64 * MiB, 2 * MiB);
    lb_alloc(&b, 12, SEG, MiB - 100, 0, 0, 0);                     /* [0, 1 MiB) */
    lb_alloc(&b, 13, SEG + 3 * MiB, 2 * MiB, 0, 0, 0);             /* [3, 5 MiB) */
    lb_alloc(&b, 14, SEG + 64 * MiB, 2 * MiB, 0, 0, 0);            /* the whole small segment */
    lb_replay(&b, 0);
    model_frag_t f;
    model_frag_now(&model, 0, &f);
    ck_assert_msg(f.external == 7 * MiB, "external %llu, want 7 MiB", (unsigned long long)f.external);
    ck_assert_msg(f.largest_free == 5 * MiB && f.free_gaps == 2, "largest %llu in %llu gaps",
                  (unsigned long long)f.largest_free, (unsigned long long)f.free_gaps);
    ck_assert_msg(f.internal == 100, "internal %llu, want the 100 bytes of rounding",
                  (unsigned long long)f.internal);
    ck_assert_msg(f.segments == 2 && f.reserved == 12 * MiB && f.stray_blocks == 0, "segments %llu reserved %llu stray %llu",
                  (unsigned long long)f.segments, (unsigned long long)f.reserved, (unsigned long long)f.stray_blocks);
    model_frag_t p;
    ck_assert_int_eq(model_frag_at_peak(&model, 0, &p), 0);
    ck_assert_msg(p.allocated == 5 * MiB && p.external == 7 * MiB, "at the peak: allocated %llu external %llu",
                  (unsigned long long)p.allocated, (unsigned long long)p.external);
    lb_done(&b);
}
END_TEST

/* Four marked steps: site 1 keeps 1 MiB per step, site 2 allocates 8 MiB and frees it. */
static void leaky_steps(lb_t *b, int with_marks, int steps)
{
    lb_chunk(b, 1, 0);
    lb_site(b, 1, 1);
    lb_site(b, 2, 2);
    lb_alloc(b, 5, SEG + 0x40000000ull, 4 * MiB, 0, 0, 3); /* weights */
    for (int s = 0; s < steps; s++) {
        uint64_t t = 100 + (uint64_t)s * 100;
        if (with_marks)
            lb_mark(b, t, (uint32_t)s + 1, "step");
        lb_alloc(b, t + 10, SEG + (uint64_t)s * MiB, MiB, 0, 0, 1);
        lb_alloc(b, t + 20, SEG + 0x10000000ull, 8 * MiB, 0, 0, 2);
        lb_free(b, t + 30, SEG + 0x10000000ull);
    }
}

START_TEST(test_marks_make_epochs_and_a_kept_allocation_grows)
{
    lb_t b;
    lb_begin(&b);
    leaky_steps(&b, 1, 6);
    lb_replay(&b, MODEL_SITES | MODEL_EPOCHS);
    const model_dev_t *d = model.dev[0];
    ck_assert_msg(d->epoch[EPOCH_MARKS] == 6 && model.marks_total == 6, "epochs %u marks %llu", d->epoch[EPOCH_MARKS],
                  (unsigned long long)model.marks_total);
    ck_assert_int_eq(model_epoch_system(&model, 0, 3), EPOCH_MARKS);
    int grew_leak = 0, grew_transient = 0;
    for (size_t i = 1; i < model.nsst; i++) {
        const model_sstat_t *s = &model.sst[i];
        model_series_t ser = model_site_series(&model, s, EPOCH_MARKS);
        uint64_t per;
        int g = model_series_grows(&ser, &per);
        if (s->site == 1) {
            grew_leak = g;
            ck_assert_msg(per == MiB, "the kept site grows by %llu per mark, want 1 MiB", (unsigned long long)per);
            ck_assert_msg(s->live_count == 6 && s->live_req == 6 * MiB, "site 1 live %llu x, %llu bytes",
                          (unsigned long long)s->live_count, (unsigned long long)s->live_req);
        }
        if (s->site == 2)
            grew_transient = g;
    }
    ck_assert_msg(grew_leak && !grew_transient, "growth: kept site %d, transient site %d", grew_leak, grew_transient);
    model_series_t lw = model_dev_series(&model, d, EPOCH_MARKS);
    uint64_t per;
    ck_assert_msg(model_series_grows(&lw, &per) && per == MiB, "device low-water: n %u first %llu last %llu",
                  lw.n, (unsigned long long)lw.first, (unsigned long long)lw.last);
    lb_done(&b);
}
END_TEST

START_TEST(test_unmarked_run_finds_iterations_at_the_troughs)
{
    lb_t b;
    lb_begin(&b);
    leaky_steps(&b, 0, 8);
    lb_replay(&b, MODEL_SITES | MODEL_EPOCHS);
    const model_dev_t *d = model.dev[0];
    ck_assert_msg(d->epoch[EPOCH_TROUGHS] >= 6, "%u troughs found in 8 saw-tooth steps", d->epoch[EPOCH_TROUGHS]);
    ck_assert_int_eq(model_epoch_system(&model, 0, 3), EPOCH_TROUGHS);
    int grew = 0;
    for (size_t i = 1; i < model.nsst; i++)
        if (model.sst[i].site == 1) {
            model_series_t ser = model_site_series(&model, &model.sst[i], EPOCH_TROUGHS);
            grew = model_series_grows(&ser, NULL);
        }
    ck_assert_msg(grew, "the kept site does not grow from trough to trough");
    lb_done(&b);
}
END_TEST

START_TEST(test_a_run_that_only_grows_has_no_epochs)
{
    lb_t b;
    lb_begin(&b);
    lb_chunk(&b, 1, 0);
    for (int i = 0; i < 50; i++)
        lb_alloc(&b, 10 + (uint64_t)i, SEG + (uint64_t)i * MiB, MiB, 0, 0, 0);
    lb_replay(&b, MODEL_SITES | MODEL_EPOCHS);
    ck_assert_msg(model.dev[0]->epoch[EPOCH_TROUGHS] == 0, "%u troughs in a run that only allocates",
                  model.dev[0]->epoch[EPOCH_TROUGHS]);
    ck_assert_int_eq(model_epoch_system(&model, 0, 1), -1);
    lb_done(&b);
}
END_TEST

START_TEST(test_threads_out_of_file_order_replay_in_time_order)
{
    lb_t b;
    lb_begin(&b);
    lb_chunk(&b, 2, 0);                /* thread 2's chunk comes first in the file... */
    lb_free(&b, 200, SEG);             /* ...but frees what thread 1 allocated at t=100 */
    lb_alloc(&b, 300, SEG, 4096, 0, 0, 0);
    lb_chunk(&b, 1, 0);
    lb_alloc(&b, 100, SEG, 4096, 0, 0, 0);
    lb_replay(&b, 0);
    const model_dev_t *d = model.dev[0];
    ck_assert_msg(d->unmatched_frees == 0 && d->replaced == 0, "unmatched %llu replaced %llu: replay not in time order",
                  (unsigned long long)d->unmatched_frees, (unsigned long long)d->replaced);
    ck_assert_msg(d->allocated == 4096 && model.live.count == 1, "allocated %llu, %zu live",
                  (unsigned long long)d->allocated, model.live.count);
    lb_done(&b);
}
END_TEST

START_TEST(test_lost_frees_and_resets_keep_the_figures_sane)
{
    lb_t b;
    lb_begin(&b);
    lb_chunk(&b, 1, 0);
    lb_free(&b, 5, SEG + 999 * 512);               /* never allocated in the log */
    lb_alloc(&b, 10, SEG, 4096, 0, 0, 0);
    lb_alloc(&b, 11, SEG, 8192, 0, 0, 0);          /* the same pointer again: its free was lost */
    lb_segment(&b, 12, GMLOG_SEGMENT_ALLOC, SEG + 64 * MiB, 2 * MiB);
    gmlog_reset_t r = {{GMLOG_RESET, 0, 0, 0, 0}, 2 * MiB, 8192};
    lb_rec(&b, &r, sizeof r, 20);
    lb_replay(&b, MODEL_ALL);
    const model_dev_t *d = model.dev[0];
    ck_assert_msg(d->unmatched_frees == 1 && d->replaced == 1, "unmatched %llu replaced %llu",
                  (unsigned long long)d->unmatched_frees, (unsigned long long)d->replaced);
    ck_assert_msg(d->resets == 1 && d->allocated == 0 && d->reserved == 0 && model.live.count == 0,
                  "after the reset: allocated %llu reserved %llu live %zu", (unsigned long long)d->allocated,
                  (unsigned long long)d->reserved, model.live.count);
    ck_assert_msg(d->peak_allocated == 8192, "peak allocated %llu", (unsigned long long)d->peak_allocated);
    lb_done(&b);
}
END_TEST

START_TEST(test_clock_records_move_the_time_base)
{
    lb_t b;
    lb_begin(&b);
    lb_chunk(&b, 1, 1000);
    lb_alloc(&b, 1500, SEG, 4096, 0, 0, 0);
    gmlog_clock_t c = {{GMLOG_CLOCK, 0, GMLOG_NO_DEVICE, 0, 0}, 10000000000ull};
    lb_rec(&b, &c, sizeof c, 1500);
    b.base = 10000000000ull;
    lb_alloc(&b, 10000000007ull, SEG + 4096, 4096, 0, 0, 0);
    lb_replay(&b, 0);
    ck_assert_msg(model.last_t == 10000000007ull, "last time %llu", (unsigned long long)model.last_t);
    ck_assert_msg(lf.t_first == 1500 && lf.t_last == 10000000007ull, "range %llu..%llu",
                  (unsigned long long)lf.t_first, (unsigned long long)lf.t_last);
    lb_done(&b);
}
END_TEST

START_TEST(test_recovered_ooms_are_retries_and_failed_ones_are_analysed)
{
    lb_t b;
    lb_begin(&b);
    lb_chunk(&b, 1, 0);
    lb_segment(&b, 5, GMLOG_SEGMENT_ALLOC, SEG, 20 * MiB);
    lb_alloc(&b, 6, SEG, 10 * MiB, 0, 0, 0);
    gmlog_oom_t o = {{GMLOG_OOM, 0, 0, GMLOG_OOM_RELEASED | GMLOG_OOM_RETRIED | GMLOG_OOM_RECOVERED, 0},
                     4 * MiB, 20 * MiB, 0, 64 * MiB, 20 * MiB, 10 * MiB, 10 * MiB, 10 * MiB, 0, 10 * MiB, 1, 0};
    lb_rec(&b, &o, sizeof o, 10);
    o.h.flags = GMLOG_OOM_RELEASED | GMLOG_OOM_RETRIED;
    o.request = 40 * MiB;
    lb_rec(&b, &o, sizeof o, 20);
    lb_replay(&b, MODEL_ALL);
    ck_assert_msg(model.retries_total == 1 && model.ooms_total == 1 && model.nooms == 1, "retries %llu ooms %llu",
                  (unsigned long long)model.retries_total, (unsigned long long)model.ooms_total);
    const model_oom_t *x = &model.ooms[0];
    ck_assert_msg(x->analysed && x->rec.request == 40 * MiB && x->persistent == 10 * MiB && x->frag.segments == 1,
                  "the OOM snapshot: request %llu persistent %llu segments %llu", (unsigned long long)x->rec.request,
                  (unsigned long long)x->persistent, (unsigned long long)x->frag.segments);
    lb_done(&b);
}
END_TEST

START_TEST(test_damaged_logs_never_crash_the_model)
{
    lb_t b;
    lb_begin(&b);
    leaky_steps(&b, 1, 20);
    lb_close_chunk(&b);
    uint8_t *copy = malloc(b.len);
    uint64_t x = 88172645463325252ull;
    for (int round = 0; round < 300; round++) {
        memcpy(copy, b.buf, b.len);
        for (int k = 0; k < 1 + round % 24; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            copy[4096 + 32 + (size_t)(x % 2000)] = (uint8_t)(x >> 32);
        }
        rd_log_t l;
        if (rd_open_mem(&l, copy, b.len, "random") == 0) {
            model_t m;
            memset(&m, 0, sizeof m);
            model_build(&m, &l, MODEL_ALL);
            model_frag_t f;
            model_frag_at_peak(&m, 0, &f);
            model_free(&m);
        }
        rd_close(&l);
    }
    free(copy);
    free(b.buf);
}
END_TEST

START_TEST(test_python_frames_come_first_with_their_file_and_line)
{
    lb_t b;
    lb_begin(&b);
    lb_chunk(&b, 1, 0);
    lb_string(&b, 1, 1, "train.py");
    lb_string(&b, 2, 2, "Model.forward");
    lb_string(&b, 3, 3, "main");
    uint8_t rec[64] = {0};
    gmlog_site_t st = {{GMLOG_SITE, 0, GMLOG_NO_DEVICE, 0, 0}, 7, 1, 2};
    uint64_t native = (uint64_t)GMLOG_FRAME_UNKNOWN_MODULE << 48 | 0x401234;
    gmlog_pyframe_t py[2] = {{1, 2, 42, 0}, {1, 3, 90, 0}};
    memcpy(rec, &st, sizeof st);
    memcpy(rec + sizeof st, &native, 8);
    memcpy(rec + sizeof st + 8, py, sizeof py);
    lb_rec(&b, rec, sizeof st + 8 + sizeof py, 4);
    lb_alloc(&b, 10, SEG, 4096, 0, 0, 7);
    lb_replay(&b, MODEL_SITES | MODEL_EPOCHS);
    site_frame_t fr[8];
    size_t n = site_frames(&model, 7, fr, 8);
    ck_assert_msg(n == 3, "%zu frames", n);
    ck_assert_msg(fr[0].python && !strcmp(fr[0].function, "Model.forward") && fr[0].file &&
                  !strcmp(fr[0].file, "train.py") && fr[0].line == 42, "first frame: %s %s:%u", fr[0].function,
                  fr[0].file ? fr[0].file : "?", fr[0].line);
    ck_assert_msg(fr[1].python && !strcmp(fr[1].function, "main") && fr[1].line == 90, "second frame: %s:%u",
                  fr[1].function, fr[1].line);
    ck_assert_msg(!fr[2].python && !strcmp(fr[2].function, "0x401234"), "the native frame: %s", fr[2].function);
    char label[128];
    site_label(&model, 7, label, sizeof label);
    ck_assert_msg(!strcmp(label, "Model.forward (train.py:42)"), "label %s", label);
    site_label(&model, 99, label, sizeof label);
    ck_assert_msg(strstr(label, "not defined"), "an undefined site: %s", label);
    lb_done(&b);
}
END_TEST

/* A log whose windows cut through everything: frees of blocks from earlier windows, segments
 * freed later, pass-through blocks, a free of a null pointer, three threads; the parallel summary must equal the replay
 * in order, figure for figure. */
static void crossing_log(lb_t *b)
{
    lb_begin(b);
    lb_chunk(b, 1, 0);
    lb_segment(b, 5, GMLOG_SEGMENT_ALLOC, SEG + 0x100000000ull, 64 * MiB);
    for (int i = 0; i < 40; i++)
        lb_alloc(b, 10 + (uint64_t)i, SEG + (uint64_t)i * MiB, MiB - 512 * (uint64_t)i, (uint64_t)i % 3, 0, 0);
    gmlog_alloc_t pass = {{GMLOG_ALLOC, 0, 0, GMLOG_KIND_PASS << GMLOG_KIND_SHIFT, 0}, SEG + 0x200000000ull, 3 * MiB, 0, 9, 0};
    lb_rec(b, &pass, 32, 60);
    lb_chunk(b, 2, 100);
    for (int i = 0; i < 30; i++)
        lb_free(b, 100 + (uint64_t)i, SEG + (uint64_t)i * MiB);          /* blocks of the first window */
    for (int i = 0; i < 20; i++)
        lb_alloc(b, 140 + (uint64_t)i, SEG + 0x300000000ull + (uint64_t)i * 4096, 4096, 0, 0, 0);
    lb_free(b, 170, SEG + 0x777000ull);                                  /* never allocated */
    lb_free(b, 171, 0);                                                  /* a null pointer: no block */
    lb_chunk(b, 3, 200);
    lb_segment(b, 200, GMLOG_SEGMENT_FREE, SEG + 0x100000000ull, 64 * MiB);
    gmlog_free_t pf = {{GMLOG_FREE, 0, 0, GMLOG_KIND_PASS << GMLOG_KIND_SHIFT, 0}, SEG + 0x200000000ull, 0, 0};
    lb_rec(b, &pf, sizeof pf, 210);
    for (int i = 0; i < 50; i++)
        lb_alloc(b, 220 + (uint64_t)i, SEG + 0x400000000ull + (uint64_t)i * 8192, 8000, 0, i % 5 ? 0 : GMLOG_A_MISS, 0);
    for (int i = 0; i < 10; i++)
        lb_free(b, 280 + (uint64_t)i, SEG + 0x300000000ull + (uint64_t)i * 4096);
    lb_chunk(b, 1, 300);
    for (int i = 30; i < 40; i++)
        lb_free(b, 300 + (uint64_t)i, SEG + (uint64_t)i * MiB);
    lb_close_chunk(b);
}

#define SAME(f) ck_assert_msg(s->f == p->f, #f ": in order %llu, in parallel %llu", (unsigned long long)s->f, \
                              (unsigned long long)p->f)

/* The figures of device 0 both parallel replays must give as the ordered one does. */
static void assert_same_figures(const model_t m[2])
{
    const model_dev_t *s = m[0].dev[0], *p = m[1].dev[0];
    ck_assert_msg(s && p, "no device 0");
    SAME(allocs);
    SAME(frees);
    SAME(hits);
    SAME(misses);
    SAME(requested);
    SAME(allocated);
    SAME(reserved);
    SAME(segments);
    SAME(peak_requested);
    SAME(peak_allocated);
    SAME(peak_reserved);
    SAME(peak_segments);
    SAME(peak_allocated_t);
    SAME(unmatched_frees);
    SAME(replaced);
    SAME(seg_allocs);
    SAME(seg_frees);
    SAME(bad_segment_frees);
    SAME(live_kind_bytes[GMLOG_KIND_POOL]);
    SAME(live_kind_count[GMLOG_KIND_POOL]);
    SAME(live_kind_bytes[GMLOG_KIND_PASS]);
    ck_assert_msg(m[0].records == m[1].records && m[0].live.count == m[1].live.count, "records %llu/%llu live %zu/%zu",
                  (unsigned long long)m[0].records, (unsigned long long)m[1].records, m[0].live.count, m[1].live.count);
}

START_TEST(test_parallel_summary_equals_the_replay_in_order)
{
    lb_t b;
    crossing_log(&b);
    model_t m[2];
    for (int k = 0; k < 2; k++) {
        setenv("GMSHIM_ANALYZER_THREADS", k ? "4" : "0", 1);
        rd_log_t l;
        ck_assert_int_eq(rd_open_mem(&l, b.buf, b.len, "crossing"), 0);
        memset(&m[k], 0, sizeof m[k]);
        model_build(&m[k], &l, 0);
        rd_close(&l);
        m[k].lf = NULL;
    }
    unsetenv("GMSHIM_ANALYZER_THREADS");
    ck_assert_msg(m[0].windows == 0 && m[1].windows == 4, "windows: %u in order, %u in parallel", m[0].windows,
                  m[1].windows);
    assert_same_figures(m);
    const model_dev_t *s = m[0].dev[0];
    ck_assert_msg(s->unmatched_frees == 2 && s->peak_reserved == 64 * MiB + 3 * MiB, "the log itself: unmatched %llu, "
                  "peak reserved %llu", (unsigned long long)s->unmatched_frees, (unsigned long long)s->peak_reserved);
    model_free(&m[0]);
    model_free(&m[1]);
    free(b.buf);
}
END_TEST

/* For the parallel replay with sites: windows that cut through site figures and epochs — marks
 * in two windows, a pointer allocated twice in one window and one live from an earlier window
 * allocated again (lost frees), frees of earlier windows' blocks, blocks live at the end. */
static void sites_log(lb_t *b, int oom)
{
    lb_begin(b);
    lb_chunk(b, 1, 0);
    lb_segment(b, 5, GMLOG_SEGMENT_ALLOC, SEG, 256 * MiB);
    for (uint32_t id = 1; id <= 8; id++)
        lb_site(b, 6, id);
    for (int i = 0; i < 40; i++)
        lb_alloc(b, 10 + (uint64_t)i, SEG + (uint64_t)i * MiB, MiB - 512 * (uint64_t)i, 0, 0, 1 + (uint32_t)i % 5);
    lb_mark(b, 50, 1, "step 1");
    lb_alloc(b, 55, SEG + 100 * MiB, 2 * MiB, 0, 0, 6);
    lb_alloc(b, 56, SEG + 100 * MiB, 3 * MiB, 0, 0, 7);                 /* again: the first one's free was lost */
    lb_chunk(b, 2, 100);
    for (int i = 0; i < 30; i++)
        lb_free(b, 100 + (uint64_t)i, SEG + (uint64_t)i * MiB);          /* blocks of the first window */
    for (int i = 0; i < 20; i++)
        lb_alloc(b, 140 + (uint64_t)i, SEG + 120 * MiB + (uint64_t)i * 4096, 4096, 0, 0, 8);
    lb_alloc(b, 165, SEG + 35 * MiB, 5 * MiB, 0, 0, 2);                 /* live since the first window */
    lb_free(b, 170, SEG + 0x777000ull);                                  /* never allocated */
    lb_free(b, 171, 0);                                                  /* a null pointer: no block */
    lb_mark(b, 175, 2, "step 2");
    lb_chunk(b, 3, 200);
    lb_alloc(b, 205, SEG + 140 * MiB, 3 * MiB, 0, 0, 9);
    lb_alloc(b, 206, SEG + 150 * MiB, MiB, 0, 0, 9);
    lb_mark(b, 212, 4, "step 2b"); /* site 9's next event, a free in this window, starts an epoch */
    for (int i = 0; i < 50; i++)
        lb_alloc(b, 220 + (uint64_t)i, SEG + 130 * MiB + (uint64_t)i * 8192, 8000, 0, i % 5 ? 0 : GMLOG_A_MISS,
                 1 + (uint32_t)i % 3);
    lb_free(b, 272, SEG + 150 * MiB);
    for (int i = 0; i < 10; i++)
        lb_free(b, 275 + (uint64_t)i, SEG + 120 * MiB + (uint64_t)i * 4096);
    for (int i = 0; i < 25; i++)
        lb_free(b, 286 + (uint64_t)i, SEG + 130 * MiB + (uint64_t)i * 8192); /* this window's own */
    if (oom) {
        gmlog_oom_t o;
        memset(&o, 0, sizeof o);
        o.h.type = GMLOG_OOM;
        o.requested = 64 * MiB;
        lb_rec(b, &o, sizeof o, 295);
    }
    lb_chunk(b, 1, 300);
    for (int i = 30; i < 40; i++)
        lb_free(b, 300 + (uint64_t)i, SEG + (uint64_t)i * MiB);
    lb_mark(b, 350, 3, "step 3");
    for (int i = 0; i < 6; i++)
        lb_alloc(b, 360 + (uint64_t)i, SEG + 200 * MiB + (uint64_t)i * MiB, MiB, 0, 0, 4);
    lb_close_chunk(b);
}

static void build_both(lb_t *b, model_t m[2], rd_log_t l[2])
{
    for (int k = 0; k < 2; k++) {
        setenv("GMSHIM_ANALYZER_THREADS", k ? "4" : "0", 1);
        ck_assert_int_eq(rd_open_mem(&l[k], b->buf, b->len, "sites"), 0);
        memset(&m[k], 0, sizeof m[k]);
        model_build(&m[k], &l[k], MODEL_SITES | MODEL_EPOCHS);
    }
    unsetenv("GMSHIM_ANALYZER_THREADS");
}

static int same_series(const model_series_t *a, const model_series_t *b)
{
    return a->n == b->n && a->ups == b->ups && a->downs == b->downs && a->first == b->first && a->last == b->last;
}

/* The device, site and epoch figures of two models of the same log. */
static void assert_same_sites_model(const model_t m[2])
{
    assert_same_figures(m);
    const model_dev_t *s = m[0].dev[0], *p = m[1].dev[0];
    SAME(peak_seq);
    SAME(peak_seq_alloc);
    SAME(epoch[EPOCH_MARKS]);
    SAME(epoch[EPOCH_TROUGHS]);
    SAME(ep_min[EPOCH_MARKS]);
    SAME(lowwater[EPOCH_MARKS].n);
    SAME(lowwater[EPOCH_MARKS].last);
    SAME(lowwater[EPOCH_TROUGHS].n);
    ck_assert_msg(m[0].records == m[1].records && m[0].live.count == m[1].live.count && m[0].nsst == m[1].nsst,
                  "records %llu/%llu live %zu/%zu sites %zu/%zu", (unsigned long long)m[0].records,
                  (unsigned long long)m[1].records, m[0].live.count, m[1].live.count, m[0].nsst, m[1].nsst);
    for (size_t i = 1; i < m[0].nsst; i++) {
        const model_sstat_t *x = &m[0].sst[i], *y = &m[1].sst[i];
        model_series_t sx = model_site_series(&m[0], x, EPOCH_MARKS), sy = model_site_series(&m[1], y, EPOCH_MARKS);
        ck_assert_msg(x->site == y->site && x->live_req == y->live_req && x->live_blk == y->live_blk &&
                          x->live_count == y->live_count && x->peak_req == y->peak_req && x->allocs == y->allocs &&
                          x->bytes_total == y->bytes_total && same_series(&sx, &sy) &&
                          same_series(&x->ser[0], &y->ser[0]) && same_series(&x->ser[1], &y->ser[1]) &&
                          !memcmp(x->ep_min, y->ep_min, sizeof x->ep_min) &&
                          !memcmp(x->acc_epoch, y->acc_epoch, sizeof x->acc_epoch),
                      "site statistics %zu (site %u) differ", i, x->site);
    }
    for (size_t i = 0; i < m[0].live.cap; i++) { /* the blocks live at the end, with their sites */
        const model_live_t *e = &m[0].live.slots[i];
        if (!e->ptr)
            continue;
        const model_live_t *f = NULL;
        for (size_t j = 0; j < m[1].live.cap && !f; j++)
            if (m[1].live.slots[j].ptr == e->ptr)
                f = &m[1].live.slots[j];
        ck_assert_msg(f && f->blk == e->blk && f->req == e->req && f->sidx == e->sidx,
                      "live block %#llx differs", (unsigned long long)e->ptr);
    }
}

START_TEST(test_parallel_sites_replay_equals_the_replay_in_order)
{
    lb_t b;
    sites_log(&b, 0);
    model_t m[2];
    rd_log_t l[2];
    build_both(&b, m, l);
    ck_assert_msg(m[0].windows == 0 && m[1].windows == 4, "windows: %u in order, %u in parallel", m[0].windows,
                  m[1].windows);
    assert_same_sites_model(m);
    const model_dev_t *s = m[0].dev[0];
    ck_assert_msg(s->replaced == 2 && s->unmatched_frees == 2 && s->epoch[EPOCH_MARKS] == 4,
                  "the log itself: replaced %llu, unmatched %llu, marks %u", (unsigned long long)s->replaced,
                  (unsigned long long)s->unmatched_frees, s->epoch[EPOCH_MARKS]);
    for (int k = 0; k < 2; k++) {
        model_free(&m[k]);
        rd_close(&l[k]);
    }
    free(b.buf);
}
END_TEST

/* An OOM's analysis needs the whole live map at that moment: the windows before the OOM's are
 * applied, then the ordered replay goes on from there — the same model, the same analysis. */
START_TEST(test_a_log_with_an_oom_goes_on_in_order_from_its_window)
{
    lb_t b;
    sites_log(&b, 1);
    model_t m[2];
    rd_log_t l[2];
    build_both(&b, m, l);
    /* The OOM comes in the last window: thread 3's records run past 300 before it. */
    ck_assert_msg(m[1].windows == 3 && m[1].nooms == 1 && m[0].nooms == 1, "windows %u, ooms %zu/%zu",
                  m[1].windows, m[0].nooms, m[1].nooms);
    assert_same_sites_model(m);
    const model_oom_t *x = &m[0].ooms[0], *y = &m[1].ooms[0];
    ck_assert_msg(x->seq == y->seq && x->allocated == y->allocated && x->requested == y->requested &&
                      x->persistent == y->persistent && x->transient == y->transient && x->ntop == y->ntop &&
                      x->epoch_index == y->epoch_index &&
                      x->frag.external == y->frag.external && x->frag.largest_free == y->frag.largest_free,
                  "the OOM's analysis differs: seq %llu/%llu allocated %llu/%llu", (unsigned long long)x->seq,
                  (unsigned long long)y->seq, (unsigned long long)x->allocated, (unsigned long long)y->allocated);
    ck_assert_msg(x->ntop > 0 && x->allocated > 0, "the OOM saw no live blocks");
    for (unsigned i = 0; i < x->ntop; i++)
        ck_assert_msg(x->top[i].sidx == y->top[i].sidx && x->top[i].bytes == y->top[i].bytes &&
                          x->top[i].count == y->top[i].count,
                      "the OOM's top site %u differs", i);
    for (int k = 0; k < 2; k++) {
        model_free(&m[k]);
        rd_close(&l[k]);
    }
    free(b.buf);
}
END_TEST

/* ---- bounded logs: a checkpoint's state (logs built by tests/unit/testlog.c) --------------------- */

#define MS 1000000ull
#define U(x) ((unsigned long long)(x))

/* The figures of the example (testlog.h) both readings must give: the cut's counts plus the
 * events after it, its peak where the events after it stay lower, its live block with its site. */
static void assert_example_figures(const model_t *m, const char *what)
{
    const model_dev_t *d = m->dev[0];
    ck_assert_msg(d != NULL, "%s: no device 0", what);
    ck_assert_msg(d->allocs == 17 && d->frees == 16 && d->hits == 15 && d->misses == 2,
                  "%s: %llu allocs, %llu frees, %llu hits, %llu misses (want 17, 16, 15, 2)", what, U(d->allocs),
                  U(d->frees), U(d->hits), U(d->misses));
    ck_assert_msg(d->peak_allocated == 81 * MiB + MiB / 2 && d->peak_requested == 81 * MiB + MiB / 2 &&
                  d->peak_reserved == 72 * MiB, "%s: peaks allocated %llu, requested %llu, reserved %llu", what,
                  U(d->peak_allocated), U(d->peak_requested), U(d->peak_reserved));
    ck_assert_msg(d->allocated == MiB && d->requested == MiB && d->reserved == 72 * MiB && !d->unmatched_frees &&
                  !d->replaced, "%s: at the end allocated %llu, requested %llu, reserved %llu, %llu unmatched frees, "
                  "%llu replaced", what, U(d->allocated), U(d->requested), U(d->reserved), U(d->unmatched_frees),
                  U(d->replaced));
    ck_assert_msg(d->ooms == 1 && m->ooms_total == 1 && m->nooms == 1 && m->ooms[0].t == 350 * MS &&
                  m->ooms[0].rec.request == 1024 * MiB, "%s: %llu OOMs on the device, %llu in all, %zu listed",
                  what, U(d->ooms), U(m->ooms_total), m->nooms);
    ck_assert_msg(m->marks_total == 2 && m->nmarks == 2 && m->marks[0].id == 1 && m->marks[0].t == 400 * MS &&
                  m->marks[1].id == 2, "%s: %llu marks, the first %u at %llu", what, U(m->marks_total),
                  m->nmarks ? m->marks[0].id : 0, U(m->nmarks ? m->marks[0].t : 0));
    model_top_t top[4];
    unsigned n = model_top_sites(m, 0, top, 4);
    ck_assert_msg(m->live.count == 1 && n == 1 && m->sst[top[0].sidx].site == 7 && top[0].bytes == MiB,
                  "%s: %zu live, %u sites live, the first site %u with %llu bytes", what, m->live.count, n,
                  n ? m->sst[top[0].sidx].site : 0, U(n ? top[0].bytes : 0));
}

START_TEST(test_a_wrapped_log_starts_from_its_checkpoint)
{
    tlog_t b;
    tlog_wrapped_example(&b, 1, 1);
    for (int k = 0; k < 2; k++) { /* in order, and with readers in parallel asked for */
        setenv("GMSHIM_ANALYZER_THREADS", k ? "4" : "0", 1);
        for (int f = 0; f < 2; f++) {
            rd_log_t l;
            model_t m;
            ck_assert_int_eq(rd_open_mem(&l, b.buf, b.len, "wrapped"), 0);
            memset(&m, 0, sizeof m);
            model_build(&m, &l, f ? MODEL_SITES | MODEL_EPOCHS : MODEL_SITES);
            assert_example_figures(&m, k ? "parallel asked" : "in order");
            ck_assert_msg(m.ooms[0].history && m.ooms[0].persistent == MiB + MiB / 2,
                          "the history's OOM: history %d, persistent %llu", m.ooms[0].history,
                          U(m.ooms[0].persistent));
            ck_assert_msg(m.records == 7 && m.by_type[GMLOG_ALLOC] == 2 && m.by_type[GMLOG_CUT] == 0 && !l.partial,
                          "%llu records, %llu allocations read as events; partial %d", U(m.records),
                          U(m.by_type[GMLOG_ALLOC]), l.partial);
            const model_dev_t *d = m.dev[0];
            ck_assert_msg(d->cut_seen && d->cut_ns == 1001 * MS && d->cut_allocs == 15 && d->cut_frees == 13,
                          "cut: seen %d at %llu, %llu allocs, %llu frees", d->cut_seen, U(d->cut_ns), U(d->cut_allocs),
                          U(d->cut_frees));
            for (size_t i = 0; i < m.live.cap; i++) {
                const model_live_t *e = &m.live.slots[i];
                if (e->ptr)
                    ck_assert_msg(e->ptr == TLOG_A && model_live_before_cut(e) &&
                                  model_live_time(e) == (1001 * MS & ~255ull),
                                  "live %llx: before the cut %d, time %llu", U(e->ptr), model_live_before_cut(e),
                                  U(model_live_time(e)));
            }
            model_free(&m);
            rd_close(&l);
        }
    }
    unsetenv("GMSHIM_ANALYZER_THREADS");
    tlog_free_buf(&b);
}
END_TEST

/* The same run unwrapped, every chunk there: its checkpoint's copies (a mark, sites, a cut and
 * its blocks) count for nothing, in order and in parallel; the figures are the wrapped log's. */
START_TEST(test_checkpoint_records_count_for_nothing_in_a_log_that_did_not_wrap)
{
    tlog_t b;
    tlog_wrapped_example(&b, 0, 1);
    for (int k = 0; k < 2; k++) {
        setenv("GMSHIM_ANALYZER_THREADS", k ? "4" : "0", 1);
        for (int f = 0; f < 2; f++) {
            rd_log_t l;
            model_t m;
            ck_assert_int_eq(rd_open_mem(&l, b.buf, b.len, "not wrapped"), 0);
            memset(&m, 0, sizeof m);
            model_build(&m, &l, f ? MODEL_SITES | MODEL_EPOCHS : 0);
            if (f)
                assert_example_figures(&m, k ? "not wrapped, in parallel" : "not wrapped");
            ck_assert_msg(m.records == 42 && m.dev[0]->allocs == 17 && m.dev[0]->frees == 16 &&
                          m.dev[0]->peak_allocated == 81 * MiB + MiB / 2 && !m.dev[0]->cut_seen && !l.partial &&
                          !l.unknown_records, "%s, flags %d: %llu records, %llu allocs, %llu frees, peak %llu, cut %d, "
                          "partial %d, %llu unknown", k ? "parallel" : "in order", f, U(m.records), U(m.dev[0]->allocs),
                          U(m.dev[0]->frees), U(m.dev[0]->peak_allocated), m.dev[0]->cut_seen, l.partial,
                          U(l.unknown_records));
            model_free(&m);
            rd_close(&l);
        }
    }
    tlog_free_buf(&b);

    /* A worker's checkpoint across its chunks, where a parallel window starts inside it: that
     * replay gives way to the one in order (the cut's block is no allocation). */
    tlog_begin(&b, 0);
    tlog_chunk(&b, 7, 0, 0, 0);
    tlog_alloc(&b, 10, TLOG_A, 4096, 0, 0);
    tlog_checkpoint(&b, 20, GMLOG_CKPT_BEGIN, 3, 20);
    gmlog_cut_t cut = {.cut_ns = 22, .requested = 8192, .allocated = 8192, .allocs = 2, .blocks = 2};
    tlog_cut(&b, 22, &cut);
    tlog_alloc(&b, 23, TLOG_A, 4096, 0, 0);
    tlog_chunk(&b, 8, 1, 0, 50);
    tlog_alloc(&b, 50, TLOG_D, 4096, 0, 0);
    tlog_free(&b, 60, TLOG_D);
    tlog_chunk(&b, 7, 2, 1, 100);
    tlog_alloc(&b, 100, TLOG_D, 4096, 0, 0);
    tlog_checkpoint(&b, 110, GMLOG_CKPT_END, 3, 20);
    tlog_free(&b, 120, TLOG_A);
    tlog_chunk(&b, 9, 3, 0, 150);
    tlog_alloc(&b, 150, TLOG_SEG, 4096, 0, 0);
    tlog_end_chunk(&b);
    model_t m[2];
    for (int k = 0; k < 2; k++) {
        setenv("GMSHIM_ANALYZER_THREADS", k ? "4" : "0", 1);
        rd_log_t l;
        ck_assert_int_eq(rd_open_mem(&l, b.buf, b.len, "worker's checkpoint"), 0);
        memset(&m[k], 0, sizeof m[k]);
        model_build(&m[k], &l, k ? 0 : MODEL_SITES | MODEL_EPOCHS);
        ck_assert_msg(m[k].dev[0]->allocs == 3 && m[k].dev[0]->frees == 2 && m[k].records == 5 &&
                      m[k].dev[0]->allocated == 4096 && !l.partial && m[k].windows == 0,
                      "%s: %llu allocs, %llu frees, %llu records, %llu allocated, partial %d, %u windows",
                      k ? "parallel" : "in order", U(m[k].dev[0]->allocs), U(m[k].dev[0]->frees), U(m[k].records),
                      U(m[k].dev[0]->allocated), l.partial, m[k].windows);
        rd_close(&l);
        m[k].lf = NULL;
        model_free(&m[k]);
    }
    unsetenv("GMSHIM_ANALYZER_THREADS");
    tlog_free_buf(&b);
}
END_TEST

Suite *analyzer_model_suite(void)
{
    Suite *s = suite_create("analyzer_model");
    TCase *tc = tcase_create("replay");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_block_sizes_peaks_and_hits_follow_the_records);
    tcase_add_test(tc, test_free_gaps_come_from_segments_and_live_blocks);
    tcase_add_test(tc, test_marks_make_epochs_and_a_kept_allocation_grows);
    tcase_add_test(tc, test_unmarked_run_finds_iterations_at_the_troughs);
    tcase_add_test(tc, test_a_run_that_only_grows_has_no_epochs);
    tcase_add_test(tc, test_threads_out_of_file_order_replay_in_time_order);
    tcase_add_test(tc, test_lost_frees_and_resets_keep_the_figures_sane);
    tcase_add_test(tc, test_clock_records_move_the_time_base);
    tcase_add_test(tc, test_recovered_ooms_are_retries_and_failed_ones_are_analysed);
    tcase_add_test(tc, test_damaged_logs_never_crash_the_model);
    tcase_add_test(tc, test_parallel_summary_equals_the_replay_in_order);
    tcase_add_test(tc, test_parallel_sites_replay_equals_the_replay_in_order);
    tcase_add_test(tc, test_a_log_with_an_oom_goes_on_in_order_from_its_window);
    tcase_add_test(tc, test_python_frames_come_first_with_their_file_and_line);
    suite_add_tcase(s, tc);
    TCase *ck = tcase_create("checkpoints");
    tcase_set_timeout(ck, 60);
    tcase_add_test(ck, test_a_wrapped_log_starts_from_its_checkpoint);
    tcase_add_test(ck, test_checkpoint_records_count_for_nothing_in_a_log_that_did_not_wrap);
    suite_add_tcase(s, ck);
    return s;
}
