/* The gmshim event-log format, version 1: the one header the shim (writer) and the gmshim CLI
 * (reader) share. Fixed little-endian layouts with explicit sizes; docs/log-format.md is the
 * prose of this file. Change a layout only with a new GMLOG_VERSION. */
#ifndef GMLOG_H
#define GMLOG_H

#include <stdint.h>

#define GMLOG_MAGIC "GMSHIMLG"        /* 8 bytes, no NUL */
#define GMLOG_VERSION 1
#define GMLOG_BYTE_ORDER 0x01020304u  /* written natively; a reader seeing 0x04030201 must swap */
#define GMLOG_CHUNK_MAGIC 0x4b434d47u /* "GMCK" */
#define GMLOG_CHUNK_SIZE (64u * 1024)
#define GMLOG_HEADER_ALIGN 4096u

/* ---- file header ----------------------------------------------------------------------------
 * At offset 0. Followed by TLV metadata entries, then zero padding up to header_size (a multiple
 * of 4096); chunks start at header_size and are chunk_size bytes each. */
typedef struct gmlog_file_header {
    char magic[8];
    uint32_t version;
    uint32_t byte_order;
    uint32_t header_size;
    uint32_t chunk_size;
    uint64_t start_realtime_ns;  /* CLOCK_REALTIME at the start (Unix epoch, ns) */
    uint64_t start_mono_ns;      /* CLOCK_MONOTONIC at the same instant: every time in the log is
                                  * CLOCK_MONOTONIC − start_mono_ns */
    uint32_t pid;
    uint32_t flags;              /* GMLOG_F_* */
    uint64_t end_ns;             /* time of the clean close (0 while open) */
    uint32_t close_reason;       /* GMLOG_CLOSE_*; for a signal: GMLOG_CLOSE_SIGNAL | sig << 8 */
    uint32_t meta_size;          /* bytes of TLV metadata after this struct */
    uint64_t chunks_at_close;    /* chunks in the file at the clean close at exit; at a close by a
                                  * signal or a stopped writer, the chunks claimed then (more may
                                  * follow); 0: not written, as by writers before it existed; a
                                  * file holding fewer was cut */
    uint64_t alive_ns;           /* while open, the log's helper thread stores here, every
                                  * GMLOG_ALIVE_PERIOD_NS, the time it ran: the process was alive
                                  * then, so a log never closed ended after it (0: not written, as
                                  * by writers before it existed or a log without records) */
    uint64_t reserved[2];
} gmlog_file_header_t;           /* 96 bytes */

#define GMLOG_ALIVE_PERIOD_NS 1000000000ull

#define GMLOG_F_CLOSED 1u        /* close_reason and end_ns are valid */
#define GMLOG_F_WRAPPED 2u       /* the log reached GMSHIM_LOG_LIMIT and reused the space of
                                  * records older than a checkpoint: read from the newest
                                  * complete checkpoint (GMLOG_CHECKPOINT) */

enum gmlog_close_reason {
    GMLOG_CLOSE_OPEN = 0,
    GMLOG_CLOSE_EXIT = 1,        /* normal exit (atexit / destructor) */
    GMLOG_CLOSE_SIGNAL = 2,      /* a fatal signal, number in bits 8..15 */
    GMLOG_CLOSE_DISK = 3,        /* the writer stopped: disk full or unwritable */
};

/* TLV metadata entry: 8-byte header, value padded to 8 bytes. A tag of 0 ends the list. */
typedef struct gmlog_meta {
    uint16_t tag;
    uint16_t reserved;
    uint32_t len;                /* bytes of value, unpadded */
} gmlog_meta_t;

enum gmlog_meta_tag {
    GMLOG_META_END = 0,
    GMLOG_META_HOST = 1,         /* host name */
    GMLOG_META_PROGRAM = 2,      /* executable path (/proc/self/exe) */
    GMLOG_META_CMDLINE = 3,      /* argv, NUL-separated */
    GMLOG_META_OPTION = 4,       /* "GMSHIM_X=value" effective setting, one entry each */
    GMLOG_META_RANK = 5,         /* RANK / LOCAL_RANK / SLURM_PROCID if set, "RANK=3" */
    GMLOG_META_VERSION = 6,      /* gmshim version string */
    GMLOG_META_MODE = 7,         /* "preload" or "injection" */
    GMLOG_META_ENV = 8,          /* other relevant environment, e.g. PYTORCH_NO_CUDA_MEMORY_CACHING=1 */
    GMLOG_META_JOB = 9,          /* what identifies the job's run, if set: "TORCHELASTIC_RUN_ID=..."
                                  * (and its RESTART_COUNT), MASTER_ADDR, MASTER_PORT, SLURM_JOB_ID,
                                  * SLURM_STEP_ID; absent from logs of writers before it existed */
};

/* ---- chunks --------------------------------------------------------------------------------
 * Each thread writes its own chunk; records never cross a chunk. A chunk whose magic is 0 was
 * never used. Within a chunk records follow each other until a record whose type is 0. */
typedef struct gmlog_chunk_header {
    uint32_t magic;              /* GMLOG_CHUNK_MAGIC, written last */
    uint32_t tid;                /* Linux thread id of the writer */
    uint64_t index;              /* chunk number in the file, for checking */
    uint64_t base_ns;            /* time base for the first records' dt */
    uint32_t thread_chunk;       /* n-th chunk of this thread, from 0 */
    uint32_t reserved;
} gmlog_chunk_header_t;          /* 32 bytes */

/* ---- records -------------------------------------------------------------------------------
 * Every record starts with this 8-byte header, which the writer stores last, in one 8-byte
 * store: a record is either all there or its type reads 0. Records are 8-byte aligned; len8 is
 * the record's length in 8-byte units (a reader skips types it does not know by it). */
typedef struct gmlog_rec {
    uint8_t type;
    uint8_t len8;
    uint8_t device;              /* 255: not about one device */
    uint8_t flags;
    uint32_t dt;                 /* ns since the chunk's current time base */
} gmlog_rec_t;

#define GMLOG_NO_DEVICE 255

enum gmlog_type {
    GMLOG_END_OF_CHUNK = 0,
    GMLOG_ALLOC = 1,
    GMLOG_FREE = 2,
    GMLOG_SEGMENT_ALLOC = 3,
    GMLOG_SEGMENT_FREE = 4,
    GMLOG_FENCE = 5,
    GMLOG_FENCE_WAIT = 6,
    GMLOG_EMPTY_CACHE = 7,
    GMLOG_OOM = 8,
    GMLOG_STATS = 9,
    GMLOG_MARK = 10,
    GMLOG_MODULE = 11,
    GMLOG_SITE = 12,
    GMLOG_STRING = 13,
    GMLOG_WARNING = 14,
    GMLOG_DEVICE = 15,
    GMLOG_CLOCK = 16,
    GMLOG_END = 17,
    GMLOG_CAPTURE = 18,
    GMLOG_RESET = 19,
    GMLOG_LIMIT = 20,
    GMLOG_CHECKPOINT = 21,
    GMLOG_CUT = 22,
    GMLOG_AT = 23,
    /* PyTorch's caching allocator, seen from inside (one gmlog_tensor_t layout each) */
    GMLOG_T_ALLOC = 24,
    GMLOG_T_FREE_REQUESTED = 25,
    GMLOG_T_FREE_COMPLETED = 26,
    GMLOG_T_SEGMENT_ALLOC = 27,
    GMLOG_T_SEGMENT_FREE = 28,
    GMLOG_T_SEGMENT_MAP = 29,
    GMLOG_T_SEGMENT_UNMAP = 30,
    GMLOG_T_OOM = 31,
    GMLOG_LEDGER = 32,           /* the card's memory outside the log's events: context, other processes */
    GMLOG_FENCE_REUSABLE = 33,   /* freed blocks under fences up to a seq may be handed out from here */
    GMLOG_TYPE_MAX = 33,         /* the writer's keep mask is 64 bits wide: widen it past 63 */
};

/* Allocation kinds (bits 2..4 of ALLOC and FREE flags). */
enum gmlog_kind {
    GMLOG_KIND_POOL = 0,         /* served by gmshim's pool */
    GMLOG_KIND_PASS = 1,         /* device memory forwarded to the real cudaMalloc (pool off) */
    GMLOG_KIND_MANAGED = 2,      /* cudaMallocManaged */
    GMLOG_KIND_PITCHED = 3,      /* cudaMallocPitch / cudaMalloc3D */
    GMLOG_KIND_HOST = 4,         /* cudaMallocHost / cudaHostAlloc (pinned host memory) */
    GMLOG_KIND_ASYNC = 5,        /* cudaMallocAsync / cudaMallocFromPoolAsync */
    GMLOG_KIND_OBSERVED = 6,     /* seen by CUPTI in the driver, not through the pool */
    GMLOG_KIND_FOREIGN = 7,      /* seen by CUPTI from another library (cuBLAS, NCCL, ...) */
};

#define GMLOG_KIND_SHIFT 2
#define GMLOG_KIND_MASK (7u << GMLOG_KIND_SHIFT)
#define GMLOG_A_MISS 0x01        /* ALLOC: a new segment came from the driver for it */
#define GMLOG_A_GRAPH 0x02       /* ALLOC: served from a graph capture's private pool */
#define GMLOG_A_EXACT 0x20       /* ALLOC (kind PASS): a caching allocator's segment (PyTorch's, its
                                  * cache kept), the driver's memory at exactly the size asked */
#define GMLOG_A_CACHED 0x40      /* ALLOC: from its thread's cache: a block that thread freed into
                                  * it (GMLOG_F_CACHED), handed back without the arena */
#define GMLOG_A_PLANNED 0x80     /* ALLOC: placed by GMSHIM_PLAN's planned step, in its own range */
#define GMLOG_F_DEFERRED 0x01    /* FREE: the block waits for a fence before reuse */
#define GMLOG_F_GRAPH 0x02       /* FREE: the block returned to a graph's private pool */
#define GMLOG_F_CACHED 0x20      /* FREE: the block went to its thread's cache, not to the arena */
#define GMLOG_F_RETURNED 0x40    /* FREE: no free of the program's: a thread's cache gave a block it
                                  * held (GMLOG_F_CACHED) back to its arena; readers hand these out
                                  * only when asked (the replay, dump) */

/* GMLOG_ALLOC, 32 bytes; 40 when `block` is present (len8 = 5). */
typedef struct gmlog_alloc {
    gmlog_rec_t h;
    uint64_t ptr;
    uint64_t size;               /* bits 0..47: bytes requested; bits 48..63: extra, see below */
    uint32_t site;               /* call-site id (GMLOG_SITE), 0 = unknown */
    uint32_t dur_ns;             /* time spent inside gmshim's cudaMalloc, saturated */
    uint64_t block;              /* only when len8 == 5: the block size, when extra overflowed */
} gmlog_alloc_t;
/* The block handed out is round_up(requested, 512) + extra * 512 (the unsplit tail of a large
 * block), unless len8 == 5: then it is `block`. Non-pool kinds: extra is 0 and `block` absent;
 * GMLOG_KIND_ASYNC and CUPTI kinds carry in `block` the stream / the source library string id. */
#define GMLOG_SIZE_BITS 48
#define GMLOG_SIZE_MASK ((1ull << GMLOG_SIZE_BITS) - 1)

/* GMLOG_FREE, 24 bytes. */
typedef struct gmlog_free {
    gmlog_rec_t h;
    uint64_t ptr;
    uint32_t site;               /* call site of the free (0 = not captured) */
    uint32_t dur_ns;
} gmlog_free_t;

/* GMLOG_SEGMENT_ALLOC / GMLOG_SEGMENT_FREE, 32 bytes: the pool's own driver calls. h.flags
 * GMLOG_SEG_VMM: one page of physical memory mapped into (unmapped from) a growable range
 * (GMSHIM_SEGMENTS=vmm), not a cudaMalloc. */
#define GMLOG_SEG_VMM 0x01
typedef struct gmlog_segment {
    gmlog_rec_t h;
    uint64_t base;
    uint64_t size;
    uint32_t dur_ns;             /* time of the driver call */
    uint32_t graph;              /* 0, or the capture id whose private pool it serves */
} gmlog_segment_t;

/* GMLOG_FENCE, 32 bytes: a fence recorded; the bytes then waiting for fences. h.flags: why it
 * was recorded (enum gmlog_fence_why; 0 in logs written before the reason was). */
typedef struct gmlog_fence {
    gmlog_rec_t h;
    uint64_t seq;
    uint64_t pending_bytes;
    uint32_t events;             /* events recorded (1 + non-blocking streams) */
    uint32_t dur_ns;             /* time of its runtime calls (stream queries, events, GPU-order
                                  * waits), saturated; 0 in older logs */
} gmlog_fence_t;

enum gmlog_fence_why {
    GMLOG_FENCE_BY_UNKNOWN = 0,  /* a log from before the reason was recorded */
    GMLOG_FENCE_BY_FREES = 1,    /* the frees since the last fence reached GMSHIM_FENCE_BYTES/_FREES */
    GMLOG_FENCE_BY_ALLOC = 2,    /* an allocation found no reusable block (or a pending one fitting
                                  * better) and its slow path recorded one */
    GMLOG_FENCE_BY_NEED = 3,     /* freed memory was needed at once: an allocation about to wait
                                  * or grow, an empty cache, an OOM retry */
    GMLOG_FENCE_BY_TRIM = 4,     /* the trimmer or the cache cap (GMSHIM_CACHE_LIMIT) */
    GMLOG_FENCE_BY_MAX = 4,
};

/* GMLOG_FENCE_WAIT, 24 bytes: an allocation blocked for a fence rather than grow or fail. */
typedef struct gmlog_fence_wait {
    gmlog_rec_t h;
    uint64_t seq;
    uint32_t dur_ns;
    uint32_t reserved;
} gmlog_fence_wait_t;

/* GMLOG_FENCE_REUSABLE, gmlog_fence_wait_t's layout (24 bytes): from here the pool may hand out
 * blocks freed under every fence up to seq — the fences completed (the pool polled them, waited
 * for them), or under GPU order (GMSHIM_GPU_ORDER) every stream was made to wait for them (flag
 * GMLOG_REUSABLE_ORDERED). One record each time the figure moves, its time taken before it moved:
 * a replay learns from it exactly when the recording could reuse freed memory. dur_ns: the time
 * of the queries (or waits) that moved it. Logs written before it have none. */
#define GMLOG_REUSABLE_ORDERED 0x01
#define GMLOG_REUSABLE_WAITED 0x02   /* moved by a wait inside a call, after what the call decided
                                      * first (a replay runs it after the call's record) */

enum gmlog_empty_reason {
    GMLOG_EMPTY_OOM = 1,         /* a driver allocation failed */
    GMLOG_EMPTY_API = 2,         /* gmshim_empty_cache() */
    GMLOG_EMPTY_PERIODIC = 3,    /* GMSHIM_EMPTY_CACHE_INTERVAL */
    GMLOG_EMPTY_IDLE = 4,        /* GMSHIM_IDLE_RELEASE */
    GMLOG_EMPTY_CACHE_LIMIT = 5, /* GMSHIM_CACHE_LIMIT */
    GMLOG_EMPTY_DEVICE_LIMIT = 6,/* GMSHIM_DEVICE_LIMIT */
    GMLOG_EMPTY_EXIT = 7,
};

/* GMLOG_EMPTY_CACHE, 24 bytes; h.flags = reason. */
typedef struct gmlog_empty_cache {
    gmlog_rec_t h;
    uint64_t bytes;              /* released to the driver */
    uint32_t segments;
    uint32_t dur_ns;
} gmlog_empty_cache_t;

#define GMLOG_OOM_RELEASED 0x01  /* the cache was released before the retry */
#define GMLOG_OOM_RETRIED 0x02   /* the driver was asked again */
#define GMLOG_OOM_WAITED 0x04    /* pending frees were waited for */
#define GMLOG_OOM_LIMIT 0x08     /* GMSHIM_DEVICE_LIMIT refused it, not the driver */
#define GMLOG_OOM_CAPTURE 0x10   /* under a graph capture: nothing could be released */
#define GMLOG_OOM_RECOVERED 0x20 /* the retry succeeded: no error reached the program */
#define GMLOG_OOM_EXACT 0x40     /* a caching allocator's exact segment was asked (GMLOG_A_EXACT) */
#define GMLOG_OOM_ASYNC 0x80     /* a stream-ordered allocation the driver's pool refused (no gmshim pool) */

/* GMLOG_OOM, 96 bytes: a driver allocation failed (recovered or not); h.flags = GMLOG_OOM_*. */
typedef struct gmlog_oom {
    gmlog_rec_t h;
    uint64_t request;            /* bytes the program asked for */
    uint64_t segment;            /* bytes gmshim asked the driver for */
    uint64_t driver_free;        /* cudaMemGetInfo at the failure */
    uint64_t driver_total;
    uint64_t reserved;           /* the pool, at the failure */
    uint64_t allocated;
    uint64_t requested;
    uint64_t cached;
    uint64_t pending;
    uint64_t largest_free;       /* largest free block in the pool */
    uint32_t free_blocks;
    uint32_t site;               /* call site of the failing allocation */
} gmlog_oom_t;

/* GMLOG_STATS, 64 bytes: a snapshot of one device's pool. */
typedef struct gmlog_stats {
    gmlog_rec_t h;
    uint64_t requested, allocated, reserved, cached, pending;
    uint64_t hits, misses;
} gmlog_stats_t;

/* GMLOG_MARK: a user mark; label follows, NUL-padded to 8 bytes. h.flags GMLOG_MARK_END: the end
 * of a phase (gmshim_phase_end), which closes no iteration: growth per mark counts the steps. */
#define GMLOG_MARK_END 1u
typedef struct gmlog_mark {
    gmlog_rec_t h;
    uint32_t id;                 /* 1, 2, 3... in call order */
    uint32_t len;                /* label bytes */
    /* char label[len] */
} gmlog_mark_t;

/* GMLOG_MODULE: a loaded object. Build id then path follow, NUL-padded to 8 bytes. */
typedef struct gmlog_module {
    gmlog_rec_t h;
    uint64_t base;               /* load bias (dlpi_addr) */
    uint64_t start, end;         /* lowest and highest executable address, absolute */
    uint32_t id;                 /* module id used by GMLOG_SITE frames */
    uint16_t path_len;
    uint8_t build_id_len;
    uint8_t reserved;
    /* uint8_t build_id[build_id_len]; char path[path_len]; */
} gmlog_module_t;

/* GMLOG_SITE: a call site, defined once. Native frames are (module id << 48 | offset in the
 * module), innermost first; Python frames are string ids and a line, innermost first. */
typedef struct gmlog_site {
    gmlog_rec_t h;
    uint32_t id;
    uint16_t native;
    uint16_t python;
    /* uint64_t frames[native]; gmlog_pyframe_t py[python]; */
} gmlog_site_t;
#define GMLOG_FRAME_MODULE(f) ((uint32_t)((f) >> 48))
#define GMLOG_FRAME_OFFSET(f) ((f) & ((1ull << 48) - 1))
#define GMLOG_FRAME_UNKNOWN_MODULE 0xffffu  /* offset is then the absolute address */

typedef struct gmlog_pyframe {
    uint32_t file;               /* string id */
    uint32_t function;           /* string id */
    uint32_t line;
    uint32_t reserved;
} gmlog_pyframe_t;

/* GMLOG_STRING: an interned string; bytes follow, NUL-padded to 8 bytes. */
typedef struct gmlog_string {
    gmlog_rec_t h;
    uint32_t id;
    uint32_t len;
} gmlog_string_t;

enum gmlog_warning_kind {
    GMLOG_WARN_FOREIGN_FREE = 1,   /* cudaFree of a pointer gmshim never handed out: forwarded */
    GMLOG_WARN_DOUBLE_FREE = 2,    /* the start of a block already free: refused */
    GMLOG_WARN_INTERIOR_FREE = 3,  /* a pointer inside a block: refused */
    GMLOG_WARN_IPC_SUBBLOCK = 4,   /* cudaIpcGetMemHandle on a block not at its segment's start */
    GMLOG_WARN_PASSTHROUGH = 5,    /* an internal failure: gmshim fell back to pass-through */
    GMLOG_WARN_STICKY = 6,         /* the runtime reported a sticky error to gmshim */
    GMLOG_WARN_VMM = 7,            /* GMSHIM_SEGMENTS=vmm could not do something: aux GMLOG_VMM_* */
};

enum gmlog_vmm_warning {
    GMLOG_VMM_UNAVAILABLE = 1,     /* the driver or device lacks the API: the classic pool instead */
    GMLOG_VMM_IPC = 2,             /* cudaIpcGetMemHandle on a block of a range: CUDA refuses it */
    GMLOG_VMM_REFUSED = 3,         /* the driver refused to map pages (not for want of memory): the
                                      classic pool serves the device's new memory from then on */
};

/* GMLOG_WARNING, 24 bytes; h.flags = kind. */
typedef struct gmlog_warning {
    gmlog_rec_t h;
    uint64_t ptr;
    uint32_t site;
    uint32_t aux;                /* kind-specific: the CUDA error code, the offset... */
} gmlog_warning_t;

/* GMLOG_DEVICE: a device's description, written when gmshim first uses it; name follows. */
typedef struct gmlog_device {
    gmlog_rec_t h;
    uint64_t total;              /* total memory (cudaMemGetInfo) */
    uint64_t free_at_start;      /* free memory then */
    uint32_t name_len;
    uint32_t reserved;
} gmlog_device_t;

/* GMLOG_CLOCK, 16 bytes: a new time base for the following records of this chunk. */
typedef struct gmlog_clock {
    gmlog_rec_t h;
    uint64_t base_ns;
} gmlog_clock_t;

/* GMLOG_END, 16 bytes: the clean end, written by the closing thread. */
typedef struct gmlog_end {
    gmlog_rec_t h;
    uint32_t reason;             /* as close_reason */
    uint32_t reserved;
} gmlog_end_t;

enum gmlog_capture_event {
    GMLOG_CAPTURE_BEGIN = 1,
    GMLOG_CAPTURE_END = 2,       /* ended with a graph */
    GMLOG_CAPTURE_INVALID = 3,   /* ended invalidated (no graph) */
    GMLOG_CAPTURE_RELEASED = 4,  /* the graph and its instances are gone: its pool went back */
};

/* GMLOG_CAPTURE, 32 bytes; h.flags = event. */
typedef struct gmlog_capture {
    gmlog_rec_t h;
    uint64_t stream;
    uint64_t graph;
    uint32_t id;                 /* gmshim's capture id */
    uint32_t mode;               /* cudaStreamCaptureMode */
} gmlog_capture_t;

/* GMLOG_RESET, 24 bytes: cudaDeviceReset; every block of the device is gone. */
typedef struct gmlog_reset {
    gmlog_rec_t h;
    uint64_t reserved_bytes;     /* forgotten */
    uint64_t live_bytes;         /* of which still live */
} gmlog_reset_t;

/* GMLOG_LIMIT, 16 bytes: the device cap now in force (0 = none). Flags: */
#define GMLOG_LIMIT_TORCH 0x01 /* PyTorch's own cap (its per-process memory fraction x the device's
                                * total), not GMSHIM_DEVICE_LIMIT: written before the OOM it raised */
typedef struct gmlog_limit {
    gmlog_rec_t h;
    uint64_t bytes;
} gmlog_limit_t;

/* ---- checkpoints (bounded logs) ------------------------------------------------------------
 * A log with a size limit (GMSHIM_LOG_LIMIT) writes a checkpoint from time to time: one thread
 * writes, in its own chunks and in this order,
 *   CHECKPOINT (flags BEGIN)
 *   copies of every SITE, STRING, MODULE, DEVICE and LIMIT record written so far (verbatim)
 *   history: for the most recent marks and OOMs before `at_ns`, an AT record then a verbatim
 *     copy of the MARK or OOM record; then for each device its last LEDGER sample, likewise
 *   per device with PyTorch's tensor events: CUT (flags GMLOG_CUT_TORCH), its T_SEGMENT_ALLOC,
 *     T_ALLOC and T_FREE_REQUESTED records (see gmlog_cut_t)
 *   per device: CUT, then one SEGMENT_ALLOC per segment the device holds, then one ALLOC per
 *     block live at `cut_ns` (same layouts as the events; their dt means nothing)
 *   CHECKPOINT (flags END, same seq)
 * The records between BEGIN and END are state, never events. Once a checkpoint is complete,
 * the writer may reuse the file space of chunks all of whose records are older than its
 * `at_ns`; the header then has GMLOG_F_WRAPPED. A reader of a wrapped log starts from the
 * newest complete checkpoint: definitions and history from it, the device state of each CUT at
 * its `cut_ns`, then every other record except a device's records at or before its `cut_ns` and
 * the MARK/OOM/global records at or before `at_ns`. */
#define GMLOG_CKPT_BEGIN 1
#define GMLOG_CKPT_END 2

/* GMLOG_CHECKPOINT, 40 bytes; h.flags = GMLOG_CKPT_BEGIN or _END. */
typedef struct gmlog_checkpoint {
    gmlog_rec_t h;
    uint64_t seq;                /* 1, 2, 3... */
    uint64_t at_ns;              /* when it began (log time); the same in BEGIN and END */
    uint64_t records;            /* END: records between BEGIN and END */
    uint64_t dropped_before_ns;  /* END: the writer may from now on drop records older than this
                                  * (= at_ns) */
} gmlog_checkpoint_t;

/* GMLOG_CUT, 128 bytes: one device's state in a checkpoint, taken with every arena of the
 * device locked: records of this device timed at or before cut_ns are in it, later ones not.
 * With h.flags GMLOG_CUT_TORCH it is PyTorch's allocator's state instead (the shim's copy of its
 * live tensors): its figures are PyTorch's (allocated: live tensors, rounded to 512 bytes;
 * pending: frees requested, not completed; reserved: its segments), counts and peaks since the
 * start are its tensors', and T_* records of the device timed at or before its cut_ns are in it;
 * `segments` T_SEGMENT_ALLOC records follow, then `blocks` T_ALLOC (live tensors) and
 * T_FREE_REQUESTED (pending frees) records. */
#define GMLOG_CUT_TORCH 1
typedef struct gmlog_cut {
    gmlog_rec_t h;               /* device */
    uint64_t cut_ns;
    uint64_t requested, allocated, reserved, cached, pending;  /* at cut_ns */
    uint64_t peak_requested, peak_allocated, peak_reserved;   /* since the start */
    uint64_t allocs, frees, hits, misses, ooms;               /* since the start */
    uint32_t segments;           /* SEGMENT_ALLOC records that follow */
    uint32_t blocks;             /* ALLOC records that follow */
} gmlog_cut_t;

/* GMLOG_AT, 16 bytes: the next record of this chunk stream (a history copy) happened at at_ns. */
typedef struct gmlog_at {
    gmlog_rec_t h;
    uint64_t at_ns;
} gmlog_at_t;

/* ---- PyTorch's caching allocator (GMLOG_T_*) --------------------------------------------
 * Written from PyTorch's own trace tracker (docs/pytorch.md) while PyTorch's cache is on. Its
 * segments are also the cudaMallocs the hooks log (ALLOC or SEGMENT_ALLOC of the same address);
 * its tensors are blocks inside them. */
/* GMLOG_T_*, 40 bytes; h.device as PyTorch says (255: not known). */
typedef struct gmlog_tensor {
    gmlog_rec_t h;
    uint64_t addr;               /* block / segment address; T_OOM: free bytes on the device */
    uint64_t size;               /* T_ALLOC, T_FREE_*: bytes requested; T_SEGMENT_*: bytes;
                                  * T_OOM: bytes the failed allocation asked for */
    uint64_t stream;             /* cudaStream_t of the block (0: the legacy stream) */
    uint32_t site;               /* gmshim's call site, captured in the allocating thread */
    uint32_t pool;               /* 0: PyTorch's default pool; else a private pool (CUDA graph) */
} gmlog_tensor_t;

/* ---- the card's ledger (GMLOG_LEDGER) ------------------------------------------------------
 * What the log's events cannot say about a device's memory, sampled by the shim (shim/ledger.c)
 * at the device's first use, after each failed allocation, at marks (at most one a second) and
 * every GMSHIM_LEDGER_INTERVAL: the driver's free bytes, the CUDA context and module code, this
 * process's use and every other process's on the same GPU as NVML gives them. The analyzer adds
 * the pool's and the libraries' figures from the events (analyzer/ledger.c). */
enum gmlog_ledger_why {
    GMLOG_LEDGER_START = 1,      /* the device's first use (the context term is measured here) */
    GMLOG_LEDGER_OOM = 2,        /* an allocation failed (after its OOM record) */
    GMLOG_LEDGER_MARK = 3,       /* a mark (gmshim_mark) */
    GMLOG_LEDGER_PERIODIC = 4,   /* GMSHIM_LEDGER_INTERVAL */
    GMLOG_LEDGER_EXIT = 5,
};

/* status bits */
#define GMLOG_LEDGER_NVML 0x01          /* NVML answered: self_used, others and the entries hold */
#define GMLOG_LEDGER_CTX_CREATED 0x02   /* context: the driver's free bytes before its creation less
                                         * after (NVML before, the driver after) */
#define GMLOG_LEDGER_CTX_FIRST 0x04     /* context: this process's use (NVML) at the device's first
                                         * use, before gmshim's first allocation on it (the context
                                         * existed already) */
#define GMLOG_LEDGER_TRUNCATED 0x08     /* more processes than the record holds: others counts all */
#define GMLOG_LEDGER_UNKNOWN_USE 0x10   /* a process NVML lists without its use (another container) */

#define GMLOG_LEDGER_MAX_PROCS 64
#define GMLOG_UNKNOWN UINT64_MAX

/* GMLOG_LEDGER, 56 bytes + 16 per process; h.flags = why (enum gmlog_ledger_why). */
typedef struct gmlog_ledger {
    gmlog_rec_t h;               /* the CUDA device */
    uint64_t total;              /* the device's memory (the driver's) */
    uint64_t driver_free;        /* the driver's free bytes now (GMLOG_UNKNOWN: not read) */
    uint64_t context;            /* the CUDA context and module code (status says how); 0: unknown */
    uint64_t self_used;          /* NVML: this process's use of the device (GMLOG_UNKNOWN: not given) */
    uint64_t others;             /* NVML: every other process's use, summed (GMLOG_UNKNOWN: no NVML) */
    uint32_t nprocs;             /* gmlog_ledger_proc_t entries that follow (other processes) */
    uint32_t status;             /* GMLOG_LEDGER_* bits */
} gmlog_ledger_t;

typedef struct gmlog_ledger_proc {
    uint32_t pid;                /* as NVML gives it (another PID namespace's, perhaps) */
    uint32_t command;            /* string id (GMLOG_STRING) of its command line, arguments joined
                                  * by spaces; 0: unknown (not in this PID namespace) */
    uint64_t used;               /* bytes (GMLOG_UNKNOWN: NVML does not say) */
} gmlog_ledger_proc_t;

#endif
