/* The exported CUDA runtime entry points. Each is thin: the guard (recursion, lazy init), one
 * call into alloc.c or capture.c, and the real function for everything gmshim only watches. */
#include "alloc.h"
#include "capture.h"
#include "common.h"
#include "evlog.h"
#include "init.h"
#include "real.h"

#define HOOK GM_EXPORT

HOOK cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    if (!gm_enter())
        return REAL_CALL(cudaMalloc, devPtr, size);
    cudaError_t err = alloc_malloc(devPtr, size, __builtin_return_address(0));
    gm_leave();
    return err;
}

HOOK cudaError_t cudaFree(void *devPtr)
{
    if (!gm_enter())
        return REAL_CALL(cudaFree, devPtr);
    cudaError_t err = alloc_free(devPtr);
    gm_leave();
    return err;
}

HOOK cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
    if (!gm_enter())
        return REAL_CALL(cudaMemGetInfo, free, total);
    cudaError_t err = alloc_mem_get_info(free, total);
    gm_leave();
    return err;
}

/* Seen so that GMSHIM_GPU_ORDER knows when a second device comes into use. */
HOOK cudaError_t cudaSetDevice(int device)
{
    cudaError_t err = REAL_CALL(cudaSetDevice, device);
    if (err == cudaSuccess && gm_enter()) {
        alloc_device_set(device);
        gm_leave();
    }
    return err;
}

HOOK cudaError_t cudaDeviceReset(void)
{
    if (!gm_enter())
        return REAL_CALL(cudaDeviceReset);
    cudaError_t err = alloc_device_reset();
    gm_leave();
    return err;
}

/* ---- stream-ordered allocations: CUDA's own pool serves them; gmshim counts and logs ---- */

#define ASYNC_ALLOC_HOOK(name, call_args, stream)                                                 \
    do {                                                                                          \
        if (!gm_enter())                                                                          \
            return REAL_CALL call_args;                                                           \
        uint64_t t0 = gm_now_ns();                                                                \
        cudaError_t err = REAL_CALL call_args;                                                    \
        if (err == cudaSuccess && devPtr)                                                         \
            alloc_unpooled(GMLOG_KIND_ASYNC, *devPtr, size, (uint64_t)(uintptr_t)(stream), t0);   \
        else if (err == cudaErrorMemoryAllocation)                                                \
            alloc_unpooled_oom(size);                                                             \
        gm_leave();                                                                               \
        return err;                                                                               \
    } while (0)

HOOK cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    ASYNC_ALLOC_HOOK(cudaMallocAsync, (cudaMallocAsync, devPtr, size, hStream), hStream);
}

HOOK cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
    ASYNC_ALLOC_HOOK(cudaMallocAsync_ptsz, (cudaMallocAsync_ptsz, devPtr, size, hStream), hStream);
}

HOOK cudaError_t cudaMallocFromPoolAsync(void **devPtr, size_t size, cudaMemPool_t pool, cudaStream_t s)
{
    ASYNC_ALLOC_HOOK(cudaMallocFromPoolAsync, (cudaMallocFromPoolAsync, devPtr, size, pool, s), s);
}

HOOK cudaError_t cudaMallocFromPoolAsync_ptsz(void **devPtr, size_t size, cudaMemPool_t pool,
                                              cudaStream_t s)
{
    ASYNC_ALLOC_HOOK(cudaMallocFromPoolAsync_ptsz, (cudaMallocFromPoolAsync_ptsz, devPtr, size, pool, s), s);
}

#define ASYNC_FREE_HOOK(name, ptr, stream)                                                        \
    do {                                                                                          \
        if (!gm_enter())                                                                          \
            return REAL_CALL(name, ptr, stream);                                                  \
        uint64_t t0 = gm_now_ns();                                                                \
        alloc_unpooled_free(GMLOG_KIND_ASYNC, ptr, t0);                                           \
        cudaError_t err = REAL_CALL(name, ptr, stream);                                           \
        gm_leave();                                                                               \
        return err;                                                                               \
    } while (0)

HOOK cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    ASYNC_FREE_HOOK(cudaFreeAsync, devPtr, hStream);
}

HOOK cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
    ASYNC_FREE_HOOK(cudaFreeAsync_ptsz, devPtr, hStream);
}

/* ---- streams: the pool fences the non-blocking ones ---------------------------------------- */

HOOK cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
    gm_in_stream_hook++;
    cudaError_t err = REAL_CALL(cudaStreamCreate, pStream);
    gm_in_stream_hook--;
    if (err == cudaSuccess && gm_enter()) {
        alloc_stream_created(*pStream, cudaStreamDefault);
        gm_leave();
    }
    return err;
}

HOOK cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    gm_in_stream_hook++;
    cudaError_t err = REAL_CALL(cudaStreamCreateWithFlags, pStream, flags);
    gm_in_stream_hook--;
    if (err == cudaSuccess && gm_enter()) {
        alloc_stream_created(*pStream, flags);
        gm_leave();
    }
    return err;
}

HOOK cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
    gm_in_stream_hook++;
    cudaError_t err = REAL_CALL(cudaStreamCreateWithPriority, pStream, flags, priority);
    gm_in_stream_hook--;
    if (err == cudaSuccess && gm_enter()) {
        alloc_stream_created(*pStream, flags);
        gm_leave();
    }
    return err;
}

HOOK cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    if (gm_enter()) {
        alloc_stream_destroying(stream);
        gm_leave();
    }
    gm_in_stream_hook++;
    cudaError_t err = REAL_CALL(cudaStreamDestroy, stream);
    gm_in_stream_hook--;
    return err;
}

/* ---- capture: the pool makes no unsafe call and keeps graph memory private ------------------ */

#define BEGIN_CAPTURE_HOOK(call_args, stream, mode, target)                                       \
    do {                                                                                          \
        if (!gm_enter())                                                                          \
            return REAL_CALL call_args;                                                           \
        gm_device_t *gate = capture_beginning(stream);                                            \
        cudaError_t err = REAL_CALL call_args;                                                    \
        capture_begin_done(gate, err, stream, mode, target);                                      \
        gm_leave();                                                                               \
        return err;                                                                               \
    } while (0)

HOOK cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    BEGIN_CAPTURE_HOOK((cudaStreamBeginCapture, stream, mode), stream, mode, NULL);
}

HOOK cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    BEGIN_CAPTURE_HOOK((cudaStreamBeginCapture_ptsz, stream, mode), stream, mode, NULL);
}

HOOK cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
    const cudaGraphNode_t *deps, const cudaGraphEdgeData *data, size_t n, enum cudaStreamCaptureMode mode)
{
    BEGIN_CAPTURE_HOOK((cudaStreamBeginCaptureToGraph, stream, graph, deps, data, n, mode), stream,
                       mode, graph);
}

HOOK cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
    const cudaGraphNode_t *deps, const cudaGraphEdgeData *data, size_t n, enum cudaStreamCaptureMode mode)
{
    BEGIN_CAPTURE_HOOK((cudaStreamBeginCaptureToGraph_ptsz, stream, graph, deps, data, n, mode),
                       stream, mode, graph);
}

#define END_CAPTURE_HOOK(name, stream, pGraph)                                                    \
    do {                                                                                          \
        cudaError_t err = REAL_CALL(name, stream, pGraph);                                        \
        if (gm_enter()) {                                                                         \
            capture_ended(stream, err, err == cudaSuccess && pGraph ? *pGraph : NULL);            \
            gm_leave();                                                                           \
        }                                                                                         \
        return err;                                                                               \
    } while (0)

HOOK cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    END_CAPTURE_HOOK(cudaStreamEndCapture, stream, pGraph);
}

HOOK cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
    END_CAPTURE_HOOK(cudaStreamEndCapture_ptsz, stream, pGraph);
}

#define INSTANTIATE_HOOK(call_args, pExec, graph)                                                 \
    do {                                                                                          \
        cudaError_t err = REAL_CALL call_args;                                                    \
        if (err == cudaSuccess && pExec && gm_enter()) {                                          \
            capture_instantiated(graph, *pExec);                                                  \
            gm_leave();                                                                           \
        }                                                                                         \
        return err;                                                                               \
    } while (0)

HOOK cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pExec, cudaGraph_t graph, unsigned long long flags)
{
    INSTANTIATE_HOOK((cudaGraphInstantiate, pExec, graph, flags), pExec, graph);
}

HOOK cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pExec, cudaGraph_t graph,
                                               unsigned long long flags)
{
    INSTANTIATE_HOOK((cudaGraphInstantiateWithFlags, pExec, graph, flags), pExec, graph);
}

HOOK cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t *pExec, cudaGraph_t graph,
                                                cudaGraphInstantiateParams *params)
{
    INSTANTIATE_HOOK((cudaGraphInstantiateWithParams, pExec, graph, params), pExec, graph);
}

HOOK cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *pExec, cudaGraph_t graph,
                                                     cudaGraphInstantiateParams *params)
{
    INSTANTIATE_HOOK((cudaGraphInstantiateWithParams_ptsz, pExec, graph, params), pExec, graph);
}

HOOK cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    cudaError_t err = REAL_CALL(cudaGraphDestroy, graph);
    if (err == cudaSuccess && gm_enter()) {
        capture_graph_destroyed(graph);
        gm_leave();
    }
    return err;
}

HOOK cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    cudaError_t err = REAL_CALL(cudaGraphExecDestroy, exec);
    if (err == cudaSuccess && gm_enter()) {
        capture_exec_destroyed(exec);
        gm_leave();
    }
    return err;
}

/* ---- allocations gmshim does not pool: forwarded, counted, logged -------------------------- */

HOOK cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    if (!gm_enter())
        return REAL_CALL(cudaMallocManaged, devPtr, size, flags);
    uint64_t t0 = gm_now_ns();
    cudaError_t err = REAL_CALL(cudaMallocManaged, devPtr, size, flags);
    if (err == cudaSuccess && devPtr)
        alloc_unpooled(GMLOG_KIND_MANAGED, *devPtr, size, 0, t0);
    gm_leave();
    return err;
}

HOOK cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
    if (!gm_enter())
        return REAL_CALL(cudaMallocPitch, devPtr, pitch, width, height);
    uint64_t t0 = gm_now_ns();
    cudaError_t err = REAL_CALL(cudaMallocPitch, devPtr, pitch, width, height);
    if (err == cudaSuccess && devPtr && pitch)
        alloc_unpooled(GMLOG_KIND_PITCHED, *devPtr, *pitch * height, 0, t0);
    gm_leave();
    return err;
}

HOOK cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr, struct cudaExtent extent)
{
    if (!gm_enter())
        return REAL_CALL(cudaMalloc3D, pitchedDevPtr, extent);
    uint64_t t0 = gm_now_ns();
    cudaError_t err = REAL_CALL(cudaMalloc3D, pitchedDevPtr, extent);
    if (err == cudaSuccess && pitchedDevPtr)
        alloc_unpooled(GMLOG_KIND_PITCHED, pitchedDevPtr->ptr,
                       pitchedDevPtr->pitch * extent.height * extent.depth, 0, t0);
    gm_leave();
    return err;
}

HOOK cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    if (!gm_enter())
        return REAL_CALL(cudaMallocHost, ptr, size);
    uint64_t t0 = gm_now_ns();
    cudaError_t err = REAL_CALL(cudaMallocHost, ptr, size);
    if (err == cudaSuccess && ptr)
        alloc_unpooled(GMLOG_KIND_HOST, *ptr, size, 0, t0);
    gm_leave();
    return err;
}

HOOK cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    if (!gm_enter())
        return REAL_CALL(cudaHostAlloc, pHost, size, flags);
    uint64_t t0 = gm_now_ns();
    cudaError_t err = REAL_CALL(cudaHostAlloc, pHost, size, flags);
    if (err == cudaSuccess && pHost)
        alloc_unpooled(GMLOG_KIND_HOST, *pHost, size, 0, t0);
    gm_leave();
    return err;
}

HOOK cudaError_t cudaFreeHost(void *ptr)
{
    if (!gm_enter())
        return REAL_CALL(cudaFreeHost, ptr);
    uint64_t t0 = gm_now_ns();
    cudaError_t err = REAL_CALL(cudaFreeHost, ptr);
    if (err == cudaSuccess)
        alloc_unpooled_free(GMLOG_KIND_HOST, ptr, t0);
    gm_leave();
    return err;
}

HOOK cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
    if (gm_enter()) {
        alloc_ipc_export(devPtr);
        gm_leave();
    }
    return REAL_CALL(cudaIpcGetMemHandle, handle, devPtr);
}
