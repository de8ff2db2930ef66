/* fake_stream.c — streams, their worker threads and operation queues, legacy default-stream
 * ordering, events and synchronisation for the fake CUDA runtime.
 * Every stream runs its queue in FIFO order on its own detached worker thread; an operation
 * carries dependencies "stream S has completed >= k operations" fixed when it is enqueued. */
#include "fake_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long fk_next_stream_id = 1;

static void *fk_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "fakecuda: out of host memory\n");
        abort();
    }
    return p;
}

static struct CUstream_st *fk_stream_new(int device, int kind, unsigned flags, int priority)
{
    struct CUstream_st *s = fk_xcalloc(1, sizeof *s);
    s->id = fk_next_stream_id++;
    s->device = device;
    s->kind = kind;
    s->flags = flags;
    s->priority = priority;
    s->dnext = fk_dev[device].streams;
    fk_dev[device].streams = s;
    fk_obj_add(s, FK_T_STREAM);
    return s;
}

static void fk_stream_free(struct CUstream_st *s)
{
    for (struct CUstream_st **pp = &fk_dev[s->device].streams; *pp; pp = &(*pp)->dnext)
        if (*pp == s) {
            *pp = s->dnext;
            break;
        }
    fk_obj_del(s);
    free(s);
}

int fk_stream_blocking(const struct CUstream_st *s)
{
    return s->kind != FK_S_LEGACY && !(s->flags & cudaStreamNonBlocking);
}

void fk_stream_destroy_locked(struct CUstream_st *s)
{
    if (s->capture)
        fk_capture_abort_stream(s);
    s->destroyed = 1;
    if (!s->has_worker)
        fk_stream_free(s);     /* never had work */
    else
        pthread_cond_broadcast(&fk_cv);   /* the worker drains the queue, then frees s */
}

/* ---- per-thread default streams: one per thread and device, destroyed at thread exit ---- */
static _Thread_local struct CUstream_st *fk_pts[FK_MAX_DEV];
static _Thread_local unsigned long long fk_pts_id[FK_MAX_DEV];
static pthread_key_t fk_pts_key;
static pthread_once_t fk_pts_once = PTHREAD_ONCE_INIT;

static struct CUstream_st *fk_pts_valid(int dev)
{
    struct CUstream_st *s = fk_obj_find(fk_pts[dev], FK_T_STREAM);
    return s && s->id == fk_pts_id[dev] && !s->destroyed ? s : NULL;
}

static void fk_pts_exit(void *unused)
{
    pthread_mutex_lock(&fk_mu);
    for (int d = 0; d < FK_MAX_DEV; d++) {
        struct CUstream_st *s = fk_pts_valid(d);
        if (s)
            fk_stream_destroy_locked(s);
        fk_pts[d] = NULL;
    }
    pthread_mutex_unlock(&fk_mu);
}

static void fk_pts_init(void)
{
    pthread_key_create(&fk_pts_key, fk_pts_exit);
}

/* Resolves a stream handle for the calling thread; ptsz: handle 0 means cudaStreamPerThread. */
struct CUstream_st *fk_stream_get(cudaStream_t h, int ptsz, cudaError_t *err)
{
    int dev = fk_cur_dev;
    if (!h)
        h = ptsz ? cudaStreamPerThread : cudaStreamLegacy;
    if (h == cudaStreamLegacy) {
        if (!fk_dev[dev].legacy)
            fk_dev[dev].legacy = fk_stream_new(dev, FK_S_LEGACY, cudaStreamDefault, 0);
        return fk_dev[dev].legacy;
    }
    if (h == cudaStreamPerThread) {
        struct CUstream_st *s = fk_pts_valid(dev);
        if (!s) {
            pthread_once(&fk_pts_once, fk_pts_init);
            pthread_setspecific(fk_pts_key, (void *)1);   /* arms fk_pts_exit */
            s = fk_stream_new(dev, FK_S_PERTHREAD, cudaStreamDefault, 0);
            fk_pts[dev] = s;
            fk_pts_id[dev] = s->id;
        }
        return s;
    }
    struct CUstream_st *s = fk_obj_find(h, FK_T_STREAM);
    if (!s || s->destroyed || s->kind != FK_S_USER) {
        *err = cudaErrorInvalidResourceHandle;
        return NULL;
    }
    return s;
}

/* ---- dependencies and waiting ------------------------------------------------------------ */
int fk_dep_done(const struct fk_dep *d)
{
    struct CUstream_st *s = fk_obj_find(d->stream, FK_T_STREAM);
    /* a stream is freed only once its queue has drained */
    return !s || s->id != d->id || s->completed >= d->count;
}

void fk_wait_dep(const struct fk_dep *d)
{
    while (!fk_dep_done(d))
        pthread_cond_wait(&fk_cv, &fk_mu);
}

void fk_wait_streams(int device)
{
    size_t n = 0, i = 0;
    for (int dv = 0; dv < fk_ndev; dv++)
        if (device < 0 || dv == device)
            for (struct CUstream_st *s = fk_dev[dv].streams; s; s = s->dnext)
                n++;
    struct fk_dep *deps = fk_xcalloc(n, sizeof *deps);
    for (int dv = 0; dv < fk_ndev; dv++)
        if (device < 0 || dv == device)
            for (struct CUstream_st *s = fk_dev[dv].streams; s; s = s->dnext)
                deps[i++] = (struct fk_dep){s, s->id, s->enqueued};
    for (i = 0; i < n; i++)
        fk_wait_dep(&deps[i]);
    free(deps);
}

/* ---- the worker --------------------------------------------------------------------------- */
static void fk_sleep_us(unsigned us)
{
    struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void fk_run(const struct fk_node *n)        /* without the lock */
{
    switch (n->kind) {
    case FK_OP_KERNEL:
        if (n->delay_us)
            fk_sleep_us(n->delay_us);
        if (n->fn)
            n->fn(n->arg);
        break;
    case FK_OP_HOSTFN:
        n->fn(n->arg);
        break;
    case FK_OP_MEMSET:
        memset(n->dst, n->value, n->bytes);
        break;
    case FK_OP_MEMCPY:
        memmove(n->dst, n->src, n->bytes);
        break;
    default:
        break;
    }
}

void fk_event_free_locked(struct CUevent_st *e)
{
    free(e);
}

static void fk_finish(const struct fk_node *n)     /* with the lock */
{
    if (n->kind == FK_OP_EVENT) {
        struct CUevent_st *e = n->event;
        if (n->event_gen == e->gen) {
            clock_gettime(CLOCK_MONOTONIC, &e->time);
            e->timed = 1;
        }
        if (--e->pending == 0 && e->destroyed)
            fk_event_free_locked(e);
    } else if (n->kind == FK_OP_FREE) {
        fk_free_ptr_if_live(n->ptr);
    }
}

static void *fk_worker(void *arg)
{
    struct CUstream_st *s = arg;
    pthread_mutex_lock(&fk_mu);
    for (;;) {
        struct fk_op *op = s->head;
        if (!op && s->destroyed)
            break;
        if (!op) {
            pthread_cond_wait(&fk_cv, &fk_mu);
            continue;
        }
        int ready = 1;
        for (int i = 0; i < op->ndeps && ready; i++)
            ready = fk_dep_done(&op->deps[i]);
        if (!ready) {
            pthread_cond_wait(&fk_cv, &fk_mu);
            continue;
        }
        pthread_mutex_unlock(&fk_mu);
        fk_run(&op->node);
        pthread_mutex_lock(&fk_mu);
        fk_finish(&op->node);
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        s->completed++;
        free(op->deps);
        free(op);
        pthread_cond_broadcast(&fk_cv);
    }
    fk_stream_free(s);
    pthread_mutex_unlock(&fk_mu);
    return NULL;
}

/* Enqueues (or, while s captures, records) one operation. extra: an additional dependency. */
cudaError_t fk_submit(struct CUstream_st *s, const struct fk_node *n, const struct fk_dep *extra)
{
    if (s->capture) {
        if (s->capture->invalidated)
            return cudaErrorStreamCaptureInvalidated;
        return fk_graph_append(s->capture->graph, n);
    }
    struct fk_device *d = &fk_dev[s->device];
    int ndeps = extra ? 1 : 0;
    if (s->kind == FK_S_LEGACY) {
        int implicit = 0;
        for (struct CUstream_st *t = d->streams; t; t = t->dnext)
            if (t != s && fk_stream_blocking(t) && t->capture) {
                fk_capture_invalidate(t->capture);
                implicit = 1;
            }
        if (implicit)
            return cudaErrorStreamCaptureImplicit;
        for (struct CUstream_st *t = d->streams; t; t = t->dnext)
            ndeps += t != s && fk_stream_blocking(t) && t->completed < t->enqueued;
    } else if (fk_stream_blocking(s) && d->legacy && d->legacy->completed < d->legacy->enqueued) {
        ndeps++;
    }
    struct fk_op *op = fk_xcalloc(1, sizeof *op);
    op->node = *n;
    op->deps = ndeps ? fk_xcalloc((size_t)ndeps, sizeof *op->deps) : NULL;
    if (extra)
        op->deps[op->ndeps++] = *extra;
    if (s->kind == FK_S_LEGACY) {
        for (struct CUstream_st *t = d->streams; t; t = t->dnext)
            if (t != s && fk_stream_blocking(t) && t->completed < t->enqueued)
                op->deps[op->ndeps++] = (struct fk_dep){t, t->id, t->enqueued};
    } else if (op->ndeps < ndeps) {
        op->deps[op->ndeps++] = (struct fk_dep){d->legacy, d->legacy->id, d->legacy->enqueued};
    }
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    s->enqueued++;
    if (!s->has_worker) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, fk_worker, s) != 0) {
            fprintf(stderr, "fakecuda: cannot start a stream worker\n");
            abort();
        }
        pthread_attr_destroy(&attr);
        s->has_worker = 1;
    }
    pthread_cond_broadcast(&fk_cv);
    return cudaSuccess;
}


/* ---- events: helpers ----------------------------------------------------------------------- */
static void fk_event_destroy_locked(struct CUevent_st *e)
{
    fk_obj_del(e);
    e->destroyed = 1;
    if (!e->pending)
        fk_event_free_locked(e);
}

static void fk_event_reset_one(void *obj, void *arg)
{
    struct CUevent_st *e = obj;
    if (e->device == *(int *)arg)
        fk_event_destroy_locked(e);
}

void fk_device_reset_streams(int device)
{
    size_t n = 0, i = 0;
    for (struct CUstream_st *s = fk_dev[device].streams; s; s = s->dnext)
        n++;
    struct CUstream_st **v = fk_xcalloc(n, sizeof *v);
    for (struct CUstream_st *s = fk_dev[device].streams; s; s = s->dnext)
        if (s->kind != FK_S_LEGACY && !s->destroyed)
            v[i++] = s;
    while (i)
        fk_stream_destroy_locked(v[--i]);
    free(v);
    fk_obj_foreach(FK_T_EVENT, fk_event_reset_one, &device);
}

static struct fk_dep fk_event_dep(const struct CUevent_st *e)
{
    return (struct fk_dep){e->stream, e->stream_id, e->target};
}

/* Complete once every operation queued before the record has run; never recorded: complete. */
static int fk_event_done(const struct CUevent_st *e)
{
    if (!e->recorded || e->capture_id)
        return 1;
    struct fk_dep d = fk_event_dep(e);
    return fk_dep_done(&d);
}

/* An event last recorded inside a capture that is still open. */
static int fk_event_in_capture(const struct CUevent_st *e)
{
    return e->capture_id && fk_capture_find(e->capture_id);
}

/* ---- stream API -------------------------------------------------------------------------- */
/* Exported entry points never call each other, so that an interposer sees each call once. */
cudaError_t fk_stream_create(cudaStream_t *pStream, unsigned flags, int priority)
{
    FK_ENTER();
    if (!pStream || (flags & ~(unsigned)cudaStreamNonBlocking))
        return fk_leave(cudaErrorInvalidValue);
    priority = priority > 0 ? 0 : priority < -5 ? -5 : priority;
    *pStream = fk_stream_new(fk_cur_dev, FK_S_USER, flags, priority);
    return fk_leave(cudaSuccess);
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
    return fk_stream_create(pStream, flags, priority);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    return fk_stream_create(pStream, flags, 0);
}

cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
    return fk_stream_create(pStream, cudaStreamDefault, 0);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    return fk_stream_destroy(stream);
}

cudaError_t fk_stream_destroy(cudaStream_t stream)
{
    FK_ENTER();
    struct CUstream_st *s = fk_obj_find(stream, FK_T_STREAM);
    if (!s || s->destroyed || s->kind != FK_S_USER)
        return fk_leave(cudaErrorInvalidResourceHandle);
    fk_stream_destroy_locked(s);
    return fk_leave(cudaSuccess);
}

static cudaError_t stream_query(cudaStream_t h, int ptsz)
{
    FK_ENTER();
    cudaError_t err = fk_check_unsafe();
    if (err)
        return fk_leave(err);
    struct CUstream_st *s = fk_stream_get(h, ptsz, &err);
    if (!s)
        return fk_leave(err);
    if (s->capture) {
        fk_capture_invalidate(s->capture);
        return fk_leave(cudaErrorStreamCaptureUnsupported);
    }
    fk_dev[s->device].st.stream_queries++;
    return fk_leave(s->completed >= s->enqueued ? cudaSuccess : cudaErrorNotReady);
}
cudaError_t cudaStreamQuery(cudaStream_t stream) { return stream_query(stream, 0); }
cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream) { return stream_query(stream, 1); }

static cudaError_t stream_sync(cudaStream_t h, int ptsz)
{
    FK_ENTER();
    cudaError_t err = fk_check_unsafe();
    if (err)
        return fk_leave(err);
    struct CUstream_st *s = fk_stream_get(h, ptsz, &err);
    if (!s)
        return fk_leave(err);
    if (s->capture) {
        fk_capture_invalidate(s->capture);
        return fk_leave(cudaErrorStreamCaptureUnsupported);
    }
    fk_dev[s->device].st.stream_syncs++;
    struct fk_dep d = {s, s->id, s->enqueued};
    fk_wait_dep(&d);
    return fk_leave(cudaSuccess);
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) { return stream_sync(stream, 0); }
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream) { return stream_sync(stream, 1); }

static cudaError_t stream_wait_event(cudaStream_t h, cudaEvent_t event, int ptsz)
{
    FK_ENTER();
    cudaError_t err = cudaSuccess;
    struct CUstream_st *s = fk_stream_get(h, ptsz, &err);
    if (!s)
        return fk_leave(err);
    struct CUevent_st *e = fk_obj_find(event, FK_T_EVENT);
    if (!e)
        return fk_leave(cudaErrorInvalidResourceHandle);
    fk_dev[s->device].st.stream_waits++;
    if (!e->recorded)
        return fk_leave(cudaSuccess);
    if (e->capture_id) {
        struct fk_capture *c = fk_capture_find(e->capture_id);
        if (!c || s->capture == c)
            return fk_leave(cudaSuccess);
        if (s->capture)
            return fk_leave(cudaErrorStreamCaptureMerge);
        if (s->kind == FK_S_LEGACY) {
            fk_capture_invalidate(c);
            return fk_leave(cudaErrorStreamCaptureImplicit);
        }
        s->capture = c;      /* fork: s joins the capture */
        return fk_leave(cudaSuccess);
    }
    if (s->capture)         /* ordering on uncaptured work: nothing to record */
        return fk_leave(s->capture->invalidated ? cudaErrorStreamCaptureInvalidated : cudaSuccess);
    struct fk_node n = {.kind = FK_OP_WAIT};
    struct fk_dep d = fk_event_dep(e);
    return fk_leave(fk_submit(s, &n, &d));
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    return stream_wait_event(stream, event, 0);
}
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    return stream_wait_event(stream, event, 1);
}

static cudaError_t stream_get(cudaStream_t h, int ptsz, unsigned *flags, int *device, int *prio)
{
    FK_ENTER();
    cudaError_t err = cudaSuccess;
    if (!flags && !device && !prio)
        return fk_leave(cudaErrorInvalidValue);
    struct CUstream_st *s = fk_stream_get(h, ptsz, &err);
    if (!s)
        return fk_leave(err);
    if (device && s->capture) {
        /* As CUDA 13.0 on an H200 does (seen in scripts/gpu-check's capture probes): asking a
         * capturing stream for its device fails and invalidates the capture, in every mode. */
        fk_capture_invalidate(s->capture);
        return fk_leave(cudaErrorStreamCaptureUnsupported);
    }
    if (flags)
        *flags = s->flags;
    if (device)
        *device = s->device;
    if (prio)
        *prio = s->priority;
    return fk_leave(cudaSuccess);
}
cudaError_t cudaStreamGetFlags(cudaStream_t s, unsigned int *flags)
{
    return stream_get(s, 0, flags, NULL, NULL);
}
cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t s, unsigned int *flags)
{
    return stream_get(s, 1, flags, NULL, NULL);
}
cudaError_t cudaStreamGetDevice(cudaStream_t s, int *device)
{
    return stream_get(s, 0, NULL, device, NULL);
}
cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t s, int *device)
{
    return stream_get(s, 1, NULL, device, NULL);
}
cudaError_t cudaStreamGetPriority(cudaStream_t s, int *priority)
{
    return stream_get(s, 0, NULL, NULL, priority);
}
cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t s, int *priority)
{
    return stream_get(s, 1, NULL, NULL, priority);
}

static cudaError_t launch(cudaStream_t h, int ptsz, enum fk_op_kind kind, void (*fn)(void *),
                          void *arg, unsigned delay_us)
{
    FK_ENTER();
    cudaError_t err = cudaSuccess;
    if (kind == FK_OP_HOSTFN && !fn)
        return fk_leave(cudaErrorInvalidValue);
    struct CUstream_st *s = fk_stream_get(h, ptsz, &err);
    if (!s)
        return fk_leave(err);
    struct fk_node n = {.kind = kind, .fn = fn, .arg = arg, .delay_us = delay_us};
    return fk_leave(fk_submit(s, &n, NULL));
}
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    return launch(stream, 0, FK_OP_HOSTFN, fn, userData, 0);
}
cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    return launch(stream, 1, FK_OP_HOSTFN, fn, userData, 0);
}
cudaError_t fakecuda_launch(cudaStream_t s, void (*fn)(void *), void *arg, unsigned delay_us)
{
    return launch(s, 0, FK_OP_KERNEL, fn, arg, delay_us);
}

cudaError_t cudaDeviceSynchronize(void)
{
    FK_ENTER();
    cudaError_t err = fk_check_unsafe();
    if (err)
        return fk_leave(err);
    fk_dev[fk_cur_dev].st.device_syncs++;
    fk_wait_streams(fk_cur_dev);
    return fk_leave(cudaSuccess);
}

/* ---- event API --------------------------------------------------------------------------- */
static cudaError_t event_create(cudaEvent_t *event, unsigned flags)
{
    FK_ENTER();
    unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
    if (!event || (flags & ~known) ||
        ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)))
        return fk_leave(cudaErrorInvalidValue);
    struct CUevent_st *e = fk_xcalloc(1, sizeof *e);
    e->flags = flags;
    e->device = fk_cur_dev;
    if (fk_cur_dev >= 0 && fk_cur_dev < fk_ndev)
        fk_dev[fk_cur_dev].st.event_creates++;
    fk_obj_add(e, FK_T_EVENT);
    *event = e;
    return fk_leave(cudaSuccess);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    return event_create(event, flags);
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    return event_create(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    FK_ENTER();
    struct CUevent_st *e = fk_obj_find(event, FK_T_EVENT);
    if (!e)
        return fk_leave(cudaErrorInvalidResourceHandle);
    fk_event_destroy_locked(e);
    return fk_leave(cudaSuccess);
}

static cudaError_t event_record(cudaEvent_t event, cudaStream_t h, int ptsz, unsigned flags)
{
    FK_ENTER();
    cudaError_t err = cudaSuccess;
    struct CUstream_st *s = fk_stream_get(h, ptsz, &err);
    if (!s)
        return fk_leave(err);
    if (s->kind == FK_S_LEGACY && (err = fk_check_unsafe()) != cudaSuccess)
        return fk_leave(err);
    struct CUevent_st *e = fk_obj_find(event, FK_T_EVENT);
    if (!e)
        return fk_leave(cudaErrorInvalidResourceHandle);
    if (flags & ~(unsigned)cudaEventRecordExternal)
        return fk_leave(cudaErrorInvalidValue);
    if (s->capture) {
        if (s->capture->invalidated)
            return fk_leave(cudaErrorStreamCaptureInvalidated);
        e->recorded = 1;
        e->capture_id = s->capture->id;
        e->timed = 0;
        e->gen++;
    } else {
        struct fk_node n = {.kind = FK_OP_EVENT, .event = e, .event_gen = e->gen + 1};
        if ((err = fk_submit(s, &n, NULL)) != cudaSuccess)
            return fk_leave(err);
        e->gen++;
        e->pending++;
        e->recorded = 1;
        e->capture_id = 0;
        e->timed = 0;
        e->stream = s;
        e->stream_id = s->id;
        e->target = s->enqueued;
    }
    fk_dev[s->device].st.event_records++;
    return fk_leave(cudaSuccess);
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    return event_record(event, stream, 0, 0);
}
cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
    return event_record(event, stream, 1, 0);
}
cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags)
{
    return event_record(event, stream, 0, flags);
}
cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream,
                                          unsigned int flags)
{
    return event_record(event, stream, 1, flags);
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
    FK_ENTER();
    cudaError_t err = fk_check_unsafe();
    if (err)
        return fk_leave(err);
    struct CUevent_st *e = fk_obj_find(event, FK_T_EVENT);
    if (!e)
        return fk_leave(cudaErrorInvalidResourceHandle);
    if (fk_event_in_capture(e))
        return fk_leave(cudaErrorCapturedEvent);
    fk_dev[e->device].st.event_queries++;
    return fk_leave(fk_event_done(e) ? cudaSuccess : cudaErrorNotReady);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    FK_ENTER();
    cudaError_t err = fk_check_unsafe();
    if (err)
        return fk_leave(err);
    struct CUevent_st *e = fk_obj_find(event, FK_T_EVENT);
    if (!e)
        return fk_leave(cudaErrorInvalidResourceHandle);
    if (fk_event_in_capture(e))
        return fk_leave(cudaErrorCapturedEvent);
    fk_dev[e->device].st.event_syncs++;
    if (e->recorded && !e->capture_id) {
        struct fk_dep d = fk_event_dep(e);   /* e may be destroyed while we wait: copy */
        fk_wait_dep(&d);
    }
    return fk_leave(cudaSuccess);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    FK_ENTER();
    if (!ms)
        return fk_leave(cudaErrorInvalidValue);
    struct CUevent_st *a = fk_obj_find(start, FK_T_EVENT), *b = fk_obj_find(end, FK_T_EVENT);
    if (!a || !b || (a->flags & cudaEventDisableTiming) || (b->flags & cudaEventDisableTiming) ||
        !a->recorded || !b->recorded)
        return fk_leave(cudaErrorInvalidResourceHandle);
    if (fk_event_in_capture(a) || fk_event_in_capture(b))
        return fk_leave(cudaErrorCapturedEvent);
    if (!fk_event_done(a) || !fk_event_done(b))
        return fk_leave(cudaErrorNotReady);
    if (!a->timed || !b->timed)
        return fk_leave(cudaErrorInvalidResourceHandle);
    double d = (double)(b->time.tv_sec - a->time.tv_sec) * 1e3 +
               (double)(b->time.tv_nsec - a->time.tv_nsec) / 1e6;
    *ms = (float)d;
    return fk_leave(cudaSuccess);
}
