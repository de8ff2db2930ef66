/* The C entry point of the PyTorch bridge: each event of PyTorch's caching allocator becomes one
 * GMLOG_T_* record. It runs under PyTorch's allocator lock in the allocating thread (the autograd
 * thread too): no lock PyTorch could wait for, no GIL (Python frames are read as the hooks read
 * them), no CUDA call, and never a failure that reaches PyTorch. */
#include "torchev.h"
#include "common.h"
#include "evlog.h"
#include "state.h"
#include "stacks.h"

#include <stddef.h>
#include <string.h>

#define MAX_SPANS 4

static struct {
    uintptr_t lo, hi;
} spans[MAX_SPANS];
static int nspans;
static uint64_t events, last_ns;

int torchev_record_type(int action)
{
    switch (action) {
    case GMSHIM_TORCH_ALLOC: return GMLOG_T_ALLOC;
    case GMSHIM_TORCH_FREE_REQUESTED: return GMLOG_T_FREE_REQUESTED;
    case GMSHIM_TORCH_FREE_COMPLETED: return GMLOG_T_FREE_COMPLETED;
    case GMSHIM_TORCH_SEGMENT_ALLOC: return GMLOG_T_SEGMENT_ALLOC;
    case GMSHIM_TORCH_SEGMENT_FREE: return GMLOG_T_SEGMENT_FREE;
    case GMSHIM_TORCH_SEGMENT_MAP: return GMLOG_T_SEGMENT_MAP;
    case GMSHIM_TORCH_SEGMENT_UNMAP: return GMLOG_T_SEGMENT_UNMAP;
    case GMSHIM_TORCH_OOM: return GMLOG_T_OOM;
    default: return 0;
    }
}

void torchev_add_machinery(uintptr_t lo, uintptr_t hi)
{
    if (nspans < MAX_SPANS && lo < hi) {
        spans[nspans].lo = lo;
        spans[nspans].hi = hi;
        __atomic_store_n(&nspans, nspans + 1, __ATOMIC_RELEASE);
    }
}

uint64_t torchev_count(void)
{
    return __atomic_load_n(&events, __ATOMIC_RELAXED);
}

uint64_t torchev_last_ns(void)
{
    return __atomic_load_n(&last_ns, __ATOMIC_RELAXED);
}

static int is_machinery(uintptr_t pc)
{
    int n = __atomic_load_n(&nspans, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (pc >= spans[i].lo && pc < spans[i].hi)
            return 1;
    return 0;
}

/* The fields every version of the event has (the first layout, API version 1). */
#define EVENT_V1_SIZE (offsetof(gmshim_torch_event_t, stream) + sizeof(unsigned long long))

GM_EXPORT int gmshim_torch_event(const gmshim_torch_event_t *ev)
{
    if (unlikely(!ev || ev->size < EVENT_V1_SIZE))
        return -1;
    if (unlikely(!evlog_enabled() || __atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) == GM_CHILD))
        return -1;
    int type = torchev_record_type(ev->action);
    if (!type)
        return -1;
    uint64_t now = gm_now_ns();
    /* Inside gmshim from here: nothing we call may come back through a hook. */
    int depth = gm_depth;
    gm_depth = 1;
    uint32_t site = 0;
    /* A completed free happens in whatever call let PyTorch see the block's events done: its
     * site says nothing about the tensor (the FREE_REQUESTED before it has the one that does). */
    if (type != GMLOG_T_FREE_COMPLETED)
        site = stacks_site_from_skip(__builtin_return_address(0), is_machinery);
    gmlog_tensor_t r;
    evlog_hdr(&r.h, type, sizeof r, ev->device, 0);
    r.addr = ev->addr;
    r.size = ev->bytes;
    r.stream = ev->stream;
    r.site = site;
    r.pool = ev->pool;
    evlog_append(&r, sizeof r, now);
    __atomic_add_fetch(&events, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&last_ns, now, __ATOMIC_RELAXED);
    gm_depth = depth;
    return 0;
}
