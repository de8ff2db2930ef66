/* fake_internal.h — private declarations shared by the fake CUDA runtime's source files.
 * All shared state lives behind one mutex (fk_mu) and one condition variable (fk_cv) that is
 * broadcast whenever a stream makes progress or the set of streams changes. */
#ifndef FAKE_INTERNAL_H
#define FAKE_INTERNAL_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "../fakecuda.h"

#define FK_MAX_DEV     16
#define FK_PAGE        ((size_t)2 << 20)   /* 2 MiB: large-allocation granule and chunk size */
#define FK_BIG_MIN     ((size_t)1 << 20)   /* requests of at least 1 MiB get their own mapping */
#define FK_SLOT        ((size_t)512)       /* small-allocation granule */
#define FK_CHUNK_SLOTS (FK_PAGE / FK_SLOT)

/* ---- handles: every stream, event, graph and exec is registered in a pointer hash --------- */
enum fk_type { FK_T_STREAM = 1, FK_T_EVENT, FK_T_GRAPH, FK_T_EXEC };
struct fk_obj {                 /* first member of every handle object */
    struct fk_obj *hnext;
    int type;
};
void fk_obj_add(void *obj, int type);
void fk_obj_del(void *obj);
void *fk_obj_find(const void *p, int type);         /* p if registered with that type, else NULL */
void fk_obj_foreach(int type, void (*fn)(void *obj, void *arg), void *arg);

/* ---- operations and graph nodes ------------------------------------------------------------ */
enum fk_op_kind { FK_OP_KERNEL, FK_OP_HOSTFN, FK_OP_MEMSET, FK_OP_MEMCPY, FK_OP_EVENT,
                  FK_OP_FREE, FK_OP_MALLOC, FK_OP_WAIT };
struct fk_node {                /* what one operation does; a graph is an array of these */
    enum fk_op_kind kind;
    void (*fn)(void *);
    void *arg;
    unsigned delay_us;
    void *dst;
    const void *src;
    size_t bytes;
    int value;
    struct CUevent_st *event;   /* FK_OP_EVENT (never in graphs) */
    unsigned long long event_gen;
    void *ptr;                  /* FK_OP_FREE / FK_OP_MALLOC */
};
struct fk_dep {                 /* satisfied once stream (ptr, id) has completed >= count ops */
    struct CUstream_st *stream;
    unsigned long long id, count;
};
struct fk_op {
    struct fk_op *next;
    struct fk_node node;
    struct fk_dep *deps;
    int ndeps;
};

/* ---- streams, events, captures, graphs ----------------------------------------------------- */
enum fk_stream_kind { FK_S_USER, FK_S_LEGACY, FK_S_PERTHREAD };
struct CUstream_st {
    struct fk_obj obj;
    unsigned long long id;
    int device, kind, priority, destroyed, has_worker;
    unsigned flags;
    unsigned long long enqueued, completed;
    struct fk_op *head, *tail;
    struct fk_capture *capture;   /* capture this stream belongs to, or NULL */
    struct CUstream_st *dnext;    /* the device's list of streams */
};

struct CUevent_st {
    struct fk_obj obj;
    unsigned flags;
    int device, recorded, pending, destroyed, timed;
    struct CUstream_st *stream;   /* completion: stream (ptr, id) completed >= target */
    unsigned long long stream_id, target, gen;
    unsigned long long capture_id; /* nonzero: last recorded inside this capture */
    struct timespec time;
};

struct fk_gmem {                /* allocations made and freed inside a capture: the graph's */
    int refs;
    size_t n, cap;
    void **ptrs;
};
struct CUgraph_st {
    struct fk_obj obj;
    struct fk_node *nodes;
    size_t n, cap;
    struct fk_gmem *gmem;
};
struct CUgraphExec_st {
    struct fk_obj obj;
    struct fk_node *nodes;
    size_t n;
    struct fk_gmem *gmem;
};

struct fk_cap_alloc { void *ptr; int freed; };
struct fk_capture {
    struct fk_capture *next;
    unsigned long long id;
    enum cudaStreamCaptureMode mode;
    pthread_t thread;
    int device, invalidated, own_graph;
    struct CUstream_st *origin;
    struct CUgraph_st *graph;
    struct fk_cap_alloc *allocs;
    size_t nallocs, cap_allocs;
};

struct CUmemPoolHandle_st {
    int device;
    unsigned long long release_threshold;
};

/* ---- memory -------------------------------------------------------------------------------- */
enum fk_mem_kind { FK_M_DEVICE, FK_M_MANAGED, FK_M_ASYNC, FK_M_HOST };
enum fk_region_type { FK_R_BIG, FK_R_CHUNK, FK_R_HOST, FK_R_VMM };
struct fk_region;
struct fk_alloc {
    char *base;
    size_t size;                /* rounded, as counted against capacity */
    int kind, free_pending;
    struct fk_region *region;
};

/* ---- devices ------------------------------------------------------------------------------- */
struct fk_device {
    size_t capacity;
    size_t context;             /* FAKECUDA_CONTEXT, charged at the device's first memory call */
    int context_made;
    size_t others;              /* FAKECUDA_OTHERS' bytes (device 0): other processes' */
    struct fakecuda_stats st;   /* st.bytes_in_use is the authoritative in-use count */
    struct CUstream_st *legacy;
    struct CUstream_st *streams;
    struct fk_region *chunks;   /* small-allocation chunks, oldest first */
    struct CUmemPoolHandle_st pool;
};

extern pthread_mutex_t fk_mu;
extern pthread_cond_t fk_cv;
extern int fk_ndev;
extern struct fk_device fk_dev[FK_MAX_DEV];
extern struct fk_capture *fk_captures;
extern int fk_fail_mallocs;
extern _Thread_local int fk_cur_dev;
extern _Thread_local enum cudaStreamCaptureMode fk_thread_mode;

/* fk_enter: init, fork/sticky checks; on success returns cudaSuccess with fk_mu held.
 * fk_leave: unlock, record a failure as the thread's last error, return err. */
cudaError_t fk_enter(void);
cudaError_t fk_leave(cudaError_t err);
cudaError_t fk_set_error(cudaError_t err);     /* record as last error (not NotReady) */
/* The driver's mapping call of that name (fake_vmm.c), for cuGetProcAddress; NULL for another. */
void *fk_vmm_proc(const char *name);
/* The stream API's bodies, shared by the runtime's and the driver's entry points (fake_driver.c). */
cudaError_t fk_stream_create(cudaStream_t *pStream, unsigned flags, int priority);
cudaError_t fk_stream_destroy(cudaStream_t stream);

#define FK_ENTER() do { cudaError_t fk_e_ = fk_enter(); if (fk_e_ != cudaSuccess) return fk_e_; } while (0)

/* streams (fake_stream.c) */
struct CUstream_st *fk_stream_get(cudaStream_t h, int ptsz, cudaError_t *err);
int fk_stream_blocking(const struct CUstream_st *s);
cudaError_t fk_submit(struct CUstream_st *s, const struct fk_node *n, const struct fk_dep *extra);
int fk_dep_done(const struct fk_dep *d);
void fk_wait_dep(const struct fk_dep *d);
void fk_wait_streams(int device);               /* all work queued so far; device -1: all */
void fk_stream_destroy_locked(struct CUstream_st *s);
void fk_event_free_locked(struct CUevent_st *e);
void fk_device_reset_streams(int device);

/* memory (fake_mem.c) */
struct fk_alloc *fk_find_alloc(const void *p);  /* live allocation containing p, or NULL */
cudaError_t fk_dev_alloc(int device, size_t n, int kind, void **out);
void fk_dev_release(struct fk_alloc *a);
void fk_free_ptr_if_live(void *p);              /* for deferred frees: ignore if already gone */
void fk_device_reset_memory(int device);
void fk_make_context(int device);           /* the device's context, once (fk_mu held) */
int fk_charge(int device, size_t n);             /* 0, or -1 when over capacity */
void fk_uncharge(int device, size_t n);
/* A mapping of the driver's virtual memory calls (fake_vmm.c): a region of device memory that
 * cudaFree refuses; neighbouring mappings form one range for copies. */
struct fk_region *fk_region_new_vmm(int device, char *base, size_t len);
void fk_region_free_vmm(struct fk_region *r);
void fk_vmm_reset(int device);                  /* cudaDeviceReset: every mapping, handle, range */

/* capture (fake_capture.c) */
cudaError_t fk_check_unsafe(void);              /* 900 + invalidation when prohibited */
void fk_capture_invalidate(struct fk_capture *c);
struct fk_capture *fk_capture_find(unsigned long long id);
void fk_capture_abort_stream(struct CUstream_st *s);   /* the stream is going away */
void fk_capture_add_alloc(struct fk_capture *c, void *p);   /* cudaMallocAsync in capture */
int fk_capture_take_free(struct fk_capture *c, void *p);    /* 1: p was allocated in c */
cudaError_t fk_graph_append(struct CUgraph_st *g, const struct fk_node *n);
void fk_gmem_release(struct fk_gmem *gm);

/* _ptsz / _ptds entry points: the real library exports them but the header only declares them
 * under CUDA_API_PER_THREAD_DEFAULT_STREAM (as macros over the plain names). */
cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream);
cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                         cudaStream_t stream);
cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream);
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
                                 enum cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count);
cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags);
cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t hStream, unsigned int *flags);
cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t hStream, int *device);
cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t hStream, int *priority);
cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData);
cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream,
                                          unsigned int flags);
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
                                               const cudaGraphNode_t *dependencies,
                                               const cudaGraphEdgeData *dependencyData,
                                               size_t numDependencies,
                                               enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph);
cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream,
                                       enum cudaStreamCaptureStatus *pCaptureStatus);
cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream,
                                          enum cudaStreamCaptureStatus *captureStatus_out,
                                          unsigned long long *id_out, cudaGraph_t *graph_out,
                                          const cudaGraphNode_t **dependencies_out,
                                          const cudaGraphEdgeData **edgeData_out,
                                          size_t *numDependencies_out);
cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                                cudaGraphInstantiateParams *instantiateParams);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream);
cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream);

#endif
