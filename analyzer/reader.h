/* The log reader: reads a gmshim event log (or takes bytes in memory), checks the header, finds
 * every thread's chunks and hands out records one at a time, merged across threads by time.
 * Memory stays bounded: one chunk buffer per thread in use, whatever the file's size. It must
 * never trust a byte of the input: every length and offset is checked before use. */
#ifndef GM_READER_H
#define GM_READER_H

#include "gmlog.h"

#include <stddef.h>
#include <stdint.h>

#define RD_MAX_DIAGS 64

/* One problem found in the file, with the byte offset where it was found. */
typedef struct rd_diag {
    uint64_t offset;
    char msg[224];
} rd_diag_t;

typedef struct rd_meta {
    uint16_t tag;
    uint32_t len;
    char *value;               /* NUL-terminated copy (NULs inside, e.g. CMDLINE, are kept) */
} rd_meta_t;

/* A record as the reader hands it out. `p` is the whole record (header first), 8-byte
 * aligned and in native byte order; it stays valid until the next rd_next() call only. */
typedef struct rd_rec {
    const uint8_t *p;
    uint64_t t;                /* ns since the log's start */
    uint64_t off;              /* byte offset in the file */
    uint64_t seq;              /* 0, 1, 2... in merged order */
    uint32_t len;              /* bytes (len8 * 8) */
    uint32_t tid;
    uint8_t type, device, flags;
} rd_rec_t;

typedef struct rd_chunk {
    uint64_t off;              /* file offset of the chunk */
    uint64_t index;
    uint64_t base_ns;
    uint32_t tid;
    uint32_t thread_chunk;
    uint32_t avail;            /* bytes of the chunk present in the file */
} rd_chunk_t;

/* One thread's records: its chunks in order. */
typedef struct rd_stream {
    const uint8_t *p;          /* the next record */
    const uint8_t *end;        /* end of the current chunk's bytes */
    const uint8_t *buf;        /* the current chunk (own buffer, or the caller's memory) */
    uint8_t *own[2];           /* a file's stream alternates two chunk buffers */
    int which;                 /* the one in use */
    int handed;                /* a record of the current chunk was handed out */
    uint64_t chunk_off;        /* file offset of the current chunk */
    uint64_t base;             /* current time base */
    uint64_t next_t;           /* time of the record at p */
    uint32_t tid;
    uint32_t first;            /* index of its first chunk in rd_log_t.chunks */
    uint32_t nchunks;
    uint32_t cur;              /* chunk being read, relative to first */
    uint32_t start_chunk;      /* a window's first and last chunks (see rd_window) */
    uint32_t stop_chunk;
    int done;
} rd_stream_t;

typedef struct rd_log {
    const char *name;          /* for messages: the path, or "<memory>" */
    int fd;                    /* the file, or -1 for bytes in memory */
    const uint8_t *data;       /* bytes in memory (NULL for a file) */
    size_t size;               /* bytes in the file or memory */
    uint8_t *owned;            /* a copy made for alignment, or a pipe's bytes; freed at close */
    uint8_t *header;           /* the header and metadata (header_size bytes) */
    gmlog_file_header_t hdr;   /* native byte order */
    int swapped;               /* written with the other byte order */
    int fatal;                 /* nothing could be read: diags[0] says why */
    int partial;               /* something was skipped: the reports are incomplete */
    int truncated;             /* the file ends inside a chunk */
    int quiet;                 /* diagnostics are not recorded (a repeated pass) */
    rd_meta_t *meta;
    size_t nmeta;
    rd_chunk_t *chunks;
    size_t nchunks;            /* chunks in use */
    size_t nslots;             /* chunk slots in the file */
    rd_stream_t *streams;
    size_t nstreams;
    uint64_t t_first, t_last;  /* first and last record times (0 when none) */
    rd_diag_t diags[RD_MAX_DIAGS];
    size_t ndiags;             /* may exceed RD_MAX_DIAGS: the rest were counted only */
    /* iteration */
    uint32_t *heap;            /* active streams: a min-heap by next_t, or (few) a plain list */
    size_t nheap;
    rd_stream_t *current;      /* stream being drained, NULL none */
    rd_stream_t *advance;      /* stream whose last record was handed out: move on next call */
    uint32_t advance_len;
    int shrank;                /* the file got shorter while being read */
    uint64_t refills;          /* chunk buffers switched so far (see rd_next) */
    uint64_t win_begin, win_end; /* the records read, by time (see rd_window) */
    uint64_t act_t[16];        /* few streams: next times of the active ones... */
    uint32_t act_i[16];        /* ...and their indices, in index order */
    uint32_t nact, cur_slot;
    uint64_t limit;            /* least next_t of the other active streams */
    uint64_t seq;
    uint64_t chunks_done;      /* for progress */
    uint64_t unknown_records;  /* records of types this reader does not know, skipped */
    uint8_t swapbuf[256 * 8];
} rd_log_t;

/* Opens a file and checks its header and chunks. Returns 0 when records can be read
 * (lf->partial may still be set), -1 when not (lf->diags[0] says why). rd_close() either way. */
int rd_open_path(rd_log_t *lf, const char *path);
/* The same on bytes in memory (copied when not 8-byte aligned); `data` must outlive lf. */
int rd_open_mem(rd_log_t *lf, const void *data, size_t size, const char *name);
void rd_close(rd_log_t *lf);

/* The next record in time order; 0 at the end. Known types shorter than their layout and
 * records that run past their chunk are reported as diagnostics and skipped. The record's
 * bytes stay valid until the next call; for a native-order log they stay valid longer, until
 * lf->refills has changed twice (each thread keeps its previous chunk), which lets a caller
 * batch records without copying them. */
int rd_next(rd_log_t *lf, rd_rec_t *rec);
/* Starts the iteration again from the first record (of the window). */
void rd_rewind(rd_log_t *lf);
/* Limits the iteration to a window of time: in each thread's records, from the first record
 * with t >= begin in the chunk where begin falls, to the first with t >= end in the chunk where
 * end falls. Windows [a, b) and [b, c) split every thread's records exactly, whatever order
 * their times are in. Takes effect at the next rd_rewind(). */
void rd_window(rd_log_t *lf, uint64_t begin, uint64_t end);
/* A second, independent reader of the same log (a dup of the file, or the same memory), for
 * another thread; its diagnostics are not recorded. */
int rd_clone(const rd_log_t *src, rd_log_t *dst);

/* Adds a diagnostic; `partial` marks the log as incompletely read. */
void rd_diag(rd_log_t *lf, uint64_t offset, int partial, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The first metadata value with this tag, or NULL. */
const char *rd_meta_get(const rd_log_t *lf, uint16_t tag);
/* For "RANK=3"-style entries: the value of KEY in entries with this tag, or NULL. */
const char *rd_meta_keyed(const rd_log_t *lf, uint16_t tag, const char *key);
/* Fraction of chunks consumed so far, 0..1. */
double rd_progress(const rd_log_t *lf);

/* The smallest length a record of `type` may have (0 for unknown types). */
unsigned rd_min_len(unsigned type);
/* A name for a record type ("alloc", "free", ...), or NULL for unknown types. */
const char *rd_type_name(unsigned type);

/* Tails of variable-length records, bounds-checked against rec->len. Each returns 0, or -1
 * when the counts in the record do not fit in it. */
int rd_site_frames(const rd_rec_t *rec, const uint64_t **native, unsigned *nnative,
                   const gmlog_pyframe_t **py, unsigned *npy);
int rd_tail_bytes(const rd_rec_t *rec, size_t fixed, size_t want, const char **bytes);

#endif
