/* The replay model: a log's records through a model of each device's pool (live blocks,
 * segments, counters, peaks, epochs, per-site bytes, OOM snapshots). Its types and entry points,
 * defined in the model_*.c files (this header has no file of its own: it is their floor). Memory
 * grows with what is live, the sites and the OOMs, never with the number of events. */
#ifndef GM_MODEL_H
#define GM_MODEL_H

#include "leakwarn.h"
#include "reader.h"
#include "events.h"

#include <stddef.h>
#include <stdint.h>

#define MODEL_MAX_DEVICES 255
#define MODEL_TL_BUCKETS 1024
#define MODEL_MAX_OOMS 64          /* analysed in full; further ones are counted */
#define MODEL_TOP 5
#define MODEL_FRAG_SAMPLES 12

/* What to keep beyond the counters (the summary needs none of it). */
enum {
    MODEL_SITES = 1u << 0,         /* per-site live bytes and growth */
    MODEL_EPOCHS = 1u << 1,        /* marks and low-water epochs (leak growth, OOM causes) */
    MODEL_FRAG = 1u << 2,          /* fragmentation snapshots at fixed times */
    MODEL_TIMELINE = 1u << 3,      /* allocated and reserved over time, in buckets */
    MODEL_ALL = 0x0fu,
    MODEL_RANGE = 1u << 8,         /* internal: one window of a parallel summary (model_windows.c) */
    MODEL_SPLIT = 1u << 9,         /* internal: one window of a parallel replay with sites */
    MODEL_DEFER = 1u << 10,        /* internal: site figures left to the site threads (model_split.c) */
};

enum { EPOCH_MARKS = 0, EPOCH_TROUGHS = 1 };

/* A live allocation, 32 bytes (two per cache line). Read it with the model_live_* helpers. */
typedef struct model_live {
    uint64_t ptr;
    uint64_t blk;                  /* 0..47 bytes it occupies; 48..55 device; 56..58 kind; 59 graph;
                                    * 60 live at a checkpoint's cut: allocated before its time */
    uint64_t req;                  /* 0..47 bytes requested; 48..63 bits 32..47 of (time >> 8) */
    uint32_t t_lo;                 /* bits 0..31 of (time >> 8) */
    uint32_t sidx;                 /* index of its (device, site) statistics, 0 = none */
} model_live_t;

#define MODEL_48 ((1ull << 48) - 1)
static inline uint64_t model_live_block(const model_live_t *e) { return e->blk & MODEL_48; }
static inline unsigned model_live_dev(const model_live_t *e) { return (unsigned)(e->blk >> 48) & 0xff; }
static inline unsigned model_live_kind(const model_live_t *e) { return (unsigned)(e->blk >> 56) & 7; }
static inline int model_live_graph(const model_live_t *e) { return (int)(e->blk >> 59) & 1; }
#define MODEL_LIVE_CUT (1ull << 60)
/* Live at a wrapped log's checkpoint: its time is the cut's, it was allocated before. */
static inline int model_live_before_cut(const model_live_t *e) { return (int)(e->blk >> 60) & 1; }
static inline uint64_t model_live_req(const model_live_t *e) { return e->req & MODEL_48; }
/* Allocation time, ns (to 256 ns). */
static inline uint64_t model_live_time(const model_live_t *e) { return ((e->req >> 48) << 32 | e->t_lo) << 8; }

typedef struct model_livemap {
    model_live_t *slots;
    size_t cap, count;
    unsigned shift;
} model_livemap_t;

/* A map of 64-bit keys (0 is never stored) to 64-bit values: the table's (table.h). */
typedef table_kv_t model_kv_t;
typedef table_map_t model_map_t;

/* A series of per-epoch low-water values: enough to tell steady growth. */
typedef struct model_series {
    uint32_t n, ups, downs;
    uint64_t first, last;
} model_series_t;

/* Per (device, call site). */
typedef struct model_sstat {
    uint32_t site;
    uint8_t dev;
    uint64_t live_req, live_blk, live_count;
    uint64_t peak_req;
    uint64_t allocs, bytes_total;
    uint32_t acc_epoch[2];
    uint64_t ep_min[2];
    model_series_t ser[2];
} model_sstat_t;

typedef struct model_sitedef {
    uint32_t id;
    uint16_t nnative, npy;
    uint64_t *native;
    gmlog_pyframe_t *py;
} model_sitedef_t;

typedef struct model_module {
    uint32_t id;
    uint64_t base, start, end;
    uint8_t build_id[64];
    uint8_t build_id_len;
    char *path;
} model_module_t;

typedef struct model_mark {
    uint32_t id;
    uint64_t t;
    char *label;
    int end;                       /* a phase's end (GMLOG_MARK_END): no epoch boundary */
} model_mark_t;

/* A device's steps found from its repeating allocations (model_steps.c): a step opens at an
 * allocation of `first` once an allocation of `arm` (once a step) came since the last opening. */
typedef struct model_stepkey {
    uint32_t first_site, arm_site;
    uint64_t first_size, arm_size;
    uint32_t period;               /* allocations in a step; 0: no period found */
    int any_size;                  /* the keys are call sites alone: each step's sizes differ */
} model_stepkey_t;

typedef struct model_bucket {
    uint64_t amax, amin, rmax;     /* allocated max/min, reserved max in the bucket */
    uint64_t alast, rlast, qlast;  /* allocated, reserved, requested at its end */
    uint32_t segs_last;
    uint32_t used;
} model_bucket_t;

/* Free space of a device's pool at one moment, from the segments and the live blocks. */
typedef struct model_frag {
    int dev;
    uint64_t t;
    uint64_t reserved, allocated, requested;
    uint64_t internal;             /* block - requested, over live pool blocks */
    uint64_t external;             /* free gaps inside segments that hold live blocks */
    uint64_t cached_whole;         /* segments without a live block (the cache), in bytes */
    uint64_t cached_segments;      /* and their number */
    uint64_t largest_free;         /* largest gap */
    uint64_t free_gaps, segments;
    uint64_t stray_blocks;         /* live pool blocks outside every known segment */
    uint64_t pending;              /* PyTorch's blocks freed and not yet reusable (occupied) */
} model_frag_t;

/* One segment's free space: the free pieces between its blocks (for PyTorch's segments, the
 * inactive split blocks of a segment that holds tensors). */
typedef struct model_segfrag {
    uint64_t base, size;
    uint64_t free, largest_free;
    uint64_t free_blocks;          /* free pieces */
    uint64_t blocks;               /* blocks in it, live or pending */
} model_segfrag_t;

#define MODEL_SEG_TOP 8

typedef struct model_top {
    uint32_t sidx;
    uint64_t bytes, count;
} model_top_t;

typedef struct model_grow {
    uint32_t sidx;
    model_series_t ser;
} model_grow_t;

typedef struct model_oom {
    gmlog_oom_t rec;               /* the record as logged */
    uint64_t t, seq, off;
    uint8_t dev;
    int analysed;
    int history;                   /* from a wrapped log's checkpoint: only the record is known */
    uint64_t limit;                /* GMSHIM_DEVICE_LIMIT in force, 0 = none */
    int limit_torch;               /* ...or PyTorch's memory fraction (a LIMIT of GMLOG_LIMIT_TORCH) */
    uint64_t device_total;         /* from the DEVICE record */
    uint64_t released_before;      /* bytes the OOM's own cache release gave back first */
    uint64_t allocated, requested, reserved;  /* the model's own figures then */
    uint64_t persistent, transient;           /* live bytes allocated before / since the epoch start */
    uint64_t unpooled_live;        /* managed, pitched, async... bytes live on the device */
    int epoch_system;              /* EPOCH_MARKS, EPOCH_TROUGHS, or -1: no epochs yet */
    uint32_t epoch_index;          /* marks or troughs before the failure */
    uint64_t epoch_start;          /* time of the last mark / trough */
    uint64_t epoch_first;          /* time of the first one */
    char *epoch_label;             /* the last mark's label */
    model_series_t lowwater;       /* the device's per-epoch low-water values */
    model_frag_t frag;
    model_top_t top[MODEL_TOP];
    unsigned ntop;
    model_grow_t grow[MODEL_TOP];
    unsigned ngrow;
    uint64_t kept;                 /* live at those sites, allocated from the first epoch to this one */
    model_segfrag_t seg[MODEL_SEG_TOP]; /* a tensor device's segments with the most free, most first */
    unsigned nseg;
    uint64_t seg_total;            /* its segments then */
} model_oom_t;

typedef struct model_retry {
    uint64_t t;
    uint64_t request;
    uint8_t dev, flags;
} model_retry_t;

typedef struct model_warning {
    uint64_t t, ptr;
    uint32_t site, aux;
    uint8_t dev, kind;
} model_warning_t;

/* A parallel summary's window: its maxima up to a free of a block allocated before it. */
typedef struct model_unfree {
    uint64_t ptr;
    uint8_t dev;
    uint64_t max_req, max_alloc, max_res, max_segs;      /* biased (see model_windows.c) */
    uint64_t t_req, t_alloc, t_res;
} model_unfree_t;

typedef struct model_dev {
    int present;
    int id;
    char name[128];
    uint64_t total, free_at_start;
    uint64_t limit, limit_max;
    int limit_torch;                            /* the limit is PyTorch's memory fraction */
    /* counts */
    uint64_t allocs, frees;                     /* every kind */
    uint64_t allocs_kind[8], frees_kind[8];
    uint64_t exact_allocs;                      /* of kind PASS: a caching allocator's exact segments */
    uint64_t planned_allocs, planned_bytes;     /* of kind POOL: served by GMSHIM_PLAN's step (bytes asked) */
    uint64_t live_kind_bytes[8], live_kind_count[8];
    uint64_t hits, misses, graph_allocs;
    uint64_t pool_alloc_ns, pool_free_ns, pass_alloc_ns, pass_free_ns;
    uint64_t seg_allocs, seg_frees, seg_alloc_ns, seg_free_ns, graph_segments;
    uint64_t fences, fence_waits, fence_wait_ns;
    uint64_t fence_ns, fences_by[GMLOG_FENCE_BY_MAX + 1]; /* the fences' runtime calls; by reason */
    uint64_t fence_events;      /* the events the fences recorded, in all */
    uint64_t empty_caches, empty_bytes, empty_segments, empty_by_reason[8];
    uint64_t ooms, retries;
    uint64_t warnings[8];
    uint64_t unmatched_frees, replaced, resets, captures, bad_segment_frees;
    /* figures now and at their peak */
    uint64_t requested, allocated, reserved, segments;
    uint64_t peak_requested, peak_allocated, peak_reserved, peak_segments;
    uint64_t peak_requested_t, peak_allocated_t, peak_reserved_t;
    uint64_t peak_seq, peak_seq_alloc;         /* where reserved peaked with the most allocated */
    uint64_t pending_release;                  /* bytes an OOM-reason empty cache just released */
    /* PyTorch's tensors (model_torch.c): the device's allocations are its tensors */
    int torch;
    uint64_t torch_allocs, torch_ooms;
    uint64_t torch_pending, torch_pending_count; /* freed, not yet reusable */
    uint64_t torch_maps, torch_unmaps;          /* expandable segments' ranges mapped / unmapped */
    uint64_t torch_pending_peak;               /* most pending while the allocator went on */
    uint64_t torch_cross_stream;               /* frees requested on another stream than the alloc's */
    uint64_t torch_waited;                     /* frees not completed at once (pending for real) */
    int torch_cut_seen;                        /* a wrapped log's checkpoint had PyTorch's state */
    int limit_seen;
    /* a wrapped log's checkpoint (CUT): what the figures started from */
    int cut_seen;
    int peak_at_cut;                           /* reserved peaked before the cut (its time unknown) */
    uint64_t cut_ns, cut_allocs, cut_frees;
    model_map_t segmap;                        /* base -> size */
    /* epochs: [EPOCH_MARKS], [EPOCH_TROUGHS] */
    uint32_t epoch[2];
    uint64_t epoch_start[2];
    uint64_t ep_min[2];
    model_series_t lowwater[2];
    leakwarn_t warn[2];                        /* the last steps' lows, for the early warning */
    leakwarn_trough_t tr;                      /* the trough under way (common/leakwarn.h's rule) */
    uint64_t epoch_first[2];                   /* when the first epoch of each began */
    /* steps found from the repeating allocations: they replace the troughs (model_steps.c) */
    model_stepkey_t step;
    int step_armed;
    model_bucket_t *tl;
} model_dev_t;

typedef struct model {
    rd_log_t *lf;
    unsigned flags;
    uint64_t stop_seq;             /* stop before this record (UINT64_MAX: never) */
    int stop_mark_id;              /* stop after this mark (0: never) */
    const char *stop_mark_label;
    int stopped;                   /* a stop condition was met */
    int progress;                  /* show progress on stderr */
    /* what was read */
    uint64_t records, by_type[GMLOG_TYPE_MAX + 1], malformed;
    uint64_t last_t;
    int end_seen;
    uint32_t end_reason;
    uint64_t end_t;
    /* devices */
    model_dev_t *dev[256];          /* by id; [255] (no device) stays NULL */
    int ndev;                      /* highest present id + 1 */
    model_livemap_t live;
    /* sites */
    model_sstat_t *sst;            /* [0] unused */
    size_t nsst, capsst;
    model_map_t sstmap;            /* dev << 32 | site -> index */
    uint64_t sst_cache[256][2];    /* a direct-mapped cache in front of sstmap: key, index */
    model_sitedef_t *sites;
    size_t nsites, capsites;
    uint8_t *site_twins;           /* sites.c's cache: 1 where another site has the same label */
    size_t site_twins_n;
    model_map_t sitemap;           /* site id -> index + 1 */
    char **strings;
    size_t nstrings, capstrings;
    model_map_t strmap;            /* string id -> index + 1 */
    model_module_t *modules;
    size_t nmodules, capmodules;
    /* events worth listing */
    model_mark_t *marks;
    size_t nmarks, capmarks;
    uint64_t marks_total;
    uint64_t marks_bounds;         /* of them, the epoch boundaries (all but phases' ends) */
    model_oom_t *ooms;
    size_t nooms, capooms;
    uint64_t ooms_total;
    model_retry_t *retries;
    size_t nretries, capretries;
    uint64_t retries_total;
    model_warning_t *warns;
    size_t nwarns;
    uint64_t warns_total;
    /* timeline */
    unsigned tl_shift;             /* bucket width = 1 << tl_shift ns */
    model_frag_t *fsnap;           /* [MODEL_FRAG_SAMPLES * devices] samples */
    size_t nfsnap, capfsnap;
    unsigned next_sample;
    uint64_t sample_t[MODEL_FRAG_SAMPLES];
    /* a window of a parallel summary */
    model_unfree_t *unfree;
    size_t nunfree, capunfree;
    int saw_reset;
    /* PyTorch's tensors (model_torch.c) */
    int torch;                     /* some device has tensor events */
    ev_dec_t ev;                   /* the decoder: its PyTorch view (segment bases, tensors, pending) */
    uint64_t torch_just_requested; /* the block whose free was the last tensor event */
    model_stepkey_t *stepkeys;     /* [MODEL_MAX_DEVICES]: steps found without marks; NULL: none */
    unsigned windows;              /* windows a parallel replay was made of (0: in order) */
    struct model_split *split;     /* a MODEL_SPLIT window's output */
    /* MODEL_DEFER: called for each block released instead of updating its site's figures (the
     * parallel replay installs it; e->sidx is then the site id) */
    void (*release_hook)(void *arg, const struct model *m, const model_live_t *e);
    void *release_arg;
} model_t;

/* Replays lf into m (rewinding it first). flags: MODEL_*. Returns 0. */
int model_build(model_t *m, rd_log_t *lf, unsigned flags);
/* The same, stopping before record number stop_seq, or after the mark whose id is mark_id or
 * whose label is mark_label; m->stopped says whether it was reached. */
int model_build_until(model_t *m, rd_log_t *lf, unsigned flags, uint64_t stop_seq, int mark_id,
                      const char *mark_label);
void model_free(model_t *m);
/* What a layer above keeps for a model (the card's ledger, ledger.c) is forgotten when the model
 * is freed: that layer hands this floor its function once, so that no call goes up by name. */
void model_on_free(void (*fn)(const model_t *m));

/* Whether ptr is a tensor block freed and not yet reusable (PyTorch's pending free). */
int model_torch_pending_at(const model_t *m, uint64_t ptr, uint64_t *block);
/* Whether ptr is the base of one of PyTorch's segments (its cudaMalloc stands for no tensor). */
int model_torch_segment_base(const model_t *m, uint64_t ptr);

/* The fragmentation of device `dev` now. */
void model_frag_now(const model_t *m, int dev, model_frag_t *out);
/* The free space of each of device dev's segments now, the max with the most free first (in out);
 * *nsegs gets how many segments there are. */
unsigned model_frag_segments(const model_t *m, int dev, model_segfrag_t *out, unsigned max, uint64_t *nsegs);
/* Fragmentation at the device's peak: replays the log up to it (a second pass). */
int model_frag_at_peak(const model_t *m, int dev, model_frag_t *out);

/* Which epochs describe a device's run: marks when there are `need` of them, else troughs when
 * there are `need`, else whichever there are (-1: none). */
int model_epoch_system(const model_t *m, int dev, unsigned need);
/* A site's per-epoch low-water series over the closed epochs (the current one is unfinished). */
model_series_t model_site_series(const model_t *m, const model_sstat_t *s, int sys);
/* The device's own series. */
model_series_t model_dev_series(const model_t *m, const model_dev_t *d, int sys);
/* Whether a series grows steadily; *per_epoch gets the mean growth per epoch. */
int model_series_grows(const model_series_t *s, uint64_t *per_epoch);
/* The one rate of growth every report states: a series' mean growth per epoch when it grows
 * steadily, else 0; a site's over its closed epochs; an OOM's leak (its growing sites' rates
 * added, else the device's low-water rate). */
uint64_t model_series_rate(const model_series_t *s);
uint64_t model_site_rate(const model_t *m, const model_sstat_t *s, int sys);
uint64_t model_oom_leak_rate(const model_oom_t *o);
/* Bytes live now per site of device dev (out[sidx], m->nsst of them) that were allocated from its
 * first epoch's start to its current epoch's: kept from steps that ended. Their total. */
uint64_t model_kept_by_site(const model_t *m, int dev, int sys, uint64_t *out);
/* What one epoch of a device is called: "mark", "step" (found from its repeating allocations)
 * or "trough" (a low-water trough); plural: "marks", "steps", "troughs". */
const char *model_epoch_noun(const model_t *m, int dev, int sys, int plural);

/* Site lookups; NULL when unknown. */
const model_sitedef_t *model_site(const model_t *m, uint32_t id);
const char *model_string(const model_t *m, uint32_t id);
const model_module_t *model_module(const model_t *m, uint32_t id);

/* The rank of the log: RANK from the metadata, else -1. */
/* The k-th mark kept that is an epoch boundary (not a phase's end), from 0; k < 0 counts from
 * the last (-1: the last). NULL when there is none. */
const model_mark_t *model_step_mark(const model_t *m, long k);
int model_rank(const model_t *m);
/* Live bytes of device `dev` at this moment, largest sites first (at most max). */
unsigned model_top_sites(const model_t *m, int dev, model_top_t *out, unsigned max);

#endif
