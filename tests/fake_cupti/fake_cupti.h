/* fake_cupti.h — test API of the fake CUPTI and the fake CUDA driver, which let gmshim's CUPTI
 * observation be tested without a GPU. Test code only: nothing here exists in the real libraries.
 *
 * $(BUILD)/fake_cupti/cuda/lib64/libcupti.so.13 (fake_cupti.c): cuptiSubscribe(_v2),
 *   cuptiUnsubscribe, cuptiEnableCallback, cuptiGetResultString, cuptiGetDeviceId. One subscriber;
 *   only the driver-API callbacks enabled for it are delivered. At subscribe it attaches to a
 *   loaded libcuda.so.1 (the fake driver), as the real one hooks into the real driver.
 *   FAKE_CUPTI_BUSY=<name>: cuptiSubscribe fails with CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
 *   (and cuptiSubscribe_v2 names <name> as the other subscriber), as under nsys;
 *   FAKE_CUPTI_FAIL=<code>: cuptiSubscribe fails with that CUptiResult.
 *
 * $(BUILD)/fake_cupti/libcuda.so.1 (fake_driver.c): the driver entry points gmshim watches
 *   (cuMemAlloc_v2, cuMemFree_v2, pitch, managed, async, host, cuMemCreate/Map/Unmap/Release,
 *   cuMemAddressReserve/Free) plus cuInit, cuMemGetInfo_v2 and cuCtxGetDevice. Each call issues
 *   the ENTER and EXIT callbacks with the real parameter structs. Addresses are made up (never
 *   dereference them); each device has FAKECUDA_MEM bytes (default 16G) and a request past that
 *   fails with CUDA_ERROR_OUT_OF_MEMORY. The context of a call encodes the thread's device
 *   (fake_cuda_set_device). cuInit, and the first call of any entry point, loads
 *   CUDA_INJECTION64_PATH (RTLD_GLOBAL) and calls its InitializeInjection, as the real driver does.
 *   It also defines cudaMalloc and cudaFree, which wrap the next ones (the fake runtime) in
 *   cuMemAlloc_v2 / cuMemFree_v2 callbacks: the runtime calling the driver. Link it before
 *   -lcudart for that.
 *
 * $(BUILD)/fake_cupti/libfakeblas.so (fake_blas.c): a "library with its own private runtime"
 *   that allocates through the driver, like cuBLAS does for its workspace.
 */
#ifndef FAKE_CUPTI_H
#define FAKE_CUPTI_H

#include <cuda.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- libcuda.so.1 ---- */
/* The calling thread's device from now on (the context of its calls). */
void fake_cuda_set_device(int dev);
/* Callbacks (enter and exit each count) that a subscriber received for callback id `cbid`. */
unsigned long long fake_cuda_delivered(unsigned cbid);
/* Bytes of device `dev` in use through the driver entry points. */
size_t fake_cuda_in_use(int dev);

/* Between the two fakes: the fake CUPTI gives the driver the function that delivers a
 * callback (it returns 1 when a subscriber received it); NULL detaches. */
struct CUpti_CallbackData;
typedef int (*fake_cupti_dispatch_fn)(unsigned cbid, const void *callback_data);
void fake_cuda_attach_cupti(fake_cupti_dispatch_fn fn);

/* ---- libfakeblas.so ---- */
/* A workspace from the driver (cuMemAlloc_v2), NULL on failure. */
void *fakeblas_workspace(size_t bytes);
/* cuMemFree_v2; returns the CUresult. */
int fakeblas_release(void *p);
/* Physical memory mapped at a reserved address (cuMemCreate, cuMemAddressReserve, cuMemMap);
 * 0 on failure. */
CUdeviceptr fakeblas_vmm_map(size_t bytes, CUmemGenericAllocationHandle *handle);
/* cuMemUnmap, cuMemRelease, cuMemAddressFree. */
void fakeblas_vmm_unmap(CUdeviceptr p, size_t bytes, CUmemGenericAllocationHandle handle);

#ifdef __cplusplus
}
#endif

#endif
