/* fakecuda.h — test-only API of the fake CUDA runtime (build/fake/libcudart.so.13).
 *
 * The fake stands in for libcudart.so.13 (CUDA 13.0) so that gmshim's tests run without a GPU.
 * Programs link against it with -L$(BUILD)/fake -lcudart and call the ordinary CUDA runtime API;
 * the functions below are extra hooks for tests.
 *
 * Model
 *  - Devices: FAKECUDA_DEVICES (default 1, at most 16), each with FAKECUDA_MEM bytes (default
 *    16G; plain bytes or a K/M/G/T, KiB/MiB/GiB/TiB suffix, case-insensitive). The current
 *    device is per thread (default 0). Properties: "Fake CUDA Device N", compute 9.0.
 *  - "Device" memory is host memory, so tests may read and write it directly. Requests of at
 *    least 1 MiB are rounded up to 2 MiB, 2 MiB-aligned, one MAP_NORESERVE mapping each (pages
 *    never touched cost no RAM); smaller ones are rounded up to 512 B and packed first-fit into
 *    shared 2 MiB chunks (a chunk is counted as 2 MiB while it exists). Capacity is accounted
 *    with those rounded sizes; going past it gives cudaErrorMemoryAllocation.
 *  - Streams are really asynchronous: each stream runs its operations in FIFO order on its own
 *    worker thread. Legacy default-stream semantics hold (blocking streams and per-thread
 *    default streams are ordered with the legacy stream; cudaStreamNonBlocking streams are not).
 *    cudaFree and cudaFreeHost wait for all queued work on every device first; cudaMemcpy and
 *    cudaMemset are queued on the legacy stream and waited for. The _ptsz entry points treat
 *    stream 0 as cudaStreamPerThread, as CUDA's per-thread-default-stream builds do.
 *  - Graph capture is strict: the "potentially unsafe" calls (cudaMalloc, cudaFree incl. NULL,
 *    cudaMallocHost, cudaHostAlloc, cudaFreeHost, cudaMallocManaged, cudaMallocPitch,
 *    cudaMalloc3D, cudaMemcpy, cudaMemset, cudaDeviceSynchronize, cudaStreamSynchronize,
 *    cudaStreamQuery, cudaEventQuery, cudaEventSynchronize, cudaEventRecord on the legacy
 *    stream) made while they are prohibited return cudaErrorStreamCaptureUnsupported (900), do
 *    nothing else, and invalidate the capture(s) that prohibited them (EndCapture then returns
 *    cudaErrorStreamCaptureInvalidated, 901). A call is prohibited when the calling thread's
 *    mode (cudaThreadExchangeStreamCaptureMode, default Global) is Global and some capture was
 *    begun in Global mode (any thread) or the thread itself has a non-Relaxed capture; in
 *    ThreadLocal mode only the thread's own non-Relaxed captures count (as documented for CUDA);
 *    in Relaxed mode nothing is prohibited. A capture counts until its EndCapture, even after
 *    it was invalidated. Using the legacy stream while a blocking stream captures returns
 *    cudaErrorStreamCaptureImplicit (906) and invalidates that capture.
 *  - Captured work becomes a graph: a plain list of operations replayed in order by
 *    cudaGraphLaunch. cudaStreamWaitEvent on an event recorded in a capture joins the waiting
 *    stream to the capture (fork/join); the graph is still one sequence.
 *  - After fork() every call in the child returns cudaErrorInitializationError.
 *
 * Limits: no kernels other than fakecuda_launch (cudaLaunchKernel is not provided), no arrays,
 * textures, 2D/3D copies, peer access or IPC opening; graphs cannot be built node by node or
 * updated; timings come from the host clock; priorities are stored, not used. See
 * tests/fake/README.md.
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Per-device counters. Events and queries are counted on the device of the stream or event
 * (the current device where there is none); unsafe_calls on the caller's current device;
 * captures_invalidated on the device of the capturing stream. */
struct fakecuda_stats {
    unsigned long long mallocs, frees;            /* successful cudaMalloc (also Pitch/3D) /
                                                     cudaFree(non-NULL) on the device */
    unsigned long long bytes_in_use, peak_bytes;  /* rounded, as counted against capacity */
    unsigned long long event_records, event_queries, event_syncs, stream_queries, device_syncs;
    unsigned long long unsafe_calls;              /* prohibited calls made during a capture */
    unsigned long long captures_invalidated;
    unsigned long long async_mallocs, async_frees, host_allocs, managed_allocs;
    unsigned long long stream_syncs;              /* cudaStreamSynchronize calls */
    unsigned long long stream_waits;              /* cudaStreamWaitEvent calls (on the stream's device) */
    unsigned long long event_creates;             /* cudaEventCreate(WithFlags) calls that made one */
};

/* Copies device `device`'s counters into *out (all zero for a device that does not exist). */
void fakecuda_get_stats(int device, struct fakecuda_stats *out);

/* Sets every counter of every device to 0, except bytes_in_use; peak_bytes restarts from it. */
void fakecuda_reset_stats(void);

/* Changes a device's capacity at run time; allocations already made stay. */
void fakecuda_set_capacity(int device, size_t bytes);

/* A test "kernel": enqueues on stream s an operation that, on the stream's worker, sleeps
 * delay_us microseconds and then calls fn(arg) (fn may be NULL). Later work on the stream waits
 * for it. While s captures, it is recorded into the graph instead. Stream handles as for any
 * call: 0 / cudaStreamLegacy / cudaStreamPerThread / a created stream. */
cudaError_t fakecuda_launch(cudaStream_t s, void (*fn)(void *), void *arg, unsigned delay_us);

/* Makes every later runtime call (and cudaGetLastError) return err, like a sticky device error
 * such as cudaErrorIllegalAddress; cudaSuccess clears it (a test-only reset). */
void fakecuda_set_sticky_error(cudaError_t err);

/* The next `count` cudaMalloc calls that get as far as allocating (valid arguments, size > 0,
 * not prohibited by a capture) fail with cudaErrorMemoryAllocation whatever the capacity. */
void fakecuda_fail_next_malloc(int count);

/* Blocks until every operation queued so far on every stream of every device has completed;
 * unlike cudaDeviceSynchronize it is never prohibited by a capture and counts nothing. */
void fakecuda_drain(void);

/* The devices given read-write access to the page of a driver-API mapping (cuMemSetAccess) that
 * holds p, one bit each; 0 when p is not mapped that way. */
unsigned fakecuda_vmm_access(const void *p);
/* The calling thread's driver context becomes one of its own (1) or the device's primary one (0):
 * streams the driver makes now belong to it. */
void fakecuda_private_context(int on);

/* The card as the fake NVML shows it (tests/fake/fake_nvml.c): a device's capacity, this process's
 * use of it (its context, FAKECUDA_CONTEXT, once made at the device's first memory call, and every
 * allocation) and whether the context exists; 0, or -1 for no such device. */
int fakecuda_card(int device, unsigned long long *capacity, unsigned long long *self_used, int *context_made);
/* Other process i of FAKECUDA_OTHERS="PID:SIZE[:NAME],..." (on device 0, whose capacity they
 * take): 0, or -1 past the last. */
int fakecuda_other(int i, unsigned *pid, unsigned long long *bytes, const char **name);
int fakecuda_device_count(void);

#ifdef __cplusplus
}
#endif

#endif
