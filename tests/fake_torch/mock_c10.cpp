// The allocator object of the stand-in libc10_cuda (tests/fake_torch): counts its emptyCache
// calls (with the pool id it was given) and hands events to the attached trackers.
#include <c10/cuda/CUDACachingAllocator.h>

#include <vector>

namespace cca = c10::cuda::CUDACachingAllocator;

namespace {
struct Native final : cca::CUDAAllocator {
    std::vector<cca::AllocatorTraceTracker> trackers;
    int empties = 0;
    unsigned long long last_pool = ~0ull;
    bool initialized() override { return true; }
    void attachAllocatorTraceTracker(cca::AllocatorTraceTracker t) override { trackers.push_back(std::move(t)); }
#ifdef GM_MOCK_OLD_EMPTY
    void emptyCache() override { empties++, last_pool = 0; }
#else
    void emptyCache(c10::MempoolId_t id) override { empties++, last_pool = id.first + id.second; }
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
