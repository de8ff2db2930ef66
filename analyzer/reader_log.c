/* The log reader's roof: the file opened (header and metadata: reader_header.c), the chunks
 * indexed by thread, the threads' records merged by time (k-way). Files are read with pread, one chunk per thread at a time: memory stays
 * bounded and a file cut short under us is no crash. It never trusts a length, offset or count. */
#include "reader.h"
#include "vec.h"
#include "reader_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- chunks and streams -------------------------------------------------------------------- */

static int chunk_order(const void *a, const void *b)
{
    const rd_chunk_t *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->index != y->index)
        return x->index < y->index ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

static int index_chunks(rd_log_t *lf)
{
    const gmlog_file_header_t *h = &lf->hdr;
    uint64_t body = lf->size - h->header_size;
    lf->nslots = (size_t)((body + h->chunk_size - 1) / h->chunk_size);
    if (body % h->chunk_size) {
        lf->truncated = 1;
        rd_diag(lf, lf->size, 1, "the file ends inside chunk %zu (%llu of its %u bytes are there): the log "
                "was cut short", lf->nslots - 1, (unsigned long long)(body % h->chunk_size), h->chunk_size);
    }
    /* A writer of this field cuts the file to its chunks at a clean close: fewer slots mean
     * chunks cut off after the close (a copy cut at a chunk boundary reads as whole otherwise). */
    uint64_t at_close = (h->flags & GMLOG_F_CLOSED) ? h->chunks_at_close : 0;
    /* At exit the count is exact; at a signal or a stopped writer a floor: others went on. */
    int exact = (h->close_reason & 0xff) == GMLOG_CLOSE_EXIT;
    if (at_close > lf->nslots) {
        lf->truncated = 1;
        uint64_t missing = at_close - lf->nslots;
        rd_diag(lf, lf->size, 1, "the file holds %zu of the %llu chunks the log was closed with: %llu %s missing "
                "at its end (the log was cut short)", lf->nslots, (unsigned long long)at_close,
                (unsigned long long)missing, missing == 1 ? "chunk is" : "chunks are");
    }
    lf->chunks = calloc(lf->nslots ? lf->nslots : 1, sizeof *lf->chunks);
    if (!lf->chunks)
        return rd_fail(lf, h->header_size, "out of memory indexing %zu chunks", lf->nslots);
    int s = lf->swapped;
    for (size_t i = 0; i < lf->nslots; i++) {
        uint64_t off = h->header_size + (uint64_t)i * h->chunk_size;
        uint64_t avail = lf->size - off < h->chunk_size ? lf->size - off : h->chunk_size;
        if (avail < CHUNK_HDR)
            continue;
        uint8_t c[CHUNK_HDR];
        if (rd_read_at(lf, c, CHUNK_HDR, off) != CHUNK_HDR)
            continue;
        uint32_t magic = ld32(c, s);
        if (magic == 0)
            continue; /* never used */
        if (magic != GMLOG_CHUNK_MAGIC) {
            rd_diag(lf, off, 1, "chunk %zu: bad magic 0x%08x; its records are skipped", i, magic);
            continue;
        }
        if (at_close && exact && i >= at_close)
            rd_diag(lf, off, 1, "chunk %zu lies past the %llu chunks the log was closed with (bytes added after "
                    "the close?)", i, (unsigned long long)at_close);
        rd_chunk_t *ch = &lf->chunks[lf->nchunks++];
        ch->off = off;
        ch->tid = ld32(c + 4, s);
        ch->index = ld64(c + 8, s);
        ch->base_ns = ld64(c + 16, s);
        ch->thread_chunk = ld32(c + 24, s);
        ch->avail = (uint32_t)avail;
        /* A wrapped log reuses the space of old chunks for new ones: indices go on growing. */
        if (ch->index != i && !(h->flags & GMLOG_F_WRAPPED)) {
            rd_diag(lf, off + 8, 1, "chunk %zu says it is chunk %llu (corrupt chunk header)", i,
                    (unsigned long long)ch->index);
            ch->index = i;
        }
    }
    qsort(lf->chunks, lf->nchunks, sizeof *lf->chunks, chunk_order);
    /* One stream per thread; a tid whose numbering restarts at 0 was reused by a new thread. A
     * wrapped log's gaps are looked at once its checkpoint is known (ckpt_scan). */
    int gaps_later = (h->flags & GMLOG_F_WRAPPED) != 0;
    lf->streams = calloc(lf->nchunks ? lf->nchunks : 1, sizeof *lf->streams);
    lf->heap = calloc(lf->nchunks ? lf->nchunks : 1, sizeof *lf->heap);
    if (!lf->streams || !lf->heap)
        return rd_fail(lf, h->header_size, "out of memory indexing %zu chunks", lf->nchunks);
    for (size_t i = 0; i < lf->nchunks; i++) {
        const rd_chunk_t *c = &lf->chunks[i];
        rd_stream_t *cur = lf->nstreams ? &lf->streams[lf->nstreams - 1] : NULL;
        const rd_chunk_t *prev = i ? &lf->chunks[i - 1] : NULL;
        if (!cur || prev->tid != c->tid || c->thread_chunk == 0) {
            cur = &lf->streams[lf->nstreams++];
            cur->tid = c->tid;
            cur->first = (uint32_t)i;
            cur->stop_chunk = UINT32_MAX;
            if (c->thread_chunk != 0 && !gaps_later)
                rd_diag(lf, c->off, 1, "thread %u: its chunks before chunk %u are missing", c->tid,
                        c->thread_chunk);
        } else if (c->thread_chunk != prev->thread_chunk + 1 && !gaps_later) {
            rd_diag(lf, c->off, 1, "thread %u: chunk %u follows chunk %u; records in between are missing",
                    c->tid, c->thread_chunk, prev->thread_chunk);
        }
        cur->nchunks++;
    }
    return 0;
}


/* Loads the stream's current chunk (a file's into the stream's buffer). */
static void enter_chunk(rd_log_t *lf, rd_stream_t *s)
{
    rd_chunk_t *c = &lf->chunks[s->first + s->cur];
    uint32_t avail = c->avail;
    s->chunk_off = c->off;
    s->base = c->base_ns;
    if (s->scanned) { /* after a gap, or at a window's start: what the scan found */
        s->in_span = (int)c->span_in;
        s->span_seq = c->span_seq;
    }
    if (lf->fd < 0) {
        s->buf = lf->data + c->off;
    } else {
        /* The other buffer, if records of this one were handed out: they must stay valid. */
        if (s->handed) {
            s->which ^= 1;
            lf->refills++;
        }
        s->handed = 0;
        uint8_t **own = &s->own[s->which];
        if (!*own)
            *own = malloc(lf->hdr.chunk_size);
        size_t got = *own ? rd_read_at(lf, *own, c->avail, c->off) : 0;
        if (got < c->avail) {
            /* Said once, by a pass that records it: a quiet one leaves the chunk to the next. */
            if (!lf->shrank)
                rd_diag(lf, c->off + got, 1, *own ? "the file got shorter while being read" : "out of memory");
            if (!lf->quiet) {
                lf->shrank = 1;
                c->avail = (uint32_t)got;
            }
        }
        s->buf = *own ? *own : (const uint8_t *)"";
        avail = (uint32_t)got;
        if (avail >= CHUNK_HDR && !(lf->hdr.flags & GMLOG_F_CLOSED) && rd_chunk_moved(lf, c, s->buf)) {
            lf->changed = 1;
            if (lf->clone)
                lf->partial = 1; /* a parallel window gives way to the replay in order, which says it */
            avail = CHUNK_HDR;   /* its records are another chunk's now */
        }
    }
    s->p = s->buf + (avail >= CHUNK_HDR ? CHUNK_HDR : avail);
    s->end = s->buf + avail;
}

/* Positions s at a record (the one at s->p, or in a later chunk); 0 when it has none. */
static int stream_load(rd_log_t *lf, rd_stream_t *s)
{
    for (;;) {
        const uint8_t *p = s->p;
        if (p + 8 <= s->end && p[0] != GMLOG_END_OF_CHUNK) {
            uint32_t len = (uint32_t)p[1] * 8;
            if (len && p + len <= s->end) {
                if (p[0] == GMLOG_CLOCK && len >= 16)
                    s->next_t = ld64(p + 8, lf->swapped);
                else
                    s->next_t = s->base + ld32(p + 4, lf->swapped);
                /* Checkpoints' records, and a wrapped log's records that its checkpoint holds. */
                if (__builtin_expect(s->in_span || p[0] >= GMLOG_CHECKPOINT || s->next_t < lf->keep_from, 0) &&
                    rd_ckpt_skip(lf, s, p, len)) {
                    if (p[0] == GMLOG_CLOCK && len >= 16)
                        s->base = s->next_t;
                    s->p = p + len;
                    continue;
                }
                if (__builtin_expect(s->cur >= s->stop_chunk, 0) &&
                    (s->cur > s->stop_chunk || s->next_t >= lf->win_end)) {
                    s->done = 1; /* the end of the window */
                    return 0;
                }
                return 1;
            }
            uint64_t off = s->chunk_off + (uint64_t)(p - s->buf);
            if (!len)
                rd_diag(lf, off, 1, "a record of type %u has length 0; the rest of its chunk is skipped", p[0]);
            else if (lf->chunks[s->first + s->cur].avail == lf->hdr.chunk_size)
                rd_diag(lf, off, 1, "a record of %u bytes runs past the end of its chunk; the rest of the chunk is "
                        "skipped", len);
        }
        __atomic_store_n(&lf->chunks_done, lf->chunks_done + 1, __ATOMIC_RELAXED);
        if (++s->cur >= s->nchunks) {
            s->done = 1; /* its buffers stay: records handed out may still be in use */
            return 0;
        }
        enter_chunk(lf, s);
    }
}

/* The active streams: below this many a linear scan beats a heap. */
#define FEW_STREAMS 16

static inline int heap_less(const rd_log_t *lf, uint32_t a, uint32_t b)
{
    uint64_t ta = lf->streams[a].next_t, tb = lf->streams[b].next_t;
    return ta < tb || (ta == tb && a < b);
}

static void heap_push(rd_log_t *lf, uint32_t v)
{
    size_t i = lf->nheap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!heap_less(lf, v, lf->heap[parent]))
            break;
        lf->heap[i] = lf->heap[parent];
        i = parent;
    }
    lf->heap[i] = v;
}

static uint32_t heap_pop(rd_log_t *lf)
{
    uint32_t top = lf->heap[0];
    uint32_t last = lf->heap[--lf->nheap];
    size_t i = 0, n = lf->nheap;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        uint32_t best = last;
        if (l < n && heap_less(lf, lf->heap[l], best))
            m = l, best = lf->heap[l];
        if (r < n && heap_less(lf, lf->heap[r], best))
            m = r, best = lf->heap[r];
        if (m == i)
            break;
        lf->heap[i] = lf->heap[m];
        i = m;
    }
    if (n)
        lf->heap[i] = last;
    return top;
}

/* Chooses the stream with the earliest next record and sets lf->limit to the earliest of the
 * others. With few streams they sit in lf->heap as a list (done ones removed). */
static rd_stream_t *pick(rd_log_t *lf)
{
    rd_stream_t *cur = lf->current;
    if (lf->nstreams <= FEW_STREAMS) {
        /* The current stream's new time, or its removal; then a branch-free scan for the least
         * and second least time (ties: the lower stream index, which comes first). */
        if (cur) {
            uint32_t k = lf->cur_slot;
            if (cur->done) {
                for (uint32_t i = k + 1; i < lf->nact; i++)
                    lf->act_t[i - 1] = lf->act_t[i], lf->act_i[i - 1] = lf->act_i[i];
                lf->nact--;
            } else {
                lf->act_t[k] = cur->next_t;
            }
        }
        uint32_t n = lf->nact;
        if (!n)
            return lf->current = NULL;
        uint64_t best = lf->act_t[0], second = UINT64_MAX;
        uint32_t bi = 0;
        for (uint32_t i = 1; i < n; i++) {
            uint64_t t = lf->act_t[i];
            int lt = t < best;
            uint64_t loser = lt ? best : t;
            second = loser < second ? loser : second;
            best = lt ? t : best;
            bi = lt ? i : bi;
        }
        lf->limit = second;
        lf->cur_slot = bi;
        return lf->current = &lf->streams[lf->act_i[bi]];
    }
    if (cur && !cur->done)
        heap_push(lf, (uint32_t)(cur - lf->streams));
    if (!lf->nheap)
        return lf->current = NULL;
    cur = &lf->streams[heap_pop(lf)];
    lf->limit = lf->nheap ? lf->streams[lf->heap[0]].next_t : UINT64_MAX;
    return lf->current = cur;
}

/* Latest record time in a stream's last chunk; notes an END record there in lf->end_record. */
static uint64_t last_time(rd_log_t *lf, const rd_stream_t *st, uint8_t *buf)
{
    const rd_chunk_t *c = &lf->chunks[st->first + st->nchunks - 1];
    uint32_t avail = (uint32_t)rd_read_at(lf, buf, c->avail, c->off);
    uint64_t base = c->base_ns, last = 0;
    int have = 0;
    for (uint32_t pos = CHUNK_HDR; pos + 8 <= avail;) {
        const uint8_t *p = buf + pos;
        uint32_t len = (uint32_t)p[1] * 8;
        if (p[0] == GMLOG_END_OF_CHUNK || len == 0 || pos + len > avail)
            break;
        uint64_t t = base + ld32(p + 4, lf->swapped);
        if (p[0] == GMLOG_CLOCK && len >= 16)
            t = base = ld64(p + 8, lf->swapped);
        if (p[0] == GMLOG_END && len >= 16)
            lf->end_record = 1;
        if (!have || t > last)
            last = t;
        have = 1;
        pos += len;
    }
    return last;
}

static inline void advance(rd_log_t *lf, rd_stream_t *s, uint32_t len);
static int finish_open(rd_log_t *lf);
static void forget(rd_log_t *lf);

#define LIVE_TRIES 3 /* opens of a log that changes while indexed */

void (*rd_index_hook)(const rd_log_t *lf);

/* The last chunk of s whose time base is at or before t (0 when none is). */
static uint32_t chunk_at(const rd_log_t *lf, const rd_stream_t *s, uint64_t t)
{
    uint32_t lo = 0, hi = s->nchunks;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (lf->chunks[s->first + mid].base_ns <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? lo - 1 : 0;
}

void rd_window(rd_log_t *lf, uint64_t begin, uint64_t end)
{
    lf->win_begin = begin;
    lf->win_end = end;
    for (size_t i = 0; i < lf->nstreams; i++) {
        rd_stream_t *s = &lf->streams[i];
        s->start_chunk = begin ? chunk_at(lf, s, begin) : 0;
        s->stop_chunk = end != UINT64_MAX ? chunk_at(lf, s, end) : UINT32_MAX;
    }
}

int rd_clone(const rd_log_t *src, rd_log_t *dst)
{
    memset(dst, 0, sizeof *dst);
    dst->name = src->name;
    dst->fd = -1;
    if (src->fd >= 0) {
        dst->fd = dup(src->fd);
        if (dst->fd < 0)
            return -1;
    } else {
        dst->data = src->data;
    }
    dst->size = src->size;
    dst->clone = 1;
    int rc = finish_open(dst);
    dst->quiet = 1;
    return rc;
}

void rd_rewind(rd_log_t *lf)
{
    if (lf->read_through)
        lf->quiet = 1;
    lf->nheap = 0;
    lf->nact = 0;
    lf->advance = NULL;
    lf->current = NULL;
    lf->seq = 0;
    __atomic_store_n(&lf->chunks_done, 0, __ATOMIC_RELAXED); /* read by the progress display */
    lf->unknown_records = 0;
    for (size_t i = 0; i < lf->nstreams; i++) {
        rd_stream_t *s = &lf->streams[i];
        s->cur = s->start_chunk;
        s->done = 0;
        s->in_span = 0; /* a scanned stream's chunk says; another's window start cannot know */
        enter_chunk(lf, s);
        if (!stream_load(lf, s))
            continue;
        /* A window's start: skip its first chunk's records before win_begin. */
        while (lf->win_begin && !s->done && s->cur == s->start_chunk && s->next_t < lf->win_begin)
            advance(lf, s, (uint32_t)s->p[1] * 8);
        if (s->done)
            continue;
        if (lf->nstreams <= FEW_STREAMS) {
            lf->act_t[lf->nact] = s->next_t;
            lf->act_i[lf->nact++] = (uint32_t)i;
        } else {
            heap_push(lf, (uint32_t)i);
        }
    }
    lf->limit = 0; /* the first rd_next() picks */
    rd_prologue_rewind(lf);
}

static int finish_open(rd_log_t *lf)
{
    lf->win_end = UINT64_MAX;
    if (rd_unwritten_header(lf)) {
        lf->no_header = 1; /* no records, not closed: every pass reads nothing */
        return 0;
    }
    if (rd_parse_header(lf))
        return -1;
    rd_parse_meta(lf);
    lf->header_diags = lf->ndiags;
    lf->header_partial = lf->partial;
    if (index_chunks(lf) || rd_ckpt_scan(lf))
        return -1;
    if (rd_index_hook && lf->fd >= 0)
        rd_index_hook(lf);
    /* Quiet first look at the starts and ends for the time range (diagnostics come later). */
    int partial = lf->partial;
    lf->quiet = 1;
    rd_rewind(lf);
    lf->partial = partial;
    int first = 1;
    uint8_t *buf = malloc(lf->hdr.chunk_size);
    for (size_t i = 0; i < lf->nstreams && buf; i++) {
        rd_stream_t *s = &lf->streams[i];
        if (s->done)
            continue;
        if (first || s->next_t < lf->t_first)
            lf->t_first = s->next_t;
        uint64_t last = last_time(lf, s, buf);
        if (first || last > lf->t_last)
            lf->t_last = last;
        first = 0;
    }
    if (lf->pro)
        rd_ckpt_first_time(lf, first);
    if (lf->t_last < lf->t_first)
        lf->t_last = lf->t_first;
    lf->quiet = 0;
    /* Every gmshim (they all write their version into the metadata) closing at exit writes END
     * as the closing thread's last record, so it is in the last chunk of that thread: without
     * one, chunks were lost (by writers before chunks_at_close, the only sign of a copy cut at
     * a chunk boundary). Logs built by hand without metadata are taken as they are. */
    if (buf && (lf->hdr.flags & GMLOG_F_CLOSED) && (lf->hdr.close_reason & 0xff) == GMLOG_CLOSE_EXIT &&
        !lf->end_record && !lf->truncated && rd_meta_get(lf, GMLOG_META_VERSION))
        rd_diag(lf, lf->size, 1, "the log was closed at exit but its end record is missing: chunks were lost at "
                "its end (the log was cut short?)");
    free(buf);
    rd_rewind(lf);
    return 0;
}

int rd_open_mem(rd_log_t *lf, const void *data, size_t size, const char *name)
{
    memset(lf, 0, sizeof *lf);
    lf->name = name ? name : "<memory>";
    lf->fd = -1;
    if ((uintptr_t)data % 8) {
        lf->owned = malloc(size ? size : 1);
        if (!lf->owned)
            return rd_fail(lf, 0, "out of memory");
        memcpy(lf->owned, data, size);
        data = lf->owned;
    }
    lf->data = size ? data : (const uint8_t *)"";
    lf->size = size;
    return finish_open(lf);
}

int rd_open_path(rd_log_t *lf, const char *path)
{
    memset(lf, 0, sizeof *lf);
    lf->name = path;
    lf->fd = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rd_fail(lf, 0, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return rd_fail(lf, 0, "cannot stat: %s", strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return rd_fail(lf, 0, "is a directory, not a log");
    }
    if (S_ISREG(st.st_mode)) {
        lf->fd = fd;
        lf->size = (size_t)st.st_size;
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        /* A log still being written may change while it is indexed: chunks claimed meanwhile
         * would read as missing. Opened again until it holds still; if it never does, what the
         * open found missing is the writer moving on, not damage (reader_live.c). */
        for (int tries = 1;; tries++) {
            int rc = finish_open(lf);
            if (rc || lf->no_header || (lf->hdr.flags & GMLOG_F_CLOSED) || rd_open_unchanged(lf))
                return rc;
            if (tries == LIVE_TRIES) {
                lf->ndiags = lf->header_diags;
                lf->partial = lf->header_partial;
                lf->truncated = 0;
                lf->changed = 1;
                return 0;
            }
            forget(lf);
            memset(lf, 0, sizeof *lf);
            lf->name = path;
            lf->fd = fd;
            lf->size = fstat(fd, &st) == 0 ? (size_t)st.st_size : 0;
        }
    }
    /* A pipe or device: its first bytes decide whether the rest is read (reader_header.c). */
    int rc = rd_read_stream(lf, fd);
    close(fd);
    return rc ? rc : finish_open(lf);
}

void rd_close(rd_log_t *lf)
{
    if (lf->fd >= 0)
        close(lf->fd);
    lf->fd = -1;
    forget(lf);
}

/* Everything the open built, freed; the file stays open. */
static void forget(rd_log_t *lf)
{
    free(lf->owned);
    free(lf->header);
    for (size_t i = 0; i < lf->nmeta; i++)
        free(lf->meta[i].value);
    for (size_t i = 0; i < lf->nstreams; i++)
        free(lf->streams[i].own[0]), free(lf->streams[i].own[1]);
    rd_prologue_free(lf);
    free(lf->meta);
    free(lf->chunks);
    free(lf->streams);
    free(lf->heap);
    lf->meta = NULL;
    lf->nmeta = 0;
    lf->chunks = NULL;
    lf->nchunks = 0;
    lf->streams = NULL;
    lf->nstreams = lf->nheap = 0;
    lf->heap = NULL;
    lf->owned = NULL;
    lf->header = NULL;
    lf->data = NULL;
    lf->size = 0;
    lf->current = lf->advance = NULL;
}

double rd_progress(const rd_log_t *lf)
{
    uint64_t done = __atomic_load_n(&lf->chunks_done, __ATOMIC_RELAXED);
    return lf->nchunks ? (double)done / (double)lf->nchunks : 1.0;
}

/* ---- iteration ----------------------------------------------------------------------------- */

/* Moves s past the record it handed out last (which stayed valid until now). */
static inline void advance(rd_log_t *lf, rd_stream_t *s, uint32_t len)
{
    const uint8_t *q = s->p + len;
    s->p = q;
    /* Checkpoint records (CHECKPOINT, CUT, AT) and the records a wrapped log's checkpoint
     * holds take the slow path. */
    if (__builtin_expect(q + 8 <= s->end && q[0] != GMLOG_END_OF_CHUNK && q[0] != GMLOG_CLOCK &&
                         (uint8_t)(q[0] - GMLOG_CHECKPOINT) > GMLOG_AT - GMLOG_CHECKPOINT && q[1] &&
                         q + (size_t)q[1] * 8 <= s->end && !lf->swapped, 1)) {
        uint32_t dt;
        memcpy(&dt, q + 4, 4);
        s->next_t = s->base + dt;
        if (__builtin_expect(s->next_t < lf->keep_from, 0)) {
            stream_load(lf, s);
            return;
        }
        if (__builtin_expect(s->cur == s->stop_chunk, 0) && s->next_t >= lf->win_end)
            s->done = 1; /* the end of the window */
    } else {
        stream_load(lf, s);
    }
}

int rd_next(rd_log_t *lf, rd_rec_t *rec)
{
    if (__builtin_expect(lf->pro_on, 0) && rd_prologue_next(lf, rec))
        return 1;
    for (;;) {
        if (lf->advance) {
            advance(lf, lf->advance, lf->advance_len);
            lf->advance = NULL;
        }
        rd_stream_t *s = lf->current;
        if (__builtin_expect(!s || s->done || s->next_t > lf->limit, 0)) {
            s = pick(lf);
            if (!s) {
                /* Another pass would repeat the same diagnostics: the next one is quiet. Not
                 * this one: the caller may still report on the records it was handed. */
                lf->read_through = 1;
                return 0;
            }
        }
        const uint8_t *p = s->p;
        uint8_t type = p[0];
        uint32_t len = (uint32_t)p[1] * 8;
        uint64_t t = s->next_t;
        if (type == GMLOG_CLOCK && len >= 16)
            s->base = t;
        lf->advance = s;
        lf->advance_len = len;
        s->handed = 1;
        uint64_t off = s->chunk_off + (uint64_t)(p - s->buf);
        if (__builtin_expect(type <= GMLOG_TYPE_MAX && len < rd_min_lens[type], 0)) {
            rd_diag(lf, off, 1, "a %s record of %u bytes is shorter than its layout (%u bytes); skipped",
                    rd_type_name(type), len, rd_min_lens[type]);
            continue;
        }
        if (__builtin_expect(type > GMLOG_TYPE_MAX, 0))
            lf->unknown_records++;
        if (type == GMLOG_FREE && (p[3] & GMLOG_F_RETURNED) && !lf->returns && !lf->raw)
            continue; /* a thread cache's block back to its arena: the program freed it before */
        if (__builtin_expect(lf->swapped, 0)) {
            memcpy(lf->swapbuf, p, len);
            if (type <= GMLOG_TYPE_MAX)
                rd_swap_record(lf->swapbuf, len);
            p = lf->swapbuf;
        }
        rec->p = p;
        rec->off = off;
        rec->t = t;
        rec->seq = lf->seq++;
        rec->len = len;
        rec->tid = s->tid;
        rec->type = type;
        rec->device = p[2];
        rec->flags = p[3];
        rec->ckpt = (s->in_span || type == GMLOG_CHECKPOINT) ? RD_CKPT_SPAN : RD_EVENT; /* lf->raw only */
        return 1;
    }
}
