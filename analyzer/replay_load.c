/* The replay's input: one device's pool events, as the decoder (events.h) gives them, packed
 * into a compact array (block ids instead of pointers, so that a replay never hashes), the
 * recorded OOMs and the settings the log says were in force. Never trusts the log: unknown frees
 * are dropped, sizes bounded. */
#include "replay.h"
#include "vec.h"
#include "events.h"

#include <stdlib.h>
#include <string.h>

/* Recorded pointers to block ids in the maps (table.h). */
typedef struct loader {
    rp_log_t *log;
    ev_dec_t ev;                 /* the decoder: PyTorch's view on a tensor device */
    table_map_t map;             /* live blocks: pointer -> id */
    table_map_t held;            /* blocks in threads' caches: freed by the program, not the pool's */
    table_map_t exact;           /* a caching allocator's exact segments (GMLOG_A_EXACT): base -> id | size / 512 << 32 */
    uint32_t *free_ids;
    size_t nfree, capfree;
    uint64_t reserved, issued;
    int oom_failed;
    int torch_capped;            /* the last LIMIT was PyTorch's memory fraction: its T_OOM is the cap's */
    int waited;                  /* a wait's fences done, held until its call's record (wait_done) */
    uint32_t waited_tid;
    uint64_t waited_seq;
} loader_t;

int rp_append(rp_log_t *log, const rp_ev_t *e)
{
    if (log->tail.off + RP_PACKED_MAX > log->cappacked) { /* grown only when short: an event is a few bytes */
        uint8_t *n = vec_grow_raw(log->packed, &log->cappacked, log->tail.off + RP_PACKED_MAX, 1, 65536);
        if (!n)
            return -1;
        log->packed = n;
    }
    rp_pack(log->packed, &log->tail, e);
    log->npacked = log->tail.off;
    log->nev++;
    return 0;
}

/* An event of the record being read; 1, or 0 when out of memory. `ptr`: an allocation's
 * recorded pointer (guided replays follow it), else 0. */
static int push(rp_log_t *log, unsigned type, uint64_t t, uint64_t x, uint32_t id, uint32_t site, uint64_t ptr)
{
    rp_ev_t e = {(t & RP_T_MASK) | (uint64_t)type << 56, x, id, site, ptr, log->cur_seq};
    return rp_append(log, &e) == 0;
}

static int new_id(loader_t *L, uint32_t *id)
{
    if (L->nfree) {
        *id = L->free_ids[--L->nfree];
        return 0;
    }
    *id = L->log->nids++;
    return 0;
}

static int release_id(loader_t *L, uint32_t id)
{
    if (L->nfree == L->capfree) {
        uint32_t *n = vec_grow(L->free_ids, &L->capfree, L->nfree + 1, sizeof *n, 1024);
        if (!n)
            return -1;
        L->free_ids = n;
    }
    L->free_ids[L->nfree++] = id;
    return 0;
}

/* A free of the block at ptr: its event, and its id back to the free list. */
static int on_free(loader_t *L, uint64_t t, uint64_t ptr, int deferred)
{
    uint64_t v;
    if (!table_map_del(&L->map, ptr, &v))
        return 0; /* not a pool block this loader saw: nothing to replay */
    uint32_t id = (uint32_t)v;
    if (!push(L->log, deferred ? RP_FREE_DEFERRED : RP_FREE, t, 0, id, 0, 0))
        return -1;
    return release_id(L, id);
}

/* The block at ptr freed into its thread's cache: its id stays with it (held). */
static int on_free_cached(loader_t *L, uint64_t t, uint64_t ptr, int deferred)
{
    uint64_t v;
    if (!table_map_del(&L->map, ptr, &v))
        return 0;
    uint32_t id = (uint32_t)v;
    if (table_map_put(&L->held, ptr, id))
        return -1;
    return push(L->log, RP_FREE_CACHED, t, deferred != 0, id, 0, 0) ? 0 : -1;
}

/* A held block back to its arena. */
static int on_return(loader_t *L, uint64_t t, uint64_t ptr)
{
    uint64_t v;
    if (!table_map_del(&L->held, ptr, &v))
        return 0;
    uint32_t id = (uint32_t)v;
    if (!push(L->log, RP_RETURN, t, 0, id, 0, 0))
        return -1;
    return release_id(L, id);
}

/* The recording's reserved bytes, and their peak. */
static void reserve(loader_t *L, uint64_t size)
{
    L->reserved += size;
    if (L->reserved > L->log->peak_reserved_recorded)
        L->log->peak_reserved_recorded = L->reserved;
}

static void unreserve(loader_t *L, uint64_t size)
{
    L->reserved = L->reserved > size ? L->reserved - size : 0;
}

/* The free of a pass-through block: an exact segment's, with its segment. */
static int on_exact_free(loader_t *L, uint64_t t, uint64_t ptr)
{
    uint64_t v;
    if (!table_map_del(&L->exact, ptr, &v))
        return 0;
    uint32_t id = (uint32_t)v;
    unreserve(L, (v >> 32) * GM_ROUND);
    if (!push(L->log, RP_EXACT_FREE, t, 0, id, 0, 0))
        return -1;
    return release_id(L, id);
}

/* A caching allocator's segment at its exact size from the driver (PyTorch's cache kept): every
 * replay gives it a segment of its own, whatever its settings (replay.c exact_alloc). */
static int on_exact_alloc(loader_t *L, uint64_t t, const ev_t *ev)
{
    uint64_t size = ev->req;
    if (!ev->ptr || !size || size % GM_ROUND || size / GM_ROUND > UINT32_MAX) {
        L->log->unpooled++;
        return 0; /* not a segment the pool could have had */
    }
    if (table_map_find(&L->exact, ev->ptr) && on_exact_free(L, t, ev->ptr))
        return -1; /* taken again without a free the log holds: the old one went */
    uint32_t id;
    new_id(L, &id);
    if (table_map_put(&L->exact, ev->ptr, id | (size / GM_ROUND) << 32))
        return -1;
    reserve(L, size);
    if (!push(L->log, RP_EXACT_ALLOC, t, size, id, ev->site, ev->ptr))
        return -1;
    return 0;
}

static int on_pool_alloc(loader_t *L, uint64_t t, const ev_t *ev)
{
    if (ev->kind != GMLOG_KIND_POOL) {
        L->log->unpooled++;
        return 0;
    }
    if (table_map_find(&L->map, ev->ptr) && on_free(L, t, ev->ptr, 0))
        return -1; /* allocated again without a free the log holds: it was freed */
    /* A block a thread's cache held: from the cache it keeps its id; from the arena it was given
     * back first (a log whose return was lost). */
    const uint64_t *h = table_map_find(&L->held, ev->ptr);
    int cached = h && (ev->flags & GMLOG_A_CACHED);
    uint32_t id;
    if (cached) {
        uint64_t v = 0;
        table_map_del(&L->held, ev->ptr, &v);
        id = (uint32_t)v;
    } else {
        if (h && on_return(L, t, ev->ptr))
            return -1;
        new_id(L, &id);
    }
    if (table_map_put(&L->map, ev->ptr, id)) /* a pointer 0 is replayed, never found again */
        return -1;
    L->log->planned_allocs += (ev->flags & GMLOG_A_PLANNED) != 0;
    return push(L->log, cached ? RP_ALLOC_CACHED : RP_ALLOC, t, ev->req, id, ev->site, ev->ptr) ? 0 : -1;
}

static int on_alloc(loader_t *L, uint64_t t, const ev_t *ev)
{
    if (ev->kind == GMLOG_KIND_PASS && (ev->flags & GMLOG_A_EXACT))
        return on_exact_alloc(L, t, ev);
    if (ev->kind == GMLOG_KIND_PASS)
        L->log->pool_off = 1;
    return on_pool_alloc(L, t, ev);
}

static int on_oom(loader_t *L, const rd_rec_t *r)
{
    rp_log_t *log = L->log;
    rp_oom_t *n = vec_grow(log->ooms, &log->capooms, log->nooms + 1, sizeof *n, 16);
    if (!n)
        return -1;
    log->ooms = n;
    rp_oom_t *o = &log->ooms[log->nooms];
    memset(o, 0, sizeof *o);
    memcpy(&o->rec, r->p, sizeof o->rec);
    o->t = r->t;
    o->ev = log->nev;
    o->recovered = (r->flags & GMLOG_OOM_RECOVERED) != 0;
    o->by_limit = (r->flags & GMLOG_OOM_LIMIT) != 0;
    o->exact = (r->flags & GMLOG_OOM_EXACT) != 0;
    if (!o->by_limit && !(r->flags & GMLOG_OOM_CAPTURE) && (o->rec.driver_free || o->rec.driver_total)) {
        uint64_t *d = vec_grow(log->drv_cap, &log->capdrv, log->ndrv + 1, sizeof *d, 16);
        if (!d)
            return -1;
        log->drv_cap = d;
        /* Both figures were taken before the OOM's own cache release. */
        uint64_t cap = o->rec.reserved + o->rec.driver_free;
        d[log->ndrv++] = cap < o->rec.reserved || cap > GMLOG_SIZE_MASK ? GMLOG_SIZE_MASK : cap;
    }
    return push(log, RP_OOM, r->t, o->by_limit || (r->flags & GMLOG_OOM_CAPTURE) ? 0 : 1, (uint32_t)log->nooms++,
                o->rec.site, 0)
               ? 0
               : -1;
}

static int on_segment_alloc(loader_t *L, uint64_t t, uint64_t base, uint64_t size)
{
    rp_log_t *log = L->log;
    if (!base || base % GM_ROUND || !size || size % GM_ROUND || size > GMLOG_SIZE_MASK)
        return 0; /* not a segment the pool could have had: nothing to follow */
    reserve(L, size);
    uint64_t units = size / GM_ROUND;
    return push(log, RP_SEG_ALLOC, t, base, units > UINT32_MAX ? 0 : (uint32_t)units, 0, 0) ? 0 : -1;
}

static int on_segment_free(loader_t *L, uint64_t t, uint64_t base, uint64_t size)
{
    unreserve(L, size);
    return push(L->log, RP_SEG_FREE, t, base, 0, 0, 0) ? 0 : -1;
}

/* A wait for fences inside a call (FENCE_WAIT, a FENCE_REUSABLE the wait moved) is logged before
 * the call's own record, though the call decided before it waited (the plan's slot refused, then
 * the pool's block waited for): what it made reusable is run after that record, at its time, or
 * before the next record of another thread. The replay's pool waits as the shim's did (its
 * pending-wait rule) for the allocation itself. */
static int wait_done(loader_t *L, const rd_rec_t *r, uint64_t seq)
{
    if (L->waited && L->waited_seq > seq)
        seq = L->waited_seq;
    L->waited = 1;
    L->waited_tid = r->tid;
    L->waited_seq = seq;
    return 0;
}

/* Whether r ends a call of the waiting thread (an allocation, a free, an OOM, an empty cache):
 * not the records a call makes on its way (segments, fences, figures). */
static int ends_wait(const loader_t *L, const rd_rec_t *r)
{
    if (!L->waited || r->tid != L->waited_tid)
        return 0;
    switch (r->type) {
    case GMLOG_SEGMENT_ALLOC:
    case GMLOG_SEGMENT_FREE:
    case GMLOG_STATS:
    case GMLOG_FENCE:
    case GMLOG_FENCE_WAIT:
    case GMLOG_FENCE_REUSABLE:
    case GMLOG_LEDGER:
    case GMLOG_CLOCK:
        return 0;
    default:
        return 1;
    }
}

static int flush_wait(loader_t *L, uint64_t t)
{
    if (!L->waited)
        return 0;
    L->waited = 0;
    return push(L->log, RP_DONE, t, L->waited_seq, 0, 0, 0) ? 0 : -1;
}

/* "128 MiB", "0 B", "on", "1.5 s" as options_format writes them. */
static uint64_t option_value(const char *v)
{
    if (!strcmp(v, "on"))
        return 1;
    if (!strcmp(v, "off"))
        return 0;
    char *end;
    double x = strtod(v, &end);
    while (*end == ' ')
        end++;
    double mul = 1;
    if (!strncmp(end, "KiB", 3))
        mul = 1024.0;
    else if (!strncmp(end, "MiB", 3))
        mul = 1024.0 * 1024;
    else if (!strncmp(end, "GiB", 3))
        mul = 1024.0 * 1024 * 1024;
    else if (!strncmp(end, "s", 1))
        mul = 1e9;
    return x > 0 ? (uint64_t)(x * mul) : 0;
}

static void read_settings(rp_log_t *log, const rd_log_t *lf)
{
    log->pending_wait = 1;
    log->foreign = 1;
    for (size_t i = 0; i < lf->nmeta; i++) {
        const rd_meta_t *m = &lf->meta[i];
        if (!m->value)
            continue;
        if (m->tag == GMLOG_META_ENV && strstr(m->value, "PYTORCH_NO_CUDA_MEMORY_CACHING=1"))
            log->torch_cache_kept = -1; /* own mode: known not to be cache-kept */
        if (m->tag != GMLOG_META_OPTION)
            continue;
        const char *eq = strchr(m->value, '=');
        if (!eq)
            continue;
        size_t n = (size_t)(eq - m->value);
        uint64_t v = option_value(eq + 1);
#define IS(name) (n == sizeof name - 1 && !memcmp(m->value, name, n))
        if (IS("GMSHIM_MAX_SPLIT"))
            log->max_split = v;
        else if (IS("GMSHIM_CACHE_LIMIT"))
            log->cache_limit = v;
        else if (IS("GMSHIM_PENDING_WAIT"))
            log->pending_wait = (int)v;
        else if (IS("GMSHIM_TRUST_STREAM_ORDER"))
            log->trust_stream_order = (int)v;
        else if (IS("GMSHIM_IDLE_RELEASE"))
            log->idle_release_ns = v;
        else if (IS("GMSHIM_SEGMENTS"))
            log->vmm = !strcmp(eq + 1, "vmm");
        else if (IS("GMSHIM_PLAN"))
            log->plan = (int)v;
        else if (IS("GMSHIM_POOL")) {
            log->foreign = 0;
            log->pool_off = !v;
        }
#undef IS
    }
}

/* Whether a loaded module is PyTorch's CUDA library (its caching allocator in the process). */
static int is_torch_module(const rd_rec_t *r)
{
    const gmlog_module_t *md = (const gmlog_module_t *)r->p;
    const char *path;
    if (rd_tail_bytes(r, sizeof *md + md->build_id_len, md->path_len, &path))
        return 0;
    for (size_t i = 0; i + 11 <= md->path_len; i++)
        if (!memcmp(path + i, "libc10_cuda", 11))
            return 1;
    return 0;
}

/* PyTorch's allocator, not gmshim's pool, placed the tensors: its settings are PyTorch's own
 * (PYTORCH_CUDA_ALLOC_CONF's max_split_size_mb, when the log's environment names it). */
static void torch_settings(rp_log_t *log, const rd_log_t *lf)
{
    log->max_split = 0;
    log->cache_limit = 0;
    log->idle_release_ns = 0;
    for (size_t i = 0; i < lf->nmeta; i++) {
        const char *v = lf->meta[i].tag == GMLOG_META_ENV ? lf->meta[i].value : NULL;
        const char *ms = v && !strncmp(v, "PYTORCH_CUDA_ALLOC_CONF=", 24) ? strstr(v, "max_split_size_mb:") : NULL;
        if (ms)
            log->max_split = strtoull(ms + 18, NULL, 10) << 20;
    }
}

/* A tensor's OOM (PyTorch's OutOfMemoryError): the decoder's record, the cap's when PyTorch's
 * memory fraction was the last limit. */
static int tensor_oom(loader_t *L, const rd_rec_t *r, const ev_t *ev)
{
    gmlog_oom_t o = *ev->oom;
    if (L->torch_capped)
        o.h.flags |= GMLOG_OOM_LIMIT;
    rd_rec_t n = *r;
    n.p = (const uint8_t *)&o;
    n.type = GMLOG_OOM;
    n.flags = o.h.flags;
    return on_oom(L, &n);
}

/* One of the decoder's events. On a tensor device the block is reusable at T_FREE_COMPLETED:
 * that is when PyTorch's allocator may hand it out again; a free requested replays nothing, and
 * an expandable segment's ranges are not followed (the replay says so). */
static int on_event(loader_t *L, const rd_rec_t *r, const ev_t *ev)
{
    if (ev->tensor) {
        if (r->type == GMLOG_T_SEGMENT_MAP && !ev->malformed)
            L->log->torch_expandable = 1;
        switch (ev->type) {
        case EV_ALLOC: return ev->ptr ? on_alloc(L, r->t, ev) : 0;
        case EV_FREE_COMPLETED: return on_free(L, r->t, ev->ptr, 0);
        case EV_SEGMENT_ALLOC:
        case EV_SEGMENT_FREE:
            if (ev->mapped)
                return 0;
            break;
        case EV_OOM: return tensor_oom(L, r, ev);
        default: return 0;
        }
    }
    switch (ev->type) {
    case EV_ALLOC: return on_alloc(L, r->t, ev);
    case EV_FREE: {
        int deferred = (ev->flags & GMLOG_F_DEFERRED) != 0;
        if (ev->kind == GMLOG_KIND_POOL && (ev->flags & GMLOG_F_RETURNED))
            return on_return(L, r->t, ev->ptr);
        if (ev->kind == GMLOG_KIND_POOL && (ev->flags & GMLOG_F_CACHED))
            return on_free_cached(L, r->t, ev->ptr, deferred);
        if (ev->kind == GMLOG_KIND_POOL)
            return on_free(L, r->t, ev->ptr, deferred);
        if (ev->kind == GMLOG_KIND_PASS)
            return on_exact_free(L, r->t, ev->ptr);
        return 0;
    }
    case EV_SEGMENT_ALLOC: return on_segment_alloc(L, r->t, ev->ptr, ev->size);
    case EV_SEGMENT_FREE: return on_segment_free(L, r->t, ev->ptr, ev->size);
    case EV_OOM: return on_oom(L, r);
    default: return 0;
    }
}

static int decode(loader_t *L, rd_log_t *lf)
{
    rp_log_t *log = L->log;
    rd_rec_t r;
    int torch = 0;
    uint64_t last_t = 0;
    rd_rewind(lf);
    while (rd_next(lf, &r)) {
        log->cur_seq = r.seq;
        if (r.type == GMLOG_MODULE) {
            torch |= is_torch_module(&r);
            continue;
        }
        if (r.type == GMLOG_MARK && r.ckpt == RD_EVENT) {
            const gmlog_mark_t *mk = (const gmlog_mark_t *)r.p;
            if (!push(log, RP_MARK, r.t, 0, mk->id, 0, 0))
                return -1;
            continue;
        }
        if (r.device != log->dev)
            continue;
        if (r.ckpt == RD_CKPT_STATE) {
            log->wrapped = 1;
            continue;
        }
        if (r.ckpt == RD_CKPT_HISTORY)
            continue;
        last_t = r.t;
        if (L->waited && r.tid != L->waited_tid && flush_wait(L, r.t)) /* another thread's: run before */
            return -1;
        int ends = ends_wait(L, &r);
        ev_t ev[EV_MAX];
        int n = ev_decode(&L->ev, &r, ev), rc = 0;
        if (n < 0)
            return -1;
        for (int i = 0; i < n && !rc; i++)
            rc = on_event(L, &r, &ev[i]);
        if (!rc && ends)
            rc = flush_wait(L, r.t);
        if (rc)
            return -1;
        if (n)
            continue;
        switch (r.type) {
        case GMLOG_DEVICE: {
            const gmlog_device_t *d = (const gmlog_device_t *)r.p;
            log->total = d->total;
            log->free_at_start = d->free_at_start;
            break;
        }
        case GMLOG_LIMIT: {
            uint64_t b = ((const gmlog_limit_t *)r.p)->bytes;
            if (!log->limit_first)
                log->limit_first = b;
            L->torch_capped = (r.flags & GMLOG_LIMIT_TORCH) && b;
            if (L->torch_capped && !log->torch_limit)
                log->torch_limit = b;
            rc = push(log, RP_LIMIT, r.t, b, 0, 0, 0) ? 0 : -1;
            break;
        }
        case GMLOG_FENCE:
            log->nfences++;
            rc = push(log, RP_FENCE, r.t, ((const gmlog_fence_t *)r.p)->pending_bytes,
                      (uint32_t)((const gmlog_fence_t *)r.p)->seq, 0, 0) ? 0 : -1;
            break;
        case GMLOG_FENCE_REUSABLE: /* both say the fences up to seq are done with */
        case GMLOG_FENCE_WAIT: {
            uint64_t seq = ((const gmlog_fence_wait_t *)r.p)->seq;
            log->nreusable += r.type == GMLOG_FENCE_REUSABLE;
            if (r.type == GMLOG_FENCE_WAIT || (r.flags & GMLOG_REUSABLE_WAITED))
                rc = wait_done(L, &r, seq);
            else
                rc = push(log, RP_DONE, r.t, seq, 0, 0, 0) ? 0 : -1;
            break;
        }
        case GMLOG_EMPTY_CACHE:
            rc = push(log, RP_EMPTY, r.t, r.flags, 0, 0, 0) ? 0 : -1;
            break;
        case GMLOG_RESET:
            L->reserved = 0;
            /* Every exact segment went with the device (their ids are not reused: no harm). */
            table_map_clear(&L->exact);
            rc = push(log, RP_RESET, r.t, 0, 0, 0, 0) ? 0 : -1;
            break;
        default:
            break;
        }
        if (!rc && ends)
            rc = flush_wait(L, r.t);
        if (rc)
            return -1;
    }
    if (flush_wait(L, last_t))
        return -1;
    if (log->torch_cache_kept == 0 && torch)
        log->torch_cache_kept = 1;
    if (log->torch_cache_kept < 0 || log->torch_tensors)
        log->torch_cache_kept = 0; /* its tensors are the blocks */
    return 0;
}

int rp_load_events(rp_log_t *log, rd_log_t *lf, int dev)
{
    memset(log, 0, sizeof *log);
    log->dev = dev;
    read_settings(log, lf);
    loader_t L;
    memset(&L, 0, sizeof L);
    L.log = log;
    if (dev >= 0 && dev < 255)
        log->torch_tensors = ev_dec_scan(&L.ev, lf, dev);
    if (log->torch_tensors)
        torch_settings(log, lf);
    int returns = lf->returns;
    lf->returns = 1; /* the caches' returns: where their blocks went back to the pool */
    int rc = decode(&L, lf);
    lf->returns = returns;
    uint8_t *fit = log->npacked ? realloc(log->packed, log->npacked) : NULL; /* no room kept for growth */
    if (fit)
        log->packed = fit, log->cappacked = log->npacked;
    ev_dec_free(&L.ev);
    table_map_free(&L.held);
    table_map_free(&L.exact);
    table_map_free(&L.map);
    free(L.free_ids);
    if (rc)
        return -1;
    /* Without a driver OOM, what the driver could give the pool is at least what it gave. */
    log->base_cap = log->free_at_start ? log->free_at_start : log->total;
    if (log->base_cap < log->peak_reserved_recorded)
        log->base_cap = log->peak_reserved_recorded;
    if (!log->total)
        log->total = log->base_cap;
    return 0;
}

int rp_load(rp_log_t *log, rd_log_t *lf, int dev)
{
    if (rp_load_events(log, lf, dev))
        return -1;
    /* Following the recording first learns when its fences completed (a log that says when its
     * freed memory became reusable, or has no fences, needs no such pass); then the replay as it
     * ran. */
    rp_cfg_t cfg;
    rp_cfg_recorded(&cfg);
    int learn = log->nfences && !log->nreusable;
    if (learn || log->foreign) {
        cfg.guided = 1;
        log->recorded = log->followed = replay_once(log, &cfg);
    }
    rp_cfg_as_recorded(log, &cfg);
    if (!log->foreign)
        log->recorded = replay_once(log, &cfg);
    if (!learn && !log->foreign)
        log->followed = log->recorded;
    return 0;
}

void rp_log_free(rp_log_t *log)
{
    free(log->packed);
    free(log->ooms);
    free(log->proof_ev);
    free(log->proof_seq);
    free(log->drv_cap);
    memset(log, 0, sizeof *log);
}
