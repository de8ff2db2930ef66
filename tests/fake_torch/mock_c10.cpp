// The allocator object of the stand-in libc10_cuda (tests/fake_torch): counts its emptyCache
// calls (with the pool id it was given), says its memory fraction and hands events to the
// attached trackers. Built with GM_MOCK_EXPANDABLE (and the fake CUDA runtime) it also maps
// memory as PyTorch's expandable segments do: the driver's mapping calls, obtained through
// cudaGetDriverEntryPointByVersion, then SEGMENT_MAP / SEGMENT_UNMAP to the trackers.
#include <c10/cuda/CUDACachingAllocator.h>

#include <cstdlib>
#include <vector>

namespace cca = c10::cuda::CUDACachingAllocator;

namespace {
struct Native final : cca::CUDAAllocator {
    std::vector<cca::AllocatorTraceTracker> trackers;
    int empties = 0;
    unsigned long long last_pool = ~0ull;
    double fraction = 1.0;
    bool initialized() override { return true; }
    void attachAllocatorTraceTracker(cca::AllocatorTraceTracker t) override { trackers.push_back(std::move(t)); }
#ifdef GM_MOCK_OLD_EMPTY
    void emptyCache() override { empties++, last_pool = 0; }
#else
    void emptyCache(c10::MempoolId_t id) override { empties++, last_pool = id.first + id.second; }
    double getMemoryFraction(c10::DeviceIndex) override { return fraction; }
#endif
};
Native *native;
} // namespace

std::atomic<cca::CUDAAllocator *> cca::allocator;

extern "C" __attribute__((visibility("default"))) void mock_init(void)
{
    native = new Native;
    cca::allocator.store(native);
}

// What torch.cuda.empty_cache() does: the inline call through the allocator object.
extern "C" __attribute__((visibility("default"))) void mock_empty_cache(void) { cca::emptyCache(); }

extern "C" __attribute__((visibility("default"))) int mock_empties(void) { return native->empties; }

extern "C" __attribute__((visibility("default"))) unsigned long long mock_last_pool(void) { return native->last_pool; }

extern "C" __attribute__((visibility("default"))) void mock_event(int action, long long addr, long long size)
{
    cca::TraceEntry e{static_cast<cca::TraceEntry::Action>(action), 0, addr, nullptr, size, {0, 0}};
    for (auto &t : native->trackers)
        t(e);
}

// torch.cuda.set_per_process_memory_fraction(f).
extern "C" __attribute__((visibility("default"))) void mock_set_fraction(double f) { native->fraction = f; }

#ifdef GM_MOCK_EXPANDABLE
#include <cuda.h>
#include <cuda_runtime_api.h>

namespace {
template <class F> F entry(const char *name)
{
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        return nullptr;
    return reinterpret_cast<F>(fn);
}

struct Mapped {
    CUdeviceptr at;
    size_t size;
    CUmemGenericAllocationHandle handle;
};
CUdeviceptr reserved_base;
std::vector<Mapped> maps; // in address order from reserved_base
constexpr size_t kReserve = 1ull << 32; // MOCK_C10_RESERVE_GIB: another size
} // namespace

// One more range at the end of the one expandable segment, as PyTorch's ExpandableSegment::map:
// the range reserved once, a handle created and mapped, access set, then SEGMENT_MAP. Returns
// the range's address, 0 when the driver refused.
extern "C" __attribute__((visibility("default"))) unsigned long long mock_expandable_map(unsigned long long bytes)
{
    static auto reserve = entry<decltype(&cuMemAddressReserve)>("cuMemAddressReserve");
    static auto create = entry<decltype(&cuMemCreate)>("cuMemCreate");
    static auto map = entry<decltype(&cuMemMap)>("cuMemMap");
    static auto access = entry<decltype(&cuMemSetAccess)>("cuMemSetAccess");
    if (!reserve || !create || !map || !access)
        return 0;
    const char *gib = getenv("MOCK_C10_RESERVE_GIB");
    size_t span = gib && atoi(gib) > 0 ? static_cast<size_t>(atoi(gib)) << 30 : kReserve;
    if (!reserved_base && reserve(&reserved_base, span, 0, 0, 0) != CUDA_SUCCESS)
        return 0;
    CUdeviceptr at = maps.empty() ? reserved_base : maps.back().at + maps.back().size;
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h;
    if (create(&h, bytes, &prop, 0) != CUDA_SUCCESS)
        return 0;
    if (map(at, bytes, 0, h, 0) != CUDA_SUCCESS)
        return 0;
    CUmemAccessDesc desc{};
    desc.location = prop.location;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    access(at, bytes, &desc, 1);
    maps.push_back({at, bytes, h});
    mock_event(cca::TraceEntry::SEGMENT_MAP, static_cast<long long>(at), static_cast<long long>(bytes));
    return at;
}

// The last range unmapped and released (PyTorch's release of a free tail), then SEGMENT_UNMAP.
extern "C" __attribute__((visibility("default"))) int mock_expandable_unmap_last(void)
{
    static auto unmap = entry<decltype(&cuMemUnmap)>("cuMemUnmap");
    static auto release = entry<decltype(&cuMemRelease)>("cuMemRelease");
    if (maps.empty() || !unmap || !release)
        return -1;
    Mapped m = maps.back();
    maps.pop_back();
    if (unmap(m.at, m.size) != CUDA_SUCCESS || release(m.handle) != CUDA_SUCCESS)
        return -1;
    mock_event(cca::TraceEntry::SEGMENT_UNMAP, static_cast<long long>(m.at), static_cast<long long>(m.size));
    return 0;
}
#endif
