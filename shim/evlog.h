/* The event-log writer: one record per call, into per-thread chunks of an mmap'd file (no system
 * call and no global lock on the hot path). The file is created at the first CUDA call;
 * GMSHIM_LOG=off disables it. Layout: gmlog.h. */
#ifndef GM_EVLOG_H
#define GM_EVLOG_H

#include "gmlog.h"

#include <stddef.h>
#include <stdint.h>

/* Opens the log if GMSHIM_LOG asks for one. Idempotent; called from the shim's init. */
void evlog_open(void);
/* What the header's GMLOG_META_MODE says: "preload" (default) or "injection". Before open. */
void evlog_set_mode(const char *mode);
/* Writes the end record and marks the file closed (reason: GMLOG_CLOSE_*). */
void evlog_close(uint32_t reason);
/* Forgets the log without writing to it (a fork child must not touch the parent's file). */
void evlog_abandon(void);
int evlog_enabled(void);
/* Whether the log is bounded (GMSHIM_LOG_LIMIT): its checkpoints repeat the state. */
int evlog_bounded(void);
void evlog_fork_prepare(void);
void evlog_fork_release(void);
/* Expands %p %h %n %r %t %% of a GMSHIM_LOG template. Returns 0, or -1 (empty, too long). */
int evlog_expand_path(const char *tmpl, char *out, size_t len, long start_time);
/* The path of the open log, or NULL. */
const char *evlog_path(void);

/* A bounded log's checkpoint asks this for every device's state (GMLOG_CUT, then SEGMENT_ALLOC
 * and ALLOC records, appended with the evlog_* helpers); returns the records it appended.
 * `start_mono` turns gm_now_ns() into log time. Set once, before the log opens. */
typedef uint64_t (*evlog_cut_fn)(uint64_t start_mono);
void checkpoint_set_cut(evlog_cut_fn fn);

/* Every record goes through here but the hit path's that fit the thread's chunk as they are
 * (evlog_alloc, evlog_free, evlog_cached_*: the same words, stored directly): `rec` is a complete
 * record of `len` bytes (a multiple of 8) whose header type/len8/device/flags are set; the writer
 * fills dt and stores the header last. `now` is gm_now_ns(). */
void evlog_append(void *rec, size_t len, uint64_t now);
/* Same with a variable tail (string bytes, frames) copied after the fixed part and padded. */
void evlog_append2(void *rec, size_t fixed, const void *tail, size_t tail_len, uint64_t now);

/* The typed helpers. */
void evlog_alloc(int dev, unsigned flags, uint64_t ptr, uint64_t requested, uint64_t block,
                 uint32_t site, uint64_t now, uint64_t t0);
void evlog_free(int dev, unsigned flags, uint64_t ptr, uint32_t site, uint64_t now, uint64_t t0);
/* A hit on a thread's cache (GMLOG_A_CACHED; GMLOG_F_CACHED with `flags`): the same records as
 * evlog_alloc / evlog_free with no duration, their time read inside when the log is on and kept
 * after *last (the cache's last stamp, stamp_after). */
void evlog_cached_alloc(int dev, uint64_t *last, uint64_t ptr, uint64_t requested, uint64_t block, uint32_t site);
void evlog_cached_free(int dev, uint64_t *last, unsigned flags, uint64_t ptr, uint32_t site);
/* The same at the counter's time t, read by the caller (0: the counter is not in use, the clock
 * read inside): the tests' way to the counter's path where the machine does not use it. */
void evlog_cached_alloc_at(uint64_t t, int dev, uint64_t *last, uint64_t ptr, uint64_t requested, uint64_t block,
                           uint32_t site);
void evlog_cached_free_at(uint64_t t, int dev, uint64_t *last, unsigned flags, uint64_t ptr, uint32_t site);
void evlog_segment(int type, int dev, uint64_t base, uint64_t size, uint32_t graph, unsigned flags, uint64_t now,
                   uint64_t t0);
void evlog_warning(int kind, int dev, uint64_t ptr, uint32_t site, uint32_t aux);
int evlog_mark(const char *label, unsigned flags);

static inline uint32_t evlog_dur(uint64_t now, uint64_t t0)
{
    uint64_t d = now > t0 ? now - t0 : 0;
    return d > 0xffffffffu ? 0xffffffffu : (uint32_t)d;
}

static inline void evlog_hdr(gmlog_rec_t *h, int type, size_t len, int dev, unsigned flags)
{
    h->type = (uint8_t)type;
    h->len8 = (uint8_t)(len / 8);
    h->device = (uint8_t)(dev < 0 || dev >= GMLOG_NO_DEVICE ? GMLOG_NO_DEVICE : dev);
    h->flags = (uint8_t)flags;
    h->dt = 0;
}

#endif
