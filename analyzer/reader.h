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
/* What the reports say of a sound log without records (a process killed as it started). */
#define RD_NO_RECORDS "no records: the process ended before recording anything"

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
    uint8_t ckpt;              /* RD_EVENT, or where in a checkpoint it comes from (RD_CKPT_*) */
} rd_rec_t;

/* What a record handed out is (rd_rec_t.ckpt). A wrapped log's reader hands out its newest
 * complete checkpoint first (definitions, history, each device's cut), then the events after
 * it; a dump (lf->raw) gets every record as it is, those of checkpoints marked. */
enum {
    RD_EVENT = 0,
    RD_CKPT_DEF = 1,           /* a SITE, STRING, MODULE, DEVICE or LIMIT the checkpoint repeats */
    RD_CKPT_HISTORY = 2,       /* a MARK or OOM from before the checkpoint, at its own time */
    RD_CKPT_STATE = 3,         /* a CUT, or a segment or block live at it, at the cut's time */
    RD_CKPT_SPAN = 4,          /* lf->raw: a record between a checkpoint's BEGIN and END, or either */
};

/* The checkpoint a wrapped log is read from. */
typedef struct rd_ckpt {
    uint64_t seq;              /* 0: none (not wrapped, or no complete checkpoint) */
    uint64_t at_ns;            /* records before it are summarised, not there one by one */
    uint64_t detail_from_ns;   /* every record after it is there (the latest cut) */
    uint64_t allocs, frees;    /* summed over its cuts: the allocations and frees it stands for
                                * (PyTorch's tensors' on a device whose cut has them) */
    uint32_t cuts;             /* devices it cuts */
    uint32_t stream;           /* index in lf->streams */
    uint32_t begin_chunk, end_chunk; /* in that stream, from its first chunk */
    uint32_t begin_pos, end_pos;     /* byte offsets in those chunks: BEGIN, and just past END */
    uint64_t begin_off;        /* file offset of BEGIN */
} rd_ckpt_t;

typedef struct rd_chunk {
    uint64_t off;              /* file offset of the chunk */
    uint64_t index;
    uint64_t base_ns;
    uint32_t tid;
    uint32_t thread_chunk;
    uint32_t avail;            /* bytes of the chunk present in the file */
    uint32_t span_in;          /* its stream was scanned: 1 when it starts inside a checkpoint */
    uint64_t span_seq;         /* ...whose seq this is */
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
    int scanned;               /* its checkpoint spans were found at open (chunks' span_in) */
    int in_span;               /* between a checkpoint's BEGIN and END */
    uint64_t span_seq;
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
    int truncated;             /* the file ends inside a chunk, or chunks are missing at its end */
    int no_header;             /* empty, or its header never written: the writer ended at its start */
    int end_record;            /* a thread's last chunk holds an END record (finish_open looks) */
    int quiet;                 /* diagnostics are not recorded (a repeated pass) */
    int clone;                 /* a second reader of the same log (rd_clone) */
    int changed;               /* the file changed while read: its writer is still at work (a
                                  chunk given to another thread since the open is not read) */
    size_t header_diags;       /* diagnostics of the header and metadata, before the chunks' */
    int header_partial;
    int read_through;          /* an iteration reached the end: the next pass is quiet */
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
    /* checkpoints (gmlog.h, "checkpoints"): spans are state, never events */
    int wrapped;               /* GMLOG_F_WRAPPED: read from the newest complete checkpoint */
    int raw;                   /* hand out every record as it is, checkpoints marked (dump) */
    int returns;               /* hand out the thread caches' returns too (FREE flagged
                                  GMLOG_F_RETURNED: not the program's frees; the replay) */
    rd_ckpt_t ckpt;            /* the checkpoint read from */
    uint64_t keep_from;        /* records timed before this may be in the checkpoint */
    uint64_t cut_ns[256];      /* per device: its records at or before this are in the checkpoint */
    uint64_t torch_cut_ns[256]; /* per device: its PyTorch records (T_*) at or before this... */
    uint8_t torch_cut[256];    /* ...when its checkpoint has PyTorch's state (a CUT flagged TORCH) */
    struct rd_prologue *pro;   /* the checkpoint's records, handed out before the others... */
    int pro_on;                /* ...while this is set */
    uint8_t swapbuf[256 * 8] __attribute__((aligned(8))); /* records handed out are 8-byte aligned */
} rd_log_t;

/* Tests only: called once a file's chunks are indexed, before the open looks whether the file
 * held still meanwhile (a writer claiming chunks under the reader); NULL otherwise. */
extern void (*rd_index_hook)(const rd_log_t *lf);

/* Opens a file and checks its header and chunks. Returns 0 when records can be read
 * (lf->partial may still be set), -1 when not (lf->diags[0] says why). rd_close() either way.
 * An empty file, or one whose header the writer never wrote (zeros), opens as a log without
 * records that was not closed (lf->no_header): a process killed as it started. */
int rd_open_path(rd_log_t *lf, const char *path);
/* The same on bytes in memory (copied when not 8-byte aligned); `data` must outlive lf. */
int rd_open_mem(rd_log_t *lf, const void *data, size_t size, const char *name);
void rd_close(rd_log_t *lf);

/* The next record in time order; 0 at the end. Known types shorter than their layout and
 * records that run past their chunk are reported as diagnostics and skipped. The record's
 * bytes stay valid until the next call; for a native-order log they stay valid longer, until
 * lf->refills has changed twice (each thread keeps its previous chunk), which lets a caller
 * batch records without copying them. Checkpoints' records are never handed out as events: a
 * wrapped log's newest complete checkpoint comes first (rec->ckpt says what each of its records
 * is), then the records after it; lf->raw hands out every record, spans marked RD_CKPT_SPAN. */
int rd_next(rd_log_t *lf, rd_rec_t *rec);
/* Starts the iteration again from the first record (of the window). */
void rd_rewind(rd_log_t *lf);
/* Limits the iteration to a window of time: in each thread's records, from the first record
 * with t >= begin in the chunk where begin falls, to the first with t >= end in the chunk where
 * end falls. Windows [a, b) and [b, c) split every thread's records exactly, whatever order
 * their times are in; a wrapped log's checkpoint comes first in the window that starts at 0.
 * Takes effect at the next rd_rewind(). */
void rd_window(rd_log_t *lf, uint64_t begin, uint64_t end);
/* A second, independent reader of the same log (a dup of the file, or the same memory), for
 * another thread; its diagnostics are not recorded. */
int rd_clone(const rd_log_t *src, rd_log_t *dst);

/* Adds a diagnostic; `partial` marks the log as incompletely read. The same message at the same
 * offset is kept once (a second pass over the records meets the same problems). */
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

/* A LEDGER record's other processes: how many its length holds of those it counts. */
unsigned rd_ledger_procs(const rd_rec_t *rec, const gmlog_ledger_proc_t **procs);
/* Tails of variable-length records, bounds-checked against rec->len. Each returns 0, or -1
 * when the counts in the record do not fit in it. */
int rd_site_frames(const rd_rec_t *rec, const uint64_t **native, unsigned *nnative,
                   const gmlog_pyframe_t **py, unsigned *npy);
int rd_tail_bytes(const rd_rec_t *rec, size_t fixed, size_t want, const char **bytes);
/* The checks of a variable-length record's tail (SITE, STRING, MODULE, MARK) that the model
 * applies, with the same diagnostic (partial): 0 when sound or of another type, -1 when not. */
int rd_check_tail(rd_log_t *lf, const rd_rec_t *rec);

#endif
