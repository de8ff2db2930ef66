// A stand-in for PyTorch's c10/cuda/CUDACachingAllocator.h: just what shim/torch/bridge.cpp uses,
// in the shapes torch 2.x has had, so that the real bridge compiles and runs in the unit tests
// without torch (tests/unit/test_torchload.c). GM_MOCK_OLD_EMPTY: emptyCache() declared in the
// CUDA allocator itself (torch 2.1-2.4); else emptyCache(MempoolId_t = {0, 0}) inherited from a
// device-generic base (torch 2.8 and later), with getMemoryFraction (torch 2.8 and later).
#pragma once
#include <atomic>
#include <functional>
#include <utility>

namespace c10 {
using CaptureId_t = unsigned long long;
using MempoolId_t = std::pair<CaptureId_t, CaptureId_t>;
using DeviceIndex = signed char;

struct DeviceAllocator {
    virtual ~DeviceAllocator() = default;
    virtual bool initialized() = 0;
#ifndef GM_MOCK_OLD_EMPTY
    virtual void emptyCache(MempoolId_t mempool_id = {0, 0}) = 0;
#endif
};

namespace cuda::CUDACachingAllocator {
struct TraceEntry {
    enum Action { ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP,
                  SEGMENT_UNMAP, SNAPSHOT, OOM, USER_DEFINED };
    Action action_;
    int device_;
    long long addr_;
    void *stream_;
    long long size_;
    MempoolId_t mempool_;
};
using AllocatorTraceTracker = std::function<void(const TraceEntry &)>;

class CUDAAllocator : public DeviceAllocator {
  public:
    virtual void attachAllocatorTraceTracker(AllocatorTraceTracker tracker) = 0;
#ifdef GM_MOCK_OLD_EMPTY
    virtual void emptyCache() = 0;
#else
    virtual double getMemoryFraction(c10::DeviceIndex device) = 0;
#endif
};

extern std::atomic<CUDAAllocator *> allocator;

inline CUDAAllocator *get() { return allocator.load(); }
#ifdef GM_MOCK_OLD_EMPTY
inline void emptyCache() { get()->emptyCache(); }
#else
inline void emptyCache(MempoolId_t mempool_id = {0, 0}) { get()->emptyCache(mempool_id); }
#endif
} // namespace cuda::CUDACachingAllocator
} // namespace c10
