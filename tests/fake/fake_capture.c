/* fake_capture.c — stream capture and graphs for the fake CUDA runtime: the capture-mode rules
 * that make some calls "unsafe" (they fail with 900 and invalidate the capture), capture
 * begin/end/query, and graphs as plain operation lists replayed in order. */
#include "fake_internal.h"

#include <stdlib.h>
#include <string.h>

static unsigned long long fk_next_capture_id = 1;

struct fk_capture *fk_capture_find(unsigned long long id)
{
    for (struct fk_capture *c = fk_captures; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

void fk_capture_invalidate(struct fk_capture *c)
{
    if (!c->invalidated) {
        c->invalidated = 1;
        fk_dev[c->device].st.captures_invalidated++;
    }
}

/* A call is prohibited when the thread's mode is not Relaxed and either the thread has its own
 * non-Relaxed capture open, or (Global mode only) any thread has a Global capture open. */
cudaError_t fk_check_unsafe(void)
{
    if (fk_thread_mode == cudaStreamCaptureModeRelaxed)
        return cudaSuccess;
    pthread_t self = pthread_self();
    int hit = 0;
    for (struct fk_capture *c = fk_captures; c; c = c->next) {
        int own = pthread_equal(c->thread, self) && c->mode != cudaStreamCaptureModeRelaxed;
        int global = fk_thread_mode == cudaStreamCaptureModeGlobal &&
                     c->mode == cudaStreamCaptureModeGlobal;
        if (own || global) {
            fk_capture_invalidate(c);
            hit = 1;
        }
    }
    if (!hit)
        return cudaSuccess;
    fk_dev[fk_cur_dev].st.unsafe_calls++;
    return cudaErrorStreamCaptureUnsupported;
}

/* ---- graphs -------------------------------------------------------------------------------- */
static struct CUgraph_st *graph_new(void)
{
    struct CUgraph_st *g = calloc(1, sizeof *g);
    if (g)
        fk_obj_add(g, FK_T_GRAPH);
    return g;
}

static void graph_free(struct CUgraph_st *g)
{
    fk_obj_del(g);
    fk_gmem_release(g->gmem);
    free(g->nodes);
    free(g);
}

cudaError_t fk_graph_append(struct CUgraph_st *g, const struct fk_node *n)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        struct fk_node *v = realloc(g->nodes, cap * sizeof *v);
        if (!v)
            return cudaErrorMemoryAllocation;
        g->nodes = v;
        g->cap = cap;
    }
    g->nodes[g->n++] = *n;
    return cudaSuccess;
}

void fk_gmem_release(struct fk_gmem *gm)
{
    if (!gm || --gm->refs)
        return;
    for (size_t i = 0; i < gm->n; i++)
        fk_free_ptr_if_live(gm->ptrs[i]);
    free(gm->ptrs);
    free(gm);
}

/* Hands allocations made and freed inside the capture to the graph (freed with its last
 * graph or exec), or frees them at once when there is no graph. */
static void capture_settle_allocs(struct fk_capture *c, struct CUgraph_st *g)
{
    for (size_t i = 0; i < c->nallocs; i++) {
        if (!c->allocs[i].freed)
            continue;
        if (g && !g->gmem && (g->gmem = calloc(1, sizeof *g->gmem)))
            g->gmem->refs = 1;
        struct fk_gmem *gm = g ? g->gmem : NULL;
        if (gm && gm->n == gm->cap) {
            size_t cap = gm->cap ? 2 * gm->cap : 8;
            void **v = realloc(gm->ptrs, cap * sizeof *v);
            if (v) {
                gm->ptrs = v;
                gm->cap = cap;
            }
        }
        if (gm && gm->n < gm->cap)
            gm->ptrs[gm->n++] = c->allocs[i].ptr;
        else
            fk_free_ptr_if_live(c->allocs[i].ptr);
    }
}

void fk_capture_add_alloc(struct fk_capture *c, void *p)
{
    if (c->nallocs == c->cap_allocs) {
        size_t cap = c->cap_allocs ? 2 * c->cap_allocs : 8;
        struct fk_cap_alloc *v = realloc(c->allocs, cap * sizeof *v);
        if (!v)
            return;            /* not tracked: it simply stays a normal allocation */
        c->allocs = v;
        c->cap_allocs = cap;
    }
    c->allocs[c->nallocs++] = (struct fk_cap_alloc){p, 0};
}

int fk_capture_take_free(struct fk_capture *c, void *p)
{
    for (size_t i = 0; i < c->nallocs; i++)
        if (c->allocs[i].ptr == p && !c->allocs[i].freed) {
            c->allocs[i].freed = 1;
            return 1;
        }
    return 0;
}

/* Detaches every stream from c, unlinks and frees it. */
static void capture_close(struct fk_capture *c)
{
    for (int d = 0; d < FK_MAX_DEV; d++)
        for (struct CUstream_st *s = fk_dev[d].streams; s; s = s->dnext)
            if (s->capture == c)
                s->capture = NULL;
    for (struct fk_capture **pp = &fk_captures; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    free(c->allocs);
    free(c);
}

/* Ends an invalidated capture: no graph comes out of it. */
static void capture_discard(struct fk_capture *c)
{
    capture_settle_allocs(c, NULL);
    if (c->own_graph)
        graph_free(c->graph);
    capture_close(c);
}

void fk_capture_abort_stream(struct CUstream_st *s)
{
    struct fk_capture *c = s->capture;
    fk_capture_invalidate(c);
    if (c->origin == s)
        capture_discard(c);
    else
        s->capture = NULL;
}

/* ---- capture API --------------------------------------------------------------------------- */
static cudaError_t begin_capture(cudaStream_t h, int ptsz, int to_graph, cudaGraph_t graph,
                                 enum cudaStreamCaptureMode mode)
{
    FK_ENTER();
    cudaError_t err = cudaSuccess;
    if ((unsigned)mode > cudaStreamCaptureModeRelaxed)
        return fk_leave(cudaErrorInvalidValue);
    struct CUstream_st *s = fk_stream_get(h, ptsz, &err);
    if (!s)
        return fk_leave(err);
    if (s->kind == FK_S_LEGACY)
        return fk_leave(cudaErrorStreamCaptureUnsupported);
    if (s->capture)
        return fk_leave(cudaErrorIllegalState);
    if (to_graph && !fk_obj_find(graph, FK_T_GRAPH))
        return fk_leave(cudaErrorInvalidValue);
    struct fk_capture *c = calloc(1, sizeof *c);
    if (!c || !(to_graph || (graph = graph_new()))) {
        free(c);
        return fk_leave(cudaErrorMemoryAllocation);
    }
    c->id = fk_next_capture_id++;
    c->mode = mode;
    c->thread = pthread_self();
    c->device = s->device;
    c->origin = s;
    c->graph = graph;
    c->own_graph = !to_graph;
    c->next = fk_captures;
    fk_captures = c;
    s->capture = c;
    return fk_leave(cudaSuccess);
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    return begin_capture(stream, 0, 0, NULL, mode);
}
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    return begin_capture(stream, 1, 0, NULL, mode);
}
cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
                                          const cudaGraphNode_t *dependencies,
                                          const cudaGraphEdgeData *dependencyData,
                                          size_t numDependencies, enum cudaStreamCaptureMode mode)
{
    return begin_capture(stream, 0, 1, graph, mode);
}
cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
                                               const cudaGraphNode_t *dependencies,
                                               const cudaGraphEdgeData *dependencyData,
                                               size_t numDependencies,
                                               enum cudaStreamCaptureMode mode)
{
    return begin_capture(stream, 1, 1, graph, mode);
}

static cudaError_t end_capture(cudaStream_t h, int ptsz, cudaGraph_t *pGraph)
{
    FK_ENTER();
    cudaError_t err = cudaSuccess;
    if (!pGraph)
        return fk_leave(cudaErrorInvalidValue);
    struct CUstream_st *s = fk_stream_get(h, ptsz, &err);
    if (!s)
        return fk_leave(err);
    struct fk_capture *c = s->capture;
    if (!c)
        return fk_leave(cudaErrorIllegalState);
    if (c->origin != s) {
        fk_capture_invalidate(c);
        return fk_leave(cudaErrorStreamCaptureUnmatched);
    }
    if (c->mode != cudaStreamCaptureModeRelaxed && !pthread_equal(c->thread, pthread_self()))
        return fk_leave(cudaErrorStreamCaptureWrongThread);
    if (c->invalidated) {
        capture_discard(c);
        *pGraph = NULL;
        return fk_leave(cudaErrorStreamCaptureInvalidated);
    }
    struct CUgraph_st *g = c->graph;
    capture_settle_allocs(c, g);
    capture_close(c);
    *pGraph = g;
    return fk_leave(cudaSuccess);
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    return end_capture(stream, 0, pGraph);
}
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
    return end_capture(stream, 1, pGraph);
}

/* Status of h's capture; cudaErrorStreamCaptureImplicit for the legacy stream while a blocking
 * stream of its device captures (as documented; that capture is not invalidated). */
static cudaError_t capture_status(cudaStream_t h, int ptsz, enum cudaStreamCaptureStatus *st,
                                  struct fk_capture **cap)
{
    cudaError_t err = cudaSuccess;
    struct CUstream_st *s = fk_stream_get(h, ptsz, &err);
    if (!s)
        return err;
    if (s->kind == FK_S_LEGACY)
        for (struct CUstream_st *t = fk_dev[s->device].streams; t; t = t->dnext)
            if (fk_stream_blocking(t) && t->capture)
                return cudaErrorStreamCaptureImplicit;
    *cap = s->capture;
    *st = !s->capture ? cudaStreamCaptureStatusNone
          : s->capture->invalidated ? cudaStreamCaptureStatusInvalidated
          : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

static cudaError_t is_capturing(cudaStream_t h, int ptsz, enum cudaStreamCaptureStatus *st)
{
    FK_ENTER();
    struct fk_capture *c;
    if (!st)
        return fk_leave(cudaErrorInvalidValue);
    return fk_leave(capture_status(h, ptsz, st, &c));
}
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pStatus)
{
    return is_capturing(stream, 0, pStatus);
}
cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *pStatus)
{
    return is_capturing(stream, 1, pStatus);
}

static cudaError_t capture_info(cudaStream_t h, int ptsz, enum cudaStreamCaptureStatus *st,
                                unsigned long long *id, cudaGraph_t *graph,
                                const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                                size_t *ndeps)
{
    FK_ENTER();
    struct fk_capture *c = NULL;
    if (!st || (edges && !deps))
        return fk_leave(cudaErrorInvalidValue);
    cudaError_t err = capture_status(h, ptsz, st, &c);
    if (err)
        return fk_leave(err);
    if (id && c)
        *id = c->id;
    if (graph)
        *graph = c && !c->invalidated ? c->graph : NULL;
    if (deps)
        *deps = NULL;          /* the fake's graphs are sequences: no node handles */
    if (edges)
        *edges = NULL;
    if (ndeps)
        *ndeps = 0;
    return fk_leave(cudaSuccess);
}
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus *st,
                                     unsigned long long *id, cudaGraph_t *graph,
                                     const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                                     size_t *ndeps)
{
    return capture_info(stream, 0, st, id, graph, deps, edges, ndeps);
}
cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *st,
                                          unsigned long long *id, cudaGraph_t *graph,
                                          const cudaGraphNode_t **deps,
                                          const cudaGraphEdgeData **edges, size_t *ndeps)
{
    return capture_info(stream, 1, st, id, graph, deps, edges, ndeps);
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    FK_ENTER();
    if (!mode || (unsigned)*mode > cudaStreamCaptureModeRelaxed)
        return fk_leave(cudaErrorInvalidValue);
    enum cudaStreamCaptureMode old = fk_thread_mode;
    fk_thread_mode = *mode;
    *mode = old;
    return fk_leave(cudaSuccess);
}

/* ---- graph API ------------------------------------------------------------------------------ */
cudaError_t cudaGraphCreate(cudaGraph_t *pGraph, unsigned int flags)
{
    FK_ENTER();
    if (!pGraph || flags)
        return fk_leave(cudaErrorInvalidValue);
    return fk_leave((*pGraph = graph_new()) ? cudaSuccess : cudaErrorMemoryAllocation);
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    FK_ENTER();
    struct CUgraph_st *g = fk_obj_find(graph, FK_T_GRAPH);
    if (!g)
        return fk_leave(cudaErrorInvalidValue);
    for (struct fk_capture *c = fk_captures; c; c = c->next)
        if (c->graph == g)
            return fk_leave(cudaErrorIllegalState);   /* still being captured into */
    graph_free(g);
    return fk_leave(cudaSuccess);
}

static cudaError_t instantiate(cudaGraphExec_t *pExec, cudaGraph_t graph,
                               cudaGraphInstantiateParams *params)
{
    FK_ENTER();
    struct CUgraph_st *g = fk_obj_find(graph, FK_T_GRAPH);
    if (!pExec || !g)
        return fk_leave(cudaErrorInvalidValue);
    struct CUgraphExec_st *x = calloc(1, sizeof *x);
    if (x && g->n && (x->nodes = malloc(g->n * sizeof *x->nodes)))
        memcpy(x->nodes, g->nodes, g->n * sizeof *x->nodes);
    if (!x || (g->n && !x->nodes)) {
        free(x);
        return fk_leave(cudaErrorMemoryAllocation);
    }
    x->n = g->n;
    if ((x->gmem = g->gmem))
        x->gmem->refs++;
    fk_obj_add(x, FK_T_EXEC);
    *pExec = x;
    if (params) {
        params->result_out = cudaGraphInstantiateSuccess;
        params->errNode_out = NULL;
    }
    return fk_leave(cudaSuccess);
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                 unsigned long long flags)
{
    return instantiate(pGraphExec, graph, NULL);
}
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                          unsigned long long flags)
{
    return instantiate(pGraphExec, graph, NULL);
}
cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                           cudaGraphInstantiateParams *instantiateParams)
{
    if (!instantiateParams)
        return instantiate(NULL, NULL, NULL);   /* InvalidValue, reported the usual way */
    return instantiate(pGraphExec, graph, instantiateParams);
}
cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                                cudaGraphInstantiateParams *instantiateParams)
{
    if (!instantiateParams)
        return instantiate(NULL, NULL, NULL);
    return instantiate(pGraphExec, graph, instantiateParams);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
    FK_ENTER();
    struct CUgraphExec_st *x = fk_obj_find(graphExec, FK_T_EXEC);
    if (!x)
        return fk_leave(cudaErrorInvalidValue);
    fk_obj_del(x);
    fk_gmem_release(x->gmem);
    free(x->nodes);
    free(x);
    return fk_leave(cudaSuccess);
}

static cudaError_t graph_launch(cudaGraphExec_t graphExec, cudaStream_t h, int ptsz, int upload)
{
    FK_ENTER();
    cudaError_t err = cudaSuccess;
    struct CUgraphExec_st *x = fk_obj_find(graphExec, FK_T_EXEC);
    if (!x)
        return fk_leave(cudaErrorInvalidValue);
    struct CUstream_st *s = fk_stream_get(h, ptsz, &err);
    if (!s || upload)
        return fk_leave(err);
    if (s->capture && s->capture->invalidated)
        return fk_leave(cudaErrorStreamCaptureInvalidated);
    for (size_t i = 0; i < x->n && !err; i++)
        if (x->nodes[i].kind != FK_OP_MALLOC)
            err = fk_submit(s, &x->nodes[i], NULL);
    return fk_leave(err);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return graph_launch(graphExec, stream, 0, 0);
}
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return graph_launch(graphExec, stream, 1, 0);
}
cudaError_t cudaGraphUpload(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return graph_launch(graphExec, stream, 0, 1);
}
cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return graph_launch(graphExec, stream, 1, 1);
}
