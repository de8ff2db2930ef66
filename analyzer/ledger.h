/* The card's ledger (ledger.c): a device's memory at one moment as terms that add up to the
 * device's total, each measured or inferred — the tensors, the cache (reusable, fragmented),
 * CUDA graphs' private pools, memory outside the pool by library, the CUDA context, other
 * processes, what was free. Built from the exports' replay (every live block and segment) and
 * the shim's LEDGER samples, at the peak of the process's use and at each OOM. */
#ifndef GM_LEDGER_H
#define GM_LEDGER_H

#include "export_replay.h"
#include "json.h"

#include <stdint.h>
#include <stdio.h>

#define LEDGER_MAX_TERMS 48

enum ledger_kind {
    LK_TENSORS,                  /* live blocks: PyTorch's tensors, or the pool's blocks */
    LK_PENDING,                  /* freed, waiting for the GPU to finish with them */
    LK_REUSABLE,                 /* the cache: whole free segments */
    LK_FRAGMENTED,               /* the cache: free pieces of segments that hold live blocks */
    LK_GRAPHS,                   /* CUDA graphs' private pools */
    LK_UNPOOLED,                 /* the program's own allocations around the pool (named by call) */
    LK_LIBRARY,                  /* a library's driver-API memory (named by the library) */
    LK_CONTEXT,                  /* the CUDA context and module code */
    LK_PROCESS,                  /* another process (pid, command) */
    LK_FREE,                     /* free in the driver */
    LK_UNNAMED,                  /* what no term explains */
};

typedef struct ledger_term {
    int kind;                    /* LK_* */
    int measured;                /* 0: inferred */
    uint32_t pid;                /* LK_PROCESS */
    uint64_t bytes;
    char name[96];               /* LK_UNPOOLED, LK_LIBRARY: the call or library; LK_PROCESS: command */
} ledger_term_t;

typedef struct ledger {
    int valid;
    int dev, torch;
    uint64_t t;                  /* ns since the log's start */
    uint64_t total;
    uint64_t seq;                /* an OOM's: its record's seq */
    unsigned nterms;
    ledger_term_t term[LEDGER_MAX_TERMS];
} ledger_t;

typedef struct ledger_set {
    ledger_t peak[256];          /* by device; valid when the log has samples of it */
    ledger_t *ooms;              /* one per OOM record, in order */
    size_t nooms;
    int any;                     /* the log has LEDGER records */
} ledger_set_t;

/* The ledgers of a log whose model is m (built once per model and kept; NULL when the log has no
 * LEDGER records or the replay ran out of memory). Thread-safe. */
const ledger_set_t *ledger_of(const model_t *m);
/* The ledger of device dev as the replay x stands, with the LEDGER sample rec (an XR_LEDGER
 * event's): the pictures' (timeline, Perfetto) at each sample. 0, or -1 when it says nothing. */
int ledger_now(const xr_t *x, const model_t *m, unsigned dev, const rd_rec_t *rec, ledger_t *l);
/* The ledger of the OOM at record seq, or NULL. */
const ledger_t *ledger_at_oom(const ledger_set_t *s, uint64_t seq);
/* A term's words: "tensors", "library libnccl.so.2", "process 4242 `python eval.py`". */
const char *ledger_term_label(const ledger_term_t *t, int torch, char *buf, size_t len);
/* A term's JSON key: "tensors", "library", "process"... */
const char *ledger_term_key(const ledger_term_t *t);
/* The term outside the pool that decides an OOM of `request` bytes: the largest of the other
 * processes, the libraries, the program's own allocations around the pool and the context whose
 * bytes with the free ones would have held the request; NULL when none would. */
const ledger_term_t *ledger_deciding(const ledger_t *l, uint64_t request);
/* What to do about that term. */
const char *ledger_remedy(const ledger_term_t *t, char *buf, size_t len);
/* The ledger as text lines indented by `indent`, and as a JSON object named `key`. */
void ledger_text(FILE *f, const ledger_t *l, const char *indent);
void ledger_json(json_t *j, const char *key, const ledger_t *l);

#endif
