/* The fence policy: when a device's frees get a fence, when fences are polled and waited for,
 * when freed blocks come back, and GMSHIM_GPU_ORDER's hold on a process that uses one device.
 * The fences themselves (events on streams) are fence.c. Callers hold the arena's lock and, for
 * anything that may ask the runtime, are inside devctx_enter. */
#ifndef GM_FENCEPOL_H
#define GM_FENCEPOL_H

#include "devtypes.h"

/* Pending blocks of the arena whose fences completed become free (the cache cap may then give
 * segments back); returns the bytes. */
size_t fencepol_take_in(gm_arena_t *a);
/* Polls the device's fences, then takes in what they released. `blocking` 0: if another thread
 * holds the fence lock (polling or recording: what it learns is shared), do not wait for it. */
size_t fencepol_harvest(gm_arena_t *a, int blocking);
/* Whether some pending block of the arena waits for a fence not yet recorded. */
int fencepol_open_set_waiting(gm_arena_t *a);
/* Records a fence covering every free so far, on every arena, for reason `why` (enum
 * gmlog_fence_why, in its log record): 0, or -1 (a capture, a failure). */
int fencepol_issue(gm_arena_t *a, unsigned why);
/* The same for a caller that holds no arena lock (the planned step, planner.c, under its own lock):
 * skipped (-1) when another thread holds the fence lock; enters the device's context itself. */
int fencepol_issue_device(gm_device_t *d, unsigned why);
/* A non-blocking poll of the device's fences without an arena: what completed becomes
 * device_done (skipped when another thread holds the fence lock). Under GPU order fences are
 * polled a batch at a time (to recycle their events) unless `every`: for one who needs to know
 * what completed (the trimmer's give-back of the plan's pages). */
void fencepol_poll_device(gm_device_t *d, int every);
/* Blocks for the oldest fence; returns bytes released + 1, or 0 if nothing could be waited for. */
size_t fencepol_wait_oldest(gm_arena_t *a);
/* Waits until fence `seq` has completed (recording it first if it is still to come). */
void fencepol_wait_for(gm_arena_t *a, uint64_t seq);
/* Blocks until fence `seq` of the device has completed; the wait is outside the fence lock. */
cudaError_t fencepol_wait_until_done(gm_device_t *d, uint64_t seq);
/* The periodic poll of the hit path (it asks the runtime only when nobody knows the answer). */
GM_NOINLINE void fencepol_poll_now(gm_arena_t *a);
/* The periodic fence of the free path, for the frees counted in `open` (the arena's or a thread
 * cache's): skipped when another thread holds the fence lock, or put off while the device is
 * quiet (GMSHIM_FENCE_SHARE). */
GM_NOINLINE void fencepol_fence_now(gm_arena_t *a, gm_open_set_t *open);

/* GMSHIM_FENCE_SHARE (percent of the time the frees' fences may take) as the quiet time after a
 * fence, in hundredths of its cost: (100 - share) / share. 0 (no quiet time) for 0 and 100. */
static inline unsigned fencepol_gap_of_share(unsigned share)
{
    return share && share < 100 ? (100 - share) * 100 / share : 0;
}

/* Freed bytes that make a fence worth recording now: without one they cannot be reused until
 * the next miss, and a miss would then have to wait for all of them. `reserved`: what the
 * arena (or, for a thread cache, the device) holds from the driver. */
static inline size_t fencepol_threshold(const gm_device_t *d, size_t reserved)
{
    if (d->fence_bytes)
        return d->fence_bytes;
    size_t t = reserved / 64;
    return t > 2 * GM_MiB ? t : 2 * GM_MiB;
}

/* A block of `size` just went PENDING on fence issued + 1: counted in the open set of frees.
 * Returns 1 when the set is large enough for a fence to be tried now (and no capture runs). */
static inline int fencepol_open_add(gm_device_t *d, gm_open_set_t *o, size_t size, uint64_t issued,
                                    size_t reserved)
{
    if (issued != o->seen) {
        /* A fence was recorded since this set last counted (by any arena or cache): it covers
         * every free counted so far. */
        o->seen = issued;
        o->bytes = 0;
        o->count = o->recheck = 0;
    }
    o->bytes += size;
    o->count++;
    size_t threshold = fencepol_threshold(d, reserved);
    return (o->bytes >= threshold || (d->fence_frees && o->count >= d->fence_frees)) &&
           (o->count >= o->recheck || size >= threshold) && !device_captures(d);
}

/* The arena's free of a block of `size` (its lock held), and the fence it may bring. */
static inline void fencepol_count_free(gm_arena_t *a, size_t size, uint64_t issued)
{
    if (fencepol_open_add(a->dev, &a->open, size, issued, a->bytes.reserved.current))
        fencepol_fence_now(a, &a->open);
}

/* The process makes device `id` current or allocates on it. GMSHIM_GPU_ORDER holds while one
 * device is in use; when a second one comes into use, the first device's blocks handed out under
 * GPU order are waited for (their fences complete) before this returns, and its freed memory
 * waits on the CPU from then on: the other device's work could touch it. */
void fencepol_note_used(int id);
/* For a pool being created (under the table's lock): whether GPU order applies to it. */
int fencepol_gpu_order_for(int id);
/* A stream gmshim cannot make wait for its fences came into use (a stream of another context,
 * a green context's), or the driver's streams cannot be watched at all (`why`, a static string).
 * GMSHIM_GPU_ORDER=auto stops (the first device's blocks handed out under GPU order are waited
 * for first) and says so once; =1 goes on and warns once. */
void fencepol_streams_unwatched(const char *why);
/* A stream created or destroyed through the hooks. */
void fencepol_stream_created(gm_device_t *d, cudaStream_t s, unsigned flags);
void fencepol_stream_destroyed(gm_device_t *d, cudaStream_t s);

#endif
