/* The card's ledger as the shim samples it (ledger.c): per device, the driver's free bytes, the
 * CUDA context and module code, and every process's use of the GPU (NVML, where present), in
 * GMLOG_LEDGER records; the analyzer adds the pool's and the libraries' terms from the events.
 * Never on the allocation hot path, never under a pool lock. */
#ifndef GM_LEDGER_H
#define GM_LEDGER_H

#include "devtypes.h"

/* The sampler thread (GMSHIM_LEDGER on, a log being written): every GMSHIM_LEDGER_INTERVAL and
 * after marks. */
void ledger_start(void);
void ledger_stop(void);
/* A fork child: no sample, no NVML, no thread. */
void ledger_forget(void);
/* device_create, before its first runtime call on device `dev` and outside every lock: the
 * device's free memory before this process's context exists (or this process's use, if it does). */
void ledger_device_opening(int dev);
/* device_create, once the device's context exists and its DEVICE record is written: the context
 * term, and the device's first sample. */
void ledger_device_opened(gm_device_t *d);
/* An allocation on device `dev` failed (no pool lock held): a sample now, on this thread. */
void ledger_oom(int dev);
/* A request of `size` from `site` that no pool of gmshim's served failed (an unpooled cudaMalloc,
 * a library's cuMemAlloc): its OOM record with the driver's figures only (flag async), then
 * ledger_oom. */
void ledger_foreign_oom(int dev, size_t size, uint32_t site);
/* A mark: the sampler thread samples soon (at most one a second). */
void ledger_mark(void);

#endif
