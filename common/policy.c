/* The device-level pool policy (policy.h): the decisions the shim makes around its heaps and the
 * replay re-runs. Nothing here may call CUDA, lock, or read a clock. */
#include "policy.h"

size_t policy_tight_segment(size_t rounded)
{
    return pool_is_small(rounded) ? pool_segment_size(rounded) : gm_round_up(rounded, GM_LARGE_ROUND);
}

int policy_fits_limit(size_t limit, size_t reserved, size_t *seg, size_t rounded)
{
    size_t tight = pool_is_small(rounded) ? *seg : policy_tight_segment(rounded);
    if (reserved + *seg <= limit)
        return 1;
    if (reserved + tight <= limit) {
        *seg = tight;
        return 1;
    }
    return 0;
}

size_t policy_release_free(gm_heap_t *h, uint64_t idle_ns, uint64_t now, policy_release_fn release, void *arg,
                           unsigned *nseg)
{
    size_t bytes = 0;
    for (gm_segment_t *seg = pool_segments(h), *next; seg; seg = next) {
        next = seg->next;
        size_t size = seg->size;
        if (pool_segment_is_free(seg) && (!idle_ns || now - seg->free_since_ns >= idle_ns) &&
            release(arg, seg) == 0) {
            bytes += size;
            (*nseg)++;
        }
    }
    return bytes;
}

size_t policy_enforce_cache_limit(gm_heap_t *h, size_t cap, policy_release_fn release, void *arg, unsigned *nseg)
{
    size_t whole = pool_whole_free_bytes(h), bytes = 0;
    while (whole > cap) {
        gm_segment_t *oldest = pool_oldest_free_segment(h);
        size_t size = oldest ? oldest->size : 0;
        if (!oldest || release(arg, oldest))
            break;
        whole -= size;
        bytes += size;
        (*nseg)++;
    }
    return bytes;
}
