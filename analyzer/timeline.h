/* The timeline's data (timeline.c): per device of a log, allocated, reserved and the memory
 * outside the pool in buckets over the run, the top live call sites at each bucket's end, the
 * live bytes by call site at the peak and at each OOM (the flame graphs), and the card's ledger
 * (ledger.h) at the last of the shim's samples in each bucket. The page's script and style are
 * in timeline_page.h. */
#ifndef GM_TIMELINE_H
#define GM_TIMELINE_H

#include "export_replay.h"
#include "ledger.h"

#define TL_BUCKETS 800
#define TL_TOP 3                  /* sites named under the mouse */
#define TL_FLAMES 17              /* the peak and up to 16 OOMs per device */
#define TL_MARKS_SHOWN 4000       /* marks the page carries, evenly thinned past it */

typedef struct tl_snap {
    char label[160];
    uint64_t t;
    uint32_t *slot;               /* site slots with live bytes then... */
    uint64_t *bytes;              /* ...and their bytes */
    size_t n;
} tl_snap_t;

typedef struct tl_dev {
    int id;
    uint64_t amax[TL_BUCKETS], rmax[TL_BUCKETS], omax[TL_BUCKETS];  /* maxima in each bucket */
    uint64_t alast[TL_BUCKETS], rlast[TL_BUCKETS], olast[TL_BUCKETS]; /* and the figures at its end */
    uint8_t used[TL_BUCKETS];
    uint32_t top_slot[TL_BUCKETS][TL_TOP];
    uint64_t top_bytes[TL_BUCKETS][TL_TOP];
    uint8_t ntop[TL_BUCKETS], top_set[TL_BUCKETS];
    int bucket;                   /* the bucket of the last event, -1 none */
    uint64_t *live;               /* by site slot */
    uint64_t peak_allocated, peak_reserved, peak_outside;
    int peak_taken;
    tl_snap_t snap[TL_FLAMES];
    unsigned nsnap, ooms;
    ledger_t *card[TL_BUCKETS];   /* the ledger at the bucket's last sample (NULL: none in it) */
    uint64_t kmax[TL_BUCKETS];    /* the CUDA context and other processes, as last sampled */
    uint64_t peak_card;           /* the highest of reserved + outside + kmax in a bucket */
    int ncard;                    /* buckets with a sample */
} tl_dev_t;

typedef struct tl_log {
    const rd_log_t *lf;
    const model_t *m;
    const xr_t *x;                /* the replay, at its end */
    size_t nslots;                /* sites + 1 (slot 0: unknown) */
    uint64_t tmax;
    tl_dev_t *dev[256];
    int python_frames;            /* the flame graph's stacks: SITE_PY_* (sites.h) */
} tl_log_t;

/* Replays the log for its timeline; 0, or -1 when out of memory. tl_log_free() either way. */
int tl_collect(tl_log_t *t, rd_log_t *lf, const model_t *m, xr_t *x);
void tl_log_free(tl_log_t *t);
/* The slot of a site id (0 when unknown). */
size_t tl_slot(const model_t *m, uint32_t site);

/* XML/HTML-escaped text. */
void tl_xml(FILE *f, const char *s);
/* A round top for a chart of values up to v. */
uint64_t tl_nice_max(uint64_t v);
/* The ledger's band: the CUDA context and other processes' bytes (what the card holds beside
 * this process's memory). */
uint64_t tl_card_band(const ledger_t *l);
/* The top of a device's chart; *cap gets the device's cap or total (0: unknown). */
uint64_t tl_vtop(const tl_dev_t *d, const model_dev_t *md, uint64_t *cap);

#endif
