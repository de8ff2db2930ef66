/* OOM causes by counterfactual. The recorded run is replayed to the failure (the pool as it
 * was, after the OOM's release of the cache), its live blocks split by when and where they
 * were allocated, and each change is tried in this order: without what earlier iterations kept
 * at growing sites (leak), with no free space wasted (fragmentation), without memory outside
 * the pool (outside), without the current iteration's own memory (transient peak); capacity
 * when none suffices. A log's replays are kept for its other OOMs and the other reports. */
#include "causes.h"
#include "advice.h"
#include "causes_torch.h"
#include "replay_run.h"
#include "output.h"
#include "sites.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHED_LOGS 4
/* Logs beyond this are not replayed for `oom` and `report` (the decoded events take about 32
 * bytes each, and the search replays them some twenty times): their failures get the snapshot
 * rules; `gmshim whatif` replays any log. GMSHIM_REPLAY_MAX_BYTES overrides it (0: no bound). */
#define REPLAY_MAX_LOG_BYTES (4ull << 30)

typedef struct cached {
    int used;            /* holds a log, or is loading one */
    int ok;              /* loaded: log and plan are valid (read-only from then on) */
    int own;             /* not in the table (every slot was in use): freed after its one use */
    unsigned refs;       /* callers using it: never evicted while any */
    pthread_mutex_t lock;/* held while it loads: a caller of the same log waits, others do not */
    char name[512];
    uint64_t size, start_ns;
    int dev;
    rp_log_t log;
    rt_log_t tlog;       /* a keep-mode log's tensors: the model of PyTorch's allocator runs the candidates */
    int tmade;
    wi_plan_t plan;
    plan_point_t *oom_plans; /* the floor and plan at each recorded OOM (valid: planned) */
    unsigned age;
} cached_t;

/* Events scanned at most to plan a log's OOMs at load (each plan reads the events up to its
 * OOM): the later OOMs of a long log with many go unplanned rather than slow every report. */
#define PLAN_SCAN_BUDGET 400000000ull

/* The table's lock guards which slot holds which log (used, refs, age, the key); a slot's own
 * lock, its loading. Replays run under neither: a loaded log is only read. */
#define SLOT_INIT {.lock = PTHREAD_MUTEX_INITIALIZER}
_Static_assert(CACHED_LOGS == 4, "one initializer per slot");
static cached_t cache[CACHED_LOGS] = {SLOT_INIT, SLOT_INIT, SLOT_INIT, SLOT_INIT};
static unsigned cache_clock;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static void slot_clear(cached_t *c)
{
    if (c->ok) {
        rp_log_free(&c->log);
        wi_plan_free(&c->plan);
        replay_torch_free(&c->tlog);
        c->tmade = 0;
        free(c->oom_plans);
        c->oom_plans = NULL;
    }
    c->used = c->ok = 0;
}

void causes_reset(void)
{
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < CACHED_LOGS; i++)
        if (cache[i].used && !cache[i].refs)
            slot_clear(&cache[i]);
    pthread_mutex_unlock(&cache_lock);
    replay_stash_free();
}

static int slot_is(const cached_t *c, const rd_log_t *lf, int dev)
{
    return c->used && c->dev == dev && c->size == lf->size && c->start_ns == lf->hdr.start_mono_ns &&
           !strncmp(c->name, lf->name, sizeof c->name - 1);
}

void (*causes_load_hook)(const char *name);

/* Decodes the device and makes its what-if plan into c (its lock held, or c private). */
static void slot_load(cached_t *c, const rd_log_t *lf, int dev, const model_t *m)
{
    if (causes_load_hook)
        causes_load_hook(lf->name);
    rd_log_t clone;
    if (rd_clone(lf, &clone))
        return;
    int rc = rp_load(&c->log, &clone, dev);
    c->tmade = !rc && c->log.torch_tensors && replay_torch_load(&c->tlog, &clone, dev) == 0;
    rd_close(&clone);
    if (rc)
        return;
    wi_opts_t o;
    wi_opts_default(&o);
    advice_growth_t g; /* the recommendation rule needs the device's growth (advice.c) */
    advice_growth_of_device(m, dev, c->log.torch_cache_kept, &g);
    advice_growth_of_log(&c->log, &g);
    advice_opts(&o, &g);
    if (wi_plan_make(&c->log, c->tmade ? &c->tlog : NULL, &o, &c->plan)) {
        rp_log_free(&c->log);
        replay_torch_free(&c->tlog);
        return;
    }
    c->oom_plans = calloc(c->log.nooms ? c->log.nooms : 1, sizeof *c->oom_plans);
    uint64_t scanned = 0;
    for (size_t k = 0; c->oom_plans && k < c->log.nooms; k++) /* once per log: the causes only read them */
        if (!c->log.ooms[k].recovered && (scanned += c->log.ooms[k].ev) <= PLAN_SCAN_BUDGET)
            plan_at_oom(&c->log, k, &c->oom_plans[k]);
    c->ok = 1;
}

static void slot_release(cached_t *c)
{
    if (c->own) {
        slot_clear(c);
        pthread_mutex_destroy(&c->lock);
        free(c);
        return;
    }
    pthread_mutex_lock(&cache_lock);
    if (!--c->refs && !c->ok)
        c->used = 0; /* it failed to load: the slot is free again */
    pthread_mutex_unlock(&cache_lock);
}

/* The decoded device and its what-if plan, made once per log and device and shared by the
 * callers of that log; slot_release() when done. NULL when it cannot be made. */
static cached_t *slot_acquire(const rd_log_t *lf, int dev, const model_t *m)
{
    cached_t *slot = NULL;
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < CACHED_LOGS; i++) {
        cached_t *c = &cache[i];
        if (slot_is(c, lf, dev)) {
            c->refs++;
            c->age = ++cache_clock;
            pthread_mutex_unlock(&cache_lock);
            pthread_mutex_lock(&c->lock); /* loaded by then */
            pthread_mutex_unlock(&c->lock);
            if (!c->ok) {
                slot_release(c);
                return NULL;
            }
            return c;
        }
        if (!c->refs && (!slot || (slot->used && (!c->used || c->age < slot->age))))
            slot = c;
    }
    if (!slot) { /* every slot in use by another caller: a private one */
        pthread_mutex_unlock(&cache_lock);
        slot = calloc(1, sizeof *slot);
        if (!slot || pthread_mutex_init(&slot->lock, NULL)) {
            free(slot);
            return NULL;
        }
        slot->own = slot->used = 1;
        slot->refs = 1;
        slot_load(slot, lf, dev, m);
        if (!slot->ok) {
            slot_release(slot);
            return NULL;
        }
        return slot;
    }
    slot_clear(slot); /* nobody uses it */
    slot->used = 1;
    slot->refs = 1;
    snprintf(slot->name, sizeof slot->name, "%s", lf->name);
    slot->size = lf->size;
    slot->start_ns = lf->hdr.start_mono_ns;
    slot->dev = dev;
    slot->age = ++cache_clock;
    pthread_mutex_lock(&slot->lock); /* free: a slot nobody holds */
    pthread_mutex_unlock(&cache_lock);
    slot_load(slot, lf, dev, m);
    pthread_mutex_unlock(&slot->lock);
    if (!slot->ok) {
        slot_release(slot);
        return NULL;
    }
    return slot;
}

/* The recorded OOM of the replay that is the model's o. */
static int find_oom(const rp_log_t *log, const model_oom_t *o)
{
    for (size_t i = 0; i < log->nooms; i++)
        if (!log->ooms[i].recovered && log->ooms[i].t == o->t && log->ooms[i].rec.request == o->rec.request &&
            log->ooms[i].rec.site == o->rec.site)
            return (int)i;
    return -1;
}

static int site_grows(const model_oom_t *o, const model_t *m, uint32_t site)
{
    for (unsigned i = 0; i < o->ngrow; i++)
        if (m->sst[o->grow[i].sidx].site == site)
            return 1;
    return 0;
}

/* Live blocks allocated from `since` to the current iteration's start at sites that keep
 * growing (any site, for PyTorch's segments, when the model names none). */
static void leaked_bytes(const replay_t *r, const model_t *m, const model_oom_t *o, uint64_t since, int any_site,
                         cause_t *c)
{
    uint64_t bytes = 0, largest = 0;
    uint32_t largest_site = 0;
    for (uint32_t id = 0; id < r->log->nids; id++) {
        const gm_block_t *b = r->blk[id];
        if (!b || b->tc == GM_TC_CACHED || r->born[id] < since || r->born[id] >= c->epoch_start)
            continue;
        if (!any_site && !site_grows(o, m, b->site))
            continue;
        bytes += b->size;
        if (b->size > largest)
            largest = b->size, largest_site = b->site;
    }
    c->leaked = bytes;
    c->leak_site = o->ngrow ? m->sst[o->grow[0].sidx].site : largest_site;
}

static const char *epoch_word(const cause_t *c)
{
    return c->epoch_system == EPOCH_MARKS ? "mark" : c->epoch_steps ? "step" : "iteration";
}

const char *causes_limit_name(char *buf, size_t len, uint64_t cap, uint64_t total, int torch)
{
    char a[32];
    if (torch && total)
        snprintf(buf, len, " (PyTorch's memory fraction %.3g = %s)", (double)cap / (double)total, rep_bytes(cap, a));
    else if (torch)
        snprintf(buf, len, " (PyTorch's memory fraction: %s)", rep_bytes(cap, a));
    else
        snprintf(buf, len, " (the GMSHIM_DEVICE_LIMIT cap)");
    return buf;
}

const char *causes_request_words(uint64_t requested, uint64_t rounded, char *buf, size_t len)
{
    char a[32], r[32];
    if (requested && requested != rounded)
        snprintf(buf, len, "the %s request (%s as the pool rounds it)", rep_bytes(requested, a), rep_bytes(rounded, r));
    else
        snprintf(buf, len, "the %s request", rep_bytes(rounded, r));
    return buf;
}

static void explain(cause_t *c, const model_t *m)
{
    char x[8][32], lbl[256], lim[96], req[96];
    uint64_t need = c->live + c->request;
    causes_request_words(c->requested, c->request, req, sizeof req);
    switch (c->cause) {
    case OOM_LEAK:
        snprintf(c->why, sizeof c->why,
                 "%s of the %s live was allocated in earlier iterations and never freed, growing by %s per %s "
                 "(most at %s); without it, live %s - %s + %s = %s fits in the %s the pool could "
                 "reserve", rep_bytes(c->leaked, x[0]), rep_bytes(c->live, x[1]), rep_bytes(c->leak_per_epoch, x[2]),
                 epoch_word(c), site_label(m, c->leak_site, lbl, sizeof lbl), rep_bytes(c->live, x[3]),
                 rep_bytes(c->leaked, x[4]), req, rep_bytes(need - c->leaked, x[6]),
                 rep_bytes(c->cap, x[7]));
        break;
    case OOM_FRAGMENTATION:
        snprintf(c->why, sizeof c->why,
                 "live %s + %s = %s fit in the %s the pool could reserve, but no free block held it: "
                 "of the %s reserved after the cache was released, %s was free inside segments that hold live "
                 "blocks, in %" PRIu64 " pieces, the largest %s", rep_bytes(c->live, x[0]), req,
                 rep_bytes(need, x[2]), rep_bytes(c->cap, x[3]), rep_bytes(c->reserved, x[4]), rep_bytes(c->pool_free, x[5]),
                 c->free_blocks, rep_bytes(c->largest_free, x[6]));
        break;
    case OOM_OUTSIDE:
        snprintf(c->why, sizeof c->why,
                 "%s of the device's %s was held outside the pool (the CUDA context, libraries with their own "
                 "allocator, other processes); live %s + %s = %s exceed the %s left to the pool, "
                 "but fit in %s + %s", rep_bytes(c->outside, x[0]), rep_bytes(c->total, x[1]), rep_bytes(c->live, x[2]),
                 req, rep_bytes(need, x[4]), rep_bytes(c->cap, x[5]), rep_bytes(c->cap, x[6]),
                 rep_bytes(c->outside, x[7]));
        break;
    case OOM_TRANSIENT:
        snprintf(c->why, sizeof c->why,
                 "the current iteration holds %s of the %s live; what lives across iterations, %s, plus %s = "
                 "%s fits in the %s the pool could reserve, and the iterations before it freed "
                 "their own memory: this iteration's peak is what overflows", rep_bytes(c->transient, x[0]),
                 rep_bytes(c->live, x[1]), rep_bytes(c->persistent, x[2]), req,
                 rep_bytes(c->persistent + c->request, x[4]), rep_bytes(c->cap, x[5]));
        break;
    case OOM_CAPACITY:
        if (c->epoch_system >= 0 && c->epoch_index >= 2)
            snprintf(c->why, sizeof c->why,
                     "what lives across iterations, %s, plus %s = %s exceed the %s the pool could "
                     "reserve%s: no iteration's own memory, kept memory, outside memory or fragmentation "
                     "makes the difference", rep_bytes(c->persistent, x[0]), req,
                     rep_bytes(c->persistent + c->request, x[2]), rep_bytes(c->cap, x[3]),
                     c->by_limit ? causes_limit_name(lim, sizeof lim, c->cap, c->total, c->torch_limit) : "");
        else
            snprintf(c->why, sizeof c->why,
                     "live %s + %s = %s exceed the %s the pool could reserve%s, and nothing kept "
                     "from earlier iterations or held outside the pool makes the difference",
                     rep_bytes(c->live, x[0]), req, rep_bytes(need, x[2]), rep_bytes(c->cap, x[3]),
                     c->by_limit ? causes_limit_name(lim, sizeof lim, c->cap, c->total, c->torch_limit) : "");
        break;
    }
}

static void decide(cause_t *c, const model_t *m, const model_oom_t *o, const replay_t *r)
{
    uint64_t need = c->live + c->request;
    int closed = c->epoch_system >= 0 && c->epoch_index >= 2; /* an iteration ran whole before this one */
    /* Leak: kept from iteration 1 on, at growing sites (PyTorch's segments: from iteration 2 on,
     * past the warm-up, at any site). */
    uint64_t since = 0;
    const model_mark_t *first = model_step_mark(m, 0), *second = model_step_mark(m, 1);
    if (c->epoch_system == EPOCH_MARKS && first)
        since = second && c->torch_cache_kept && !o->ngrow ? second->t : first->t;
    else if (c->epoch_steps) /* kept from the first step on: the prologue is no step */
        since = o->epoch_first;
    advice_growth_t g; /* the one growth rule, which the recommendation follows too */
    advice_growth(m, o, c->torch_cache_kept, &g);
    if (closed && g.per_step) {
        leaked_bytes(r, m, o, since, c->torch_cache_kept && !o->ngrow, c);
        if ((!c->reproduced || c->torch_expandable) && o->ngrow) /* the replay went its own way: the recording's */
            c->leaked = o->kept;
        c->leak_per_epoch = g.per_step;
        /* It decides when without it the request fits, and it is at least the request: more
         * than a pool's usual waste, so that fragmentation only moved the failure a little. */
        if (c->leaked && c->leaked >= c->request && need - c->leaked <= c->cap) {
            c->cause = OOM_LEAK;
            return;
        }
    }
    c->leaked = 0, c->leak_site = 0, c->leak_per_epoch = 0;
    if (need <= c->cap) {
        c->cause = OOM_FRAGMENTATION;
        return;
    }
    if (!c->by_limit && c->outside && c->outside * 10 >= c->total && need <= c->cap + c->outside) {
        c->cause = OOM_OUTSIDE;
        return;
    }
    if (closed && c->transient && c->persistent + c->request <= c->cap) {
        c->cause = OOM_TRANSIENT;
        return;
    }
    c->cause = OOM_CAPACITY;
    if (c->epoch_system < 0)
        snprintf(c->cannot_tell, sizeof c->cannot_tell,
                 "the log has no marks and no iterations the pool could see (low-water troughs): the memory of "
                 "one step cannot be told from memory that persists, so all of it counts as persistent; "
                 "gmshim_mark() per iteration would tell");
    else if (!closed)
        snprintf(c->cannot_tell, sizeof c->cannot_tell,
                 "the log holds only one iteration before the failure (%u %s%s): whether this iteration's memory "
                 "would have been freed at its end cannot be seen, so it counts as capacity", c->epoch_index,
                 c->epoch_system == EPOCH_MARKS ? "mark" : c->epoch_steps ? "step" : "trough", c->epoch_index == 1 ? "" : "s");
}

static void remedy(cause_t *c, const wi_plan_t *p)
{
    char a[32];
    c->min_found = p->min_found;
    c->min_device_bytes = p->min_device_bytes;
    c->growing = p->growing;
    c->growth_peaks = p->growth_peaks;
    c->growth_per_step = p->growth_per_step;
    c->lasting_device_bytes = p->lasting_device_bytes;
    c->climbing = p->climbing && !p->growing;
    c->climb_need = p->climb_need;
    c->climb_held = p->climb_held;
    c->headroom = p->headroom;
    if (p->rec >= 0) {
        snprintf(c->env_name, sizeof c->env_name, "%s", p->runs[p->rec].env_name);
        snprintf(c->env_value, sizeof c->env_value, "%s", p->runs[p->rec].env_value);
    }
    size_t n = 0;
    unsigned tried = 0;
    for (size_t i = 0; i < p->nruns; i++)
        tried += p->runs[i].candidate;
    n += (size_t)snprintf(c->tested + n, sizeof c->tested - n, "%s", p->why);
    if (n < sizeof c->tested && p->rec < 0 && tried && !p->growing)
        snprintf(c->tested + n, sizeof c->tested - n, " (%u settings replayed)", tried);
    (void)a;
}

/* The floor and plan at the failure, and the split of what the run reserved (split.h). */
static void cause_split(cause_t *c, const cached_t *e, size_t k)
{
    const wi_plan_t *p = &e->plan;
    if (e->oom_plans)
        c->plan = e->oom_plans[k];
    int planned = c->plan.valid;
    uint64_t floor = planned ? c->plan.floor : c->live + c->request;
    const wi_run_t *r = p->rec >= 0 ? &p->runs[p->rec] : NULL;
    split_make(&c->split, floor, c->plan.planned, planned, c->reserved + c->segment, r ? r->res.peak_reserved : 0,
               c->cap, r ? r->env_name : NULL, r ? r->env_value : NULL);
}

int causes_of(const model_t *m, const model_oom_t *o, cause_t *c)
{
    memset(c, 0, sizeof *c);
    if (!m || !m->lf || o->history)
        return -1;
    const char *env = getenv("GMSHIM_REPLAY_MAX_BYTES");
    uint64_t max = env ? strtoull(env, NULL, 10) : REPLAY_MAX_LOG_BYTES;
    if (max && m->lf->size > max)
        return -1;
    cached_t *e = slot_acquire(m->lf, o->dev, m);
    int k = e ? find_oom(&e->log, o) : -1;
    if (k < 0) {
        if (e)
            slot_release(e);
        return -1;
    }
    const rp_log_t *log = &e->log;
    rp_cfg_t cfg;
    rp_cfg_as_recorded(log, &cfg);
    replay_t *r = replay_start(log, &cfg);
    if (!r) {
        slot_release(e);
        return -1;
    }
    uint64_t failed = r->res.recorded_failed;
    replay_run(r, log->ooms[k].ev + 1);
    const rp_fail_t *f = &r->res.last;
    /* Under expandable segments the replay's segments are the classic allocator's: its figures at
     * the failure are not the run's; the model of PyTorch's allocator decides below. */
    c->reproduced = r->res.recorded_failed > failed && f->oom == k && !log->torch_expandable;
    c->torch_cache_kept = log->torch_cache_kept;
    c->torch_tensors = log->torch_tensors;
    c->by_limit = log->ooms[k].by_limit;
    c->torch_limit = c->by_limit && log->torch_limit;
    c->torch_expandable = log->torch_expandable;
    c->fail_site = o->rec.site;
    c->request = pool_round((size_t)o->rec.request);
    c->requested = o->rec.request;
    c->total = log->total;
    if (c->reproduced) {
        c->cap = f->cap;
        c->live = f->live;
        c->reserved = f->reserved;
        c->largest_free = f->largest_free;
        c->free_blocks = f->free_blocks;
    } else { /* the replay got past it: the recorded figures */
        c->cap = c->by_limit ? (o->limit ? o->limit : o->rec.reserved) : o->rec.reserved + o->rec.driver_free;
        c->live = o->rec.allocated;
        c->reserved = o->rec.reserved;
        c->largest_free = o->rec.largest_free;
        c->free_blocks = o->rec.free_blocks;
    }
    c->pool_free = c->reserved > c->live ? c->reserved - c->live : 0;
    c->outside = !c->by_limit && c->total > c->cap ? c->total - c->cap : 0;
    c->epoch_system = o->epoch_system;
    c->epoch_index = o->epoch_index;
    c->epoch_start = o->epoch_start;
    c->epoch_steps = c->epoch_system == EPOCH_TROUGHS && m->dev[o->dev] && m->dev[o->dev]->step.period;
    if (c->epoch_system >= 0 && c->reproduced)
        replay_live_split(r, c->epoch_start, &c->persistent, &c->transient);
    else
        c->persistent = c->live;
    c->segment = c->reproduced ? f->segment : o->rec.segment;
    /* Expandable segments: the model of PyTorch's allocator, where it fails here too. */
    rt_oom_state_t st;
    if (log->torch_expandable &&
        causes_torch_expandable(e->tmade ? &e->tlog : NULL, (size_t)k, c->epoch_start, &st) == 1) {
        c->reproduced = 1;
        c->cap = st.cap;
        c->live = st.live;
        c->reserved = st.reserved;
        c->largest_free = st.largest_free;
        c->free_blocks = st.free_blocks;
        c->pool_free = c->reserved > c->live ? c->reserved - c->live : 0;
        c->outside = !c->by_limit && c->total > c->cap ? c->total - c->cap : 0;
        c->persistent = c->epoch_system >= 0 ? st.persistent : c->live;
        c->transient = c->live - c->persistent;
    }
    decide(c, m, o, r);
    explain(c, m);
    remedy(c, &e->plan);
    advice_growth_t g;
    advice_growth(m, o, c->torch_cache_kept, &g);
    c->step_ns = g.step_ns;
    cause_split(c, e, (size_t)k);
    replay_end(r);
    slot_release(e);
    return 0;
}

const char *causes_check(const cause_t *c)
{
    uint64_t need = c->live + c->request;
    if (c->persistent + c->transient != c->live)
        return "persistent + transient is not the live total";
    if (c->reproduced && c->reserved > c->cap)
        return "the pool reserved more than it could";
    if (c->reserved < c->live || c->pool_free != c->reserved - c->live)
        return "free inside the pool is not reserved - live";
    switch (c->cause) {
    case OOM_FRAGMENTATION:
        if (need > c->cap)
            return "fragmentation, but live + request exceed what the pool could reserve";
        if (c->largest_free >= c->request)
            return "fragmentation, but a free block was large enough";
        break;
    case OOM_LEAK:
        if (!c->leaked || c->leaked > c->persistent)
            return "a leak of bytes that were not allocated before the current iteration";
        if (need - c->leaked > c->cap || (need <= c->cap && c->leaked < c->request))
            return "a leak whose removal does not decide whether the request fits";
        break;
    case OOM_OUTSIDE:
        if (need <= c->cap || need > c->cap + c->outside || c->outside * 10 < c->total)
            return "outside memory that does not decide whether the request fits";
        break;
    case OOM_TRANSIENT:
        if (need <= c->cap || c->persistent + c->request > c->cap || c->epoch_index < 2)
            return "a transient peak whose persistent part plus the request do not fit";
        break;
    case OOM_CAPACITY:
        if (need <= c->cap)
            return "capacity, but live + request fit";
        if (c->epoch_system >= 0 && c->epoch_index >= 2 && c->persistent + c->request <= c->cap)
            return "capacity, but without the current iteration the request fits";
        break;
    }
    return NULL;
}
