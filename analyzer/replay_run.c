/* The replay's events (replay_run.h): each decoded event of a device run against the replay's
 * pool and driver (replay.c), the planned step served first where GMSHIM_PLAN is on. Frees wait
 * for a fence until the recording shows it completed (a block of it handed out again, a fence
 * wait, a segment given back) or, as a bound, not at all. Never trusts the log: an event naming
 * a block the replay does not hold is skipped. */
#include "replay_run.h"
#include "replay_plan.h"
#include "stepplan.h"
#include "vec.h"

#include <string.h>

#define RP_FENCE_LAG 256             /* fences recorded after one that must have completed it */
#define RP_FOLLOW_MAX 4096           /* placements a guided replay tries to follow before it gives up */

/* ---- following the recording ---------------------------------------------------------------- */

static void add_proof(replay_t *r, uint64_t seq)
{
    if (r->cfg.guided != 1)
        return;
    rp_log_t *log = (rp_log_t *)r->log; /* a guided replay writes what it learns of the fences */
    uint64_t *a = vec_grow(log->proof_ev, &log->capproof_ev, log->nproofs + 1, sizeof *a, 256);
    if (a)
        log->proof_ev = a;
    uint64_t *b = vec_grow(log->proof_seq, &log->capproof_seq, log->nproofs + 1, sizeof *b, 256);
    if (b)
        log->proof_seq = b;
    if (!a || !b)
        return;
    log->proof_ev[log->nproofs] = r->at;
    log->proof_seq[log->nproofs++] = seq;
}

/* The recording handed out `want` where the replay chose b: if want lies in a block still
 * pending here, its fence had completed: release up to it and choose again. */
static gm_block_t *follow(replay_t *r, gm_block_t *b, uint64_t want, size_t req, uint32_t site)
{
    gm_segment_t *seg = pool_find_segment(&r->heap, (uintptr_t)want);
    gm_block_t *at = seg ? pool_segment_find_block(seg, (uintptr_t)want) : NULL;
    if (!at || at->state != GM_BLOCK_PENDING) {
        r->res.divergences++;
        return b;
    }
    uint64_t seq = at->fence_seq;
    pool_free_block(&r->heap, b, r->now ? r->now : 1);
    replay_release_to(r, seq);
    add_proof(r, seq);
    int grew;
    b = replay_alloc(r, req, site, -1, &grew);
    if (b && b->ptr != want)
        r->res.divergences++;
    return b;
}

/* A fence record says how much was still pending then: the older fences whose frees are not
 * in that figure had completed (their blocks released by a poll since). */
static void match_pending(replay_t *r, uint64_t pending)
{
    while (r->heap.pending_head && r->st.pending.current > pending) {
        uint64_t seq = r->heap.pending_head->fence_seq;
        replay_release_to(r, seq);
        add_proof(r, seq);
    }
}

/* A guided replay takes the recording's segments as they came (a log another writer made need
 * not follow the pool's sizes): the class from the request it was taken for. */
static void adopt_segment(replay_t *r)
{
    const rp_log_t *log = r->log;
    if (!r->seg_base || !r->seg_size)
        return; /* the decoder keeps only sizes and addresses the pool could have had */
    int small = r->seg_size == GM_SMALL_SEGMENT;
    rp_cursor_t ahead = r->cur; /* past the event being run */
    for (size_t i = r->at + 1; i < log->nev && i < r->at + 16; i++) {
        rp_ev_t e;
        rp_unpack(log->packed, &ahead, &e);
        if (rp_ev_type(&e) == RP_ALLOC) {
            small = pool_is_small(pool_round((size_t)e.x));
            break;
        }
    }
    if (!pool_add_segment(&r->heap, (uintptr_t)r->seg_base, (size_t)r->seg_size, small, r->now ? r->now : 1))
        return;
    r->seg_base = 0;
    if (r->st.reserved.current > r->res.peak_reserved) {
        r->res.peak_reserved = r->st.reserved.current;
        r->res.frag_at_peak = r->st.reserved.current - r->st.allocated.current;
    }
}

static void seg_free_recorded(replay_t *r, uint64_t base)
{
    gm_segment_t *seg = pool_find_segment(&r->heap, (uintptr_t)base);
    if (!seg || seg->base != base) {
        r->res.divergences += seg != NULL;
        return;
    }
    if (!pool_segment_is_free(seg)) {
        replay_release_to(r, UINT64_MAX); /* the shim waited for the fences before giving it back */
        add_proof(r, r->issued + 1);
    }
    if (pool_segment_is_free(seg))
        pool_remove_segment(&r->heap, seg);
    else
        r->res.divergences++;
}

/* ---- GMSHIM_PLAN (shim/planner.c, hit.c planned_alloc) ---------------------------------------- */

/* The planned step first: the slot the plan expects, once every block planned over it is freed
 * and its fence done, its pages mapped (the pool's cache given back first where they would pass
 * the peak, as the shim). A log that says when its freed memory became reusable has said so
 * before this allocation, the shim's fence and poll for the slot included; of an older log, a
 * fence the slot waits for is taken as complete (GPU order's rule: the replay's bound). 1 when
 * it served block e->id. */
static int plan_alloc(replay_t *r, const rp_ev_t *e)
{
    size_t rounded = pool_round((size_t)e->x);
    int32_t s = rplan_next(r->plan, e->site, rounded);
    if (s < 0)
        return 0;
    uint64_t off = 0, w = rplan_claim(r->plan, s, r->released, &off);
    if (w && w != STEPPLAN_BUSY && !r->log->nreusable) {
        if (w > r->issued)
            r->issued = w;
        replay_release_to(r, w);
        w = rplan_claim(r->plan, s, r->released, &off);
    }
    if (w) {
        rplan_unclaimed(r->plan, -1);
        return 0;
    }
    uint64_t miss = rplan_missing(r->plan, off, rounded);
    if (miss && !r->plan_released && r->st.reserved.current + miss > r->res.peak_reserved) {
        replay_empty_cache(r, 0, 0);
        r->plan_released = 1;
    }
    if (miss && r->st.reserved.current + miss > replay_cap_at(r)) {
        rplan_unclaimed(r->plan, s); /* the cap refuses its pages: the pool's turn */
        return 0;
    }
    if (miss) {
        rplan_map(r->plan, off, rounded);
        gm_stat_add(&r->st.reserved, miss);
        r->plan_released = 0;
    }
    gm_stat_add(&r->st.allocated, rplan_taken(r->plan, e->id, s, off));
    r->blk[e->id] = NULL;
    r->born[e->id] = rp_ev_t_ns(e);
    replay_note_peaks(r);
    return 1;
}

/* While the plan learns: what the pool served; the plan made, the pool's cache goes. */
static void plan_note(replay_t *r, const rp_ev_t *e, const gm_block_t *b)
{
    (void)b;
    if (rplan_note(r->plan, e->id, e->site, pool_round((size_t)e->x)))
        replay_empty_cache(r, 0, 0);
}

/* A free of a planned block: 1 when it was one. */
static int plan_free(replay_t *r, uint32_t id, int deferred)
{
    uint64_t bytes = 0;
    rplan_note_free(r->plan, id);
    if (!rplan_free(r->plan, id, deferred && r->defer ? r->issued + 1 : 0, &bytes))
        return 0;
    gm_stat_sub(&r->st.allocated, bytes);
    return 1;
}

/* ---- the events ----------------------------------------------------------------------------- */

static void on_alloc(replay_t *r, const rp_ev_t *e)
{
    int grew;
    if (r->plan && e->id < r->log->nids && plan_alloc(r, e))
        return;
    gm_block_t *b = replay_alloc(r, (size_t)e->x, e->site, -1, &grew);
    if (grew && r->cfg.guided)
        r->res.divergences++;
    if (b && r->cfg.guided && !grew && r->res.divergences < RP_FOLLOW_MAX && b->ptr != e->ptr)
        b = follow(r, b, e->ptr, (size_t)e->x, e->site);
    if (!b) {
        r->res.new_failures++;
        return;
    }
    b->site = e->site;
    r->blk[e->id] = b;
    r->born[e->id] = rp_ev_t_ns(e);
    if (r->plan)
        plan_note(r, e, b);
}

static void on_free(replay_t *r, const rp_ev_t *e, int deferred)
{
    if (r->plan && plan_free(r, e->id, deferred))
        return;
    gm_block_t *b = r->blk[e->id];
    if (!b)
        return;
    r->blk[e->id] = NULL;
    if (deferred && r->defer) {
        pool_defer_block(&r->heap, b, r->issued + 1);
        return;
    }
    gm_segment_t *seg = b->seg;
    pool_free_block(&r->heap, b, r->now ? r->now : 1);
    if (r->cache_cap && seg->first->state == GM_BLOCK_FREE && seg->first->size == seg->size)
        replay_enforce_cache_limit(r);
}

static void on_free_cached(replay_t *r, const rp_ev_t *e)
{
    if (r->plan && plan_free(r, e->id, e->x != 0)) /* the shim's plan sees its frees first */
        return;
    gm_block_t *b = r->blk[e->id];
    if (!b || b->tc == GM_TC_CACHED)
        return;
    b->tc = GM_TC_CACHED;
    b->fence_seq = e->x && r->defer ? r->issued + 1 : 0;
    r->held_bytes += b->size;
}

static void on_alloc_cached(replay_t *r, const rp_ev_t *e)
{
    gm_block_t *b = r->blk[e->id];
    if (!b || b->tc != GM_TC_CACHED) { /* given back meanwhile (return_held): from the pool */
        on_alloc(r, e);
        return;
    }
    if (r->plan && rplan_serving(r->plan)) { /* the plan before the thread's cache: asked again */
        r->blk[e->id] = NULL;
        replay_unhold(r, b);
        on_alloc(r, e);
        return;
    }
    b->tc = GM_TC_NONE;
    r->held_bytes -= b->size;
    gm_stat_sub(&r->st.requested, b->requested);
    gm_stat_add(&r->st.requested, (size_t)e->x);
    b->requested = (size_t)e->x;
    b->site = e->site;
    r->born[e->id] = rp_ev_t_ns(e);
    replay_note_peaks(r);
    if (r->plan)
        plan_note(r, e, b);
}

static void on_return(replay_t *r, const rp_ev_t *e)
{
    gm_block_t *b = r->blk[e->id];
    if (!b || b->tc != GM_TC_CACHED)
        return;
    r->blk[e->id] = NULL;
    gm_segment_t *seg = b->seg;
    replay_unhold(r, b);
    if (r->cache_cap && seg->first->state == GM_BLOCK_FREE && seg->first->size == seg->size)
        replay_enforce_cache_limit(r);
}

static void on_exact_alloc(replay_t *r, const rp_ev_t *e)
{
    gm_block_t *b = replay_exact(r, (size_t)e->x, e->site, -1);
    if (!b) {
        r->res.new_failures++;
        return;
    }
    b->site = e->site;
    r->blk[e->id] = b;
    r->born[e->id] = rp_ev_t_ns(e);
}

static void on_exact_free(replay_t *r, const rp_ev_t *e)
{
    gm_block_t *b = r->blk[e->id];
    if (!b)
        return;
    r->blk[e->id] = NULL;
    gm_segment_t *seg = b->seg;
    pool_free_block(&r->heap, b, r->now ? r->now : 1);
    if (pool_segment_is_free(seg))
        pool_remove_segment(&r->heap, seg);
}

static void on_oom(replay_t *r, const rp_ev_t *e)
{
    const rp_oom_t *o = &r->log->ooms[e->id];
    if (!o->recovered && o->rec.request <= GMLOG_SIZE_MASK) {
        int grew;
        uint64_t before = r->res.failures;
        gm_block_t *b = o->exact ? replay_exact(r, (size_t)o->rec.request, o->rec.site, (int)e->id)
                                 : replay_alloc(r, (size_t)o->rec.request, o->rec.site, (int)e->id, &grew);
        if (b) {
            r->res.recorded_passed++;
            gm_segment_t *seg = b->seg;
            pool_free_block(&r->heap, b, r->now ? r->now : 1); /* what the program did next is unknown */
            if (o->exact && pool_segment_is_free(seg))
                pool_remove_segment(&r->heap, seg);
        } else {
            r->res.recorded_failed++;
            (void)before;
        }
    }
    r->next_oom++;
}

static void on_empty(replay_t *r, uint64_t reason)
{
    if (r->cfg.guided)
        return; /* its segment frees came one by one before this record */
    if (reason == GMLOG_EMPTY_API)
        replay_empty_cache(r, 1, 0);
    else if (reason == GMLOG_EMPTY_PERIODIC)
        replay_empty_cache(r, 0, 0);
    else if (reason == GMLOG_EMPTY_IDLE)
        replay_empty_cache(r, 0, r->log->idle_release_ns ? r->log->idle_release_ns : 1);
    /* OOM, DEVICE_LIMIT, CACHE_LIMIT: the replay's own policy decides; EXIT: the end */
}

static void on_reset(replay_t *r)
{
    pool_reset(&r->heap);
    memset(&r->st, 0, sizeof r->st);
    r->heap.max_split = r->cfg.max_split == RP_RECORDED ? r->log->max_split : r->cfg.max_split;
    memset(r->blk, 0, (r->log->nids ? r->log->nids : 1) * sizeof *r->blk);
    if (r->plan)
        rplan_reset(r->plan);
}

void replay_run(replay_t *r, size_t until)
{
    const rp_log_t *log = r->log;
    if (until > log->nev)
        until = log->nev;
    unsigned drv_after_alloc = 0; /* recovered driver OOMs whose figure holds up to the next allocation */
    while (r->at < until) {
        rp_ev_t ev;
        rp_unpack(log->packed, &r->cur, &ev);
        const rp_ev_t *e = &ev;
        r->ev_ptr = ev.ptr, r->ev_rec = ev.rec;
        r->now = rp_ev_t_ns(e);
        if (!r->cfg.guided)
            while (r->next_proof < log->nproofs && log->proof_ev[r->next_proof] <= r->at)
                replay_release_to(r, log->proof_seq[r->next_proof++]);
        uint64_t failures = r->res.failures;
        switch (rp_ev_type(e)) {
        case RP_ALLOC:
            on_alloc(r, e);
            r->next_drv += drv_after_alloc;
            drv_after_alloc = 0;
            break;
        case RP_FREE:
            on_free(r, e, 0);
            break;
        case RP_FREE_DEFERRED:
            on_free(r, e, 1);
            break;
        case RP_FENCE:
            if (e->id > r->issued)
                r->issued = e->id;
            if (r->cfg.guided)
                match_pending(r, e->x);
            else if (!log->nreusable && e->id > RP_FENCE_LAG) /* a bound on how far the GPU lags */
                replay_release_to(r, e->id - RP_FENCE_LAG);
            break;
        case RP_DONE:
            replay_release_to(r, e->x);
            break;
        case RP_SEG_ALLOC:
            r->seg_base = e->x;
            r->seg_size = (uint64_t)e->id * GM_ROUND;
            if (r->cfg.guided)
                adopt_segment(r);
            break;
        case RP_SEG_FREE:
            if (r->cfg.guided)
                seg_free_recorded(r, e->x);
            break;
        case RP_EMPTY:
            on_empty(r, e->x);
            break;
        case RP_OOM:
            on_oom(r, e);
            if (e->x) { /* a driver OOM: its figure of what the driver gave holds up to here */
                if (log->ooms[e->id].recovered)
                    drv_after_alloc++;
                else
                    r->next_drv++;
            }
            break;
        case RP_LIMIT:
            r->limit_now = e->x;
            break;
        case RP_RESET:
            on_reset(r);
            break;
        case RP_EXACT_ALLOC:
            on_exact_alloc(r, e);
            r->next_drv += drv_after_alloc;
            drv_after_alloc = 0;
            break;
        case RP_EXACT_FREE:
            on_exact_free(r, e);
            break;
        case RP_FREE_CACHED:
            on_free_cached(r, e);
            break;
        case RP_ALLOC_CACHED:
            on_alloc_cached(r, e);
            r->next_drv += drv_after_alloc;
            drv_after_alloc = 0;
            break;
        case RP_RETURN:
            on_return(r, e);
            break;
        default:
            break;
        }
        r->at++;
        r->res.events++;
        if (r->stop_on_fail && r->res.failures > failures)
            break;
    }
    if (r->plan) {
        rplan_stats_t ps;
        rplan_stats(r->plan, &ps);
        r->res.planned = ps.planned, r->res.plan_period = ps.period, r->res.plan_bytes = ps.mapped;
    }
}
