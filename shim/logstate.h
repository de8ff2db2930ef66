/* The log writer's state, shared by its parts, bottom up: logstate.c (this state, the file's
 * end marks, the checkpoint thread), logkeep.c (what a bounded log repeats), logring.c (where
 * chunks go in the file: extents, the ring of a bounded log, what stays mapped), evlog.c (open,
 * close, the records) and checkpoint.c (a bounded log's checkpoint). Nothing outside them
 * includes this. */
#ifndef GM_LOGSTATE_H
#define GM_LOGSTATE_H

#include "common.h"
#include "gmlog.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#define EXTENT_CHUNKS 256u                    /* 16 MiB of chunks per mapping */
#define EXTENT_BYTES ((size_t)EXTENT_CHUNKS * GMLOG_CHUNK_SIZE)
#define NO_SLOT UINT32_MAX

/* Extent e holds chunks e*256 .. e*256+255, in file slot `slot`. It stays mapped while any of
 * its chunks may still be written: until every one was claimed and every claimant moved on. */
typedef struct extent {
    uint8_t *addr;                             /* NULL once unmapped */
    uint32_t slot;                             /* where in the file: header_size + slot * 16 MiB */
    uint32_t open;                             /* chunks claimed and not yet given up */
    uint32_t usable;                           /* chunks backed by the file (< 256: disk full) */
    int short_err;                             /* why not all 256 (ENOSPC, EFBIG: ulimit -f); 0 */
    uint32_t reused;                           /* its slot held older chunks: zero each at claim */
    uint64_t last_release;                     /* log time its last chunk was given up */
    uint64_t skip[EXTENT_CHUNKS / 64];         /* chunks of its slot still held by older extents'
                                                * threads (idle ones keep theirs): never claimed */
} extent_t;

/* What a thread does after unlocking: have the extent mapped ahead faulted in, unmap the extents
 * it finished (both slow, and both wait for the process's mappings: never under the lock), ask for
 * a checkpoint. */
typedef struct after_unlock {
    size_t populate;                           /* its extent number + 1; 0: none */
    unsigned populate_gen;                     /* gm_log.gen when it was mapped */
    int checkpoint;
    int nunmap;
    void *unmap[2];                            /* extents no longer in the table, to unmap */
} after_unlock_t;

typedef struct evlog_state {
    int enabled;                               /* records are being written */
    int closed;                                /* no new chunk may be claimed */
    int fd;
    unsigned gen;                              /* bumped when threads must drop their chunk */
    uint64_t start_mono;
    unsigned keep;                             /* bounded: copy definitions for checkpoints */
    /* Above: read with every record. Below: written when a chunk is claimed, on other lines. */
    _Alignas(64) uint64_t next_chunk;
    uint32_t header_size;
    gmlog_file_header_t *hdr;
    extent_t *extents;                         /* by extent number */
    size_t nextents, extents_cap;
    uint32_t *slot_owner;                      /* extent number in each file slot */
    uint64_t (*slot_held)[EXTENT_CHUNKS / 64]; /* per slot: its chunks claimed, not given up */
    uint32_t nslots, slots_cap, max_slots;     /* max_slots 0: unbounded */
    uint32_t ring_cursor;                      /* where the search for a reusable slot starts */
    int wrapped;
    int exit_key_made;                         /* evlog_exit_key exists */
    uint64_t ckpt_done_at;                     /* log time of the newest complete checkpoint */
    uint64_t ckpt_extent;                      /* extent number when the newest one was asked for */
    int ckpt_busy;
    int warned;                                /* the log's one warning was given */
    uint32_t next_mark;
    char path[PATH_MAX];
    pthread_mutex_t lock;
} evlog_state_t;


typedef struct evlog_tls {
    uint8_t *chunk;
    uint32_t used;
    unsigned gen;
    uint64_t base;                             /* time base of the current chunk, ns since start */
    uint64_t chunk_index;
    uint32_t nchunks;
    uint32_t tid;
    int in_checkpoint;                         /* the checkpoint writer: its copies are not kept */
    int exit_hooked;
} evlog_tls_t;

extern evlog_state_t gm_log;
extern __thread evlog_tls_t gm_log_tls __attribute__((tls_model("initial-exec")));
extern pthread_key_t evlog_exit_key;

/* logstate.c */
/* posix_fallocate, except past the file size limit (`ulimit -f`): EFBIG then. */
int logstate_reserve(int fd, off_t off, off_t len);
/* Header fields of a clean end; async-signal-safe. */
void logstate_mark_closed(uint32_t reason);
/* The header's alive_ns: now (the process is alive), while the log is open. */
void logstate_mark_alive(void);
/* The log stops (disk full, out of memory) with its one warning. gm_log.lock held. */
void logstate_stop_writing(const char *why, int err);

/* The log's helper thread (logstate.c): asked for a checkpoint or to fault an extent in (started
 * the first time), told to stop; forgotten with every copy in a fork child. For a checkpoint it
 * runs the writer installed here (checkpoint.c's, by checkpoint_set_cut); without one that request
 * does nothing. To fault extent `extent` of log generation `gen` in it calls fn (logring.c's);
 * -1 when the thread cannot run (the caller calls fn itself). A newer request replaces one not
 * yet served. */
#define KEEP_MASK ((1ull << GMLOG_SITE) | (1ull << GMLOG_STRING) | (1ull << GMLOG_MODULE) | \
                   (1ull << GMLOG_DEVICE) | (1ull << GMLOG_LIMIT) | (1ull << GMLOG_MARK) | (1ull << GMLOG_OOM) | \
                   (1ull << GMLOG_LEDGER))
void logstate_checkpoint_request(void);
int logstate_request_populate(void (*fn)(size_t extent, unsigned gen), size_t extent, unsigned gen);
void logstate_checkpoint_stop(void);
void logstate_checkpoint_forget(void);
void logstate_set_checkpoint_writer(void (*write)(void));

#endif
