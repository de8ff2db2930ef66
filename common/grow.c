/* The grow sequence (grow.h): the order of a grow's steps and its OOM flags, once for the shim
 * and the replay. Nothing here may call CUDA, lock, or read a clock: each step is a callback. */
#include "grow.h"
#include "gmlog.h"
#include "policy.h"

static int capturing(const grow_ops_t *o, void *arg)
{
    return o->capturing && o->capturing(arg);
}

/* Whether a segment of *seg for `rounded` (maybe made the tight one) fits under the cap; when it
 * does not, the cache goes back once (not during a capture) and the cap decides again. */
static int fits_limit(const grow_ops_t *o, void *arg, size_t *seg, size_t rounded)
{
    if (policy_fits_limit(o->limit(arg), o->reserved(arg), seg, rounded))
        return 1;
    if (capturing(o, arg))
        return 0;
    int waited = 0;
    o->release(arg, GMLOG_EMPTY_DEVICE_LIMIT, &waited);
    return policy_fits_limit(o->limit(arg), o->reserved(arg), seg, rounded);
}

/* After the driver's OOM on seg: the cache released, h's room reused, seg asked again, then the
 * tight segment; the OOM ended. */
static gm_block_t *grow_retry(const grow_ops_t *o, void *arg, gm_heap_t *h, size_t seg, size_t rounded,
                              size_t size, int *fresh)
{
    if (o->oom_seen)
        o->oom_seen(arg, seg);
    unsigned flags = GMLOG_OOM_RELEASED;
    int waited = 0;
    o->release(arg, GMLOG_EMPTY_OOM, &waited);
    if (waited)
        flags |= GMLOG_OOM_WAITED;
    gm_block_t *b = pool_alloc(h, rounded, size);
    if (!b) {
        flags |= GMLOG_OOM_RETRIED;
        int st = o->segment(arg, seg, rounded, size, &b);
        size_t tight = policy_tight_segment(rounded);
        if (st == GROW_OOM && !pool_is_small(rounded) && tight < seg)
            st = o->segment(arg, seg = tight, rounded, size, &b);
        *fresh = st == GROW_OK;
    }
    if (b)
        flags |= GMLOG_OOM_RECOVERED;
    o->oom_end(arg, flags, seg);
    return b;
}

gm_block_t *grow_alloc(const grow_ops_t *o, void *arg, gm_heap_t *h, size_t seg, size_t rounded, size_t size,
                       int *fresh)
{
    gm_block_t *b = NULL;
    *fresh = 0;
    if (o->limit(arg) && !fits_limit(o, arg, &seg, rounded)) {
        if ((b = pool_alloc(h, rounded, size))) /* room the release made */
            return b;
        o->oom_end(arg, GMLOG_OOM_LIMIT | GMLOG_OOM_RELEASED, seg);
        return NULL;
    }
    int st = o->segment(arg, seg, rounded, size, &b);
    if (st != GROW_OOM) {
        *fresh = st == GROW_OK;
        return b;
    }
    return grow_retry(o, arg, h, seg, rounded, size, fresh);
}

int grow_exact(const grow_ops_t *o, void *arg, size_t size, gm_block_t **bp)
{
    size_t seg = size;
    *bp = NULL;
    if (o->limit(arg) && !fits_limit(o, arg, &seg, size)) {
        o->oom_end(arg, GMLOG_OOM_LIMIT | GMLOG_OOM_RELEASED | GMLOG_OOM_EXACT, size);
        return GROW_OOM;
    }
    int st = o->segment(arg, size, size, size, bp);
    if (st != GROW_OOM)
        return st;
    if (o->oom_seen)
        o->oom_seen(arg, size);
    unsigned flags = GMLOG_OOM_EXACT;
    if (!capturing(o, arg)) {
        /* Asked again only if some went back, as the caller would be without the pool. */
        flags |= GMLOG_OOM_RELEASED;
        int waited = 0;
        size_t released = o->release(arg, GMLOG_EMPTY_OOM, &waited);
        if (waited)
            flags |= GMLOG_OOM_WAITED;
        if (released) {
            flags |= GMLOG_OOM_RETRIED;
            st = o->segment(arg, size, size, size, bp);
        }
    } else {
        flags |= GMLOG_OOM_CAPTURE;
    }
    if (st == GROW_OK)
        flags |= GMLOG_OOM_RECOVERED;
    o->oom_end(arg, flags, size);
    return st;
}
