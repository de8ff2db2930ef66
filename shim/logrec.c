/* The record builders of logrec.h: the only place each of these records is laid out. Called
 * under pool locks and from CUPTI callbacks: nothing here may lock, allocate or call CUDA. */
#include "logrec.h"
#include "common.h"
#include "evlog.h"

#include <string.h>

void logrec_device(int dev, uint64_t total, uint64_t free_at_start, const char *name, size_t name_max)
{
    if (!evlog_enabled())
        return;
    gmlog_device_t rec;
    memset(&rec, 0, sizeof rec);
    size_t len = strnlen(name, name_max);
    evlog_hdr(&rec.h, GMLOG_DEVICE, sizeof rec + gm_round_up(len, 8), dev, 0);
    rec.total = total;
    rec.free_at_start = free_at_start;
    rec.name_len = (uint32_t)len;
    evlog_append2(&rec, sizeof rec, name, len, gm_now_ns());
}

void logrec_oom(int dev, unsigned flags, const gmlog_oom_t *figures)
{
    if (!evlog_enabled())
        return;
    gmlog_oom_t rec = *figures;
    evlog_hdr(&rec.h, GMLOG_OOM, sizeof rec, dev, flags);
    evlog_append(&rec, sizeof rec, gm_now_ns());
}

void logrec_limit(int dev, uint64_t bytes)
{
    logrec_limit_flags(dev, bytes, 0);
}

void logrec_limit_flags(int dev, uint64_t bytes, unsigned flags)
{
    if (!evlog_enabled())
        return;
    gmlog_limit_t rec;
    evlog_hdr(&rec.h, GMLOG_LIMIT, sizeof rec, dev, flags);
    rec.bytes = bytes;
    evlog_append(&rec, sizeof rec, gm_now_ns());
}

void logrec_fence(int dev, unsigned why, uint64_t seq, uint64_t pending_bytes, unsigned events, uint64_t now,
                  uint64_t t0)
{
    if (!evlog_enabled())
        return;
    gmlog_fence_t rec;
    memset(&rec, 0, sizeof rec);
    evlog_hdr(&rec.h, GMLOG_FENCE, sizeof rec, dev, why);
    rec.seq = seq;
    rec.pending_bytes = pending_bytes;
    rec.events = events;
    rec.dur_ns = evlog_dur(now, t0);
    evlog_append(&rec, sizeof rec, now);
}

void logrec_stats(int dev, const gm_pool_stats_t *bytes, uint64_t hits, uint64_t misses, uint64_t now)
{
    if (!evlog_enabled())
        return;
    gmlog_stats_t st;
    memset(&st, 0, sizeof st);
    evlog_hdr(&st.h, GMLOG_STATS, sizeof st, dev, 0);
    st.requested = bytes->requested.current;
    st.allocated = bytes->allocated.current;
    st.reserved = bytes->reserved.current;
    st.cached = bytes->cached.current;
    st.pending = bytes->pending.current;
    st.hits = hits;
    st.misses = misses;
    evlog_append(&st, sizeof st, now);
}

/* A fence's seq with the time of the calls since t0, the record at time `at` (gmlog_fence_wait_t). */
static void fence_seq_record(unsigned type, int dev, unsigned flags, uint64_t seq, uint64_t now, uint64_t t0,
                             uint64_t at)
{
    if (!evlog_enabled())
        return;
    gmlog_fence_wait_t rec;
    memset(&rec, 0, sizeof rec);
    evlog_hdr(&rec.h, type, sizeof rec, dev, flags);
    rec.seq = seq;
    rec.dur_ns = evlog_dur(now, t0);
    evlog_append(&rec, sizeof rec, at);
}

void logrec_fence_wait(int dev, uint64_t seq, uint64_t now, uint64_t t0)
{
    fence_seq_record(GMLOG_FENCE_WAIT, dev, 0, seq, now, t0, now);
}

void logrec_fence_reusable(int dev, uint64_t seq, unsigned how, uint64_t now, uint64_t t0)
{
    fence_seq_record(GMLOG_FENCE_REUSABLE, dev, how, seq, now, t0, t0);
}

void logrec_empty_cache(int dev, int reason, uint64_t bytes, unsigned segments, uint64_t t0)
{
    if (!evlog_enabled())
        return;
    gmlog_empty_cache_t rec;
    memset(&rec, 0, sizeof rec);
    evlog_hdr(&rec.h, GMLOG_EMPTY_CACHE, sizeof rec, dev, (unsigned)reason);
    uint64_t now = gm_now_ns();
    rec.bytes = bytes;
    rec.segments = segments;
    rec.dur_ns = evlog_dur(now, t0);
    evlog_append(&rec, sizeof rec, now);
}

void logrec_reset(int dev, uint64_t reserved_bytes, uint64_t live_bytes)
{
    if (!evlog_enabled())
        return;
    gmlog_reset_t rec;
    memset(&rec, 0, sizeof rec);
    evlog_hdr(&rec.h, GMLOG_RESET, sizeof rec, dev, 0);
    rec.reserved_bytes = reserved_bytes;
    rec.live_bytes = live_bytes;
    evlog_append(&rec, sizeof rec, gm_now_ns());
}

void logrec_capture(int dev, int event, uint64_t stream, uint64_t graph, uint32_t id, unsigned mode)
{
    if (!evlog_enabled())
        return;
    gmlog_capture_t rec;
    memset(&rec, 0, sizeof rec);
    evlog_hdr(&rec.h, GMLOG_CAPTURE, sizeof rec, dev, (unsigned)event);
    rec.stream = stream;
    rec.graph = graph;
    rec.id = id;
    rec.mode = mode;
    evlog_append(&rec, sizeof rec, gm_now_ns());
}

void logrec_cut(int dev, const gmlog_cut_t *figures, uint64_t cut_ns, uint64_t now)
{
    gmlog_cut_t c = *figures;
    evlog_hdr(&c.h, GMLOG_CUT, sizeof c, dev, 0);
    c.cut_ns = cut_ns;
    evlog_append(&c, sizeof c, now);
}

void logrec_ledger(int dev, unsigned why, const gmlog_ledger_t *fixed, const gmlog_ledger_proc_t *procs,
                   unsigned nprocs)
{
    if (!evlog_enabled())
        return;
    gmlog_ledger_t rec = *fixed;
    if (nprocs > GMLOG_LEDGER_MAX_PROCS)
        nprocs = GMLOG_LEDGER_MAX_PROCS;
    rec.nprocs = nprocs;
    size_t tail = (size_t)nprocs * sizeof *procs;
    evlog_hdr(&rec.h, GMLOG_LEDGER, sizeof rec + tail, dev, why);
    evlog_append2(&rec, sizeof rec, procs, tail, gm_now_ns());
}
