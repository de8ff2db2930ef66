/* The counterfactual replay: one device's pool events, decoded once from a log into a compact
 * array, re-run through the shim's own pool code (common/pool.c, common/policy.c) under the recorded
 * settings or others (device size, GMSHIM_DEVICE_LIMIT, GMSHIM_MAX_SPLIT, GMSHIM_CACHE_LIMIT,
 * GMSHIM_PENDING_WAIT). It must never trust the log: a free of an unknown pointer is skipped, a
 * replay that cannot place a block counts it as a failure and goes on. */
#ifndef GM_REPLAY_H
#define GM_REPLAY_H

#include "pool.h"
#include "reader.h"

#include <stddef.h>
#include <stdint.h>

#define RP_RECORDED UINT64_MAX      /* a setting as the log recorded it */

/* A switch of a replay: as the log recorded it (0, what a zeroed configuration says), off, on. */
enum { RP_AS_LOG = 0, RP_OFF, RP_ON };

#include "replay_events.h"

/* A failed allocation as the log recorded it. */
typedef struct rp_oom {
    gmlog_oom_t rec;
    uint64_t t;
    uint64_t ev;        /* its event index */
    int recovered;      /* the retry succeeded in the recording */
    int by_limit;       /* GMSHIM_DEVICE_LIMIT refused it */
    int exact;          /* a caching allocator's exact segment was asked */
} rp_oom_t;

/* The settings of one replay. */
typedef struct rp_cfg {
    uint64_t device_bytes;   /* the device's memory (what outside the pool held is kept); RP_RECORDED */
    uint64_t limit;          /* GMSHIM_DEVICE_LIMIT in bytes, 0 = none; RP_RECORDED: as the log's LIMIT records */
    uint64_t max_split;      /* GMSHIM_MAX_SPLIT; RP_RECORDED */
    uint64_t cache_limit;    /* GMSHIM_CACHE_LIMIT; RP_RECORDED */
    int pending_wait;        /* GMSHIM_PENDING_WAIT: 0, 1, or -1 as recorded */
    int frees_at_once;       /* every free reusable at once (a bound: the GPU never lags) */
    int guided;              /* follow the recording's own segment frees and fences (its settings only):
                                1 also writes what it learns of the fences into the log, 2 only reads */
    int vmm;                 /* GMSHIM_SEGMENTS=vmm: RP_AS_LOG, RP_OFF (classic), RP_ON */
    int plan;                /* GMSHIM_PLAN: RP_AS_LOG, RP_OFF, RP_ON (which turns on vmm, as in the shim) */
    int probe;               /* only whether it fits: replay_once stops at the first failure */
} rp_cfg_t;

/* One failed allocation in a replay. */
typedef struct rp_fail {
    uint64_t ev, t;
    uint64_t record;         /* the log's record (rd_rec_t.seq) */
    uint64_t request, rounded, segment;
    uint32_t site;
    int oom;                 /* the recorded OOM it replays (index in rp_log.ooms), or -1: an
                                allocation that succeeded in the recording */
    int by_limit;
    uint64_t cap;            /* bytes the pool could reserve then (limit or driver) */
    uint64_t reserved, live, pending, largest_free;
    uint64_t free_blocks;
    uint64_t live_peak;      /* the most live before it */
} rp_fail_t;

typedef struct rp_result {
    uint64_t events;
    uint64_t peak_reserved, peak_allocated;
    uint64_t frag_at_peak;   /* reserved - allocated when reserved peaked */
    uint64_t failures;       /* every failed allocation */
    uint64_t recorded_failed;/* recorded OOMs that failed again */
    uint64_t recorded_passed;/* recorded OOMs the replay got past */
    uint64_t new_failures;   /* allocations that succeeded in the recording and failed here */
    uint64_t divergences;    /* guided: blocks placed elsewhere than recorded */
    uint64_t planned;        /* GMSHIM_PLAN: allocations served from the plan */
    uint64_t plan_period;    /* ...the step's allocations (0: no plan made) */
    uint64_t plan_bytes;     /* ...bytes of the plan's range mapped at the end */
    rp_fail_t first;         /* valid when failures */
    rp_fail_t last;          /* the latest failure */
    double seconds;          /* replay_many: the replay's own time, on its thread */
} rp_result_t;

/* A device's events and what the log says of its settings. */
typedef struct rp_log {
    int dev;
    uint8_t *packed;         /* the events, packed (replay_events.h): read in order by cursors */
    size_t npacked, cappacked;
    size_t nev;
    rp_cursor_t tail;        /* the packing's state: after the last event */
    uint64_t cur_seq;        /* decoding: the record being read */
    uint32_t nids;           /* block ids in use at most */
    rp_oom_t *ooms;
    size_t nooms, capooms;
    uint64_t *proof_ev, *proof_seq;   /* fences the guided replay saw completed, by event index */
    size_t nproofs, capproof_ev, capproof_seq;
    /* the device */
    uint64_t total, free_at_start;
    uint64_t *drv_cap;       /* bytes the driver let the pool hold, at each driver OOM in order */
    size_t ndrv, capdrv;
    uint64_t base_cap;       /* without driver OOMs: what it could hold */
    /* recorded settings */
    uint64_t max_split, cache_limit, idle_release_ns;
    int pending_wait, trust_stream_order, pool_off;
    uint64_t limit_first;    /* the first cap in force */
    uint64_t torch_limit;    /* PyTorch's memory fraction x the device (its first LIMIT of GMLOG_LIMIT_TORCH):
                                in force from the start, as far as the log can tell; 0 = none */
    int torch_cache_kept;    /* PyTorch with its caching allocator on: blocks are its segments */
    int torch_tensors;       /* ...unless its bridge logged its tensors: then they are the blocks */
    int torch_expandable;    /* PyTorch's expandable segments (T_SEGMENT_MAP): the replay's segments
                                are its classic allocator's, not ranges mapped into one */
    int vmm, plan;           /* GMSHIM_SEGMENTS=vmm, GMSHIM_PLAN=1 in the recording */
    uint64_t planned_allocs; /* ALLOC records of the recording's plan (GMLOG_A_PLANNED) */
    int foreign;             /* not written by gmshim's pool (no GMSHIM_* settings): its segments are
                                followed as recorded, not re-decided */
    int wrapped;             /* a bounded log read from a checkpoint: the state before it is not replayed */
    uint64_t unpooled;       /* allocations of other kinds, not replayed */
    uint64_t nfences;        /* FENCE records (none: frees replay as reusable at once) */
    uint64_t nreusable;      /* FENCE_REUSABLE records: the recording says when freed memory
                                became reusable (no guided pass, no bound on the GPU's lag) */
    uint64_t peak_reserved_recorded;
    rp_result_t recorded;    /* the replay under the recorded settings (rp_cfg_as_recorded) */
    rp_result_t followed;    /* the guided replay that learnt when the fences completed */
} rp_log_t;

/* Decodes device `dev` of lf (rewound first), then makes the guided replay under the recorded
 * settings (log->recorded). 0, or -1 when out of memory. */
int rp_load(rp_log_t *log, rd_log_t *lf, int dev);
/* As rp_load without the two replays of the recording (log->recorded, log->followed stay zero):
 * the events alone, for what reads them and replays nothing (the plan at the peak). */
int rp_load_events(rp_log_t *log, rd_log_t *lf, int dev);
void rp_log_free(rp_log_t *log);
/* Appends an event to the log's packed events (the loader's, or a test's by hand): 0, or -1. */
int rp_append(rp_log_t *log, const rp_ev_t *e);

/* A configuration: every setting as recorded. */
void rp_cfg_recorded(rp_cfg_t *cfg);
/* ...and how the log is best replayed as it ran: simulated by the policy, or (a foreign log)
 * following its segments. */
void rp_cfg_as_recorded(const rp_log_t *log, rp_cfg_t *cfg);

/* A replay in progress (for the causes: stop at a failure and look at the pool). */
typedef struct replay {
    const rp_log_t *log;
    rp_cfg_t cfg;
    gm_heap_t heap;
    gm_pool_stats_t st;
    gm_block_t **blk;        /* by block id */
    uint64_t *born;          /* allocation time, by block id */
    uint64_t issued;         /* the last fence recorded */
    uint64_t released;       /* pending frees up to this fence are free */
    uint64_t held_bytes;     /* blocks held in threads' caches (RP_FREE_CACHED): allocated to the
                                pool, not to the program */
    uint64_t limit_now;
    uint64_t cache_cap;      /* GMSHIM_CACHE_LIMIT in force (0: none) */
    int pw;                  /* GMSHIM_PENDING_WAIT in force */
    int defer;               /* frees wait for a fence */
    size_t next_oom;         /* recorded OOMs passed */
    size_t next_drv;         /* driver OOMs passed */
    size_t next_proof;
    uint64_t seg_base, seg_size; /* the recording's latest segment, to reuse its address */
    uint64_t synth_base;
    uint64_t whole_bytes;    /* cache-limit bookkeeping: set when it must be recounted */
    size_t at;               /* next event */
    rp_cursor_t cur;         /* where it is in the packed events */
    uint64_t ev_ptr, ev_rec; /* the event being run: its recorded pointer and record */
    uint64_t now;
    int stop_on_fail;        /* stop right after the first failure */
    rp_result_t res;
    size_t capids;           /* entries blk and born have room for */
    int stashed;             /* the heap was initialized: reused, not re-made */
    int vmm;                 /* growable ranges (replay_plan.h) */
    struct rplan *plan;      /* the planned step, NULL: GMSHIM_PLAN off */
    int plan_released;       /* the pool's cache went since the plan's range last grew */
} replay_t;

int replay_init(replay_t *r, const rp_log_t *log, const rp_cfg_t *cfg);
/* The same on storage an earlier replay left (its arrays and block structs: no fresh pages to
 * clear), NULL when out of memory; replay_end gives it back for the next. Thread-safe. */
replay_t *replay_start(const rp_log_t *log, const rp_cfg_t *cfg);
void replay_end(replay_t *r);
/* Frees the storage replays left. */
void replay_stash_free(void);
void replay_free(replay_t *r);
/* Runs a whole replay; the result. */
rp_result_t replay_once(const rp_log_t *log, const rp_cfg_t *cfg);
/* Runs n configurations, on up to `threads` threads (0: one per CPU, at most 16); calls
 * progress(arg, done, n) after each when given. */
void replay_many(const rp_log_t *log, const rp_cfg_t *cfgs, rp_result_t *out, size_t n, unsigned threads,
                 void (*progress)(void *arg, size_t done, size_t n), void *arg);

/* The pool's steps, for the events (replay_run.c). Pending frees up to fence seq become free. */
void replay_release_to(replay_t *r, uint64_t seq);
/* GMSHIM_CACHE_LIMIT: the oldest wholly free segments (and ranges' idle pages) over the cap go. */
void replay_enforce_cache_limit(replay_t *r);
/* A block a thread's cache held back to the pool: free, or pending on its fence. */
void replay_unhold(replay_t *r, gm_block_t *b);
/* Every pending free waited for when asked, then the whole free segments (idle ones only when
 * idle_ns) and the ranges' idle pages given back, the threads' caches first; the bytes. */
size_t replay_empty_cache(replay_t *r, int wait, uint64_t idle_ns);
/* After an allocation that succeeded: the run's peaks. */
void replay_note_peaks(replay_t *r);
/* A block for `req` from `site` as the shim's pool serves it (a free block, the threads' caches'
 * blocks given back, then common/grow.c); NULL: a failure, noted (oom: the recorded OOM re-run,
 * or -1). *grew: a new segment's block. */
gm_block_t *replay_alloc(replay_t *r, size_t req, uint32_t site, int oom, int *grew);
/* A caching allocator's exact segment of `size` (grow_exact), its peaks noted; NULL: failed. */
gm_block_t *replay_exact(replay_t *r, size_t size, uint32_t site, int oom);

/* The bytes the pool could reserve at event `at` under cfg (limit and device). */
uint64_t replay_cap_at(const replay_t *r);
/* Live bytes by when they were allocated: before `since` and from then on. */
void replay_live_split(const replay_t *r, uint64_t since, uint64_t *before, uint64_t *after);

#endif
