/* Bookkeeping of captures and graphs; the allocation side is capheap.c (capture_heap). A
 * graph's private heap is released when the graph and every instance made from it are gone,
 * as PyTorch keeps a private pool per graph. */
#include "capture.h"
#include "capheap.h"
#include "devctx.h"
#include "device.h"
#include "evlog.h"
#include "logrec.h"
#include "real.h"

#include <stdlib.h>
#include <string.h>

typedef struct gm_exec_ref {
    cudaGraphExec_t exec;
    struct gm_exec_ref *next;
} gm_exec_ref_t;

typedef struct gm_graph {
    gm_device_t *dev;
    gm_heap_t *heap;
    cudaGraph_t graph;
    cudaStream_t stream;
    int capturing;
    int graph_alive;
    gm_exec_ref_t *execs;
    uint32_t id;
    struct gm_graph *next;
} gm_graph_t;

static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static gm_graph_t *graphs;
static uint32_t next_id;

/* Streams created through the hooks and their devices: cudaStreamGetDevice cannot be asked
 * about a capturing stream (it invalidates the capture, even in relaxed mode: docs/performance.md,
 * "Measurements the code relies on"), so the device is remembered at creation. */
typedef struct stream_dev {
    cudaStream_t stream;
    int device;
} stream_dev_t;

static stream_dev_t *streams;
static size_t nstreams, streams_cap;

void capture_stream_created(cudaStream_t stream, int device)
{
    pthread_mutex_lock(&cap_lock);
    for (size_t i = 0; i < nstreams; i++)
        if (streams[i].stream == stream) {
            streams[i].device = device;
            pthread_mutex_unlock(&cap_lock);
            return;
        }
    if (nstreams == streams_cap) {
        size_t ncap = streams_cap ? streams_cap * 2 : 64;
        stream_dev_t *n = realloc(streams, ncap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&cap_lock);
            return;
        }
        streams = n;
        streams_cap = ncap;
    }
    streams[nstreams].stream = stream;
    streams[nstreams].device = device;
    nstreams++;
    pthread_mutex_unlock(&cap_lock);
}

void capture_stream_destroyed(cudaStream_t stream)
{
    pthread_mutex_lock(&cap_lock);
    for (size_t i = 0; i < nstreams; i++)
        if (streams[i].stream == stream) {
            streams[i] = streams[--nstreams];
            break;
        }
    pthread_mutex_unlock(&cap_lock);
}

int capture_stream_device(cudaStream_t stream)
{
    int dev = -1;
    pthread_mutex_lock(&cap_lock);
    for (size_t i = 0; i < nstreams && stream && stream != cudaStreamLegacy && stream != cudaStreamPerThread; i++)
        if (streams[i].stream == stream) {
            dev = streams[i].device;
            break;
        }
    pthread_mutex_unlock(&cap_lock);
    if (dev >= 0)
        return dev;
    /* A stream gmshim did not see created, or a default stream: the current device. */
    if (REAL_CALL(cudaGetDevice, &dev) != cudaSuccess)
        dev = 0;
    return dev;
}

static void log_capture(gm_graph_t *g, int event, unsigned mode)
{
    logrec_capture(g->dev->id, event, (uint64_t)(uintptr_t)g->stream, (uint64_t)(uintptr_t)g->graph, g->id,
                   mode);
}

/* The capture heap the device should use now: the newest capture still under way. */
static gm_heap_t *current_capture_heap(gm_device_t *d)
{
    for (gm_graph_t *g = graphs; g; g = g->next)
        if (g->dev == d && g->capturing)
            return g->heap;
    return NULL;
}

gm_device_t *capture_beginning(cudaStream_t stream)
{
    gm_device_t *d = devctx_peek(capture_stream_device(stream));
    if (d)
        pthread_mutex_lock(&d->fence_lock); /* no arena lock is held: the lock order holds */
    return d;
}

void capture_begin_done(gm_device_t *gate, cudaError_t err, cudaStream_t stream, enum cudaStreamCaptureMode mode,
                        cudaGraph_t target)
{
    if (gate) {
        /* Raised under the fence lock: a fence from now on sees it, one before it has ended. */
        if (err == cudaSuccess)
            __atomic_add_fetch(&gate->captures_beginning, 1, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&gate->fence_lock);
    }
    if (err != cudaSuccess)
        return;
    capture_begun(stream, mode, target);
    if (gate)
        __atomic_sub_fetch(&gate->captures_beginning, 1, __ATOMIC_SEQ_CST);
}

void capture_begun(cudaStream_t stream, enum cudaStreamCaptureMode mode, cudaGraph_t target)
{
    gm_device_t *d = device_get(capture_stream_device(stream));
    if (!d)
        return;
    pthread_mutex_lock(&cap_lock);
    gm_graph_t *g = NULL;
    if (target)
        for (g = graphs; g && !(g->graph == target && !g->capturing); g = g->next)
            ;
    if (!g) {
        g = calloc(1, sizeof *g);
        if (!g) {
            pthread_mutex_unlock(&cap_lock);
            return;
        }
        g->dev = d;
        g->id = ++next_id;
        g->heap = capheap_graph_heap(d, g, g->id);
        if (!g->heap) {
            free(g);
            pthread_mutex_unlock(&cap_lock);
            return;
        }
        g->graph = target;
        g->graph_alive = target != NULL;
        g->next = graphs;
        graphs = g;
    }
    g->stream = stream;
    g->capturing = 1;
    capheap_set_captures(d, 1, g->heap);
    log_capture(g, GMLOG_CAPTURE_BEGIN, (unsigned)mode);
    pthread_mutex_unlock(&cap_lock);
}

static void unlink_graph(gm_graph_t *g)
{
    gm_graph_t **link = &graphs;
    while (*link != g)
        link = &(*link)->next;
    *link = g->next;
}

/* No graph or instance uses the memory any more: the heap goes back. cap_lock held. */
static void release(gm_graph_t *g)
{
    log_capture(g, GMLOG_CAPTURE_RELEASED, 0);
    unlink_graph(g);
    capheap_release_graph_heap(g->dev, g->heap);
    gm_exec_ref_t *e = g->execs;
    while (e) {
        gm_exec_ref_t *next = e->next;
        free(e);
        e = next;
    }
    free(g);
}

static void release_if_unused(gm_graph_t *g)
{
    if (!g->capturing && !g->graph_alive && !g->execs)
        release(g);
}

void capture_ended(cudaStream_t stream, cudaError_t err, cudaGraph_t graph)
{
    pthread_mutex_lock(&cap_lock);
    gm_graph_t *g;
    for (g = graphs; g && !(g->capturing && g->stream == stream); g = g->next)
        ;
    if (g) {
        g->capturing = 0;
        capheap_set_captures(g->dev, -1, current_capture_heap(g->dev));
        if (err == cudaSuccess && graph) {
            g->graph = graph;
            g->graph_alive = 1;
            log_capture(g, GMLOG_CAPTURE_END, 0);
        } else {
            log_capture(g, GMLOG_CAPTURE_INVALID, 0);
            g->graph_alive = 0;
        }
        release_if_unused(g);
    }
    pthread_mutex_unlock(&cap_lock);
}

void capture_instantiated(cudaGraph_t graph, cudaGraphExec_t exec)
{
    pthread_mutex_lock(&cap_lock);
    for (gm_graph_t *g = graphs; g; g = g->next) {
        if (g->graph == graph && g->graph_alive) {
            gm_exec_ref_t *e = malloc(sizeof *e);
            if (e) {
                e->exec = exec;
                e->next = g->execs;
                g->execs = e;
            }
            break;
        }
    }
    pthread_mutex_unlock(&cap_lock);
}

void capture_graph_destroyed(cudaGraph_t graph)
{
    pthread_mutex_lock(&cap_lock);
    for (gm_graph_t *g = graphs; g; g = g->next) {
        if (g->graph == graph && g->graph_alive) {
            g->graph_alive = 0;
            release_if_unused(g);
            break;
        }
    }
    pthread_mutex_unlock(&cap_lock);
}

void capture_exec_destroyed(cudaGraphExec_t exec)
{
    pthread_mutex_lock(&cap_lock);
    for (gm_graph_t *g = graphs; g; g = g->next) {
        for (gm_exec_ref_t **link = &g->execs; *link; link = &(*link)->next) {
            if ((*link)->exec == exec) {
                gm_exec_ref_t *e = *link;
                *link = e->next;
                free(e);
                release_if_unused(g);
                pthread_mutex_unlock(&cap_lock);
                return;
            }
        }
    }
    pthread_mutex_unlock(&cap_lock);
}

void capture_device_reset(gm_device_t *d)
{
    pthread_mutex_lock(&cap_lock);
    gm_graph_t **link = &graphs;
    while (*link) {
        gm_graph_t *g = *link;
        if (g->dev != d) {
            link = &g->next;
            continue;
        }
        *link = g->next;
        gm_exec_ref_t *e = g->execs;
        while (e) {
            gm_exec_ref_t *next = e->next;
            free(e);
            e = next;
        }
        free(g); /* its heap is freed by device_forget */
    }
    pthread_mutex_unlock(&cap_lock);
}

void capture_fork_prepare(void) { pthread_mutex_lock(&cap_lock); }
void capture_fork_release(void) { pthread_mutex_unlock(&cap_lock); }
