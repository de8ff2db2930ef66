/* One builder per log record type that the pool, captures and CUPTI write (the writer's own
 * records, ALLOC, FREE, SEGMENT_*, WARNING and MARK are in evlog.c; interning records in
 * stacks.c and modules.c). Each fills the header, sizes the record and appends it; each is a
 * no-op while no log is written. Layouts: common/gmlog.h. */
#ifndef GM_LOGREC_H
#define GM_LOGREC_H

#include "gmlog.h"
#include "pool.h"

#include <stddef.h>
#include <stdint.h>

/* A device seen for the first time: its memory and name (at most name_max bytes of it). */
void logrec_device(int dev, uint64_t total, uint64_t free_at_start, const char *name, size_t name_max);
/* An allocation that failed or needed the cache released: `figures` carries every field but the
 * header (the pool's side, the driver's side, or both). */
void logrec_oom(int dev, unsigned flags, const gmlog_oom_t *figures);
void logrec_limit(int dev, uint64_t bytes);
/* The same with the record's flags (GMLOG_LIMIT_TORCH: PyTorch's own cap). */
void logrec_limit_flags(int dev, uint64_t bytes, unsigned flags);
/* A fence recorded for reason `why` (enum gmlog_fence_why), its runtime calls from t0 to now. */
void logrec_fence(int dev, unsigned why, uint64_t seq, uint64_t pending_bytes, unsigned events, uint64_t now,
                  uint64_t t0);
/* A snapshot of one arena's figures. */
void logrec_stats(int dev, const gm_pool_stats_t *bytes, uint64_t hits, uint64_t misses, uint64_t now);
void logrec_fence_wait(int dev, uint64_t seq, uint64_t now, uint64_t t0);
/* Blocks freed under fences up to seq became reusable at t0 (how: GMLOG_REUSABLE_* flags). */
void logrec_fence_reusable(int dev, uint64_t seq, unsigned how, uint64_t now, uint64_t t0);
void logrec_empty_cache(int dev, int reason, uint64_t bytes, unsigned segments, uint64_t t0);
void logrec_reset(int dev, uint64_t reserved_bytes, uint64_t live_bytes);
void logrec_capture(int dev, int event, uint64_t stream, uint64_t graph, uint32_t id, unsigned mode);
/* The card's ledger for a device (GMLOG_LEDGER): `fixed` carries every field but the header, then
 * nprocs other processes. */
void logrec_ledger(int dev, unsigned why, const gmlog_ledger_t *fixed, const gmlog_ledger_proc_t *procs,
                   unsigned nprocs);
/* A checkpoint's device cut: `figures` carries every field but the header and cut_ns. */
void logrec_cut(int dev, const gmlog_cut_t *figures, uint64_t cut_ns, uint64_t now);

#endif
