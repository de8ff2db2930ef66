// The PyTorch bridge: attaches a trace tracker to PyTorch's CUDA caching allocator and hands each
// event to libgmshim.so's C entry point; empties PyTorch's cache for gmshim's trimmer; and, with
// PyTorch's cache off, has PyTorch's emptyCache call gmshim after it. Built against the installed
// torch's headers (make torch-bridge, or shim/torchload.c at first use); dlopen'ed by
// torchload.c. It must never throw into PyTorch, take a lock, touch Python or call CUDA: the
// tracker runs under PyTorch's allocator lock in whichever thread allocates.
#include <c10/cuda/CUDACachingAllocator.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
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

// getMemoryFraction(device) (torch 2.8 and later): the cap torch.cuda.set_per_process_memory_fraction
// or the per_process_memory_fraction key set, read at an OOM only (it asks the device's total).
template <class T, class = void> struct has_fraction : std::false_type {};
template <class T>
struct has_fraction<T, std::void_t<decltype(std::declval<T &>().getMemoryFraction(c10::DeviceIndex{}))>>
    : std::true_type {};

template <class T> double fraction_of(T *a, int device)
{
    if constexpr (has_fraction<T>::value) {
        try {
            return a ? a->getMemoryFraction(static_cast<c10::DeviceIndex>(device < 0 ? 0 : device)) : 0.0;
        } catch (...) {
            return 0.0;
        }
    } else {
        return 0.0;
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
    if (ev.action == GMSHIM_TORCH_OOM)
        ev.memory_fraction = fraction_of(cca::allocator.load(), ev.device);
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

namespace {

// ---- PyTorch's emptyCache, followed (its cache off: gmshim's pool is the cache to empty) -------
// emptyCache is a virtual of the allocator object (inline callers in the header: no symbol to
// interpose), and with PyTorch's cache off it makes no CUDA call gmshim could see. So its slot
// in the object's vtable is pointed at a function that calls PyTorch's own first, then gmshim.
// It relies on the Itanium C++ ABI (GCC and Clang on Linux): a pointer to a virtual member
// function holds the slot's byte offset (+1 on x86-64; on ARM the virtual flag is the low bit of
// the adjustment), and a member function takes `this` as its first argument.

using Pool = std::pair<unsigned long long, unsigned long long>; // MempoolId_t

void (*after_empty)(void);

template <class C, class... A> struct EmptySlot {
    static inline void (*original)(C *, A...);
    static void call(C *self, A... a)
    {
        original(self, a...);
        if (after_empty)
            after_empty();
    }
};

// The protection of the mapping holding addr, from /proc/self/maps; -1 when not found.
int protection_of(std::uintptr_t addr)
{
    FILE *f = std::fopen("/proc/self/maps", "re");
    if (!f)
        return -1;
    char line[512];
    int prot = -1;
    while (prot < 0 && std::fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        if (std::sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && addr >= lo && addr < hi)
            prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
                   (perms[2] == 'x' ? PROT_EXEC : 0);
    }
    std::fclose(f);
    return prot;
}

template <class C, class... A> int hook_slot(C *obj, void (C::*member)(A...))
{
    struct {
        std::uintptr_t ptr;
        std::ptrdiff_t adj;
    } rep;
    static_assert(sizeof member == sizeof rep, "not the Itanium ABI's member pointer");
    std::memcpy(&rep, &member, sizeof rep);
#if defined(__aarch64__) || defined(__arm__)
    if (!(rep.adj & 1) || (rep.adj >> 1))
        return -3;
    std::size_t offset = rep.ptr;
#else
    if (!(rep.ptr & 1) || rep.adj)
        return -3; // not a virtual, or in a secondary base: nothing this code knows how to follow
    std::size_t offset = rep.ptr - 1;
#endif
    void **vtable = *reinterpret_cast<void ***>(obj);
    void **slot = reinterpret_cast<void **>(reinterpret_cast<char *>(vtable) + offset);
    void *now = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    void *ours = reinterpret_cast<void *>(&EmptySlot<C, A...>::call);
    if (now == ours)
        return 0;
    if (!now)
        return -4;
    long page = sysconf(_SC_PAGESIZE);
    int prot = page > 0 ? protection_of(reinterpret_cast<std::uintptr_t>(slot)) : -1;
    if (prot < 0 || (prot & PROT_EXEC))
        return -5; // not found, or on a page of code: never made writable
    std::uintptr_t lo = reinterpret_cast<std::uintptr_t>(slot) & ~static_cast<std::uintptr_t>(page - 1);
    // Vtables live in RELRO, read-only after relocation: writable for the one store, then as before.
    if (!(prot & PROT_WRITE) &&
        mprotect(reinterpret_cast<void *>(lo), static_cast<std::size_t>(page), prot | PROT_WRITE) != 0)
        return -5;
    EmptySlot<C, A...>::original = reinterpret_cast<void (*)(C *, A...)>(now);
    __atomic_store_n(slot, ours, __ATOMIC_RELEASE); // a thread calling emptyCache sees one or the other
    if (!(prot & PROT_WRITE))
        mprotect(reinterpret_cast<void *>(lo), static_cast<std::size_t>(page), prot);
    return 0;
}

// emptyCache(MempoolId_t) in recent torch, emptyCache() in torch 2.1's: whichever this torch has.
template <class T, class = void> struct empty_takes_pool : std::false_type {};
template <class T>
struct empty_takes_pool<T, std::void_t<decltype(static_cast<void (T::*)(Pool)>(&T::emptyCache))>>
    : std::true_type {};

template <class T, class = void> struct empty_takes_nothing : std::false_type {};
template <class T>
struct empty_takes_nothing<T, std::void_t<decltype(static_cast<void (T::*)()>(&T::emptyCache))>>
    : std::true_type {};

template <class T> int hook_empty_cache(T *a)
{
    if constexpr (empty_takes_pool<T>::value)
        return hook_slot<T, Pool>(a, static_cast<void (T::*)(Pool)>(&T::emptyCache));
    else if constexpr (empty_takes_nothing<T>::value)
        return hook_slot<T>(a, static_cast<void (T::*)()>(&T::emptyCache));
    else
        return -3; // a signature this bridge does not know: the rest of the bridge still builds
}

} // namespace

// PyTorch's cache emptied, as torch.cuda.empty_cache() does it. 0; -1: no allocator object; -2:
// it threw (a CUDA error: the caller goes on).
extern "C" __attribute__((visibility("default"))) int gmshim_torch_bridge_empty_cache(void)
{
    cca::CUDAAllocator *a = cca::allocator.load();
    if (!a)
        return -1;
    try {
        cca::emptyCache();
    } catch (...) {
        return -2;
    }
    return 0;
}

// 0: PyTorch's emptyCache now calls `after` once it has returned; -1: no allocator object; -2:
// already hooked to another function; below: the vtable could not be followed or written.
extern "C" __attribute__((visibility("default"))) int gmshim_torch_bridge_hook_empty_cache(void (*after)(void))
{
    if (!after || (after_empty && after_empty != after))
        return -2;
    cca::CUDAAllocator *a = cca::allocator.load();
    if (!a)
        return -1;
    after_empty = after;
    int rc = hook_empty_cache(a);
    if (rc != 0)
        after_empty = nullptr;
    return rc;
}
