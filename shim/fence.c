/* Recording and polling fences. Events are recycled; nothing here blocks: a wait for a fence is
 * the fence policy's (fencepol.c), made on fence_oldest_pending_event outside the fence lock, and only
 * instead of growing or failing. */
#include "fence.h"
#include "common.h"
#include "real.h"

#include <stdlib.h>
#include <string.h>

static int grow(void **arr, int *cap, size_t elem, int need)
{
    if (need <= *cap)
        return 0;
    int ncap = *cap ? *cap * 2 : 8;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

static cudaError_t event_get(gm_fences_t *f, cudaEvent_t *ev)
{
    if (f->nspare) {
        *ev = f->spare[--f->nspare];
        return cudaSuccess;
    }
    return REAL_CALL(cudaEventCreateWithFlags, ev, cudaEventDisableTiming);
}

static void event_put(gm_fences_t *f, cudaEvent_t ev)
{
    if (grow((void **)&f->spare, &f->spare_cap, sizeof *f->spare, f->nspare + 1) == 0)
        f->spare[f->nspare++] = ev;
    else
        REAL_CALL(cudaEventDestroy, ev);
}

static gm_fence_t *ring_at(gm_fences_t *f, int i)
{
    return &f->ring[(f->head + i) % f->ring_cap];
}

static int ring_push(gm_fences_t *f)
{
    if (f->count < f->ring_cap)
        return 0;
    int ncap = f->ring_cap ? f->ring_cap * 2 : 8;
    gm_fence_t *n = calloc((size_t)ncap, sizeof *n);
    if (!n)
        return -1;
    for (int i = 0; i < f->count; i++)
        n[i] = *ring_at(f, i);
    /* The slots past count keep their event arrays for reuse. */
    for (int i = f->count; i < f->ring_cap; i++)
        n[i] = *ring_at(f, i);
    free(f->ring);
    f->ring = n;
    f->head = 0;
    f->ring_cap = ncap;
    return 0;
}

cudaError_t fence_issue(gm_fences_t *f, int ask_idle)
{
    f->failed = NULL;
    if (ring_push(f))
        return cudaErrorMemoryAllocation;
    gm_fence_t *fe = ring_at(f, f->count);
    int need = 1 + f->nstreams;
    if (grow((void **)&fe->ev, &fe->cap, sizeof *fe->ev, need + f->nretired))
        return cudaErrorMemoryAllocation;
    /* The number is taken before the events are recorded: a free that still reads the old
     * number waits for this fence, whose events come after that free. */
    uint64_t seq = __atomic_add_fetch(&f->issued, 1, __ATOMIC_SEQ_CST);
    fe->nev = 0;
    fe->all = NULL;
    cudaError_t err = cudaSuccess;
    for (int i = 0; i < need; i++) {
        cudaStream_t s = i == 0 ? cudaStreamLegacy : f->streams[i - 1];
        /* A non-blocking stream whose work has all completed needs no event: what ran there
         * before the frees is done. Most of PyTorch's 32 pool streams are idle. The legacy
         * stream's event is always recorded. */
        if (i > 0 && ask_idle && REAL_CALL(cudaStreamQuery, s) == cudaSuccess)
            continue;
        cudaEvent_t ev;
        err = event_get(f, &ev);
        if (err != cudaSuccess) {
            f->failed = "cudaEventCreateWithFlags";
            break;
        }
        err = REAL_CALL(cudaEventRecord, ev, s);
        if (err != cudaSuccess) {
            f->failed = "cudaEventRecord";
            event_put(f, ev);
            break;
        }
        fe->ev[fe->nev++] = ev;
    }
    if (err != cudaSuccess) {
        for (int i = 0; i < fe->nev; i++)
            event_put(f, fe->ev[i]);
        fe->nev = 0;
        /* Give the number back: frees that read it wait for the next fence that succeeds. */
        __atomic_store_n(&f->issued, seq - 1, __ATOMIC_SEQ_CST);
        return err;
    }
    for (int i = 0; i < f->nretired; i++)
        fe->ev[fe->nev++] = f->retired[i];
    f->nretired = 0;
    fe->seq = seq;
    f->count++;
    return cudaSuccess;
}

static void fence_retire(gm_fences_t *f)
{
    gm_fence_t *fe = ring_at(f, 0);
    for (int i = 0; i < fe->nev; i++)
        event_put(f, fe->ev[i]);
    fe->nev = 0;
    if (fe->all)
        event_put(f, fe->all);
    fe->all = NULL;
    __atomic_store_n(&f->done, fe->seq, __ATOMIC_RELEASE);
    f->head = (f->head + 1) % f->ring_cap;
    f->count--;
}

/* Whether event ev has completed: 1, 0, or -1 with the runtime's error in *err. */
static int event_done(cudaEvent_t ev, cudaError_t *err)
{
    cudaError_t e = REAL_CALL(cudaEventQuery, ev);
    if (e == cudaSuccess || e == cudaErrorNotReady)
        return e == cudaSuccess;
    *err = e;
    return -1;
}

cudaError_t fence_poll(gm_fences_t *f)
{
    cudaError_t err = cudaSuccess;
    cudaEvent_t newest_all = f->count >= GM_FENCE_BATCH ? ring_at(f, f->count - 1)->all : NULL;
    if (newest_all) {
        int c = event_done(newest_all, &err);
        if (c < 0)
            return err;
        while (c && f->count)
            fence_retire(f);
    }
    while (f->count) {
        gm_fence_t *fe = ring_at(f, 0);
        if (fe->all) {
            int c = event_done(fe->all, &err);
            if (c <= 0)
                return err; /* cudaSuccess while it still runs; the newer ones are behind it */
            fence_retire(f);
            continue;
        }
        /* Events already seen complete are dropped from the end, so a fence spanning busy
         * streams is not queried twice for its idle ones. */
        while (fe->nev) {
            int c = event_done(fe->ev[fe->nev - 1], &err);
            if (c <= 0)
                return err;
            event_put(f, fe->ev[--fe->nev]);
        }
        fence_retire(f);
    }
    return cudaSuccess;
}

cudaEvent_t fence_oldest_pending_event(gm_fences_t *f)
{
    if (!f->count)
        return NULL;
    gm_fence_t *fe = ring_at(f, 0);
    if (fe->all)
        return fe->all;
    /* fence_poll drops completed events from the end: the last one is still to complete. */
    return fe->nev ? fe->ev[fe->nev - 1] : NULL;
}

int fence_newest_events(const gm_fences_t *f)
{
    const gm_fence_t *fe = f->count ? ring_at((gm_fences_t *)f, f->count - 1) : NULL;
    return fe ? fe->nev + (fe->all != NULL) : 0;
}

int fence_outstanding(const gm_fences_t *f)
{
    return f->count;
}

cudaError_t fence_order(gm_fences_t *f)
{
    uint64_t seq = f->issued;
    if (seq <= f->ordered)
        return cudaSuccess;
    cudaError_t err = cudaSuccess;
    /* Event 0 of a fence is on the legacy stream itself; the others are on non-blocking streams
     * (and streams destroyed meanwhile). Events already seen complete are gone from the end. */
    int waits = 0;
    for (int i = 0; i < f->count && err == cudaSuccess; i++) {
        gm_fence_t *fe = ring_at(f, i);
        if (fe->seq <= f->ordered)
            continue;
        for (int j = 1; j < fe->nev && err == cudaSuccess; j++, waits++)
            err = REAL_CALL(cudaStreamWaitEvent, cudaStreamLegacy, fe->ev[j], 0);
    }
    /* The newest fence, which gets the event answering for all (the fences may all have been
     * retired meanwhile, on the CPU, when an earlier order failed). */
    gm_fence_t *newest = f->count && ring_at(f, f->count - 1)->seq == seq ? ring_at(f, f->count - 1) : NULL;
    if (!f->nstreams && !waits && newest && newest->nev == 1 && !newest->all) {
        /* Only legacy events: the newest one comes after all the others. */
        newest->all = newest->ev[0];
        newest->nev = 0;
    }
    if (f->nstreams && err == cudaSuccess) {
        cudaEvent_t ev;
        err = event_get(f, &ev);
        if (err == cudaSuccess) {
            err = REAL_CALL(cudaEventRecord, ev, cudaStreamLegacy);
            for (int i = 0; i < f->nstreams && err == cudaSuccess; i++)
                err = REAL_CALL(cudaStreamWaitEvent, f->streams[i], ev, 0);
            if (err == cudaSuccess && newest && !newest->all)
                newest->all = ev; /* after the waits for every unordered fence's events */
            else
                event_put(f, ev); /* a wait keeps the record it saw */
        }
    }
    if (err == cudaSuccess)
        __atomic_store_n(&f->ordered, seq, __ATOMIC_RELEASE);
    return err;
}

cudaError_t fence_order_stream(gm_fences_t *f, cudaStream_t s)
{
    /* The fences' own events, not a new one on the legacy stream: this may run while a blocking
     * stream captures, when work queued on the legacy stream would invalidate the capture. */
    cudaError_t err = cudaSuccess;
    for (int i = 0; i < f->count && err == cudaSuccess; i++) {
        gm_fence_t *fe = ring_at(f, i);
        if (fe->seq > f->ordered)
            break;
        if (fe->all) {
            err = REAL_CALL(cudaStreamWaitEvent, s, fe->all, 0); /* it answers for the others */
            continue;
        }
        for (int j = 0; j < fe->nev && err == cudaSuccess; j++)
            err = REAL_CALL(cudaStreamWaitEvent, s, fe->ev[j], 0);
    }
    return err;
}

void fence_add_stream(gm_fences_t *f, cudaStream_t s)
{
    for (int i = 0; i < f->nstreams; i++)
        if (f->streams[i] == s)
            return;
    if (grow((void **)&f->streams, &f->stream_cap, sizeof *f->streams, f->nstreams + 1) == 0)
        f->streams[f->nstreams++] = s;
}

void fence_retire_stream(gm_fences_t *f, cudaStream_t s)
{
    cudaEvent_t ev;
    if (grow((void **)&f->retired, &f->retired_cap, sizeof *f->retired, f->nretired + 1) ||
        event_get(f, &ev) != cudaSuccess)
        return;
    if (REAL_CALL(cudaEventRecord, ev, s) != cudaSuccess) {
        event_put(f, ev);
        return;
    }
    f->retired[f->nretired++] = ev;
}

void fence_remove_stream(gm_fences_t *f, cudaStream_t s)
{
    for (int i = 0; i < f->nstreams; i++)
        if (f->streams[i] == s) {
            f->streams[i] = f->streams[--f->nstreams];
            return;
        }
}

void fence_forget(gm_fences_t *f)
{
    for (int i = 0; i < f->ring_cap; i++) {
        free(f->ring[i].ev);
    }
    free(f->ring);
    free(f->spare);
    free(f->streams);
    free(f->retired);
    uint64_t issued = f->issued;
    memset(f, 0, sizeof *f);
    f->issued = f->done = f->ordered = issued;
}
