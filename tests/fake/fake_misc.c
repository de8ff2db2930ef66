/* fake_misc.c — device management, device properties and attributes, versions, error
 * names and strings, and cudaDeviceReset for the fake CUDA runtime. */
#include "fake_internal.h"

#include <stdio.h>
#include <string.h>

static const struct { cudaError_t code; const char *name, *text; } fk_errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorCudartUnloading, "cudaErrorCudartUnloading", "driver shutting down"},
    {cudaErrorInvalidPitchValue, "cudaErrorInvalidPitchValue", "invalid pitch argument"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorIllegalState, "cudaErrorIllegalState",
     "the operation cannot be performed in the present state"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources",
     "too many resources requested for launch"},
    {cudaErrorAssert, "cudaErrorAssert", "device-side assert triggered"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotPermitted, "cudaErrorNotPermitted", "operation not permitted"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureMerge, "cudaErrorStreamCaptureMerge",
     "operation would result in a merge of separate capture sequences"},
    {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched",
     "capture was not ended in the same stream as it began"},
    {cudaErrorStreamCaptureUnjoined, "cudaErrorStreamCaptureUnjoined",
     "capturing stream has unjoined work"},
    {cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation",
     "dependency created on uncaptured work in another stream"},
    {cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {cudaErrorCapturedEvent, "cudaErrorCapturedEvent",
     "operation not permitted on an event last recorded in a capturing stream"},
    {cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {cudaErrorTimeout, "cudaErrorTimeout", "wait operation timed out"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

const char *cudaGetErrorName(cudaError_t error)
{
    for (size_t i = 0; i < sizeof fk_errors / sizeof fk_errors[0]; i++)
        if (fk_errors[i].code == error)
            return fk_errors[i].name;
    return "unrecognized error code";
}

const char *cudaGetErrorString(cudaError_t error)
{
    for (size_t i = 0; i < sizeof fk_errors / sizeof fk_errors[0]; i++)
        if (fk_errors[i].code == error)
            return fk_errors[i].text;
    return "unrecognized error code";
}

cudaError_t cudaDriverGetVersion(int *driverVersion)
{
    FK_ENTER();
    if (!driverVersion)
        return fk_leave(cudaErrorInvalidValue);
    *driverVersion = 13000;
    return fk_leave(cudaSuccess);
}

cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
    FK_ENTER();
    if (!runtimeVersion)
        return fk_leave(cudaErrorInvalidValue);
    *runtimeVersion = 13000;
    return fk_leave(cudaSuccess);
}

cudaError_t cudaGetDeviceCount(int *count)
{
    FK_ENTER();
    if (!count)
        return fk_leave(cudaErrorInvalidValue);
    *count = fk_ndev;
    return fk_leave(cudaSuccess);
}

cudaError_t cudaSetDevice(int device)
{
    FK_ENTER();
    if (device < 0 || device >= fk_ndev)
        return fk_leave(cudaErrorInvalidDevice);
    fk_cur_dev = device;
    return fk_leave(cudaSuccess);
}

cudaError_t cudaGetDevice(int *device)
{
    FK_ENTER();
    if (!device)
        return fk_leave(cudaErrorInvalidValue);
    *device = fk_cur_dev;
    return fk_leave(cudaSuccess);
}

cudaError_t cudaInitDevice(int device, unsigned int deviceFlags, unsigned int flags)
{
    FK_ENTER();
    return fk_leave(device < 0 || device >= fk_ndev ? cudaErrorInvalidDevice : cudaSuccess);
}

cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
    FK_ENTER();
    return fk_leave(cudaSuccess);
}

cudaError_t cudaGetDeviceFlags(unsigned int *flags)
{
    FK_ENTER();
    if (!flags)
        return fk_leave(cudaErrorInvalidValue);
    *flags = cudaDeviceMapHost;
    return fk_leave(cudaSuccess);
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    FK_ENTER();
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = -5;
    return fk_leave(cudaSuccess);
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    FK_ENTER();
    if (!prop)
        return fk_leave(cudaErrorInvalidValue);
    if (device < 0 || device >= fk_ndev)
        return fk_leave(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "Fake CUDA Device %d", device);
    prop->uuid.bytes[0] = (char)0xfa;
    prop->uuid.bytes[15] = (char)device;
    prop->totalGlobalMem = fk_dev[device].capacity;
    prop->sharedMemPerBlock = 48 << 10;
    prop->regsPerBlock = 65536;
    prop->warpSize = 32;
    prop->memPitch = 2147483647;
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 2147483647;
    prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
    prop->totalConstMem = 64 << 10;
    prop->major = 9;
    prop->minor = 0;
    prop->textureAlignment = 512;
    prop->texturePitchAlignment = 32;
    prop->multiProcessorCount = 132;
    prop->canMapHostMemory = 1;
    prop->surfaceAlignment = 512;
    prop->concurrentKernels = 1;
    prop->ECCEnabled = 1;
    prop->pciBusID = 0x18 + device;
    prop->asyncEngineCount = 4;
    prop->unifiedAddressing = 1;
    prop->memoryBusWidth = 6144;
    prop->l2CacheSize = 50 << 20;
    prop->maxThreadsPerMultiProcessor = 2048;
    prop->streamPrioritiesSupported = 1;
    prop->globalL1CacheSupported = prop->localL1CacheSupported = 1;
    prop->sharedMemPerMultiprocessor = 228 << 10;
    prop->regsPerMultiprocessor = 65536;
    prop->managedMemory = 1;
    prop->concurrentManagedAccess = 1;
    prop->computePreemptionSupported = 1;
    prop->cooperativeLaunch = 1;
    prop->sharedMemPerBlockOptin = 227 << 10;
    prop->maxBlocksPerMultiProcessor = 32;
    prop->memoryPoolsSupported = 1;
    prop->clusterLaunch = 1;
    return fk_leave(cudaSuccess);
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    FK_ENTER();
    if (!value)
        return fk_leave(cudaErrorInvalidValue);
    if (device < 0 || device >= fk_ndev)
        return fk_leave(cudaErrorInvalidDevice);
    int v;
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: v = 1024; break;
    case cudaDevAttrMaxBlockDimX: case cudaDevAttrMaxBlockDimY: v = 1024; break;
    case cudaDevAttrMaxBlockDimZ: v = 64; break;
    case cudaDevAttrMaxGridDimX: v = 2147483647; break;
    case cudaDevAttrMaxGridDimY: case cudaDevAttrMaxGridDimZ: v = 65535; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: v = 48 << 10; break;
    case cudaDevAttrWarpSize: v = 32; break;
    case cudaDevAttrMaxRegistersPerBlock: v = 65536; break;
    case cudaDevAttrClockRate: v = 1980000; break;
    case cudaDevAttrMultiProcessorCount: v = 132; break;
    case cudaDevAttrIntegrated: v = 0; break;
    case cudaDevAttrCanMapHostMemory: v = 1; break;
    case cudaDevAttrComputeMode: v = cudaComputeModeDefault; break;
    case cudaDevAttrConcurrentKernels: v = 1; break;
    case cudaDevAttrEccEnabled: v = 1; break;
    case cudaDevAttrPciBusId: v = 0x18 + device; break;
    case cudaDevAttrPciDeviceId: case cudaDevAttrPciDomainId: v = 0; break;
    case cudaDevAttrMemoryClockRate: v = 3201000; break;
    case cudaDevAttrGlobalMemoryBusWidth: v = 6144; break;
    case cudaDevAttrL2CacheSize: v = 50 << 20; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: v = 2048; break;
    case cudaDevAttrAsyncEngineCount: v = 4; break;
    case cudaDevAttrUnifiedAddressing: v = 1; break;
    case cudaDevAttrComputeCapabilityMajor: v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: v = 0; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: v = 228 << 10; break;
    case cudaDevAttrManagedMemory: v = 1; break;
    case cudaDevAttrConcurrentManagedAccess: v = 1; break;
    case cudaDevAttrCooperativeLaunch: v = 1; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: v = 227 << 10; break;
    case cudaDevAttrMemoryPoolsSupported: v = 1; break;
    default: return fk_leave(cudaErrorInvalidValue);
    }
    *value = v;
    return fk_leave(cudaSuccess);
}

/* Waits for the device's work, then destroys its streams, events and memory. */
cudaError_t cudaDeviceReset(void)
{
    FK_ENTER();
    int dev = fk_cur_dev;
    fk_wait_streams(dev);
    fk_device_reset_streams(dev);
    fk_device_reset_memory(dev);
    return fk_leave(cudaSuccess);
}
