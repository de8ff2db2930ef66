/* A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, read for its
 * rules, not copied), run over the tensors a keep-mode log recorded through the bridge: its
 * segments, splitting, pools by stream and size, oversize blocks (max_split_size_mb), rounding
 * (roundup_power2_divisions), garbage collection under a memory fraction
 * (garbage_collection_threshold), its OOM retry, and expandable segments (one growing range per
 * stream and pool, mapped in 2 or 20 MiB pages). It never trusts the log: a free of an unknown
 * tensor is skipped, a request the model cannot place is counted and the run goes on. */
#ifndef GM_REPLAY_TORCH_H
#define GM_REPLAY_TORCH_H

#include "reader.h"

#include <stddef.h>
#include <stdint.h>

/* PYTORCH_CUDA_ALLOC_CONF, the keys the model follows. */
typedef struct rt_conf {
    int expandable;           /* expandable_segments:True */
    uint64_t max_split;       /* max_split_size_mb in bytes; 0: none (SIZE_MAX in PyTorch) */
    unsigned divisions;       /* roundup_power2_divisions (0 or 1: none) */
    double gc_threshold;      /* garbage_collection_threshold (0: none; acts only under a fraction) */
    int async;                /* backend:cudaMallocAsync (not modelled: the driver's pool is opaque) */
    /* Not keys: what a run asks of the model beyond PyTorch's settings. */
    uint64_t limit;           /* PyTorch's memory fraction x the device in force throughout (0: the log's) */
    uint64_t dev_limit;       /* GMSHIM_DEVICE_LIMIT in force throughout (0: the log's) */
    uint64_t less;            /* bytes taken from what PyTorch could reserve, the driver's room and its
                                 fraction alike (the recommendation's headroom check) */
} rt_conf_t;

enum rt_type {
    RT_ALLOC = 1,             /* size: bytes asked, id: tensor, stream: index */
    RT_FREE,                  /* id: the tensor's block reusable (FREE_COMPLETED) */
    RT_EMPTY,                 /* the recording gave segments back outside an OOM retry (empty_cache) */
    RT_OOM,                   /* size: bytes asked by an allocation that raised OutOfMemoryError */
    RT_CAP,                   /* size: bytes PyTorch could reserve from the driver from here on, under
                                 GMSHIM_DEVICE_LIMIT; id << 32 | site: the driver's room alone */
    RT_LIMIT,                 /* size: PyTorch's memory fraction x the device (0: none) */
};

typedef struct rt_ev {
    uint64_t size;
    uint64_t t;               /* ns since the log's start */
    uint32_t id;
    uint32_t site;            /* RT_ALLOC, RT_OOM: the call site */
    uint16_t stream;
    uint8_t type;
    uint8_t pad;
} rt_ev_t;

/* A device's tensor events, decoded once, and what the recording says of them. */
typedef struct rt_log {
    int dev;
    rt_ev_t *ev;
    size_t nev, capev;
    uint32_t nids;            /* tensor ids in use at most */
    unsigned nstreams;
    uint64_t cap;             /* bytes PyTorch could reserve at the start */
    uint64_t total;           /* the device's memory */
    uint64_t torch_limit;     /* PyTorch's memory fraction x the device, its first LIMIT: in force from
                                 the start (it is set before the first tensor, as a rule); 0: none */
    rt_conf_t conf;           /* the log's own PYTORCH_CUDA_ALLOC_CONF */
    int has_conf;             /* ...which the log's environment named */
    char conf_raw[512];       /* ...its value as the job set it, every key ("" where none) */
    uint64_t peak_reserved_recorded; /* PyTorch's max_memory_reserved, from its segment events */
    uint64_t nooms;           /* OutOfMemoryErrors recorded */
    /* PyTorch's classic segments as the driver placed them, in the order they were made: the
     * model gives a segment it makes the address of the next recorded one of its size, since
     * PyTorch's free blocks of one size go lowest address first and the driver's addresses are
     * in no order a model could know (a segment with none: an address above every real one). */
    uint64_t *seg_addr, *seg_size;
    size_t nsegs, capsegs;
    int wrapped;              /* a bounded log: the events before its checkpoint are lost */
} rt_log_t;

typedef struct rt_result {
    uint64_t peak_reserved, peak_allocated;
    uint64_t failures;        /* requests the model could not place */
    uint64_t recorded_failed; /* recorded OutOfMemoryErrors that fail in the model too */
    uint64_t recorded_passed; /* ...that the model gets past */
    uint64_t new_failures;    /* allocations that succeeded in the recording and fail here */
    uint64_t first_ev;        /* the first failure's event index (when failures) */
    uint64_t first_request;
    uint64_t segments;        /* segments made (cudaMalloc) or page runs mapped */
    uint64_t reserved;        /* at the end */
} rt_result_t;

/* The model at a recorded OutOfMemoryError that it fails too (after its retry). */
typedef struct rt_oom_state {
    uint64_t cap;             /* what PyTorch could reserve: the driver's room, or its fraction */
    int by_limit;             /* the fraction refused it */
    uint64_t reserved, live;  /* live: the tensors' blocks */
    uint64_t largest_free, free_blocks;  /* free blocks of mapped memory */
    uint64_t persistent;      /* live, allocated before epoch_t */
} rt_oom_state_t;

/* Runs the model under conf up to the k-th recorded OutOfMemoryError (from 0): 1 when it fails
 * there too (*out filled, `persistent` counted against epoch_t), 0 when it gets past it, -1 when
 * the log has no such OOM or memory ran out. */
int replay_torch_oom_state(const rt_log_t *log, const rt_conf_t *conf, size_t k, uint64_t epoch_t, rt_oom_state_t *out);

/* Decodes device dev's tensor events of lf (rewound first). 0; 1 when the log has none (not a
 * keep-mode log with the bridge); -1 when out of memory. */
int replay_torch_load(rt_log_t *log, rd_log_t *lf, int dev);
void replay_torch_free(rt_log_t *log);
/* Appends an event (the loader's, or a test's by hand): 0, or -1 when out of memory. */
int replay_torch_append(rt_log_t *log, unsigned type, uint64_t size, uint32_t id, unsigned stream);
/* A classic segment PyTorch made at addr (the loader's, or a test's by hand): 0, or -1 when out of
 * memory. */
int replay_torch_segment(rt_log_t *log, uint64_t addr, uint64_t size);
/* ...with its time and site. */
int replay_torch_append_at(rt_log_t *log, unsigned type, uint64_t size, uint32_t id, unsigned stream, uint64_t t,
                           uint32_t site);
/* Runs the log through the model under conf; the result. */
rt_result_t replay_torch_run(const rt_log_t *log, const rt_conf_t *conf);

/* Parses PYTORCH_CUDA_ALLOC_CONF's value (keys separated by commas, key:value); 0 when a key it
 * follows was named. Keys it does not follow are ignored. */
int replay_torch_conf_parse(const char *s, rt_conf_t *out);
/* Writes the conf as PYTORCH_CUDA_ALLOC_CONF takes it ("" for PyTorch's defaults). */
const char *replay_torch_conf_text(const rt_conf_t *c, char *buf, size_t len);
/* The value a job that ran with PYTORCH_CUDA_ALLOC_CONF=raw sets to run as `text` (a conf's text,
 * every key the model follows): text's keys, then the job's own keys that text neither names nor
 * decides (per_process_memory_fraction, pinned_*, a list of roundup_power2_divisions...), in
 * their order, so that applying it changes only what the model tried. NULL when it does not fit. */
const char *replay_torch_conf_merge(const char *raw, const char *text, char *buf, size_t len);
/* PyTorch's size rounding under `divisions` (the model's; exposed for tests). */
uint64_t replay_torch_round(uint64_t size, unsigned divisions);

#endif
