/* Graph capture: which captures are under way (so the pool makes no unsafe call and serves
 * their allocations from a private heap), and which graphs and instances still use the memory
 * of a finished capture (the heap goes back to the general pool only when all are destroyed). */
#ifndef GM_CAPTURE_H
#define GM_CAPTURE_H

#include "devtypes.h"

#include <cuda_runtime_api.h>

/* Around the runtime's cudaStreamBeginCapture(ToGraph): no fence may query or record on the stream
 * between the runtime's begin and capture_begun (a query of a capturing stream invalidates its
 * capture). capture_beginning holds the device's fences off (its fence lock, or NULL where the
 * device has no pool yet); capture_begin_done lets them go, counting the capture first when the
 * runtime began it (err: its result), and calls capture_begun. */
gm_device_t *capture_beginning(cudaStream_t stream);
void capture_begin_done(gm_device_t *gate, cudaError_t err, cudaStream_t stream, enum cudaStreamCaptureMode mode,
                        cudaGraph_t target);
/* After a successful cudaStreamBeginCapture(ToGraph); target is the graph of ToGraph or NULL. */
void capture_begun(cudaStream_t stream, enum cudaStreamCaptureMode mode, cudaGraph_t target);
/* After cudaStreamEndCapture returned err with *graph. */
void capture_ended(cudaStream_t stream, cudaError_t err, cudaGraph_t graph);
void capture_instantiated(cudaGraph_t graph, cudaGraphExec_t exec);
void capture_graph_destroyed(cudaGraph_t graph);
void capture_exec_destroyed(cudaGraphExec_t exec);
/* cudaDeviceReset: drops every capture and graph of the device (before device_forget). */
void capture_device_reset(gm_device_t *d);
/* The device a stream belongs to: the one current when it was created through the hooks, else
 * the current device. Never asks the runtime (that would invalidate a capture of the stream). */
int capture_stream_device(cudaStream_t stream);
void capture_stream_created(cudaStream_t stream, int device);
void capture_stream_destroyed(cudaStream_t stream);

void capture_fork_prepare(void);
void capture_fork_release(void);

#endif
