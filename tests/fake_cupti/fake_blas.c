/* libfakeblas.so: a library that allocates through the driver itself, as cuBLAS, cuDNN and NCCL
 * do with their private runtime, so that gmshim's tests can check which library is named as
 * the requester. Test code only. */
#include "fake_cupti.h"

#include <string.h>

void *fakeblas_workspace(size_t bytes)
{
    CUdeviceptr p = 0;
    CUresult r = cuMemAlloc(&p, bytes);
    return r == CUDA_SUCCESS ? (void *)(uintptr_t)p : NULL;
}

int fakeblas_release(void *p)
{
    return (int)cuMemFree((CUdeviceptr)(uintptr_t)p);
}

CUdeviceptr fakeblas_vmm_map(size_t bytes, CUmemGenericAllocationHandle *handle)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUdevice dev = 0;
    cuCtxGetDevice(&dev);
    prop.location.id = dev;
    CUdeviceptr va = 0;
    if (cuMemCreate(handle, bytes, &prop, 0) != CUDA_SUCCESS)
        return 0;
    if (cuMemAddressReserve(&va, bytes, 0, 0, 0) != CUDA_SUCCESS ||
        cuMemMap(va, bytes, 0, *handle, 0) != CUDA_SUCCESS) {
        cuMemRelease(*handle);
        return 0;
    }
    return va;
}

void fakeblas_vmm_unmap(CUdeviceptr p, size_t bytes, CUmemGenericAllocationHandle handle)
{
    cuMemUnmap(p, bytes);
    cuMemRelease(handle);
    cuMemAddressFree(p, bytes);
}
