/* The model's reading of PyTorch's tensor events (analyzer/model_torch.c) on logs built record by
 * record: the tensors are the allocations, PyTorch's segments the segments (the cudaMalloc the
 * hooks logged for each is not counted again), a free requested stays pending until PyTorch
 * completes it, a free on another stream than the allocation's is counted, and a log without
 * tensor events reads as before. */
#include "model.h"
#include "replay.h"
#include "replay_torch.h"
#include "suites.h"
#include "testlog.h"

#include <stdlib.h>
#include <string.h>

#define MiB TLOG_MiB
#define SEG (TLOG_SEG + 0x4000000)     /* PyTorch's 20 MiB segment */
#define TA SEG                         /* its first tensor, at the segment's base */
#define TB (SEG + MiB)

/* Records, by number: 0 DEVICE; 1 gmshim's segment, 2 PyTorch's cudaMalloc of it (an ALLOC of
 * 20 MiB), 3 T_SEGMENT_ALLOC; 4 tensor A (1 MiB, stream 0, site 7), 5 tensor B (2 MiB,
 * stream 5, site 9); 6 A's free requested on stream 0, 7 B's requested on stream 7 (another
 * stream: it stays pending to the end); 8 A's free completed. With tensors 0 the T_* records are
 * left out: the log of a run without the bridge. */
static void build(tlog_t *b, int tensors)
{
    tlog_begin(b, 0);
    tlog_torch_keep(b);
    tlog_chunk(b, 1, 0, 0, 1000);
    tlog_device(b, 1000, "test GPU", 80 * 1024 * MiB);
    tlog_segment(b, 1100, GMLOG_SEGMENT_ALLOC, SEG, 20 * MiB);
    tlog_alloc(b, 1101, SEG, 20 * MiB, GMLOG_KIND_POOL << GMLOG_KIND_SHIFT | GMLOG_A_MISS, 3);
    if (tensors) {
        tlog_tensor(b, 1102, GMLOG_T_SEGMENT_ALLOC, SEG, 20 * MiB, 0, 7);
        tlog_tensor(b, 1200, GMLOG_T_ALLOC, TA, MiB, 0, 7);
        tlog_tensor(b, 1300, GMLOG_T_ALLOC, TB, 2 * MiB, 5, 9);
        tlog_tensor(b, 1400, GMLOG_T_FREE_REQUESTED, TA, MiB, 0, 11);
        tlog_tensor(b, 1500, GMLOG_T_FREE_REQUESTED, TB, 2 * MiB, 7, 11);
        tlog_tensor(b, 1600, GMLOG_T_FREE_COMPLETED, TA, MiB, 0, 0);
    }
    tlog_end_chunk(b);
}

typedef struct built {
    tlog_t b;
    rd_log_t lf;
    model_t m;
} built_t;

static built_t *model_of(int tensors, uint64_t stop_seq)
{
    built_t *x = calloc(1, sizeof *x);
    ck_assert(x);
    build(&x->b, tensors);
    ck_assert_int_eq(rd_open_mem(&x->lf, x->b.buf, x->b.len, "tensors"), 0);
    model_build_until(&x->m, &x->lf, MODEL_ALL, stop_seq, 0, NULL);
    ck_assert(x->m.dev[0]);
    return x;
}

static void done(built_t *x)
{
    model_free(&x->m);
    rd_close(&x->lf);
    tlog_free_buf(&x->b);
    free(x);
}

START_TEST(test_pytorchs_tensors_are_the_allocations)
{
    built_t *x = model_of(1, UINT64_MAX);
    const model_dev_t *d = x->m.dev[0];
    ck_assert(x->m.torch && d->torch);
    ck_assert_uint_eq(d->torch_allocs, 2);
    ck_assert_uint_eq(d->allocs, 2); /* the segment's cudaMalloc is not an allocation */
    ck_assert_uint_eq(d->peak_allocated, 3 * MiB);
    ck_assert_uint_eq(d->peak_requested, 3 * MiB);
    done(x);
}
END_TEST

START_TEST(test_pytorchs_segment_is_reserved_once)
{
    built_t *x = model_of(1, UINT64_MAX);
    const model_dev_t *d = x->m.dev[0];
    ck_assert_uint_eq(d->peak_reserved, 20 * MiB); /* not gmshim's segment and PyTorch's both */
    ck_assert_uint_eq(d->segments, 1);
    done(x);
}
END_TEST

START_TEST(test_a_tensors_site_holds_its_bytes)
{
    built_t *x = model_of(1, 6); /* before the first free */
    const model_t *m = &x->m;
    uint64_t site7 = 0, site9 = 0, site3 = 0;
    for (size_t i = 1; i < m->nsst; i++) {
        if (m->sst[i].site == 7)
            site7 = m->sst[i].live_req;
        if (m->sst[i].site == 9)
            site9 = m->sst[i].live_req;
        if (m->sst[i].site == 3)
            site3 = m->sst[i].live_req;
    }
    ck_assert_uint_eq(site7, MiB);
    ck_assert_uint_eq(site9, 2 * MiB);
    ck_assert_uint_eq(site3, 0); /* the segment's cudaMalloc site holds nothing */
    done(x);
}
END_TEST

START_TEST(test_a_requested_free_stays_pending_until_completed)
{
    built_t *x = model_of(1, 8); /* both frees requested, A's not yet completed */
    const model_dev_t *d = x->m.dev[0];
    ck_assert_uint_eq(d->allocated, 0); /* the tensors are gone */
    ck_assert_uint_eq(d->torch_pending, 3 * MiB);
    ck_assert_uint_eq(d->torch_pending_count, 2);
    ck_assert(model_torch_pending_at(&x->m, TA, NULL));
    done(x);
    x = model_of(1, UINT64_MAX);
    d = x->m.dev[0];
    ck_assert_uint_eq(d->torch_pending, 2 * MiB); /* B's never completed */
    ck_assert_uint_eq(d->torch_pending_peak, 3 * MiB);
    ck_assert_uint_eq(d->torch_waited, 2); /* neither completed at once */
    ck_assert(!model_torch_pending_at(&x->m, TA, NULL));
    ck_assert(model_torch_pending_at(&x->m, TB, NULL));
    done(x);
}
END_TEST

/* A free completed as soon as it was requested (no other stream used the block) never waited. */
START_TEST(test_a_free_completed_at_once_did_not_wait)
{
    tlog_t b;
    tlog_begin(&b, 0);
    tlog_torch_keep(&b);
    tlog_chunk(&b, 1, 0, 0, 1000);
    tlog_tensor(&b, 1102, GMLOG_T_SEGMENT_ALLOC, SEG, 20 * MiB, 0, 7);
    tlog_tensor(&b, 1200, GMLOG_T_ALLOC, TA, MiB, 0, 7);
    tlog_tensor(&b, 1400, GMLOG_T_FREE_REQUESTED, TA, MiB, 0, 11);
    tlog_tensor(&b, 1401, GMLOG_T_FREE_COMPLETED, TA, MiB, 0, 0);
    tlog_tensor(&b, 1500, GMLOG_T_ALLOC, TB, MiB, 0, 7);
    tlog_end_chunk(&b);
    rd_log_t lf;
    ck_assert_int_eq(rd_open_mem(&lf, b.buf, b.len, "at once"), 0);
    model_t m;
    model_build(&m, &lf, 0);
    ck_assert_uint_eq(m.dev[0]->torch_waited, 0);
    ck_assert_uint_eq(m.dev[0]->torch_pending_peak, 0);
    ck_assert_uint_eq(m.dev[0]->torch_pending, 0);
    model_free(&m);
    rd_close(&lf);
    tlog_free_buf(&b);
}
END_TEST

/* A wrapped log whose checkpoint has PyTorch's state. The checkpoint (at 1000): PyTorch's CUT
 * (tensors A 1 MiB site 7 and B 2 MiB site 9 live, C 512 KiB pending; peak allocated 5 MiB, 10
 * allocations, 7 frees), its segment and T_ records; then gmshim's own CUT (its view: 40 hits, 3
 * misses) with gmshim's segment, PyTorch's segment's cudaMalloc and a library's own 64 KiB
 * cudaMalloc (site 4). After it: a tensor X timed before the cut (in the checkpoint: dropped);
 * C's free completed, A freed, D (4 MiB, site 11) allocated. */
#define TC (SEG + 3 * MiB)
#define TD (SEG + 4 * MiB)
#define OTHER (SEG + 20 * MiB)
static void wrapped_tensor_log(tlog_t *b)
{
    tlog_begin(b, GMLOG_F_WRAPPED);
    tlog_torch_keep(b);
    tlog_chunk(b, 2, 2, 0, 1000);
    tlog_checkpoint(b, 1000, GMLOG_CKPT_BEGIN, 1, 1000);
    tlog_device(b, 1000, "test GPU", 80 * 1024 * MiB);
    gmlog_cut_t tc = {.h = {0, 0, 0, GMLOG_CUT_TORCH, 0}, .cut_ns = 1001, .requested = 3 * MiB,
                      .allocated = 3 * MiB, .reserved = 20 * MiB, .pending = MiB / 2, .peak_requested = 5 * MiB,
                      .peak_allocated = 5 * MiB, .peak_reserved = 20 * MiB, .allocs = 10, .frees = 7,
                      .segments = 1, .blocks = 3};
    tlog_cut(b, 1001, &tc);
    tlog_tensor(b, 1001, GMLOG_T_SEGMENT_ALLOC, SEG, 20 * MiB, 0, 7);
    tlog_tensor(b, 1001, GMLOG_T_ALLOC, TA, MiB, 0, 7);
    tlog_tensor(b, 1001, GMLOG_T_ALLOC, TB, 2 * MiB, 5, 9);
    tlog_tensor(b, 1001, GMLOG_T_FREE_REQUESTED, TC, MiB / 2, 5, 9);
    gmlog_cut_t hc = {.cut_ns = 1002, .requested = 20 * MiB + 65536, .allocated = 20 * MiB + 65536,
                      .reserved = 22 * MiB, .peak_allocated = 30 * MiB, .allocs = 50, .frees = 47, .hits = 40,
                      .misses = 3, .segments = 1, .blocks = 2};
    tlog_cut(b, 1002, &hc);
    tlog_segment(b, 1002, GMLOG_SEGMENT_ALLOC, SEG, 22 * MiB);
    tlog_alloc(b, 1002, SEG, 20 * MiB, GMLOG_KIND_POOL << GMLOG_KIND_SHIFT, 3);
    tlog_alloc(b, 1002, OTHER, 65536, GMLOG_KIND_POOL << GMLOG_KIND_SHIFT, 4);
    tlog_checkpoint(b, 1003, GMLOG_CKPT_END, 1, 1000);
    tlog_chunk(b, 1, 3, 5, 900);
    tlog_tensor(b, 950, GMLOG_T_ALLOC, SEG + 8 * MiB, MiB, 0, 7);
    tlog_tensor(b, 2000, GMLOG_T_FREE_COMPLETED, TC, MiB / 2, 5, 0);
    tlog_tensor(b, 2100, GMLOG_T_FREE_REQUESTED, TA, MiB, 0, 11);
    tlog_tensor(b, 2101, GMLOG_T_FREE_COMPLETED, TA, MiB, 0, 0);
    tlog_tensor(b, 2200, GMLOG_T_ALLOC, TD, 4 * MiB, 0, 11);
    tlog_end_chunk(b);
}

/* The model of PyTorch's allocator on that log starts from the checkpoint's tensors (C, whose
 * free was requested, still held) and drops X, timed before the cut: B and D live at the end,
 * 6 MiB at most, never A + B + C + X. */
START_TEST(test_the_allocator_model_starts_from_the_checkpoints_tensors)
{
    tlog_t b;
    wrapped_tensor_log(&b);
    rd_log_t lf;
    ck_assert_int_eq(rd_open_mem(&lf, b.buf, b.len, "wrapped tensors"), 0);
    rt_log_t l;
    ck_assert_int_eq(replay_torch_load(&l, &lf, 0), 0);
    rt_result_t r = replay_torch_run(&l, &l.conf);
    ck_assert_msg(l.wrapped && r.peak_allocated == 6 * MiB && r.failures == 0,
                  "wrapped %d, peak allocated %llu (B + D = 6 MiB), %llu failures", l.wrapped,
                  (unsigned long long)r.peak_allocated, (unsigned long long)r.failures);
    replay_torch_free(&l);
    rd_close(&lf);
    tlog_free_buf(&b);
}
END_TEST

static uint64_t live_at_site(const model_t *m, uint32_t site)
{
    for (size_t i = 1; i < m->nsst; i++)
        if (m->sst[i].site == site)
            return m->sst[i].live_req;
    return 0;
}

START_TEST(test_a_wrapped_log_restores_pytorchs_tensors_from_its_checkpoint)
{
    tlog_t b;
    wrapped_tensor_log(&b);
    rd_log_t lf;
    ck_assert_int_eq(rd_open_mem(&lf, b.buf, b.len, "wrapped tensors"), 0);
    ck_assert_msg(lf.ckpt.seq == 1 && lf.torch_cut[0] && lf.torch_cut_ns[0] == 1001 && lf.cut_ns[0] == 1002,
                  "checkpoint %llu, PyTorch's cut %d at %llu, gmshim's at %llu", (unsigned long long)lf.ckpt.seq,
                  lf.torch_cut[0], (unsigned long long)lf.torch_cut_ns[0], (unsigned long long)lf.cut_ns[0]);
    ck_assert_msg(lf.ckpt.allocs == 10 && lf.ckpt.frees == 7, "the checkpoint stands for %llu allocations, %llu "
                  "frees: PyTorch's 10 and 7", (unsigned long long)lf.ckpt.allocs, (unsigned long long)lf.ckpt.frees);
    model_t m;
    model_build(&m, &lf, MODEL_ALL);
    const model_dev_t *d = m.dev[0];
    uint64_t want = 2 * MiB + 4 * MiB + 65536; /* B, D and the library's block; not X, not A */
    ck_assert_msg(d->allocated == want && d->requested == want, "allocated %llu, requested %llu, %llu expected",
                  (unsigned long long)d->allocated, (unsigned long long)d->requested, (unsigned long long)want);
    ck_assert_msg(d->reserved == 20 * MiB && d->segments == 1, "reserved %llu in %llu segments: PyTorch's one",
                  (unsigned long long)d->reserved, (unsigned long long)d->segments);
    ck_assert_msg(d->torch_pending == 0 && d->torch_pending_peak == MiB / 2, "pending %llu, peak %llu",
                  (unsigned long long)d->torch_pending, (unsigned long long)d->torch_pending_peak);
    ck_assert_msg(d->torch_allocs == 11 && d->hits == 40 && d->misses == 3,
                  "%llu tensors, %llu hits, %llu misses", (unsigned long long)d->torch_allocs,
                  (unsigned long long)d->hits, (unsigned long long)d->misses);
    ck_assert_msg(d->peak_allocated == want, "peak %llu: PyTorch's 5 MiB at the cut, %llu after it",
                  (unsigned long long)d->peak_allocated, (unsigned long long)want);
    ck_assert_msg(live_at_site(&m, 9) == 2 * MiB && live_at_site(&m, 7) == 0 && live_at_site(&m, 3) == 0 &&
                  live_at_site(&m, 4) == 65536 && live_at_site(&m, 11) == 4 * MiB,
                  "sites 9/7/3/4/11 hold %llu/%llu/%llu/%llu/%llu", (unsigned long long)live_at_site(&m, 9),
                  (unsigned long long)live_at_site(&m, 7), (unsigned long long)live_at_site(&m, 3),
                  (unsigned long long)live_at_site(&m, 4), (unsigned long long)live_at_site(&m, 11));
    model_free(&m);
    rd_close(&lf);
    tlog_free_buf(&b);
}
END_TEST

START_TEST(test_a_tensor_freed_on_another_stream_is_counted)
{
    built_t *x = model_of(1, UINT64_MAX);
    ck_assert_uint_eq(x->m.dev[0]->torch_cross_stream, 1); /* B: allocated on 5, freed on 7 */
    done(x);
}
END_TEST

START_TEST(test_a_pending_block_is_occupied_space_in_its_segment)
{
    built_t *x = model_of(1, UINT64_MAX); /* A completed, B pending: free is A's 1 MiB and the tail */
    model_frag_t fr;
    model_frag_now(&x->m, 0, &fr);
    ck_assert_uint_eq(fr.pending, 2 * MiB);
    ck_assert_uint_eq(fr.external, 18 * MiB);
    ck_assert_uint_eq(fr.free_gaps, 2);
    ck_assert_uint_eq(fr.largest_free, 17 * MiB);
    model_segfrag_t g[2];
    uint64_t nsegs;
    ck_assert_uint_eq(model_frag_segments(&x->m, 0, g, 2, &nsegs), 1);
    ck_assert_uint_eq(nsegs, 1);
    ck_assert_uint_eq(g[0].base, SEG);
    ck_assert_uint_eq(g[0].free, 18 * MiB);
    ck_assert_uint_eq(g[0].free_blocks, 2);
    ck_assert_uint_eq(g[0].largest_free, 17 * MiB);
    ck_assert_uint_eq(g[0].blocks, 1);
    done(x);
}
END_TEST

/* PyTorch's OutOfMemoryError (T_OOM) is the OOM: the tensor's request and site, the figures of
 * PyTorch's allocator then; the hooks' failed cudaMalloc before it is not a second OOM. */
START_TEST(test_pytorchs_oom_is_the_oom_with_the_tensors_request)
{
    tlog_t b;
    tlog_begin(&b, 0);
    tlog_torch_keep(&b);
    tlog_chunk(&b, 1, 0, 0, 1000);
    tlog_device(&b, 1000, "test GPU", 80 * 1024 * MiB);
    tlog_segment(&b, 1100, GMLOG_SEGMENT_ALLOC, SEG, 20 * MiB);
    tlog_alloc(&b, 1101, SEG, 20 * MiB, GMLOG_KIND_POOL << GMLOG_KIND_SHIFT | GMLOG_A_MISS, 3);
    tlog_tensor(&b, 1102, GMLOG_T_SEGMENT_ALLOC, SEG, 20 * MiB, 0, 7);
    tlog_tensor(&b, 1200, GMLOG_T_ALLOC, TA, MiB, 0, 7);
    tlog_tensor(&b, 1300, GMLOG_T_ALLOC, TB, 2 * MiB, 0, 9);
    tlog_tensor(&b, 1400, GMLOG_T_FREE_REQUESTED, TA, MiB, 0, 11);
    tlog_tensor(&b, 1401, GMLOG_T_FREE_COMPLETED, TA, MiB, 0, 0);
    tlog_oom(&b, 1500, 40 * MiB, 20 * MiB, 12); /* PyTorch asked for a 40 MiB segment */
    tlog_tensor(&b, 1600, GMLOG_T_OOM, 512 * MiB, 30 * MiB, 0, 12);
    tlog_end_chunk(&b);
    rd_log_t lf;
    ck_assert_int_eq(rd_open_mem(&lf, b.buf, b.len, "oom"), 0);
    model_t m;
    model_build(&m, &lf, MODEL_SITES | MODEL_EPOCHS);
    ck_assert_uint_eq(m.nooms, 1);
    const model_oom_t *o = &m.ooms[0];
    ck_assert_uint_eq(o->rec.request, 30 * MiB);
    ck_assert_uint_eq(o->rec.segment, 40 * MiB);
    ck_assert_uint_eq(o->rec.site, 12);
    ck_assert_uint_eq(o->rec.allocated, 2 * MiB);
    ck_assert_uint_eq(o->rec.reserved, 20 * MiB);
    ck_assert_uint_eq(o->rec.largest_free, 17 * MiB);
    ck_assert_uint_eq(o->nseg, 1);
    ck_assert_uint_eq(o->seg[0].free, 18 * MiB);
    model_free(&m);
    rd_close(&lf);
    tlog_free_buf(&b);
}
END_TEST

/* PyTorch's segment taken from the driver at its exact size (kind PASS, GMLOG_A_EXACT: no gmshim
 * segment around it) and an OOM of an exact segment: the tensors and PyTorch's OOM read as with a
 * pool segment, and the replay takes the OOM as the tensor's request, not an exact segment's. */
START_TEST(test_an_exact_segment_and_its_oom_read_as_pytorchs)
{
    tlog_t b;
    tlog_begin(&b, 0);
    tlog_torch_keep(&b);
    tlog_chunk(&b, 1, 0, 0, 1000);
    tlog_device(&b, 1000, "test GPU", 80 * 1024 * MiB);
    tlog_alloc(&b, 1101, SEG, 20 * MiB, GMLOG_KIND_PASS << GMLOG_KIND_SHIFT | GMLOG_A_EXACT, 3);
    tlog_tensor(&b, 1102, GMLOG_T_SEGMENT_ALLOC, SEG, 20 * MiB, 0, 7);
    tlog_tensor(&b, 1200, GMLOG_T_ALLOC, TA, MiB, 0, 7);
    tlog_tensor(&b, 1300, GMLOG_T_ALLOC, TB, 2 * MiB, 0, 9);
    gmlog_oom_t o = {.h = {GMLOG_OOM, 0, 0, GMLOG_OOM_RELEASED | GMLOG_OOM_EXACT, 0}, .request = 40 * MiB,
                     .segment = 40 * MiB, .driver_free = 30 * MiB, .driver_total = 80 * 1024 * MiB,
                     .reserved = 20 * MiB, .allocated = 20 * MiB, .requested = 20 * MiB, .site = 12};
    tlog_rec(&b, &o, sizeof o, 1500);
    tlog_tensor(&b, 1600, GMLOG_T_OOM, 512 * MiB, 30 * MiB, 0, 12);
    tlog_end_chunk(&b);
    rd_log_t lf;
    ck_assert_int_eq(rd_open_mem(&lf, b.buf, b.len, "exact"), 0);
    model_t m;
    model_build(&m, &lf, MODEL_SITES | MODEL_EPOCHS);
    ck_assert_uint_eq(m.nooms, 1);
    ck_assert_uint_eq(m.ooms[0].rec.request, 30 * MiB);
    ck_assert_uint_eq(m.ooms[0].rec.segment, 40 * MiB);
    ck_assert_uint_eq(m.ooms[0].rec.reserved, 20 * MiB);
    ck_assert_uint_eq(m.ooms[0].rec.allocated, 3 * MiB);
    ck_assert_msg(!(m.ooms[0].rec.h.flags & GMLOG_OOM_EXACT), "the tensor's OOM kept the segment's flag");
    model_free(&m);
    rp_log_t log;
    ck_assert_int_eq(rp_load(&log, &lf, 0), 0);
    ck_assert_msg(log.torch_tensors && !log.pool_off && log.nooms == 1 && !log.ooms[0].exact,
                  "tensors %d, pool_off %d, %zu OOMs, exact %d", log.torch_tensors, log.pool_off, log.nooms,
                  log.nooms ? log.ooms[0].exact : -1);
    ck_assert_uint_eq(log.ooms[0].rec.request, 30 * MiB);
    rp_log_free(&log);
    rd_close(&lf);
    tlog_free_buf(&b);
}
END_TEST

START_TEST(test_a_log_without_tensor_events_reads_as_before)
{
    built_t *x = model_of(0, UINT64_MAX);
    const model_dev_t *d = x->m.dev[0];
    ck_assert(!x->m.torch && !d->torch);
    ck_assert_uint_eq(d->allocs, 1); /* PyTorch's segment, as the hooks saw it */
    ck_assert_uint_eq(d->peak_allocated, 20 * MiB);
    ck_assert_uint_eq(d->peak_reserved, 20 * MiB);
    done(x);
}
END_TEST

/* Expandable segments, no cudaMalloc. unmap 0: two ranges mapped one after the other, a tensor
 * across their boundary. unmap 1: one 40 MiB range, a tensor, the free last 20 MiB unmapped. */
static model_t *expandable_model(tlog_t *b, rd_log_t *lf, model_t *m, int unmap)
{
    tlog_begin(b, 0);
    tlog_torch_keep(b);
    tlog_chunk(b, 1, 0, 0, 1000);
    tlog_device(b, 1000, "test GPU", 80 * 1024 * MiB);
    if (unmap) {
        tlog_tensor(b, 1100, GMLOG_T_SEGMENT_MAP, SEG, 40 * MiB, 0, 7);
        tlog_tensor(b, 1200, GMLOG_T_ALLOC, SEG, 16 * MiB, 0, 7);
        tlog_tensor(b, 1600, GMLOG_T_SEGMENT_UNMAP, SEG + 20 * MiB, 20 * MiB, 0, 0);
    } else {
        tlog_tensor(b, 1100, GMLOG_T_SEGMENT_MAP, SEG, 20 * MiB, 0, 7);
        tlog_tensor(b, 1200, GMLOG_T_ALLOC, SEG, 16 * MiB, 0, 7);
        tlog_tensor(b, 1300, GMLOG_T_SEGMENT_MAP, SEG + 20 * MiB, 20 * MiB, 0, 9);
        tlog_tensor(b, 1400, GMLOG_T_ALLOC, SEG + 16 * MiB, 16 * MiB, 0, 9); /* across the two ranges */
    }
    tlog_end_chunk(b);
    ck_assert_int_eq(rd_open_mem(lf, b->buf, b->len, "expandable"), 0);
    model_build(m, lf, MODEL_ALL);
    ck_assert(m->dev[0]);
    return m;
}

/* A range mapped at the end of an expandable segment grows it: one segment, whose free space is the
 * tail after the tensor that crosses the old end, not two segments with a tensor across them. */
START_TEST(test_mapped_ranges_grow_one_expandable_segment)
{
    tlog_t b;
    rd_log_t lf;
    model_t m;
    expandable_model(&b, &lf, &m, 0);
    const model_dev_t *d = m.dev[0];
    ck_assert_uint_eq(d->segments, 1);
    ck_assert_uint_eq(d->reserved, 40 * MiB);
    ck_assert_uint_eq(d->peak_allocated, 32 * MiB);
    model_segfrag_t g[2];
    uint64_t nsegs;
    ck_assert_uint_eq(model_frag_segments(&m, 0, g, 2, &nsegs), 1);
    ck_assert_uint_eq(g[0].base, SEG);
    ck_assert_uint_eq(g[0].size, 40 * MiB);
    ck_assert_uint_eq(g[0].free, 8 * MiB);
    ck_assert_uint_eq(g[0].largest_free, 8 * MiB);
    model_free(&m);
    rd_close(&lf);
    tlog_free_buf(&b);
}
END_TEST

/* An unmapped tail shrinks the segment (PyTorch unmaps free pages of a segment, not segments). */
START_TEST(test_an_unmapped_tail_shrinks_the_expandable_segment)
{
    tlog_t b;
    rd_log_t lf;
    model_t m;
    expandable_model(&b, &lf, &m, 1);
    const model_dev_t *d = m.dev[0];
    ck_assert_uint_eq(d->segments, 1);
    ck_assert_uint_eq(d->reserved, 20 * MiB);
    ck_assert_uint_eq(d->peak_reserved, 40 * MiB);
    ck_assert_uint_eq(d->bad_segment_frees, 0);
    model_free(&m);
    rd_close(&lf);
    tlog_free_buf(&b);
}
END_TEST

Suite *analyzer_tensors_suite(void)
{
    Suite *s = suite_create("analyzer_tensors");
    TCase *tc = tcase_create("built");
    tcase_add_test(tc, test_pytorchs_tensors_are_the_allocations);
    tcase_add_test(tc, test_pytorchs_segment_is_reserved_once);
    tcase_add_test(tc, test_a_tensors_site_holds_its_bytes);
    tcase_add_test(tc, test_a_requested_free_stays_pending_until_completed);
    tcase_add_test(tc, test_a_free_completed_at_once_did_not_wait);
    tcase_add_test(tc, test_a_wrapped_log_restores_pytorchs_tensors_from_its_checkpoint);
    tcase_add_test(tc, test_the_allocator_model_starts_from_the_checkpoints_tensors);
    tcase_add_test(tc, test_a_tensor_freed_on_another_stream_is_counted);
    tcase_add_test(tc, test_a_pending_block_is_occupied_space_in_its_segment);
    tcase_add_test(tc, test_pytorchs_oom_is_the_oom_with_the_tensors_request);
    tcase_add_test(tc, test_an_exact_segment_and_its_oom_read_as_pytorchs);
    tcase_add_test(tc, test_a_log_without_tensor_events_reads_as_before);
    tcase_add_test(tc, test_mapped_ranges_grow_one_expandable_segment);
    tcase_add_test(tc, test_an_unmapped_tail_shrinks_the_expandable_segment);
    suite_add_tcase(s, tc);
    return s;
}
