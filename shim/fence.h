/* Fences: the proof that device work issued before a cudaFree has completed, on every stream.
 * A fence is a CUDA event recorded on the legacy default stream (which covers blocking and
 * per-thread streams) and on every non-blocking stream created through the hooks. Fences are
 * numbered; a freed block waits for the first fence recorded after its free. */
#ifndef GM_FENCE_H
#define GM_FENCE_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#define GM_CACHE_LINE 64
/* Under GPU order, fences are polled only once this many are outstanding (a poll only recycles
 * their events then), and then in one query when the newest's legacy event completed. */
#define GM_FENCE_BATCH 16

typedef struct gm_fence {
    uint64_t seq;
    cudaEvent_t all;        /* GPU order: the legacy stream's event after its waits for this
                             * fence's events (fence_order): it completes only once every fence
                             * up to this one has, so one query retires them all (or NULL) */
    int nev;
    int cap;
    cudaEvent_t *ev;
} gm_fence_t;

typedef struct gm_fences {
    cudaStream_t *streams;  /* known non-blocking streams of the device */
    int nstreams, stream_cap;
    gm_fence_t *ring;       /* outstanding fences, oldest at `head` */
    int head, count, ring_cap;
    cudaEvent_t *retired;   /* last events of destroyed streams, for the next fence */
    int nretired, retired_cap;
    cudaEvent_t *spare;     /* recycled events */
    int nspare, spare_cap;
    const char *failed;     /* what the last failed fence_issue could not do: the runtime call's
                             * name, or NULL when host memory ran out */
    /* Read by every free and poll: a cache line of their own, away from the fields written
     * under the lock. */
    _Alignas(GM_CACHE_LINE) uint64_t issued; /* seq of the newest fence recorded (read atomically anywhere) */
    uint64_t done;          /* every fence up to this seq has completed (likewise) */
    uint64_t ordered;       /* GMSHIM_GPU_ORDER: every known stream waits on the GPU for the
                             * fences up to this seq (likewise) */
} gm_fences_t;

/* Records a fence: an event on the legacy stream and on each known stream — with ask_idle, only
 * on those a cudaStreamQuery finds with work still to complete (an idle one needs none). Under GPU
 * order it pays not to ask: the fence's waits keep every stream busy, a query costs more than the
 * event it would save, and the events on the streams are never queried (`all` answers for them).
 * The caller holds the device's fence lock, has the device current, and is in relaxed capture
 * mode. On failure `failed` names what failed (NULL: no host memory, cudaErrorMemoryAllocation). */
cudaError_t fence_issue(gm_fences_t *f, int ask_idle);
/* The events the newest fence recorded. */
int fence_newest_events(const gm_fences_t *f);
/* Advances `done` over completed fences without blocking. Returns a CUDA error other than
 * cudaErrorNotReady, or cudaSuccess. Under GPU order a fence's `all` event answers for it and
 * every fence before it: one query of the newest fence's can retire them all, and otherwise one
 * query a fence, from the oldest, instead of one per event. */
cudaError_t fence_poll(gm_fences_t *f);
/* An event of the oldest outstanding fence not yet seen complete (its `all` where it has one;
 * NULL if none), for a caller that waits on it without holding the fences' lock: once that lock
 * is dropped the event may be recycled into a newer fence, which only makes the wait longer,
 * never too short. */
cudaEvent_t fence_oldest_pending_event(gm_fences_t *f);
int fence_outstanding(const gm_fences_t *f);
/* Ordering on the GPU instead of the CPU (GMSHIM_GPU_ORDER): makes work queued from now on wait,
 * on the GPU, for every fence issued so far — the legacy stream waits for the fences' events on
 * the other streams, every known non-blocking stream waits for the legacy stream, and blocking
 * and per-thread streams follow the legacy stream by CUDA's implicit synchronization. Then
 * `ordered` = `issued`; the legacy stream's event after its waits becomes the newest fence's
 * `all`. Same locking as fence_issue. */
cudaError_t fence_order(gm_fences_t *f);
/* A non-blocking stream created while ordered fences may still run on the GPU waits for their
 * events. */
cudaError_t fence_order_stream(gm_fences_t *f, cudaStream_t s);

void fence_add_stream(gm_fences_t *f, cudaStream_t s);
/* Records an event on a stream about to be destroyed; the next fence waits for it too. */
void fence_retire_stream(gm_fences_t *f, cudaStream_t s);
void fence_remove_stream(gm_fences_t *f, cudaStream_t s);
/* Device reset: the runtime destroyed our events and streams; drop them without CUDA calls.
 * Every outstanding fence counts as done. */
void fence_forget(gm_fences_t *f);

#endif
