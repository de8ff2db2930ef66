/* The replay engine's floor: a replay's pool and driver, the shim's own pool code (the data
 * structure, common/pool.c; the device-level policy, common/policy.c: the tight segment under a
 * cap, waiting for pending frees under GMSHIM_PENDING_WAIT, GMSHIM_CACHE_LIMIT, empty cache;
 * the grow sequence, common/grow.c: GMSHIM_DEVICE_LIMIT's release, the driver OOM's release of
 * whole free segments and retry, exact segments, growable ranges' pages) over a driver of the
 * recorded capacity; the threads' caches; a replay's storage. The events that drive it are
 * replay_run.c's, above it. One arena per device: a log of several contending threads replays
 * as if they shared one. */
#include "replay.h"
#include "replay_plan.h"
#include "grow.h"
#include "policy.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define RP_LARGE_ROUND ((uint64_t)GM_LARGE_ROUND)
#define RP_SYNTH_BASE (1ull << 52)   /* addresses of segments the recording never had */
#define RP_RANGE_MAX (4ull << 40)   /* the largest growable range replayed: 4 TiB, 16 MiB of pages */

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
void replay_enforce_cache_limit(replay_t *r)
{
    uint64_t cap = cache_limit_of(r);
    unsigned n = 0;
    if (cap && !r->cfg.guided)
        policy_enforce_cache_limit(&r->heap, cap, remove_segment, r, &n);
    if (cap && r->vmm) /* the ranges' idle pages over the cap, oldest first */
        rplan_range_release(&r->heap, cap, 0, 0);
}

void replay_release_to(replay_t *r, uint64_t seq)
{
    if (seq > r->released)
        r->released = seq;
    if (r->heap.pending_head && r->heap.pending_head->fence_seq <= seq &&
        pool_release_pending(&r->heap, seq, r->now ? r->now : 1) && cache_limit_of(r))
        replay_enforce_cache_limit(r);
}

/* ---- the threads' caches ------------------------------------------------------------------ */

/* A held block back to the pool, free if its fence completed, else pending on it. */
void replay_unhold(replay_t *r, gm_block_t *b)
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
            replay_unhold(r, b);
            any = 1;
        }
    }
    return any;
}

/* Waits for every pending free (when asked), then gives back the wholly free segments (and,
 * when it waited, the planned step's idle pages, as shim/slowpath.c's OOM and API releases); the
 * bytes. */
size_t replay_empty_cache(replay_t *r, int wait, uint64_t idle_ns)
{
    unsigned n = 0;
    return_held(r, SIZE_MAX); /* shim/slowpath.c: the caches give their blocks back first */
    if (wait)
        replay_release_to(r, UINT64_MAX);
    size_t freed = policy_release_free(&r->heap, idle_ns, r->now, remove_segment, r, &n);
    if (r->vmm)
        freed += rplan_range_release(&r->heap, 0, idle_ns, r->now);
    if (wait && r->plan) { /* the OOM's release and an explicit one: the plan's idle pages too */
        uint64_t pages = rplan_give_back(r->plan);
        gm_stat_sub(&r->st.reserved, pages);
        freed += pages;
    }
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
    f->live_peak = res->peak_allocated;
    f->pending = r->st.pending.current;
    size_t largest, count;
    pool_free_summary(&r->heap, &largest, &count);
    f->largest_free = largest;
    f->free_blocks = count;
    if (res->failures == 1)
        res->first = *f;
}

/* After an allocation that succeeded: the run's peaks. */
void replay_note_peaks(replay_t *r)
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
    if (range > RP_RANGE_MAX) /* a damaged log's device or request: no range, a classic segment */
        return GROW_FAILED;
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
    return replay_empty_cache(((rp_grow_t *)g)->r, 1, 0);
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
gm_block_t *replay_exact(replay_t *r, size_t size, uint32_t site, int oom)
{
    rp_grow_t g = {r, size, size, site, oom};
    gm_block_t *b;
    grow_exact(&exact_ops, &g, size, &b);
    if (b)
        replay_note_peaks(r);
    return b;
}

/* GMSHIM_PENDING_WAIT's waits: the fence completes at once. */
static void wait_for(void *r, uint64_t seq)
{
    replay_release_to(r, seq);
}

static int wait_oldest(void *r)
{
    uint64_t seq = pool_oldest_pending_seq(&((replay_t *)r)->heap);
    if (seq)
        replay_release_to(r, seq);
    return seq != 0;
}

gm_block_t *replay_alloc(replay_t *r, size_t req, uint32_t site, int oom, int *grew)
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
        replay_note_peaks(r);
    return b;
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
