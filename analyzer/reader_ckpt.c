/* A bounded log's checkpoints as the reader sees them (gmlog.h, docs/log-format.md): the spans
 * of state that are never events, and a wrapped log's prologue read from its newest complete
 * checkpoint. Part of the reader (reader_log.c); shares its internals through reader_int.h. */
#include "reader.h"
#include "reader_int.h"
#include "vec.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- checkpoints -----------------------------------------------------------------------------
 * A bounded log's checkpoint (gmlog.h) is a span of one thread's records, from CHECKPOINT BEGIN
 * to the END of the same seq: state, never events. The streams that may hold one (every stream
 * of a wrapped log; of another log, those that start with one, as the writer's checkpoint thread
 * does) are scanned at open, so that each of their chunks knows whether it starts inside a span:
 * a window may start there, a gap may fall inside one. Other streams find their spans as they
 * are read; one that meets an END it did not see begin says so (a window of a parallel replay
 * then gives way to the replay in order). A wrapped log is read from its newest complete
 * checkpoint: its definitions, its history in time order and each device's cut first (the
 * prologue), then the other records except those the checkpoint stands for. */

enum { PRO_DONE, PRO_DEFS, PRO_HISTORY, PRO_CUTS };

typedef struct pro_hist {
    uint64_t t, off;
    size_t at, order;          /* where its bytes are; its place in the checkpoint (ties keep it) */
    uint32_t len;
} pro_hist_t;

typedef struct rd_prologue {
    int phase;
    uint32_t chunk, pos;       /* the walk through the span: chunk (from the stream's first), offset */
    int loaded;                /* the chunk `cur` holds, or -1 */
    const uint8_t *cur;
    uint32_t avail;
    uint8_t *buf[2];           /* a file's: two, as a stream's (records handed out stay valid) */
    int which, handed;
    int after_at, in_cut;      /* the walk is after an AT record, among a CUT's records */
    uint64_t at_t, cut_t;
    pro_hist_t *hist;          /* the history, in time order */
    size_t nhist, next;
    uint8_t *bytes;            /* its records, native order */
} rd_prologue_t;

static void pro_restart(rd_log_t *lf, rd_prologue_t *pr)
{
    pr->chunk = lf->ckpt.begin_chunk;
    pr->pos = lf->ckpt.begin_pos;
    pr->after_at = pr->in_cut = 0;
}

static int pro_load(rd_log_t *lf, rd_prologue_t *pr)
{
    if (pr->loaded == (int)pr->chunk)
        return 1;
    const rd_chunk_t *c = &lf->chunks[lf->streams[lf->ckpt.stream].first + pr->chunk];
    if (lf->fd < 0) {
        pr->cur = lf->data + c->off;
        pr->avail = c->avail;
    } else {
        if (pr->handed) {
            pr->which ^= 1;
            lf->refills++;
        }
        pr->handed = 0;
        if (!pr->buf[pr->which] && !(pr->buf[pr->which] = malloc(lf->hdr.chunk_size)))
            return 0;
        pr->cur = pr->buf[pr->which];
        pr->avail = (uint32_t)rd_read_at(lf, pr->buf[pr->which], c->avail, c->off);
    }
    pr->loaded = (int)pr->chunk;
    return 1;
}

/* The span's next record (its length and file offset), or NULL at its end. */
static const uint8_t *pro_step(rd_log_t *lf, rd_prologue_t *pr, uint32_t *lenp, uint64_t *offp)
{
    const rd_ckpt_t *k = &lf->ckpt;
    while (pr->chunk <= k->end_chunk) {
        if (!pro_load(lf, pr))
            return NULL;
        uint32_t stop = pr->chunk == k->end_chunk && k->end_pos < pr->avail ? k->end_pos : pr->avail;
        if (pr->pos + 8 <= stop) {
            const uint8_t *p = pr->cur + pr->pos;
            uint32_t len = (uint32_t)p[1] * 8;
            if (p[0] != GMLOG_END_OF_CHUNK && len && pr->pos + len <= stop) {
                *lenp = len;
                *offp = lf->chunks[lf->streams[k->stream].first + pr->chunk].off + pr->pos;
                pr->pos += len;
                return p;
            }
        }
        pr->chunk++;
        pr->pos = CHUNK_HDR;
    }
    return NULL;
}

/* What a record of the span is, the walk moved past it: RD_CKPT_*, with its time in *t, or
 * RD_EVENT for what is not handed out (the markers, AT, CLOCK, types this reader does not know). */
static int pro_class(const rd_log_t *lf, rd_prologue_t *pr, const uint8_t *p, uint32_t len, uint64_t *t)
{
    if (pr->after_at) {
        pr->after_at = 0;
        *t = pr->at_t;
        return RD_CKPT_HISTORY;
    }
    switch (p[0]) {
    case GMLOG_AT:
        pr->in_cut = 0;
        if (len >= 16) {
            pr->after_at = 1;
            pr->at_t = ld64(p + 8, lf->swapped);
        }
        return RD_EVENT;
    case GMLOG_CUT:
        if (len < sizeof(gmlog_cut_t))
            return RD_EVENT;
        pr->in_cut = 1;
        *t = pr->cut_t = ld64(p + 8, lf->swapped);
        return RD_CKPT_STATE;
    case GMLOG_SEGMENT_ALLOC:
    case GMLOG_ALLOC:
    case GMLOG_T_SEGMENT_ALLOC: /* after a CUT flagged TORCH: PyTorch's segments, tensors, pending frees */
    case GMLOG_T_ALLOC:
    case GMLOG_T_FREE_REQUESTED:
        *t = pr->cut_t;
        return pr->in_cut ? RD_CKPT_STATE : RD_EVENT;
    case GMLOG_SITE:
    case GMLOG_STRING:
    case GMLOG_MODULE:
    case GMLOG_DEVICE:
    case GMLOG_LIMIT:
        pr->in_cut = 0;
        *t = lf->t_first;
        return RD_CKPT_DEF;
    case GMLOG_CLOCK:
        return RD_EVENT;
    default:
        pr->in_cut = 0;
        return RD_EVENT;
    }
}

static int by_hist_time(const void *a, const void *b)
{
    const pro_hist_t *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* The history's records, copied (in native order) and put in time order. */
static int pro_collect(rd_log_t *lf, rd_prologue_t *pr)
{
    size_t cap = 0, bcap = 0, blen = 0;
    const uint8_t *p;
    uint32_t len;
    uint64_t off, t;
    pro_restart(lf, pr);
    while ((p = pro_step(lf, pr, &len, &off))) {
        if (pro_class(lf, pr, p, len, &t) != RD_CKPT_HISTORY)
            continue;
        if (p[0] >= 1 && p[0] <= GMLOG_TYPE_MAX && len < rd_min_len(p[0])) {
            rd_diag(lf, off, 1, "a %s record of %u bytes is shorter than its layout (%u bytes); skipped",
                    rd_type_name(p[0]), len, rd_min_len(p[0]));
            continue;
        }
        pro_hist_t *h = vec_grow(pr->hist, &cap, pr->nhist + 1, sizeof *h, 64);
        if (!h)
            return -1;
        pr->hist = h;
        uint8_t *b = vec_grow(pr->bytes, &bcap, blen + len, 1, 16384);
        if (!b)
            return -1;
        pr->bytes = b;
        memcpy(pr->bytes + blen, p, len);
        if (lf->swapped && p[0] <= GMLOG_TYPE_MAX)
            rd_swap_record(pr->bytes + blen, len);
        pr->hist[pr->nhist] = (pro_hist_t){t, off, blen, pr->nhist, len};
        pr->nhist++;
        blen += len;
    }
    if (pr->nhist)
        qsort(pr->hist, pr->nhist, sizeof *pr->hist, by_hist_time);
    return 0;
}

void rd_prologue_rewind(rd_log_t *lf)
{
    rd_prologue_t *pr = lf->pro;
    if (!pr)
        return;
    pr->phase = !lf->win_begin && !lf->raw ? PRO_DEFS : PRO_DONE;
    pr->next = 0;
    pro_restart(lf, pr);
    lf->pro_on = pr->phase != PRO_DONE;
}

void rd_prologue_free(rd_log_t *lf)
{
    rd_prologue_t *pr = lf->pro;
    if (!pr)
        return;
    free(pr->buf[0]), free(pr->buf[1]);
    free(pr->hist);
    free(pr->bytes);
    free(pr);
    lf->pro = NULL;
    lf->pro_on = 0;
}

int rd_prologue_next(rd_log_t *lf, rd_rec_t *rec)
{
    rd_prologue_t *pr = lf->pro;
    for (;;) {
        if (pr->phase == PRO_HISTORY) {
            if (pr->next < pr->nhist) {
                const pro_hist_t *h = &pr->hist[pr->next++];
                const uint8_t *p = pr->bytes + h->at;
                *rec = (rd_rec_t){p, h->t, h->off, lf->seq++, h->len, lf->streams[lf->ckpt.stream].tid,
                                  p[0], p[2], p[3], RD_CKPT_HISTORY};
                return 1;
            }
            pr->phase = PRO_CUTS;
            pro_restart(lf, pr);
            continue;
        }
        if (pr->phase == PRO_DONE) {
            lf->pro_on = 0;
            return 0;
        }
        uint32_t len;
        uint64_t off, t = 0;
        const uint8_t *p = pro_step(lf, pr, &len, &off);
        if (!p) {
            pr->phase = pr->phase == PRO_DEFS ? PRO_HISTORY : PRO_DONE;
            continue;
        }
        int cls = pro_class(lf, pr, p, len, &t);
        if (cls != (pr->phase == PRO_DEFS ? RD_CKPT_DEF : RD_CKPT_STATE))
            continue;
        unsigned type = p[0];
        if (len < rd_min_len(type)) {
            rd_diag(lf, off, 1, "a %s record of %u bytes is shorter than its layout (%u bytes); skipped",
                    rd_type_name(type), len, rd_min_len(type));
            continue;
        }
        pr->handed = 1;
        if (lf->swapped) {
            memcpy(lf->swapbuf, p, len);
            rd_swap_record(lf->swapbuf, len);
            p = lf->swapbuf;
        }
        *rec = (rd_rec_t){p, t, off, lf->seq++, len, lf->streams[lf->ckpt.stream].tid, (uint8_t)type, p[2], p[3],
                          (uint8_t)cls};
        return 1;
    }
}

/* Whether a wrapped log's record is one its checkpoint stands for. Definitions always apply. */
static int ckpt_drop(const rd_log_t *lf, const uint8_t *p, uint64_t t)
{
    switch (p[0]) {
    case GMLOG_SITE:
    case GMLOG_STRING:
    case GMLOG_MODULE:
    case GMLOG_DEVICE:
        return 0;
    default:
        break;
    }
    /* OOMs and limits are copied into the checkpoint up to its at_ns (the writer times any
     * written after that copy later than at_ns): that instant decides, not the device's cut. */
    if (p[0] == GMLOG_OOM || p[0] == GMLOG_LIMIT || p[2] == GMLOG_NO_DEVICE)
        return t <= lf->ckpt.at_ns;
    /* PyTorch's events have their own cut, when the checkpoint copied PyTorch's state */
    if (p[0] >= GMLOG_T_ALLOC && p[0] <= GMLOG_T_OOM && lf->torch_cut[p[2]])
        return t <= lf->torch_cut_ns[p[2]];
    return t <= lf->cut_ns[p[2]];
}

/* The record at p (s->next_t its time): 1 when it is not handed out. Moves s into and out of
 * checkpoint spans. */
int rd_ckpt_skip(rd_log_t *lf, rd_stream_t *s, const uint8_t *p, uint32_t len)
{
    uint64_t off = s->chunk_off + (uint64_t)(p - s->buf);
    if (p[0] == GMLOG_CHECKPOINT) {
        if (len >= sizeof(gmlog_checkpoint_t)) {
            uint64_t seq = ld64(p + 8, lf->swapped);
            if (p[3] == GMLOG_CKPT_BEGIN) {
                s->in_span = 1;
                s->span_seq = seq;
            } else if (p[3] == GMLOG_CKPT_END) {
                if (!s->in_span || s->span_seq != seq)
                    rd_diag(lf, off, 1, "thread %u: checkpoint %llu ends without its beginning: records before "
                            "it may have been read as events", s->tid, (unsigned long long)seq);
                s->in_span = 0;
            }
        } else if (!lf->raw) { /* a damaged record (a raw pass says it in rd_next, as of any type) */
            rd_diag(lf, off, 1, "a %s record of %u bytes is shorter than its layout (%u bytes); skipped",
                    rd_type_name(p[0]), len, rd_min_len(p[0]));
        }
        return !lf->raw;
    }
    if (s->in_span || lf->raw)
        return !lf->raw;
    if (p[0] == GMLOG_CUT || p[0] == GMLOG_AT) {
        rd_diag(lf, off, 1, "a %s record outside any checkpoint; skipped", rd_type_name(p[0]));
        return 1;
    }
    return lf->ckpt.seq && s->next_t < lf->keep_from && ckpt_drop(lf, p, s->next_t);
}

typedef struct scan_gap {
    uint64_t off, prev_last;
    uint32_t tid, tc, prev_tc;
} scan_gap_t;

typedef struct scan {
    rd_ckpt_t best;
    uint64_t cut[256], tmp_cut[256], tcut[256], tmp_tcut[256];
    uint8_t has[256], tmp_has[256], thas[256], tmp_thas[256];
    uint64_t tmp_allocs, tmp_frees;
    uint64_t tmp_dev_allocs[256], tmp_dev_frees[256]; /* PyTorch's cut of a device: its counts stand */
    uint32_t tmp_cuts;
    scan_gap_t *gaps;
    size_t ngaps, capgaps;
} scan_t;

/* The writer's checkpoint thread starts with a checkpoint: such a stream is scanned. */
static int starts_with_checkpoint(const rd_log_t *lf, const rd_stream_t *st)
{
    const rd_chunk_t *c = &lf->chunks[st->first];
    uint8_t r[8];
    return c->avail >= CHUNK_HDR + 8 && rd_read_at(lf, r, 8, c->off + CHUNK_HDR) == 8 && r[0] == GMLOG_CHECKPOINT;
}

/* One stream's spans: each chunk's span_in, the complete checkpoints (the newest kept in sc),
 * the gaps in its chunk numbering. A gap may fall inside a span: the chunks after it are inside
 * one when an END comes before any BEGIN. */
static void scan_stream(rd_log_t *lf, uint32_t si, uint8_t *buf, scan_t *sc)
{
    const rd_stream_t *st = &lf->streams[si];
    int in = 0, pending = 0, sw = lf->swapped;
    uint64_t seq = 0, b_at = 0, b_off = 0, prev_last = 0;
    uint32_t pending_from = 0, b_chunk = 0, b_pos = 0, prev_tc = 0;
    for (uint32_t k = 0; k < st->nchunks; k++) {
        rd_chunk_t *c = &lf->chunks[st->first + k];
        if (k ? c->thread_chunk != prev_tc + 1 : c->thread_chunk != 0) {
            if (k && sc->ngaps < 100000) {
                scan_gap_t *n = vec_grow(sc->gaps, &sc->capgaps, sc->ngaps + 1, sizeof *n, 16);
                if (n)
                    sc->gaps = n;
                if (sc->ngaps < sc->capgaps)
                    sc->gaps[sc->ngaps++] = (scan_gap_t){c->off, prev_last, c->tid, c->thread_chunk, prev_tc};
            }
            pending = 1;
            pending_from = k;
            in = 0;
        }
        c->span_in = (uint32_t)in;
        c->span_seq = seq;
        const uint8_t *b = buf ? buf : lf->data + c->off;
        uint32_t avail = buf ? (uint32_t)rd_read_at(lf, buf, c->avail, c->off) : c->avail;
        uint64_t base = c->base_ns, last = c->base_ns;
        for (uint32_t pos = CHUNK_HDR; pos + 8 <= avail;) {
            const uint8_t *p = b + pos;
            uint32_t len = (uint32_t)p[1] * 8;
            if (p[0] == GMLOG_END_OF_CHUNK || !len || pos + len > avail)
                break;
            uint64_t t = base + ld32(p + 4, sw);
            if (p[0] == GMLOG_CLOCK && len >= 16)
                t = base = ld64(p + 8, sw);
            if (t > last)
                last = t;
            if (p[0] == GMLOG_CHECKPOINT && len >= sizeof(gmlog_checkpoint_t)) {
                uint64_t cseq = ld64(p + 8, sw);
                if (p[3] == GMLOG_CKPT_BEGIN) {
                    pending = 0; /* the chunks since the gap start outside any span */
                    in = 1;
                    seq = cseq;
                    b_at = ld64(p + 16, sw);
                    b_chunk = k, b_pos = pos, b_off = c->off + pos;
                    memset(sc->tmp_has, 0, sizeof sc->tmp_has);
                    memset(sc->tmp_thas, 0, sizeof sc->tmp_thas);
                    sc->tmp_allocs = sc->tmp_frees = 0;
                    sc->tmp_cuts = 0;
                } else if (p[3] == GMLOG_CKPT_END) {
                    if (pending) { /* the chunks since the gap are inside this span */
                        for (uint32_t j = pending_from; j <= k; j++)
                            lf->chunks[st->first + j].span_in = 1, lf->chunks[st->first + j].span_seq = cseq;
                        pending = 0;
                    } else if (in && seq == cseq && (cseq > sc->best.seq || (cseq == sc->best.seq && b_at > sc->best.at_ns))) {
                        uint64_t allocs = sc->tmp_allocs, frees = sc->tmp_frees;
                        for (int d = 0; d < 256; d++)
                            if (sc->tmp_thas[d]) /* the device's tensors, not gmshim's segments, are counted */
                                allocs += sc->tmp_dev_allocs[d], frees += sc->tmp_dev_frees[d];
                        sc->best = (rd_ckpt_t){.seq = cseq, .at_ns = b_at, .allocs = allocs,
                                               .frees = frees, .cuts = sc->tmp_cuts, .stream = si,
                                               .begin_chunk = b_chunk, .end_chunk = k, .begin_pos = b_pos,
                                               .end_pos = pos + len, .begin_off = b_off};
                        memcpy(sc->cut, sc->tmp_cut, sizeof sc->cut);
                        memcpy(sc->has, sc->tmp_has, sizeof sc->has);
                        memcpy(sc->tcut, sc->tmp_tcut, sizeof sc->tcut);
                        memcpy(sc->thas, sc->tmp_thas, sizeof sc->thas);
                    }
                    in = 0;
                }
            } else if (p[0] == GMLOG_CUT && in && !pending && len >= sizeof(gmlog_cut_t) && (p[3] & GMLOG_CUT_TORCH)) {
                sc->tmp_tcut[p[2]] = ld64(p + 8, sw);
                sc->tmp_thas[p[2]] = 1;
                sc->tmp_dev_allocs[p[2]] = ld64(p + offsetof(gmlog_cut_t, allocs), sw);
                sc->tmp_dev_frees[p[2]] = ld64(p + offsetof(gmlog_cut_t, frees), sw);
            } else if (p[0] == GMLOG_CUT && in && !pending && len >= sizeof(gmlog_cut_t)) {
                sc->tmp_cut[p[2]] = ld64(p + 8, sw);
                sc->tmp_cuts += !sc->tmp_has[p[2]];
                sc->tmp_has[p[2]] = 1;
                if (!sc->tmp_thas[p[2]]) { /* PyTorch's cut, written first, counts that device */
                    sc->tmp_allocs += ld64(p + offsetof(gmlog_cut_t, allocs), sw);
                    sc->tmp_frees += ld64(p + offsetof(gmlog_cut_t, frees), sw);
                }
            }
            pos += len;
        }
        prev_tc = c->thread_chunk;
        prev_last = last;
    }
}

int rd_ckpt_scan(rd_log_t *lf)
{
    lf->wrapped = (lf->hdr.flags & GMLOG_F_WRAPPED) != 0;
    int any = 0;
    for (size_t i = 0; i < lf->nstreams; i++) {
        rd_stream_t *st = &lf->streams[i];
        st->scanned = lf->wrapped || starts_with_checkpoint(lf, st);
        any |= st->scanned;
    }
    if (!any && !lf->wrapped)
        return 0;
    scan_t *sc = calloc(1, sizeof *sc);
    uint8_t *buf = lf->fd >= 0 ? malloc(lf->hdr.chunk_size) : NULL;
    if (!sc || (lf->fd >= 0 && !buf)) {
        free(sc), free(buf);
        return rd_fail(lf, lf->hdr.header_size, "out of memory looking for the log's checkpoints");
    }
    for (size_t i = 0; i < lf->nstreams; i++)
        if (lf->streams[i].scanned)
            scan_stream(lf, (uint32_t)i, buf, sc);
    free(buf);
    int rc = 0;
    if (lf->wrapped && !sc->best.seq) {
        rd_diag(lf, offsetof(gmlog_file_header_t, flags), 1, "the log reached its size limit (GMSHIM_LOG_LIMIT) and "
                "reused the space of its oldest records, but holds no complete checkpoint to read them from: the "
                "reports cover only the records that remain");
    } else if (lf->wrapped) {
        lf->ckpt = sc->best;
        uint64_t from = sc->best.at_ns;
        for (int d = 0; d < 256; d++) {
            lf->cut_ns[d] = sc->has[d] ? sc->cut[d] : sc->best.at_ns;
            if (lf->cut_ns[d] > from)
                from = lf->cut_ns[d];
            lf->torch_cut[d] = sc->thas[d];
            lf->torch_cut_ns[d] = sc->tcut[d];
            if (sc->thas[d] && sc->tcut[d] > from)
                from = sc->tcut[d];
        }
        lf->ckpt.detail_from_ns = from;
        lf->keep_from = from + 1;
        /* Gaps before the checkpoint are the space it let the writer reuse; after it, damage. */
        for (size_t i = 0; i < sc->ngaps; i++)
            if (sc->gaps[i].prev_last >= sc->best.at_ns)
                rd_diag(lf, sc->gaps[i].off, 1, "thread %u: chunk %u follows chunk %u; records in between are "
                        "missing", sc->gaps[i].tid, sc->gaps[i].tc, sc->gaps[i].prev_tc);
        lf->pro = calloc(1, sizeof *lf->pro);
        if (!lf->pro || (lf->pro->loaded = -1, pro_collect(lf, lf->pro)))
            rc = rd_fail(lf, sc->best.begin_off, "out of memory reading the log's checkpoint");
    }
    free(sc->gaps);
    free(sc);
    return rc;
}

void rd_ckpt_first_time(rd_log_t *lf, int none)
{
    uint64_t t = lf->ckpt.at_ns;
    if (lf->pro->nhist && lf->pro->hist[0].t < t)
        t = lf->pro->hist[0].t;
    if (none || t < lf->t_first)
        lf->t_first = t;
    if (lf->ckpt.detail_from_ns > lf->t_last)
        lf->t_last = lf->ckpt.detail_from_ns;
}
