/* The real CUDA runtime functions, found at run time (the shim links no CUDA library): first
 * with dlsym(RTLD_NEXT), then in a libcudart that was loaded RTLD_LOCAL. */
#ifndef GM_REAL_H
#define GM_REAL_H

#include <cuda_runtime_api.h>

/* The per-thread-default-stream entry points, which the CUDA headers only declare when compiled
 * for that mode. */
cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream);
cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream);
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
    const cudaGraphNode_t *dependencies, const cudaGraphEdgeData *dependencyData,
    size_t numDependencies, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph);
cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
    cudaGraphInstantiateParams *instantiateParams);

/* X(name, return type, parameter list) for every function the shim calls or forwards. */
#define GM_REAL_FUNCS(X)                                                                          \
    X(cudaMalloc, cudaError_t, (void **, size_t))                                                 \
    X(cudaFree, cudaError_t, (void *))                                                            \
    X(cudaMemGetInfo, cudaError_t, (size_t *, size_t *))                                          \
    X(cudaDeviceReset, cudaError_t, (void))                                                       \
    X(cudaDeviceSynchronize, cudaError_t, (void))                                                 \
    X(cudaMallocAsync, cudaError_t, (void **, size_t, cudaStream_t))                              \
    X(cudaMallocAsync_ptsz, cudaError_t, (void **, size_t, cudaStream_t))                         \
    X(cudaFreeAsync, cudaError_t, (void *, cudaStream_t))                                         \
    X(cudaFreeAsync_ptsz, cudaError_t, (void *, cudaStream_t))                                    \
    X(cudaMallocFromPoolAsync, cudaError_t, (void **, size_t, cudaMemPool_t, cudaStream_t))       \
    X(cudaMallocFromPoolAsync_ptsz, cudaError_t, (void **, size_t, cudaMemPool_t, cudaStream_t))  \
    X(cudaStreamCreate, cudaError_t, (cudaStream_t *))                                            \
    X(cudaStreamCreateWithFlags, cudaError_t, (cudaStream_t *, unsigned int))                     \
    X(cudaStreamCreateWithPriority, cudaError_t, (cudaStream_t *, unsigned int, int))             \
    X(cudaStreamDestroy, cudaError_t, (cudaStream_t))                                             \
    X(cudaStreamBeginCapture, cudaError_t, (cudaStream_t, enum cudaStreamCaptureMode))            \
    X(cudaStreamBeginCapture_ptsz, cudaError_t, (cudaStream_t, enum cudaStreamCaptureMode))       \
    X(cudaStreamBeginCaptureToGraph, cudaError_t, (cudaStream_t, cudaGraph_t,                     \
        const cudaGraphNode_t *, const cudaGraphEdgeData *, size_t, enum cudaStreamCaptureMode))  \
    X(cudaStreamBeginCaptureToGraph_ptsz, cudaError_t, (cudaStream_t, cudaGraph_t,                \
        const cudaGraphNode_t *, const cudaGraphEdgeData *, size_t, enum cudaStreamCaptureMode))  \
    X(cudaStreamEndCapture, cudaError_t, (cudaStream_t, cudaGraph_t *))                           \
    X(cudaStreamEndCapture_ptsz, cudaError_t, (cudaStream_t, cudaGraph_t *))                      \
    X(cudaMallocManaged, cudaError_t, (void **, size_t, unsigned int))                            \
    X(cudaMallocPitch, cudaError_t, (void **, size_t *, size_t, size_t))                          \
    X(cudaMalloc3D, cudaError_t, (struct cudaPitchedPtr *, struct cudaExtent))                    \
    X(cudaMallocHost, cudaError_t, (void **, size_t))                                             \
    X(cudaHostAlloc, cudaError_t, (void **, size_t, unsigned int))                                \
    X(cudaFreeHost, cudaError_t, (void *))                                                        \
    X(cudaIpcGetMemHandle, cudaError_t, (cudaIpcMemHandle_t *, void *))                           \
    X(cudaGraphInstantiate, cudaError_t, (cudaGraphExec_t *, cudaGraph_t, unsigned long long))    \
    X(cudaGraphInstantiateWithFlags, cudaError_t, (cudaGraphExec_t *, cudaGraph_t,                \
        unsigned long long))                                                                      \
    X(cudaGraphInstantiateWithParams, cudaError_t, (cudaGraphExec_t *, cudaGraph_t,               \
        cudaGraphInstantiateParams *))                                                            \
    X(cudaGraphInstantiateWithParams_ptsz, cudaError_t, (cudaGraphExec_t *, cudaGraph_t,          \
        cudaGraphInstantiateParams *))                                                            \
    X(cudaGraphDestroy, cudaError_t, (cudaGraph_t))                                               \
    X(cudaGraphExecDestroy, cudaError_t, (cudaGraphExec_t))                                       \
    X(cudaGetDevice, cudaError_t, (int *))                                                        \
    X(cudaSetDevice, cudaError_t, (int))                                                          \
    X(cudaGetDeviceCount, cudaError_t, (int *))                                                   \
    X(cudaGetDeviceProperties, cudaError_t, (struct cudaDeviceProp *, int))                       \
    X(cudaEventCreateWithFlags, cudaError_t, (cudaEvent_t *, unsigned int))                       \
    X(cudaEventRecord, cudaError_t, (cudaEvent_t, cudaStream_t))                                  \
    X(cudaEventQuery, cudaError_t, (cudaEvent_t))                                                 \
    X(cudaStreamQuery, cudaError_t, (cudaStream_t))                                               \
    X(cudaEventSynchronize, cudaError_t, (cudaEvent_t))                                           \
    X(cudaEventDestroy, cudaError_t, (cudaEvent_t))                                               \
    X(cudaStreamWaitEvent, cudaError_t, (cudaStream_t, cudaEvent_t, unsigned int))                \
    X(cudaStreamGetFlags, cudaError_t, (cudaStream_t, unsigned int *))                            \
    X(cudaThreadExchangeStreamCaptureMode, cudaError_t, (enum cudaStreamCaptureMode *))           \
    X(cudaGetLastError, cudaError_t, (void))                                                      \
    X(cudaPeekAtLastError, cudaError_t, (void))                                                   \
    X(cudaRuntimeGetVersion, cudaError_t, (int *))                                                \
    X(cudaDriverGetVersion, cudaError_t, (int *))

#define GM_REAL_FIELD(name, ret, params) ret(*name) params;
typedef struct gm_real {
    GM_REAL_FUNCS(GM_REAL_FIELD)
} gm_real_t;
#undef GM_REAL_FIELD

/* Resolved pointers; NULL where not found (yet). */
extern gm_real_t gm_real;

/* Resolves every function. Returns the number found. Safe to call again (e.g. after a
 * libcudart was dlopen'ed later): only missing entries are looked up. */
int real_resolve(void);
/* Looks up one missing function again; returns it or NULL. */
void *real_retry(const char *name, void **slot);
/* What a hook returns when no real function exists: an error and one clear message. */
cudaError_t real_missing(const char *name);

/* Two driver-API calls (libcuda, CUresult 0 = success): the calling thread's current context
 * and that context's device. Both NULL until a libcuda with them is loaded (the runtime loads it
 * when it initializes); looked up again on each call until found. */
typedef int (*gm_cu_ctx_get_current_t)(void **ctx);
typedef int (*gm_cu_ctx_get_device_t)(int *device);
int real_driver_ctx(gm_cu_ctx_get_current_t *get_current, gm_cu_ctx_get_device_t *get_device);

/* The driver's virtual memory calls (libcuda; CUresult 0 = success), for GMSHIM_SEGMENTS=vmm.
 * Handles and addresses as the driver's 64-bit integers; `prop` and `desc` are its structs. */
typedef struct gm_vmm_api {
    int (*reserve)(unsigned long long *ptr, size_t size, size_t align, unsigned long long addr, unsigned long long flags);
    int (*address_free)(unsigned long long ptr, size_t size);
    int (*create)(unsigned long long *handle, size_t size, const void *prop, unsigned long long flags);
    int (*release)(unsigned long long handle);
    int (*map)(unsigned long long ptr, size_t size, size_t offset, unsigned long long handle, unsigned long long flags);
    int (*unmap)(unsigned long long ptr, size_t size);
    int (*set_access)(unsigned long long ptr, size_t size, const void *desc, size_t count);
    int (*granularity)(size_t *g, const void *prop, int option);
    int (*attribute)(int *value, int attr, int device);
    int (*can_access_peer)(int *can, int device, int peer);
} gm_vmm_api_t;
/* Fills api from the loaded libcuda: 0, or -1 when any function is missing. */
int real_driver_vmm(gm_vmm_api_t *api);

/* Calls real function `name`, resolving it again if it was missing; if there is none at all,
 * returns the error of real_missing. Use inside functions returning cudaError_t. */
#define REAL_CALL(name, ...)                                                                      \
    (likely(gm_real.name != NULL) || real_retry(#name, (void **)&gm_real.name)                   \
         ? gm_real.name(__VA_ARGS__)                                                              \
         : real_missing(#name))

#endif
