/* GMSHIM_PLAN (plan.h): learning a device's step from the online pool's allocations, then
 * serving it from a planned range. Every failure here (host memory, the driver, a capture) sends
 * the allocation to the online pool; the plan never fails a request and never hands out memory
 * the GPU may still use. */
#include "planner.h"
#include "devctx.h"
#include "diag.h"
#include "evlog.h"
#include "fencepol.h"
#include "logrec.h"
#include "options.h"
#include "ranges.h"
#include "slowpath.h"
#include "stepplan.h"
#include "steprec.h"
#include "tcache.h"

#include <stdlib.h>
#include <string.h>

#define PAGE GM_VMM_PAGE
#define LEARN_MAX (1u << 17) /* allocations the recogniser records at most (a step is half) */

enum { ST_OFF = 0, ST_LEARN, ST_SERVE };

/* The recogniser's tags of the online blocks it records, by address (open addressing). */
typedef struct tagent {
    uintptr_t ptr;
    uint32_t tag;
} tagent_t;

struct gm_plan {
    pthread_mutex_t lock;
    int state;                   /* ST_*: written under the lock, read atomically */
    uintptr_t base;              /* the range (read atomically by the free path) */
    size_t size;
    steprec_t *rec;              /* ST_LEARN */
    tagent_t *tags;
    size_t ntags, tagcap;
    stepplan_t *sp;              /* ST_SERVE */
    uint64_t *tokens;            /* per page of the range: the driver's handle, 0 = not mapped */
    uint64_t *requested;         /* per slot: the live block's request */
    uint32_t *sites;             /* per slot: the live block's call site */
    uint64_t last_stamp;         /* the newest log time under the lock (stamp_after) */
    uint64_t gen;                /* planner_forget's count: a plan made before it is gone */
    uint64_t fences, frees;
    uint64_t allocated, allocated_peak, requested_total, requested_peak; /* live planned blocks */
    int released;                /* the online cache was released since the range last grew */
    uint64_t idle_count, idle_since; /* GMSHIM_IDLE_RELEASE: the planned count last seen, and since when */
    uint64_t newest_free_seq;    /* the fence the newest planned free waits for */
    uint64_t open_seq, open_bytes, open_count; /* the planned frees waiting for fence open_seq, still to come */
};

static int on_warned;

void planner_setup(gm_device_t *d)
{
    if (!options_get(GM_OPT_PLAN))
        return;
    if (!d->ranges) {
        diag_warn_once(&on_warned, "GMSHIM_PLAN needs the driver's virtual memory API (GMSHIM_SEGMENTS=vmm), "
                                   "which device %d lacks: no plan", d->id);
        return;
    }
    gm_plan_t *p = calloc(1, sizeof *p);
    if (!p || !(p->rec = steprec_create(LEARN_MAX))) {
        free(p);
        diag_warn_once(&on_warned, "GMSHIM_PLAN: out of host memory on device %d: no plan", d->id);
        return;
    }
    pthread_mutex_init(&p->lock, NULL);
    p->state = ST_LEARN;
    d->plan = p;
    d->plan_give_back = planner_give_back;
    __atomic_store_n(&d->plan_moves, 1, __ATOMIC_RELAXED);
}

static inline int plan_state(const gm_plan_t *p)
{
    return __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
}

static inline int capturing(gm_device_t *d)
{
    return device_captures(d) || __atomic_load_n(&d->captures_beginning, __ATOMIC_SEQ_CST);
}

/* ---- learning ------------------------------------------------------------------------------- */

static size_t tag_home(const gm_plan_t *p, uintptr_t ptr)
{
    return (size_t)((ptr >> 9) * 0x9E3779B97F4A7C15ull >> 20) & (p->tagcap - 1);
}

static int tags_grow(gm_plan_t *p)
{
    size_t cap = p->tagcap ? p->tagcap * 2 : 1024;
    tagent_t *old = p->tags, *v = calloc(cap, sizeof *v);
    if (!v)
        return -1;
    size_t oldcap = p->tagcap;
    p->tags = v, p->tagcap = cap;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].ptr) {
            size_t j = tag_home(p, old[i].ptr);
            while (v[j].ptr)
                j = (j + 1) & (cap - 1);
            v[j] = old[i];
        }
    free(old);
    return 0;
}

static int tags_put(gm_plan_t *p, uintptr_t ptr, uint32_t tag)
{
    if (2 * (p->ntags + 1) > p->tagcap && tags_grow(p))
        return -1;
    size_t j = tag_home(p, ptr);
    while (p->tags[j].ptr && p->tags[j].ptr != ptr)
        j = (j + 1) & (p->tagcap - 1);
    p->ntags += !p->tags[j].ptr;
    p->tags[j] = (tagent_t){ptr, tag};
    return 0;
}

/* The tag of ptr, removed (backward shift); 0 when it has none. */
static uint32_t tags_take(gm_plan_t *p, uintptr_t ptr)
{
    if (!p->tagcap)
        return 0;
    size_t i = tag_home(p, ptr);
    while (p->tags[i].ptr && p->tags[i].ptr != ptr)
        i = (i + 1) & (p->tagcap - 1);
    if (!p->tags[i].ptr)
        return 0;
    uint32_t tag = p->tags[i].tag;
    p->ntags--;
    for (size_t j = i;;) {
        p->tags[i].ptr = 0;
        for (;;) {
            j = (j + 1) & (p->tagcap - 1);
            if (!p->tags[j].ptr)
                return tag;
            size_t h = tag_home(p, p->tags[j].ptr);
            if (i <= j ? (h <= i || h > j) : (h <= i && h > j))
                break;
        }
        p->tags[i] = p->tags[j];
        i = j;
    }
}

static void learning_end(gm_device_t *d, gm_plan_t *p)
{
    steprec_destroy(p->rec);
    p->rec = NULL;
    free(p->tags);
    p->tags = NULL;
    p->ntags = p->tagcap = 0;
    __atomic_store_n(&d->plan_moves, 0, __ATOMIC_RELAXED);
}

/* Under the lock: the recogniser has its step: the plan and its range (no page mapped yet).
 * 1 when the plan serves from now on (the online cache is then released, outside the lock). */
static int install(gm_device_t *d, gm_plan_t *p)
{
    steprec_step_t step;
    stepplan_t *sp = steprec_step(p->rec, &step) == 0 ? stepplan_build(&step, GM_ROUND) : NULL;
    size_t size = sp ? gm_round_up(stepplan_top(sp), PAGE) : 0;
    uint64_t *tokens = sp ? calloc(size / PAGE, sizeof *tokens) : NULL;
    uint64_t *req = sp ? calloc(stepplan_period(sp), sizeof *req) : NULL;
    uint32_t *sites = sp ? calloc(stepplan_period(sp), sizeof *sites) : NULL;
    uintptr_t base = 0;
    int ok = tokens && req && sites;
    if (ok) {
        gm_ctx_t c;
        devctx_enter(d, &c);
        ok = ranges_plan_reserve(d, size, &base) == 0;
        devctx_leave(&c);
    }
    learning_end(d, p);
    if (!ok) {
        stepplan_destroy(sp);
        free(tokens), free(req), free(sites);
        __atomic_store_n(&p->state, ST_OFF, __ATOMIC_RELEASE);
        diag_verbose("GMSHIM_PLAN: no plan on device %d (out of host memory or addresses)", d->id);
        return 0;
    }
    p->sp = sp, p->tokens = tokens, p->requested = req, p->sites = sites;
    __atomic_store_n(&p->base, base, __ATOMIC_RELAXED);
    __atomic_store_n(&p->size, size, __ATOMIC_RELAXED);
    __atomic_store_n(&p->state, ST_SERVE, __ATOMIC_RELEASE);
    diag_verbose("GMSHIM_PLAN: device %d: a step of %u allocations, %u planned in %zu bytes (its floor %llu)",
                 d->id, stepplan_period(sp), stepplan_nplanned(sp), size, (unsigned long long)stepplan_floor(sp));
    return 1;
}

void planner_note_online(gm_device_t *d, size_t size, uint32_t site, uintptr_t ptr)
{
    gm_plan_t *p = d->plan;
    if (plan_state(p) != ST_LEARN || capturing(d))
        return;
    size_t rounded = pool_round(size);
    int made = 0;
    pthread_mutex_lock(&p->lock);
    if (p->state == ST_LEARN) {
        uint32_t tag = steprec_alloc(p->rec, steprec_key(site, rounded), rounded);
        if (tag && tags_put(p, ptr, tag)) {
            learning_end(d, p); /* out of host memory: no plan, nothing else changes */
            __atomic_store_n(&p->state, ST_OFF, __ATOMIC_RELEASE);
        } else if (steprec_state(p->rec) == STEPREC_READY) {
            made = install(d, p);
        } else if (steprec_state(p->rec) == STEPREC_FULL) {
            learning_end(d, p);
            __atomic_store_n(&p->state, ST_OFF, __ATOMIC_RELEASE);
            diag_verbose("GMSHIM_PLAN: device %d repeats no step the recogniser finds: no plan", d->id);
        }
    }
    pthread_mutex_unlock(&p->lock);
    if (made && !capturing(d))
        slowpath_trim(d, 0); /* what the online pool caches: the plan serves the step now */
}

/* ---- serving -------------------------------------------------------------------------------- */

/* Maps the pages of [off, off + n) the range lacks, in runs; the online cache is released first
 * (the lock dropped for it) when the mapping would lift the device past its peak. 0, or -1. */
static int map_slot(gm_device_t *d, gm_plan_t *p, uint64_t off, size_t n, uint64_t gen)
{
    size_t first = off / PAGE, last = (off + n - 1) / PAGE, missing = 0;
    for (size_t i = first; i <= last; i++)
        missing += !p->tokens[i];
    if (!missing)
        return 0;
    if (!p->released && device_reserved(d) + missing * PAGE > __atomic_load_n(&d->reserved_peak, __ATOMIC_RELAXED)) {
        pthread_mutex_unlock(&p->lock);
        if (!capturing(d))
            slowpath_trim(d, 0);
        pthread_mutex_lock(&p->lock);
        if (p->gen != gen || p->state != ST_SERVE)
            return -2; /* a reset meanwhile: the slot is no more */
        p->released = 1;
    }
    gm_ctx_t c;
    devctx_enter(d, &c);
    int rc = 0;
    for (size_t i = first; i <= last && !rc; i++) {
        if (p->tokens[i])
            continue;
        size_t j = i;
        while (j + 1 <= last && !p->tokens[j + 1])
            j++;
        rc = ranges_plan_map(d, p->base + i * PAGE, j - i + 1, &p->tokens[i], &p->last_stamp);
        i = j;
    }
    devctx_leave(&c);
    if (!rc)
        p->released = 0;
    return rc;
}

/* Under the lock: slot s taken when its addresses are free. A fence the slot waits for is
 * recorded if it is still to come (as the pool's miss records one; under GPU order it answers at
 * once), else polled, once. 0 and *off, or nonzero. A fence still to come is not recorded for one
 * small freed block alone (below the pool's threshold, fencepol_threshold): a small block freed and
 * wanted again at once (a loop of one small allocation) goes to the online pool, whose cache shares
 * a fence among many frees, instead of costing a fence a pair; an OOM's release still unmaps the
 * slot's pages for the pool once their fences complete. */
static uint64_t claim(gm_device_t *d, gm_plan_t *p, int32_t s, uint64_t *off)
{
    uint64_t w = stepplan_claim(p->sp, s, device_reusable(d), off);
    if (!w || w == STEPPLAN_BUSY)
        return w;
    if (w > device_issued(d)) {
        if (w == p->open_seq && p->open_count < 2 && p->open_bytes < fencepol_threshold(d, device_reserved(d)))
            return w;
        if (fencepol_issue_device(d, GMLOG_FENCE_BY_NEED) != 0)
            return w;
        p->fences++;
    }
    if (w > device_reusable(d))
        fencepol_poll_device(d, 0);
    return stepplan_claim(p->sp, s, device_reusable(d), off);
}

int planner_alloc(gm_device_t *d, size_t size, uint32_t site, void **out)
{
    gm_plan_t *p = d->plan;
    if (plan_state(p) != ST_SERVE || capturing(d))
        return 0;
    size_t rounded = pool_round(size);
    pthread_mutex_lock(&p->lock);
    if (p->state != ST_SERVE) {
        pthread_mutex_unlock(&p->lock);
        return 0;
    }
    int32_t s = stepplan_next(p->sp, steprec_key(site, rounded));
    uint64_t off = 0, gen = p->gen;
    if (s < 0) {
        pthread_mutex_unlock(&p->lock);
        return 0;
    }
    if (rounded > stepplan_slot_size(p->sp, s) || claim(d, p, s, &off) != 0) {
        stepplan_unclaimed(p->sp); /* a key alike but larger, or the addresses still held */
        pthread_mutex_unlock(&p->lock);
        return 0;
    }
    int rc = map_slot(d, p, off, rounded, gen);
    if (rc) {
        if (rc == -1)
            stepplan_release(p->sp, s);
        pthread_mutex_unlock(&p->lock);
        return 0;
    }
    p->requested[s] = size;
    p->sites[s] = site;
    p->requested_total += size;
    p->allocated += stepplan_slot_size(p->sp, s);
    if (p->allocated > p->allocated_peak)
        p->allocated_peak = p->allocated;
    if (p->requested_total > p->requested_peak)
        p->requested_peak = p->requested_total;
    __atomic_store_n(&d->plan_allocated, p->allocated, __ATOMIC_RELAXED);
    __atomic_store_n(&d->plan_requested, p->requested_total, __ATOMIC_RELAXED);
    uintptr_t ptr = p->base + off;
    if (evlog_enabled()) {
        uint64_t now = stamp_after(&p->last_stamp, gm_now_unordered_ns());
        evlog_alloc(d->id, GMLOG_A_PLANNED, ptr, size, rounded, site, now, now);
    }
    pthread_mutex_unlock(&p->lock);
    if (device_narenas(d) == 1) /* the device's peak with the pool's blocks (one arena: exact) */
        tcache_note_peak(d, d->arenas[0], tcache_mine(d));
    *out = (void *)ptr;
    return 1;
}

int planner_free(gm_device_t *d, uintptr_t ptr, uint32_t site, size_t *bytes, uint64_t *issued)
{
    gm_plan_t *p = d->plan;
    int state = plan_state(p);
    uintptr_t base = __atomic_load_n(&p->base, __ATOMIC_RELAXED);
    if (state == ST_LEARN) {
        pthread_mutex_lock(&p->lock);
        uint32_t tag = p->state == ST_LEARN ? tags_take(p, ptr) : 0;
        if (tag)
            steprec_free(p->rec, tag);
        pthread_mutex_unlock(&p->lock);
        return PLANNER_NOT_MINE;
    }
    if (state != ST_SERVE || ptr - base >= __atomic_load_n(&p->size, __ATOMIC_RELAXED))
        return PLANNER_NOT_MINE;
    pthread_mutex_lock(&p->lock);
    int32_t s = p->state == ST_SERVE && ptr - p->base < p->size ? stepplan_live_slot(p->sp, ptr - p->base) : -1;
    if (s < 0) {
        pthread_mutex_unlock(&p->lock);
        return PLANNER_BAD;
    }
    uint64_t n = stepplan_slot_size(p->sp, s);
    p->allocated -= n;
    p->requested_total -= p->requested[s];
    __atomic_store_n(&d->plan_allocated, p->allocated, __ATOMIC_RELAXED);
    __atomic_store_n(&d->plan_requested, p->requested_total, __ATOMIC_RELAXED);
    p->frees++;
    /* The fence number before the record: a fence numbered past it records its events later,
     * after the work this free follows (as the pool's free reads it). */
    uint64_t seq = d->trust_stream_order ? 0 : device_issued(d) + 1;
    if (evlog_enabled()) {
        uint64_t now = stamp_after(&p->last_stamp, gm_now_unordered_ns());
        evlog_free(d->id, seq ? GMLOG_F_DEFERRED : 0, ptr, site, now, now);
    }
    stepplan_free(p->sp, ptr - p->base, seq);
    if (seq != p->open_seq)
        p->open_seq = seq, p->open_bytes = p->open_count = 0;
    p->open_bytes += n;
    p->open_count++;
    if (seq > p->newest_free_seq)
        __atomic_store_n(&p->newest_free_seq, seq, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&p->lock);
    *bytes = n;
    *issued = seq ? seq - 1 : UINT64_MAX;
    return PLANNER_FREED;
}

size_t planner_give_back(gm_device_t *d, int reason)
{
    gm_plan_t *p = d->plan;
    if (!p || plan_state(p) != ST_SERVE || capturing(d))
        return 0;
    /* The trimmer never waits for the GPU: only pages whose freed blocks' fences have completed go
     * (a fence recorded now for the newest frees, found complete by a later pass); an OOM release
     * and an explicit empty cache wait for the device once instead (ranges_plan_unmap). */
    int trimmer = reason == GMLOG_EMPTY_IDLE || reason == GMLOG_EMPTY_PERIODIC;
    if (trimmer) {
        if (__atomic_load_n(&p->newest_free_seq, __ATOMIC_RELAXED) > device_issued(d))
            fencepol_issue_device(d, GMLOG_FENCE_BY_TRIM);
        fencepol_poll_device(d, 1);
    }
    pthread_mutex_lock(&p->lock);
    if (reason == GMLOG_EMPTY_IDLE && p->state == ST_SERVE) {
        /* Only a plan that served nothing for GMSHIM_IDLE_RELEASE (the trimmer's passes see its
         * count unchanged that long): a step under way would map the pages again at once. */
        stepplan_stats_t st;
        stepplan_stats(p->sp, &st);
        uint64_t now = gm_now_ns(), idle_ns = (uint64_t)options_get(GM_OPT_IDLE_RELEASE) * 1000000u;
        if (st.planned != p->idle_count || !p->idle_since) {
            p->idle_count = st.planned;
            p->idle_since = now;
        }
        if (now - p->idle_since < idle_ns) {
            pthread_mutex_unlock(&p->lock);
            return 0;
        }
    }
    size_t npages = p->state == ST_SERVE ? p->size / PAGE : 0, mapped = 0;
    for (size_t i = 0; i < npages; i++)
        mapped += p->tokens[i] != 0;
    uint8_t *held = mapped ? calloc(npages, 1) : NULL;
    if (!held || capturing(d)) {
        pthread_mutex_unlock(&p->lock);
        free(held);
        return 0;
    }
    /* A freed block's work was queued before its free: the device waited for before the first
     * page goes (ranges_plan_unmap) has completed every fence a freed slot waits for. Only the
     * pages of live blocks stay. */
    stepplan_held_pages(p->sp, PAGE, trimmer ? device_done(d) : UINT64_MAX, held);
    uint64_t t0 = gm_now_ns();
    size_t gone = 0;
    int synced = trimmer; /* every block on the pages to go is freed and its fence complete */
    gm_ctx_t c;
    devctx_enter(d, &c);
    for (size_t i = 0; i < npages; i++) {
        if (!p->tokens[i] || held[i])
            continue;
        size_t j = i;
        while (j + 1 < npages && p->tokens[j + 1] && !held[j + 1])
            j++;
        int rc = ranges_plan_unmap(d, p->base + i * PAGE, j - i + 1, &p->tokens[i], &synced, &p->last_stamp);
        for (size_t k = i; k <= j; k++)
            gone += !p->tokens[k];
        if (rc)
            break;
        i = j;
    }
    devctx_leave(&c);
    pthread_mutex_unlock(&p->lock);
    free(held);
    if (gone)
        logrec_empty_cache(d->id, reason, (uint64_t)gone * PAGE, (unsigned)gone, t0);
    return gone * PAGE;
}

int planner_owns_address(gm_device_t *d, uintptr_t ptr, int *kind)
{
    gm_plan_t *p = d->plan;
    if (!p || plan_state(p) != ST_SERVE)
        return 0;
    pthread_mutex_lock(&p->lock);
    int in = p->state == ST_SERVE && ptr - p->base < p->size;
    if (in) {
        uint64_t off = ptr - p->base, n = 0;
        /* A slot's start that no live block holds was freed (or never handed out): a double free. */
        *kind = stepplan_live_at(p->sp, off, &n) || off % GM_ROUND ? GMLOG_WARN_INTERIOR_FREE : GMLOG_WARN_DOUBLE_FREE;
    }
    pthread_mutex_unlock(&p->lock);
    return in;
}

/* The plan's counts, its lock held. */
static void counts_locked(const gm_plan_t *p, planner_counts_t *out)
{
    memset(out, 0, sizeof *out);
    out->state = p->state;
    out->fences = p->fences;
    out->frees = p->frees;
    if (p->sp) {
        stepplan_stats_t st;
        stepplan_stats(p->sp, &st);
        out->planned = st.planned;
        out->online = st.online;
        out->busy = st.busy;
        out->departures = st.departures;
        out->period = stepplan_period(p->sp);
        out->top = p->size;
    }
    out->allocated = p->allocated;
    out->allocated_peak = p->allocated_peak;
    out->requested = p->requested_total;
    out->requested_peak = p->requested_peak;
}

void planner_counts(gm_device_t *d, planner_counts_t *out)
{
    gm_plan_t *p = d->plan;
    if (!p) {
        memset(out, 0, sizeof *out);
        return;
    }
    pthread_mutex_lock(&p->lock);
    counts_locked(p, out);
    pthread_mutex_unlock(&p->lock);
}

void planner_forget(gm_device_t *d)
{
    gm_plan_t *p = d->plan;
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    /* The context's memory went with it: nothing to unmap, addresses and handles included. */
    stepplan_destroy(p->sp);
    free(p->tokens), free(p->requested), free(p->sites), free(p->tags);
    p->sp = NULL, p->tokens = p->requested = NULL, p->sites = NULL, p->tags = NULL;
    p->ntags = p->tagcap = 0;
    __atomic_store_n(&p->size, 0, __ATOMIC_RELAXED);
    p->allocated = p->requested_total = 0;
    p->idle_count = p->idle_since = 0;
    __atomic_store_n(&p->newest_free_seq, 0, __ATOMIC_RELAXED); /* the device's fences start again */
    p->open_seq = p->open_bytes = p->open_count = 0;
    __atomic_store_n(&d->plan_allocated, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&d->plan_requested, 0, __ATOMIC_RELAXED);
    p->gen++;
    steprec_destroy(p->rec);
    p->rec = steprec_create(LEARN_MAX);
    __atomic_store_n(&p->state, p->rec ? ST_LEARN : ST_OFF, __ATOMIC_RELEASE);
    __atomic_store_n(&d->plan_moves, p->rec != NULL, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&p->lock);
}

void planner_cut_lock(gm_device_t *d)
{
    if (d->plan)
        pthread_mutex_lock(&d->plan->lock);
}

uint32_t planner_cut_pages(gm_device_t *d, int write, uint64_t now)
{
    gm_plan_t *p = d->plan;
    if (!p || p->state != ST_SERVE || !p->tokens)
        return 0;
    return ranges_cut_pages(d->id, p->base, p->tokens, p->size / PAGE, write, now);
}

void planner_cut_stats(gm_device_t *d, gmlog_cut_t *c)
{
    if (!d->plan)
        return;
    planner_counts_t pc;
    counts_locked(d->plan, &pc);
    c->allocs += pc.planned;
    c->hits += pc.planned;
    c->frees += pc.frees;
    c->allocated += pc.allocated;
    c->requested += pc.requested;
}

uint32_t planner_cut_blocks(gm_device_t *d, int write, uint64_t now)
{
    gm_plan_t *p = d->plan;
    if (!p || p->state != ST_SERVE || !p->sp)
        return 0;
    uint32_t n = 0;
    for (uint32_t s = 0; s < stepplan_period(p->sp); s++) {
        uint64_t off;
        if (!stepplan_slot_live(p->sp, (int32_t)s, &off))
            continue;
        if (write)
            evlog_alloc(d->id, GMLOG_A_PLANNED, p->base + off, p->requested[s], pool_round(p->requested[s]),
                        p->sites[s], now, now);
        n++;
    }
    return n;
}

void planner_cut_unlock(gm_device_t *d, uint64_t after)
{
    gm_plan_t *p = d->plan;
    if (!p)
        return;
    if (p->last_stamp < after)
        p->last_stamp = after; /* the plan's next records are timed after the cut */
    pthread_mutex_unlock(&p->lock);
}

void planner_fork_lock(gm_device_t *d)
{
    if (d->plan)
        pthread_mutex_lock(&d->plan->lock);
}

void planner_fork_unlock(gm_device_t *d)
{
    if (d->plan)
        pthread_mutex_unlock(&d->plan->lock);
}
