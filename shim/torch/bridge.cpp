// The PyTorch bridge: attaches a trace tracker to PyTorch's CUDA caching allocator and hands each
// event to libgmshim.so's C entry point. Built against the installed torch's headers (make
// torch-bridge, or shim/torchload.c at first use); dlopen'ed by torchload.c. It must never throw
// into PyTorch, take a lock, touch Python or call CUDA: the tracker runs under PyTorch's
// allocator lock in whichever thread allocates.
#include <c10/cuda/CUDACachingAllocator.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "gmshim.h"

namespace {

namespace cca = c10::cuda::CUDACachingAllocator;
using Entry = cca::TraceEntry;

// TraceEntry grew fields over torch 2.x (device_, mempool_): read each only where it exists.
template <class T, class = void> struct has_device : std::false_type {};
template <class T> struct has_device<T, std::void_t<decltype(std::declval<T>().device_)>> : std::true_type {};
template <class T, class = void> struct has_mempool : std::false_type {};
template <class T> struct has_mempool<T, std::void_t<decltype(std::declval<T>().mempool_)>> : std::true_type {};

template <class T> int device_of(const T &e)
{
    if constexpr (has_device<T>::value)
        return static_cast<int>(e.device_);
    else
        return -1;
}

template <class T> unsigned pool_of(const T &e)
{
    if constexpr (has_mempool<T>::value) {
        unsigned long long id = e.mempool_.first ? e.mempool_.first : e.mempool_.second;
        return static_cast<unsigned>(id);
    } else {
        return 0;
    }
}

int action_of(Entry::Action a)
{
    switch (a) {
    case Entry::ALLOC: return GMSHIM_TORCH_ALLOC;
    case Entry::FREE_REQUESTED: return GMSHIM_TORCH_FREE_REQUESTED;
    case Entry::FREE_COMPLETED: return GMSHIM_TORCH_FREE_COMPLETED;
    case Entry::SEGMENT_ALLOC: return GMSHIM_TORCH_SEGMENT_ALLOC;
    case Entry::SEGMENT_FREE: return GMSHIM_TORCH_SEGMENT_FREE;
    case Entry::SEGMENT_MAP: return GMSHIM_TORCH_SEGMENT_MAP;
    case Entry::SEGMENT_UNMAP: return GMSHIM_TORCH_SEGMENT_UNMAP;
    case Entry::OOM: return GMSHIM_TORCH_OOM;
    default: return 0; // SNAPSHOT, USER_DEFINED, later ones: not memory
    }
}

int (*forward)(const gmshim_torch_event_t *);

void on_trace(const Entry &e) noexcept
{
    gmshim_torch_event_t ev{};
    ev.size = sizeof ev;
    ev.action = action_of(e.action_);
    if (!ev.action)
        return;
    ev.device = device_of(e);
    ev.pool = pool_of(e);
    ev.addr = static_cast<unsigned long long>(e.addr_);
    ev.bytes = static_cast<unsigned long long>(e.size_);
    ev.stream = static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(e.stream_));
    forward(&ev);
}

} // namespace

// 0: attached; -1: no allocator object; -2: the allocator refused (another backend) or threw.
extern "C" __attribute__((visibility("default"))) int gmshim_torch_bridge_attach(
    int (*event)(const gmshim_torch_event_t *))
{
    if (!event || forward)
        return forward == event && event ? 0 : -2;
    cca::CUDAAllocator *a = cca::allocator.load();
    if (!a)
        return -1;
    forward = event;
    try {
        a->attachAllocatorTraceTracker([](const Entry &e) { on_trace(e); });
    } catch (...) {
        forward = nullptr;
        return -2;
    }
    return 0;
}
