/* The replay engine: a device's decoded events re-run through the shim's own pool code: the
 * data structure (common/pool.c), the device-level policy (common/policy.c: the tight segment
 * under a cap, waiting for pending frees under GMSHIM_PENDING_WAIT, GMSHIM_CACHE_LIMIT, empty
 * cache) and the grow sequence (common/grow.c: GMSHIM_DEVICE_LIMIT's release, the driver OOM's
 * release of whole free segments and retry, exact segments), over a driver of the recorded
 * capacity. Frees wait for a fence until the recording shows it completed (a block of it handed
 * out again, a fence wait, a segment given back) or, as a bound, not at all. One arena per
 * device: a log of several contending threads replays as if they shared one. */
#include "replay.h"
#include "replay_plan.h"
#include "vec.h"
#include "grow.h"
#include "policy.h"
#include "stepplan.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define RP_LARGE_ROUND ((uint64_t)GM_LARGE_ROUND)
#define RP_SYNTH_BASE (1ull << 52)   /* addresses of segments the recording never had */
#define RP_FENCE_LAG 256             /* fences recorded after one that must have completed it */
#define RP_FOLLOW_MAX 4096           /* placements a guided replay tries to follow before it gives up */

void rp_cfg_recorded(rp_cfg_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->device_bytes = RP_RECORDED;
    cfg->limit = RP_RECORDED;
    cfg->max_split = RP_RECORDED;
    cfg->cache_limit = RP_RECORDED;
    cfg->pending_wait = -1;
}

void rp_cfg_as_recorded(const rp_log_t *log, rp_cfg_t *cfg)
{
    rp_cfg_recorded(cfg);
    cfg->guided = log->foreign ? 2 : 0;
}

static uint64_t cache_limit_of(const replay_t *r)
{
    return r->cache_cap;
}

static int pending_wait_of(const replay_t *r)
{
    return r->pw;
}

static uint64_t limit_of(const replay_t *r)
{
    return r->cfg.limit == RP_RECORDED ? r->limit_now : r->cfg.limit;
}

/* What the driver lets the pool hold now: the recording's figure at the next driver OOM (what
 * was outside the pool then stays outside), moved by the device size asked for. */
static uint64_t driver_cap(const replay_t *r)
{
    const rp_log_t *log = r->log;
    uint64_t cap = r->next_drv < log->ndrv ? log->drv_cap[r->next_drv]
                   : log->ndrv           ? log->drv_cap[log->ndrv - 1]
                                         : log->base_cap;
    if (r->cfg.device_bytes != RP_RECORDED) {
        uint64_t outside = log->total > cap ? log->total - cap : 0;
        cap = r->cfg.device_bytes > outside ? r->cfg.device_bytes - outside : 0;
    }
    return cap;
}

uint64_t replay_cap_at(const replay_t *r)
{
    uint64_t cap = driver_cap(r), lim = limit_of(r);
    return lim && lim < cap ? lim : cap;
}

/* Makes r, whose storage (blk, born, the heap's block structs) may come from an earlier replay,
 * a fresh replay of log under cfg. */
static int replay_reuse(replay_t *r, const rp_log_t *log, const rp_cfg_t *cfg)
{
    gm_block_t **blk = r->blk;
    uint64_t *born = r->born;
    size_t cap = r->capids, n = log->nids ? log->nids : 1;
    gm_heap_t *h = &r->heap;
    rplan_destroy(r->plan);
    if (r->stashed)
        pool_reset(h);
    else
        pool_init(h, &r->st, NULL);
    /* Everything but the heap, which pool_reset left as pool_init would. */
    memset(r, 0, offsetof(replay_t, heap));
    memset((char *)r + offsetof(replay_t, heap) + sizeof r->heap, 0,
           sizeof *r - offsetof(replay_t, heap) - sizeof r->heap);
    r->heap.stats = &r->st;
    r->stashed = 1;
    if (cap < n) {
        free(blk);
        free(born);
        blk = malloc(n * sizeof *blk);
        born = malloc(n * sizeof *born);
        cap = n;
        if (!blk || !born) {
            free(blk);
            free(born);
            blk = NULL, born = NULL, cap = 0;
        }
    }
    r->blk = blk;
    r->born = born; /* read only where blk is set */
    r->capids = cap;
    if (!blk)
        return -1;
    memset(blk, 0, n * sizeof *blk);
    r->log = log;
    r->cfg = *cfg;
    r->heap.max_split = cfg->max_split == RP_RECORDED ? log->max_split : cfg->max_split;
    r->limit_now = log->torch_limit; /* PyTorch's fraction: set before its first tensor, as a rule */
    r->synth_base = RP_SYNTH_BASE;
    /* The settings the hot path reads, decided once. */
    r->cache_cap = cfg->cache_limit == RP_RECORDED ? log->cache_limit : cfg->cache_limit;
    r->pw = cfg->pending_wait < 0 ? log->pending_wait : cfg->pending_wait;
    r->defer = !cfg->frees_at_once && !log->trust_stream_order && log->nfences;
    /* The plan turns on growable ranges, as in the shim; a guided replay follows the recording's
     * own segments (a range's pages among them) instead. */
    int plan = cfg->plan == RP_AS_LOG ? log->plan : cfg->plan == RP_ON;
    r->vmm = !cfg->guided && (plan || (cfg->vmm == RP_AS_LOG ? log->vmm : cfg->vmm == RP_ON));
    if (!cfg->guided && plan && !(r->plan = rplan_create(log->nids)))
        return -1;
    return 0;
}

int replay_init(replay_t *r, const rp_log_t *log, const rp_cfg_t *cfg)
{
    memset(r, 0, sizeof *r);
    if (replay_reuse(r, log, cfg)) {
        replay_free(r);
        return -1;
    }
    return 0;
}

void replay_free(replay_t *r)
{
    rplan_destroy(r->plan);
    r->plan = NULL;
    pool_destroy(&r->heap);
    free(r->blk);
    free(r->born);
    r->blk = NULL;
    r->born = NULL;
    r->capids = 0;
    r->stashed = 0;
}

/* Replays done leave their storage here for the next (per thread it would die with the
 * short-lived threads of replay_many): bounded, the largest kept. */
#define RP_STASH 16
static replay_t *stash[RP_STASH];
static unsigned nstash;
static pthread_mutex_t stash_lock = PTHREAD_MUTEX_INITIALIZER;

replay_t *replay_start(const rp_log_t *log, const rp_cfg_t *cfg)
{
    replay_t *r = NULL;
    pthread_mutex_lock(&stash_lock);
    if (nstash)
        r = stash[--nstash];
    pthread_mutex_unlock(&stash_lock);
    if (!r && !(r = calloc(1, sizeof *r)))
        return NULL;
    if (replay_reuse(r, log, cfg)) {
        replay_free(r);
        free(r);
        return NULL;
    }
    return r;
}

void replay_end(replay_t *r)
{
    if (!r)
        return;
    r->log = NULL;
    rplan_destroy(r->plan);
    r->plan = NULL;
    pthread_mutex_lock(&stash_lock);
    if (nstash < RP_STASH) {
        stash[nstash++] = r;
        r = NULL;
    }
    pthread_mutex_unlock(&stash_lock);
    if (r) {
        replay_free(r);
        free(r);
    }
}

void replay_stash_free(void)
{
    pthread_mutex_lock(&stash_lock);
    while (nstash) {
        replay_t *r = stash[--nstash];
        replay_free(r);
        free(r);
    }
    pthread_mutex_unlock(&stash_lock);
}

/* ---- releasing ------------------------------------------------------------------------------ */

static int remove_segment(void *r, gm_segment_t *seg)
{
    pool_remove_segment(&((replay_t *)r)->heap, seg);
    return 0;
}

/* GMSHIM_CACHE_LIMIT: the oldest wholly free segments go while they exceed the cap. */
static void enforce_cache_limit(replay_t *r)
{
    uint64_t cap = cache_limit_of(r);
    unsigned n = 0;
    if (cap && !r->cfg.guided)
        policy_enforce_cache_limit(&r->heap, cap, remove_segment, r, &n);
    if (cap && r->vmm) /* the ranges' idle pages over the cap, oldest first */
        rplan_range_release(&r->heap, cap, 0, 0);
}

static void release_to(replay_t *r, uint64_t seq)
{
    if (seq > r->released)
        r->released = seq;
    if (r->heap.pending_head && r->heap.pending_head->fence_seq <= seq &&
        pool_release_pending(&r->heap, seq, r->now ? r->now : 1) && cache_limit_of(r))
        enforce_cache_limit(r);
}

/* ---- the threads' caches ------------------------------------------------------------------ */

/* A held block back to the pool, free if its fence completed, else pending on it. */
static void unhold(replay_t *r, gm_block_t *b)
{
    b->tc = GM_TC_NONE;
    r->held_bytes -= b->size;
    if (b->fence_seq > r->released)
        pool_defer_block(&r->heap, b, b->fence_seq);
    else
        pool_free_block(&r->heap, b, r->now ? r->now : 1);
}

/* The held blocks back to the pool as shim/tcache.c tcache_drain gives them back (the log does not
 * say which thread's cache held which, so all of them), but those of rounded size `keep`
 * (SIZE_MAX: none kept). Returns whether any came back. */
static int return_held(replay_t *r, size_t keep)
{
    if (!r->held_bytes)
        return 0;
    int any = 0;
    for (uint32_t id = 0; id < r->log->nids; id++) {
        gm_block_t *b = r->blk[id];
        if (b && b->tc == GM_TC_CACHED && b->size != keep) {
            r->blk[id] = NULL;
            unhold(r, b);
            any = 1;
        }
    }
    return any;
}

/* Waits for every pending free (when asked), then gives back the wholly free segments; the
 * bytes. */
static size_t empty_cache(replay_t *r, int wait, uint64_t idle_ns)
{
    unsigned n = 0;
    return_held(r, SIZE_MAX); /* shim/slowpath.c: the caches give their blocks back first */
    if (wait)
        release_to(r, UINT64_MAX);
    size_t freed = policy_release_free(&r->heap, idle_ns, r->now, remove_segment, r, &n);
    if (r->vmm)
        freed += rplan_range_release(&r->heap, 0, idle_ns, r->now);
    return freed;
}

/* ---- allocating ----------------------------------------------------------------------------- */

static gm_block_t *add_segment(replay_t *r, size_t size, size_t rounded, size_t requested)
{
    uintptr_t base;
    if (r->seg_size == size && r->seg_base && r->seg_base % GM_ROUND == 0) {
        base = (uintptr_t)r->seg_base; /* the recording's address: the same ties in best fit */
        r->seg_base = 0;
    } else {
        base = (uintptr_t)r->synth_base;
        r->synth_base += gm_round_up(size, RP_LARGE_ROUND);
    }
    gm_segment_t *seg = pool_add_segment(&r->heap, base, size, pool_is_small(rounded), r->now ? r->now : 1);
    return seg ? pool_alloc_fresh(&r->heap, seg, rounded, requested) : NULL;
}

static void note_failure(replay_t *r, size_t req, size_t rounded, size_t seg, uint32_t site, int by_limit,
                         int oom)
{
    rp_result_t *res = &r->res;
    res->failures++;
    rp_fail_t *f = &res->last;
    memset(f, 0, sizeof *f);
    f->ev = r->at;
    f->record = r->at < r->log->nev ? r->ev_rec : 0;
    f->t = r->now;
    f->request = req;
    f->rounded = rounded;
    f->segment = seg;
    f->site = site;
    f->oom = oom;
    f->by_limit = by_limit;
    f->cap = replay_cap_at(r);
    f->reserved = r->st.reserved.current;
    f->live = r->st.allocated.current - r->held_bytes;
    f->pending = r->st.pending.current;
    size_t largest, count;
    pool_free_summary(&r->heap, &largest, &count);
    f->largest_free = largest;
    f->free_blocks = count;
    if (res->failures == 1)
        res->first = *f;
}

/* After an allocation that succeeded: the run's peaks. */
static void note_peaks(replay_t *r)
{
    uint64_t res = r->st.reserved.current, alloc = r->st.allocated.current - r->held_bytes;
    if (res > r->res.peak_reserved) {
        r->res.peak_reserved = res;
        r->res.frag_at_peak = res - alloc;
    }
    if (alloc > r->res.peak_allocated)
        r->res.peak_allocated = alloc;
}

/* ---- growing: the shim's sequence (common/grow.c) over the replay's driver ------------------ */

/* One grow or exact segment, as common/grow.c asks the replay for it. */
typedef struct rp_grow {
    replay_t *r;
    size_t req, rounded;
    uint32_t site;
    int oom; /* the recorded OOM re-run, or -1 */
} rp_grow_t;

static size_t grow_limit(void *g)
{
    return limit_of(((rp_grow_t *)g)->r);
}

static size_t grow_reserved(void *g)
{
    return ((rp_grow_t *)g)->r->st.reserved.current;
}

/* GMSHIM_SEGMENTS=vmm's segment, as shim/ranges.c ranges_grow makes it: the best fit's missing
 * pages mapped (while the plan learns, idle pages moved first where the reservation would pass
 * its peak), a range as large as the device added where none has room. The pages go while the
 * reservation stays under the cap and the driver's capacity (map_cb's limit, the driver's OOM);
 * GROW_FAILED: no range could be added (the caller takes a classic segment). */
static int grow_range(replay_t *r, size_t rounded, size_t size, gm_block_t **bp)
{
    int refused = 0;
    uint64_t cap = replay_cap_at(r), budget = r->plan && rplan_learning(r->plan) ? r->st.reserved.peak : 0;
    if ((*bp = rplan_range_alloc(&r->heap, rounded, size, cap, budget, &refused)))
        return GROW_OK;
    if (refused)
        return GROW_OOM;
    uint64_t range = gm_round_up(r->log->total ? r->log->total : 64ull << 30, GM_VMM_PAGE);
    if (range < rounded)
        range = gm_round_up(rounded, GM_VMM_PAGE);
    if (rplan_range_add(&r->heap, (uintptr_t)r->synth_base, (size_t)range, rounded) != 0)
        return GROW_FAILED;
    r->synth_base += range;
    *bp = rplan_range_alloc(&r->heap, rounded, size, cap, budget, &refused);
    return *bp ? GROW_OK : GROW_OOM;
}

/* The driver gives what its capacity leaves; growable ranges first where they are on, as
 * shim/segments.c segments_grow. */
static int grow_segment(void *g, size_t seg, size_t rounded, size_t size, gm_block_t **bp)
{
    replay_t *r = ((rp_grow_t *)g)->r;
    if (r->vmm && grow_range(r, rounded, size, bp) != GROW_FAILED)
        return *bp ? GROW_OK : GROW_OOM;
    if (seg < rounded) /* a size computed for a range's missing pages: the classic segment holds it */
        seg = policy_tight_segment(rounded);
    if (r->st.reserved.current + seg > driver_cap(r))
        return GROW_OOM;
    *bp = add_segment(r, seg, rounded, size);
    return GROW_OK;
}

/* A caching allocator's segment: a segment of its own, one block filling it, at the recorded
 * address when it is free here. */
static int grow_exact_segment(void *g, size_t seg, size_t rounded, size_t size, gm_block_t **bp)
{
    rp_grow_t *gr = g;
    replay_t *r = gr->r;
    if (r->st.reserved.current + size > driver_cap(r))
        return GROW_OOM;
    uintptr_t base = gr->oom < 0 ? (uintptr_t)r->ev_ptr : 0;
    int taken = !base || base % GM_ROUND;
    for (const gm_segment_t *s = pool_segments(&r->heap); s && !taken; s = s->next)
        taken = s->base < base + size && base < s->base + s->size; /* the range overlaps one */
    if (taken) {
        base = (uintptr_t)r->synth_base;
        r->synth_base += gm_round_up(size, RP_LARGE_ROUND);
    }
    gm_segment_t *s = pool_add_segment(&r->heap, base, size, 0, r->now ? r->now : 1);
    *bp = s ? pool_alloc_fresh(&r->heap, s, size, size) : NULL;
    return GROW_OK;
}

static size_t grow_release(void *g, int reason, int *waited)
{
    *waited = 0;
    return empty_cache(((rp_grow_t *)g)->r, 1, 0);
}

static void grow_oom_end(void *g, unsigned flags, size_t seg)
{
    rp_grow_t *gr = g;
    if (!(flags & GMLOG_OOM_RECOVERED))
        note_failure(gr->r, gr->req, gr->rounded, seg, gr->site, !!(flags & GMLOG_OOM_LIMIT), gr->oom);
}

/* No capture to model; a failure's figures are the pool's after the release (note_failure). */
static const grow_ops_t grow_ops = {grow_limit, grow_reserved, NULL, grow_segment, grow_release, NULL, grow_oom_end};
static const grow_ops_t exact_ops = {grow_limit, grow_reserved, NULL, grow_exact_segment, grow_release, NULL,
                                     grow_oom_end};

/* A caching allocator's segment (PyTorch's, its cache kept): from the driver at exactly its size,
 * whatever the pool's settings, as the shim's slowpath_exact asks for it. */
static gm_block_t *exact_alloc(replay_t *r, size_t size, uint32_t site, int oom)
{
    rp_grow_t g = {r, size, size, site, oom};
    gm_block_t *b;
    grow_exact(&exact_ops, &g, size, &b);
    if (b)
        note_peaks(r);
    return b;
}

/* GMSHIM_PENDING_WAIT's waits: the fence completes at once. */
static void wait_for(void *r, uint64_t seq)
{
    release_to(r, seq);
}

static int wait_oldest(void *r)
{
    uint64_t seq = pool_oldest_pending_seq(&((replay_t *)r)->heap);
    if (seq)
        release_to(r, seq);
    return seq != 0;
}

static gm_block_t *do_alloc(replay_t *r, size_t req, uint32_t site, int oom, int *grew)
{
    size_t rounded = pool_round(req);
    const policy_waits_t waits = {wait_for, wait_oldest, r};
    *grew = 0;
    gm_block_t *b = policy_alloc_waiting(&r->heap, rounded, req, pending_wait_of(r), &waits);
    /* Before growing, the caches' blocks come back, as the shim's slow path takes them back. */
    if (!b && return_held(r, rounded))
        b = policy_alloc_waiting(&r->heap, rounded, req, pending_wait_of(r), &waits);
    if (!b) {
        /* A growable range maps only the pages the best fit lacks (shim/slowpath.c grow). */
        size_t seg = r->vmm ? rplan_range_wanted(&r->heap, rounded) : pool_segment_size(rounded);
        rp_grow_t g = {r, req, rounded, site, oom};
        b = grow_alloc(&grow_ops, &g, &r->heap, seg, rounded, req, grew);
    }
    if (b)
        note_peaks(r);
    return b;
}

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
    release_to(r, seq);
    add_proof(r, seq);
    int grew;
    b = do_alloc(r, req, site, -1, &grew);
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
        release_to(r, seq);
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
        release_to(r, UINT64_MAX); /* the shim waited for the fences before giving it back */
        add_proof(r, r->issued + 1);
    }
    if (pool_segment_is_free(seg))
        pool_remove_segment(&r->heap, seg);
    else
        r->res.divergences++;
}

/* ---- GMSHIM_PLAN (shim/planner.c, hit.c planned_alloc) ---------------------------------------- */

/* The planned step first: the slot the plan expects, once every block planned over it is freed
 * and its fence done (a fence it waits for is recorded by need and taken as complete, GPU
 * order's rule: the replay's bound), its pages mapped (the pool's cache given back first where
 * they would pass the peak, as the shim). 1 when it served block e->id. */
static int plan_alloc(replay_t *r, const rp_ev_t *e)
{
    size_t rounded = pool_round((size_t)e->x);
    int32_t s = rplan_next(r->plan, e->site, rounded);
    if (s < 0)
        return 0;
    uint64_t off = 0, w = rplan_claim(r->plan, s, r->released, &off);
    if (w && w != STEPPLAN_BUSY) {
        if (w > r->issued)
            r->issued = w;
        release_to(r, w);
        w = rplan_claim(r->plan, s, r->released, &off);
    }
    if (w) {
        rplan_unclaimed(r->plan, -1);
        return 0;
    }
    uint64_t miss = rplan_missing(r->plan, off, rounded);
    if (miss && !r->plan_released && r->st.reserved.current + miss > r->res.peak_reserved) {
        empty_cache(r, 0, 0);
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
    note_peaks(r);
    return 1;
}

/* While the plan learns: what the pool served; the plan made, the pool's cache goes. */
static void plan_note(replay_t *r, const rp_ev_t *e, const gm_block_t *b)
{
    (void)b;
    if (rplan_note(r->plan, e->id, e->site, pool_round((size_t)e->x)))
        empty_cache(r, 0, 0);
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
    gm_block_t *b = do_alloc(r, (size_t)e->x, e->site, -1, &grew);
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
    if (cache_limit_of(r) && seg->first->state == GM_BLOCK_FREE && seg->first->size == seg->size)
        enforce_cache_limit(r);
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
        unhold(r, b);
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
    note_peaks(r);
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
    unhold(r, b);
    if (cache_limit_of(r) && seg->first->state == GM_BLOCK_FREE && seg->first->size == seg->size)
        enforce_cache_limit(r);
}

static void on_exact_alloc(replay_t *r, const rp_ev_t *e)
{
    gm_block_t *b = exact_alloc(r, (size_t)e->x, e->site, -1);
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
        gm_block_t *b = o->exact ? exact_alloc(r, (size_t)o->rec.request, o->rec.site, (int)e->id)
                                 : do_alloc(r, (size_t)o->rec.request, o->rec.site, (int)e->id, &grew);
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
        empty_cache(r, 1, 0);
    else if (reason == GMLOG_EMPTY_PERIODIC)
        empty_cache(r, 0, 0);
    else if (reason == GMLOG_EMPTY_IDLE)
        empty_cache(r, 0, r->log->idle_release_ns ? r->log->idle_release_ns : 1);
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
                release_to(r, log->proof_seq[r->next_proof++]);
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
            else if (e->id > RP_FENCE_LAG) /* a bound on how far the GPU lags */
                release_to(r, e->id - RP_FENCE_LAG);
            break;
        case RP_DONE:
            release_to(r, e->x);
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

void replay_live_split(const replay_t *r, uint64_t since, uint64_t *before, uint64_t *after)
{
    uint64_t b = 0, a = 0;
    for (uint32_t id = 0; id < r->log->nids; id++) {
        const gm_block_t *blk = r->blk[id];
        if (!blk || blk->tc == GM_TC_CACHED)
            continue;
        if (r->born[id] < since)
            b += blk->size;
        else
            a += blk->size;
    }
    *before = b;
    *after = a;
}
