/* Thread caches (tcache.h): a thread's small freed blocks, reused by it without an arena lock.
 * Its lock is an exchange on a line of its own, taken by its thread on each call; others take it
 * to take blocks back, to free one of its thread's blocks, for a checkpoint or the stats. Whoever
 * holds it waits for no other lock but the log's; its own thread never waits for it: found
 * taken, the call goes to the arenas instead. */
#include "tcache.h"
#include "evlog.h"
#include "fencepol.h"
#include "state.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

__thread gm_tcache_t *gm_tcache_mine[GM_MAX_DEVICES] __attribute__((tls_model("initial-exec")));

#define GM_TCACHE_POLL_EVERY 32 /* misses on a recorded but unconfirmed fence between two polls */

static inline int tc_trylock(gm_tcache_t *tc)
{
    return __atomic_exchange_n(&tc->lock, 1, __ATOMIC_ACQUIRE) == 0;
}

/* Held for a few dozen instructions at a time; a holder descheduled (more threads than CPUs)
 * is given the CPU rather than spun against. */
static void tc_lock(gm_tcache_t *tc)
{
    for (unsigned spins = 0; !tc_trylock(tc);)
        while (__atomic_load_n(&tc->lock, __ATOMIC_RELAXED)) {
            if (++spins >= 64)
                sched_yield();
#if defined(__x86_64__) || defined(__i386__)
            else
                __builtin_ia32_pause();
#endif
        }
}

static inline void tc_unlock(gm_tcache_t *tc)
{
    __atomic_store_n(&tc->lock, 0, __ATOMIC_RELEASE);
}

static inline unsigned slot_of(uintptr_t ptr)
{
    return (unsigned)(((ptr >> 9) * 0x9E3779B97F4A7C15ull) >> 54); /* 10 bits: GM_TCACHE_SLOTS */
}
_Static_assert(GM_TCACHE_SLOTS == 1024, "slot_of takes 10 bits");

static inline gm_tc_queue_t *queue_of(gm_tcache_t *tc, size_t size)
{
    return &tc->cls[size / GM_ROUND - 1];
}

/* bytes and requested_adj change under the lock and are read without it too (tcache_note_peak):
 * stored atomically. */
static inline void adj_add(gm_tcache_t *tc, int64_t delta)
{
    __atomic_store_n(&tc->requested_adj, tc->requested_adj + delta, __ATOMIC_RELAXED);
}

/* ---- the cached blocks' two lists: by size (fl) and by age (pl) ----------------------------- */

static void cached_push(gm_tcache_t *tc, gm_block_t *b)
{
    gm_tc_queue_t *q = queue_of(tc, b->size);
    b->fl.next = NULL;
    b->fl.prev = q->tail;
    if (q->tail)
        q->tail->fl.next = b;
    else
        q->head = b;
    q->tail = b;
    b->pl.next = NULL;
    b->pl.prev = tc->newest;
    if (tc->newest)
        tc->newest->pl.next = b;
    else
        tc->oldest = b;
    tc->newest = b;
    __atomic_store_n(&tc->bytes, tc->bytes + b->size, __ATOMIC_RELAXED);
}

static void cached_unlink(gm_tcache_t *tc, gm_block_t *b)
{
    gm_tc_queue_t *q = queue_of(tc, b->size);
    if (b->fl.prev)
        b->fl.prev->fl.next = b->fl.next;
    else
        q->head = b->fl.next;
    if (b->fl.next)
        b->fl.next->fl.prev = b->fl.prev;
    else
        q->tail = b->fl.prev;
    if (b->pl.prev)
        b->pl.prev->pl.next = b->pl.next;
    else
        tc->oldest = b->pl.next;
    if (b->pl.next)
        b->pl.next->pl.prev = b->pl.prev;
    else
        tc->newest = b->pl.prev;
    __atomic_store_n(&tc->bytes, tc->bytes - b->size, __ATOMIC_RELAXED);
}

static inline gm_arena_t *arena_of(const gm_block_t *b)
{
    return (gm_arena_t *)((char *)b->seg->heap - offsetof(gm_arena_t, general));
}

/* A cached block leaves the cache (lock held) for `out`, a chain through pl.next that its arena
 * takes back (give_back; the arena's index in fl.bin, read there before anything else of it).
 * Its requested bytes as the arena counted them leave the cache's adjustment. */
static void detach(gm_tcache_t *tc, gm_block_t *b, gm_block_t **out)
{
    cached_unlink(tc, b);
    adj_add(tc, b->tc_requested);
    b->fl.bin = (uint32_t)arena_of(b)->index;
    b->pl.next = *out;
    *out = b;
}

/* Under a's lock: the arena counts b's request as the program made it last, not as it was when
 * b joined its cache. */
static void count_requested_now(gm_arena_t *a, const gm_block_t *b)
{
    gm_stat_t *r = &a->bytes.requested;
    __atomic_store_n(&r->current, r->current + b->requested - b->tc_requested, __ATOMIC_RELAXED);
}

/* Under a's lock: a detached block back in its arena, freed as the program freed it; logged (the
 * replay follows the caches through these records). */
static size_t back_to_arena(gm_arena_t *a, gm_block_t *b, uint64_t now)
{
    int deferred = b->fence_seq > device_reusable(a->dev);
    if (evlog_enabled())
        evlog_free(a->dev->id, GMLOG_F_RETURNED | (deferred ? GMLOG_F_DEFERRED : 0), b->ptr, 0,
                   arena_stamp(a, now), now);
    /* The arena counted `requested` as it was when the block joined the cache. */
    count_requested_now(a, b);
    b->tc = GM_TC_NONE;
    b->tc_owner = NULL;
    HASH_DEL(a->live, b);
    size_t size = b->size;
    if (deferred)
        pool_defer_block(&a->general, b, b->fence_seq);
    else
        pool_free_block(&a->general, b, now);
    return size;
}

/* Detached blocks of device d back to their arenas, each arena locked once; no lock held. `gen`:
 * the device's resets when they were detached. A reset since (a program resetting the device
 * while another thread's blocks were on their way back) took them with everything else: the
 * block structs are still memory (device_forget keeps their storage) but no longer these. */
static void give_back(gm_device_t *d, gm_block_t *chain, uint64_t gen)
{
    while (chain) {
        int n = device_narenas(d);
        gm_arena_t *a = d->arenas[chain->fl.bin < (uint32_t)n ? chain->fl.bin : 0];
        pthread_mutex_lock(&a->lock);
        if (__atomic_load_n(&d->resets, __ATOMIC_RELAXED) != gen) {
            pthread_mutex_unlock(&a->lock);
            return;
        }
        /* After the frees' records (the cache's lock was taken since): an allocation of these
         * blocks from the arena is stamped after them. */
        uint64_t now = gm_now_ns();
        arena_note_stamp(a, now);
        gm_block_t **link = &chain;
        while (*link) {
            gm_block_t *b = *link;
            if (b->fl.bin != (uint32_t)a->index) {
                link = &b->pl.next;
                continue;
            }
            *link = b->pl.next;
            back_to_arena(a, b, now);
        }
        pthread_mutex_unlock(&a->lock);
    }
}

/* ---- the calling thread's caches ------------------------------------------------------------- */

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static int exit_key_made;

static void thread_exit_cb(void *unused)
{
    (void)unused;
    tcache_thread_exit();
}

static void make_exit_key(void)
{
    exit_key_made = pthread_key_create(&exit_key, thread_exit_cb) == 0;
}

gm_tcache_t *tcache_make(gm_device_t *d)
{
    gm_tcache_t *tc = NULL;
    /* A cache whose thread ended: its blocks went back; blocks it handed out still name it. */
    for (gm_tcache_t *t = __atomic_load_n(&d->tcaches, __ATOMIC_ACQUIRE); t && !tc; t = t->next) {
        int dead = 1;
        if (__atomic_load_n(&t->dead, __ATOMIC_RELAXED) &&
            __atomic_compare_exchange_n(&t->dead, &dead, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            tc = t;
    }
    if (!tc) {
        void *p = NULL;
        if (posix_memalign(&p, GM_CACHE_LINE, sizeof *tc) != 0)
            return NULL;
        tc = memset(p, 0, sizeof *tc);
        tc->dev = d;
        gm_tcache_t *head = __atomic_load_n(&d->tcaches, __ATOMIC_RELAXED);
        do
            tc->next = head;
        while (!__atomic_compare_exchange_n(&d->tcaches, &head, tc, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
    }
    tc_lock(tc);
    memset(&tc->open, 0, sizeof tc->open);
    tc->since_poll = 0;
    tc_unlock(tc);
    pthread_once(&exit_once, make_exit_key);
    if (exit_key_made)
        pthread_setspecific(exit_key, (void *)1);
    gm_tcache_mine[d->id] = tc;
    return tc;
}

void tcache_thread_exit(void)
{
    /* A fork child's caches are copies of the parent's, their locks perhaps copied held. */
    if (__atomic_load_n(&gm_state, __ATOMIC_ACQUIRE) == GM_CHILD)
        return;
    for (int i = 0; i < GM_MAX_DEVICES; i++) {
        gm_tcache_t *tc = gm_tcache_mine[i];
        if (!tc)
            continue;
        gm_tcache_mine[i] = NULL;
        gm_block_t *chain = NULL;
        tc_lock(tc);
        uint64_t gen = __atomic_load_n(&tc->dev->resets, __ATOMIC_RELAXED);
        while (tc->oldest)
            detach(tc, tc->oldest, &chain);
        memset(tc->slot, 0, sizeof tc->slot);
        __atomic_store_n(&tc->dead, 1, __ATOMIC_RELEASE);
        tc_unlock(tc);
        give_back(tc->dev, chain, gen);
    }
}

/* ---- the hit path ---------------------------------------------------------------------------- */

/* A cached block handed out again (lock held). */
static void hand_out(gm_tcache_t *tc, gm_block_t *b, size_t size, uint32_t site)
{
    cached_unlink(tc, b);
    adj_add(tc, (int64_t)size);
    b->requested = size;
    b->site = site;
    b->born = __atomic_load_n(&tc->dev->warn_epoch, __ATOMIC_RELAXED);
    b->tc = GM_TC_USER;
    unsigned s = slot_of(b->ptr);
    tc->slot[s].ptr = b->ptr;
    tc->slot[s].b = b;
}

int tcache_alloc(gm_tcache_t *tc, size_t rounded, size_t size, uint32_t site, void **out)
{
    gm_device_t *d = tc->dev;
    if (unlikely(!tc_trylock(tc)))
        return GM_TC_MISS;
    gm_block_t *b = queue_of(tc, rounded)->head;
    if (unlikely(!b || b->fence_seq > device_reusable(d) || device_captures(d))) {
        int poll = b && b->fence_seq <= device_issued(d) && ++tc->since_poll >= GM_TCACHE_POLL_EVERY;
        if (poll)
            tc->since_poll = 0;
        tc_unlock(tc);
        return poll ? GM_TC_POLL : GM_TC_MISS;
    }
    hand_out(tc, b, size, site);
    tcache_note_peak(d, arena_of(b), tc);
    tc->allocs++;
    tc->alloc_bytes += b->size;
    tc->requested_bytes += size;
    evlog_cached_alloc(d->id, &tc->last_stamp, b->ptr, size, b->size, site);
    tc_unlock(tc);
    *out = (void *)b->ptr;
    return GM_TC_HIT;
}

int tcache_free(gm_tcache_t *tc, uintptr_t ptr, uint32_t site)
{
    gm_device_t *d = tc->dev;
    unsigned s = slot_of(ptr);
    if (unlikely(!tc_trylock(tc)))
        return 0;
    if (tc->slot[s].ptr != ptr) {
        tc_unlock(tc);
        return 0;
    }
    gm_block_t *b = tc->slot[s].b;
    tc->slot[s].ptr = 0;
    int trust = d->trust_stream_order;
    uint64_t issued = device_issued(d);
    b->fence_seq = trust ? 0 : issued + 1; /* the next fence's number: see fencepol.h */
    b->tc = GM_TC_CACHED;
    adj_add(tc, -(int64_t)b->requested);
    cached_push(tc, b);
    tc->frees++;
    /* Before the block can be reused: by this thread under this lock, by others only after a
     * drain has taken the lock. */
    evlog_cached_free(d->id, &tc->last_stamp, trust ? 0 : GMLOG_F_DEFERRED, ptr, site);
    int r = GM_TC_FREED;
    if (!trust && fencepol_open_add(d, &tc->open, b->size, issued, device_reserved(d)))
        r |= GM_TC_FENCE;
    if (tc->bytes > d->tcache_max)
        r |= GM_TC_OVER;
    tc_unlock(tc);
    return r;
}

void tcache_shrink(gm_tcache_t *tc)
{
    size_t keep = tc->dev->tcache_max - tc->dev->tcache_max / 4;
    gm_block_t *chain = NULL;
    tc_lock(tc);
    uint64_t gen = __atomic_load_n(&tc->dev->resets, __ATOMIC_RELAXED);
    while (tc->oldest && tc->bytes > keep)
        detach(tc, tc->oldest, &chain);
    tc_unlock(tc);
    give_back(tc->dev, chain, gen);
}

/* ---- the arenas' side ------------------------------------------------------------------------ */

gm_block_t *tcache_take(gm_tcache_t *tc, size_t rounded, size_t size, uint32_t site)
{
    tc_lock(tc);
    gm_block_t *b = queue_of(tc, rounded)->head;
    if (b && b->fence_seq <= device_reusable(tc->dev))
        hand_out(tc, b, size, site);
    else
        b = NULL;
    tc_unlock(tc);
    return b;
}

void tcache_adopt(gm_tcache_t *tc, gm_block_t *b)
{
    tc_lock(tc); /* its own thread: only a drain or a checkpoint holds it, briefly */
    b->tc = GM_TC_USER;
    b->tc_owner = tc;
    b->tc_requested = (uint32_t)b->requested;
    unsigned s = slot_of(b->ptr);
    tc->slot[s].ptr = b->ptr; /* a block of the same slot before it frees through its arena */
    tc->slot[s].b = b;
    tc_unlock(tc);
}

int tcache_disown(gm_arena_t *a, gm_block_t *b)
{
    gm_tcache_t *tc = b->tc_owner;
    tc_lock(tc);
    int cached = b->tc == GM_TC_CACHED;
    if (!cached) {
        unsigned s = slot_of(b->ptr);
        if (tc->slot[s].ptr == b->ptr)
            tc->slot[s].ptr = 0;
        /* The arena counts what the program asked for from now on. */
        adj_add(tc, (int64_t)b->tc_requested - (int64_t)b->requested);
        count_requested_now(a, b);
        b->tc = GM_TC_NONE;
        b->tc_owner = NULL;
    }
    arena_note_stamp(a, tc->last_stamp);
    tc_unlock(tc);
    return cached ? -1 : 0;
}

size_t tcache_drain(gm_arena_t *a, gm_tcache_t *keep, size_t keep_size)
{
    gm_device_t *d = a->dev;
    gm_block_t *chain = NULL;
    for (gm_tcache_t *tc = __atomic_load_n(&d->tcaches, __ATOMIC_ACQUIRE); tc; tc = tc->next) {
        /* A cache in use right now (its thread in a call, or another drain) keeps its blocks
         * this time, unless the pool is about to be emptied: then they must come back. */
        if (keep_size != GM_TCACHE_ALL && tc != keep) {
            if (!tc_trylock(tc))
                continue;
        } else {
            tc_lock(tc);
        }
        for (gm_block_t *b = tc->oldest, *next; b; b = next) {
            next = b->pl.next;
            if (b->seg->heap == &a->general && !(tc == keep && b->size == keep_size))
                detach(tc, b, &chain);
        }
        tc_unlock(tc);
    }
    if (!chain)
        return 0;
    uint64_t now = gm_now_ns();
    arena_note_stamp(a, now);
    size_t bytes = 0;
    while (chain) {
        gm_block_t *b = chain;
        chain = b->pl.next;
        bytes += back_to_arena(a, b, now);
    }
    return bytes;
}

/* ---- the device as a whole ------------------------------------------------------------------- */

static void raise_to(uint64_t *peak, uint64_t v)
{
    uint64_t p = __atomic_load_n(peak, __ATOMIC_RELAXED);
    while (v > p && !__atomic_compare_exchange_n(peak, &p, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

void tcache_note_peak(gm_device_t *d, const gm_arena_t *a, const gm_tcache_t *tc)
{
    uint64_t alloc = __atomic_load_n(&a->bytes.allocated.current, __ATOMIC_RELAXED);
    uint64_t req = __atomic_load_n(&a->bytes.requested.current, __ATOMIC_RELAXED);
    if (tc) {
        uint64_t cached = __atomic_load_n(&tc->bytes, __ATOMIC_RELAXED);
        alloc = alloc > cached ? alloc - cached : 0;
        req += (uint64_t)__atomic_load_n(&tc->requested_adj, __ATOMIC_RELAXED);
    }
    /* The planned step's blocks are allocated too (planner.c keeps these as it serves). */
    alloc += __atomic_load_n(&d->plan_allocated, __ATOMIC_RELAXED);
    req += __atomic_load_n(&d->plan_requested, __ATOMIC_RELAXED);
    raise_to(&d->peak_allocated_seen, alloc);
    raise_to(&d->peak_requested_seen, req);
}

void tcache_peaks(gm_device_t *d, int narenas, unsigned long long *allocated, unsigned long long *requested)
{
    if (narenas != 1)
        return;
    uint64_t alloc = __atomic_load_n(&d->peak_allocated_seen, __ATOMIC_RELAXED);
    uint64_t req = __atomic_load_n(&d->peak_requested_seen, __ATOMIC_RELAXED);
    if (alloc < *allocated)
        *allocated = alloc;
    if (req < *requested)
        *requested = req;
}

static void sum_held(gm_device_t *d, gm_tcache_sums_t *out)
{
    memset(out, 0, sizeof *out);
    for (gm_tcache_t *tc = __atomic_load_n(&d->tcaches, __ATOMIC_ACQUIRE); tc; tc = tc->next) {
        out->allocs += tc->allocs;
        out->frees += tc->frees;
        out->alloc_bytes += tc->alloc_bytes;
        out->requested_bytes += tc->requested_bytes;
        out->bytes += tc->bytes;
        out->requested_adj += tc->requested_adj;
    }
}

void tcache_sum(gm_device_t *d, gm_tcache_sums_t *out)
{
    tcache_lock_all(d, NULL);
    sum_held(d, out);
    tcache_unlock_all(d, 0);
}

void tcache_lock_all(gm_device_t *d, gm_tcache_sums_t *sums)
{
    for (gm_tcache_t *tc = __atomic_load_n(&d->tcaches, __ATOMIC_ACQUIRE); tc; tc = tc->next)
        tc_lock(tc);
    if (sums)
        sum_held(d, sums);
}

void tcache_unlock_all(gm_device_t *d, uint64_t stamp)
{
    for (gm_tcache_t *tc = __atomic_load_n(&d->tcaches, __ATOMIC_ACQUIRE); tc; tc = tc->next) {
        if (tc->last_stamp < stamp)
            tc->last_stamp = stamp;
        tc_unlock(tc);
    }
}

void tcache_forget(gm_device_t *d)
{
    for (gm_tcache_t *tc = __atomic_load_n(&d->tcaches, __ATOMIC_ACQUIRE); tc; tc = tc->next) {
        tc_lock(tc);
        memset(tc->slot, 0, sizeof tc->slot);
        memset(tc->cls, 0, sizeof tc->cls);
        tc->oldest = tc->newest = NULL;
        __atomic_store_n(&tc->bytes, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&tc->requested_adj, 0, __ATOMIC_RELAXED);
        tc_unlock(tc);
    }
}
