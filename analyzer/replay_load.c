/* The replay's input: one device's pool events decoded from a log into a compact array (block
 * ids instead of pointers, so that a replay never hashes), the recorded OOMs and the settings
 * the log says were in force. Never trusts the log: unknown frees are dropped, sizes bounded. */
#include "replay.h"
#include "vec.h"
#include "torch_events.h"

#include <stdlib.h>
#include <string.h>

/* Recorded pointer -> block id, open addressing with backward-shift deletion. */
typedef struct idmap {
    uint64_t *key;
    uint32_t *val;
    size_t cap, count;
} idmap_t;

static size_t idmap_home(const idmap_t *m, uint64_t k)
{
    return (size_t)((k >> 9) * 0x9E3779B97F4A7C15ull >> 20) & (m->cap - 1);
}

static int idmap_grow(idmap_t *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 1024;
    uint64_t *k = calloc(ncap, sizeof *k);
    uint32_t *v = calloc(ncap, sizeof *v);
    if (!k || !v) {
        free(k);
        free(v);
        return -1;
    }
    idmap_t n = {k, v, ncap, 0};
    for (size_t i = 0; i < m->cap; i++)
        if (m->key[i]) {
            size_t j = idmap_home(&n, m->key[i]);
            while (n.key[j])
                j = (j + 1) & (ncap - 1);
            n.key[j] = m->key[i];
            n.val[j] = m->val[i];
            n.count++;
        }
    free(m->key);
    free(m->val);
    *m = n;
    return 0;
}

/* The slot of k (its key 0 when absent). */
static size_t idmap_slot(const idmap_t *m, uint64_t k)
{
    size_t i = idmap_home(m, k);
    while (m->key[i] && m->key[i] != k)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static void idmap_erase(idmap_t *m, size_t i)
{
    for (;;) {
        m->key[i] = 0;
        size_t j = i;
        for (;;) {
            j = (j + 1) & (m->cap - 1);
            if (!m->key[j]) {
                m->count--;
                return;
            }
            size_t h = idmap_home(m, m->key[j]);
            if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j))
                break;
        }
        m->key[i] = m->key[j];
        m->val[i] = m->val[j];
        i = j;
    }
}

typedef struct loader {
    rp_log_t *log;
    idmap_t map;
    idmap_t held;                /* blocks in threads' caches: freed by the program, not the pool's */
    uint32_t *free_ids;
    size_t nfree, capfree;
    uint64_t reserved, issued;
    int oom_failed;
    /* PyTorch's tensors (torch_events.h): the device's blocks are its tensors */
    int tensors;
    idmap_t segbase;             /* PyTorch's segment bases: their ALLOC and FREE are left out */
    idmap_t exact, exact_units;  /* a caching allocator's exact segments (GMLOG_A_EXACT): base -> block id, size / 512 */
    gmlog_oom_t hook_oom;        /* the hooks' last failed cudaMalloc, for the next T_OOM */
    int torch_capped;            /* the last LIMIT was PyTorch's memory fraction: its T_OOM is the cap's */
    int hook_oom_seen;
} loader_t;

int rp_append(rp_log_t *log, const rp_ev_t *e)
{
    uint8_t *n = vec_grow_raw(log->packed, &log->cappacked, log->tail.off + RP_PACKED_MAX, 1, 65536);
    if (!n)
        return -1;
    log->packed = n;
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
    uint32_t *n = vec_grow(L->free_ids, &L->capfree, L->nfree + 1, sizeof *n, 1024);
    if (!n)
        return -1;
    L->free_ids = n;
    L->free_ids[L->nfree++] = id;
    return 0;
}

/* A free of the block at ptr: its event, and its id back to the free list. */
static int on_free(loader_t *L, uint64_t t, uint64_t ptr, int deferred)
{
    if (!L->map.cap)
        return 0;
    size_t i = idmap_slot(&L->map, ptr);
    if (!L->map.key[i])
        return 0; /* not a pool block this decoder saw: nothing to replay */
    uint32_t id = L->map.val[i];
    idmap_erase(&L->map, i);
    if (!push(L->log, deferred ? RP_FREE_DEFERRED : RP_FREE, t, 0, id, 0, 0))
        return -1;
    return release_id(L, id);
}

/* The block at ptr freed into its thread's cache: its id stays with it (held). */
static int on_free_cached(loader_t *L, uint64_t t, uint64_t ptr, int deferred)
{
    if (!L->map.cap)
        return 0;
    size_t i = idmap_slot(&L->map, ptr);
    if (!L->map.key[i])
        return 0;
    uint32_t id = L->map.val[i];
    idmap_erase(&L->map, i);
    if (L->held.count * 2 >= L->held.cap && idmap_grow(&L->held))
        return -1;
    size_t h = idmap_slot(&L->held, ptr);
    L->held.key[h] = ptr;
    L->held.val[h] = id;
    L->held.count++;
    return push(L->log, RP_FREE_CACHED, t, deferred != 0, id, 0, 0) ? 0 : -1;
}

/* A held block back to its arena (`id` of the held slot i). */
static int on_return_slot(loader_t *L, uint64_t t, size_t i)
{
    uint32_t id = L->held.val[i];
    idmap_erase(&L->held, i);
    if (!push(L->log, RP_RETURN, t, 0, id, 0, 0))
        return -1;
    return release_id(L, id);
}

static int on_return(loader_t *L, uint64_t t, uint64_t ptr)
{
    if (!L->held.cap)
        return 0;
    size_t i = idmap_slot(&L->held, ptr);
    return L->held.key[i] ? on_return_slot(L, t, i) : 0;
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

static int on_pool_alloc(loader_t *L, const rd_rec_t *r);
static int on_exact_free(loader_t *L, uint64_t t, uint64_t ptr);

/* A caching allocator's segment at its exact size from the driver (PyTorch's cache kept): every
 * replay gives it a segment of its own, whatever its settings (replay.c exact_alloc). */
static int on_exact_alloc(loader_t *L, const rd_rec_t *r)
{
    const gmlog_alloc_t *a = (const gmlog_alloc_t *)r->p;
    uint64_t size = a->size & GMLOG_SIZE_MASK;
    if (!a->ptr || !size || size % GM_ROUND || size / GM_ROUND > UINT32_MAX) {
        L->log->unpooled++;
        return 0; /* not a segment the pool could have had */
    }
    if ((L->exact.count * 2 >= L->exact.cap && idmap_grow(&L->exact)) ||
        (L->exact_units.count * 2 >= L->exact_units.cap && idmap_grow(&L->exact_units)))
        return -1;
    size_t i = idmap_slot(&L->exact, a->ptr), u = idmap_slot(&L->exact_units, a->ptr);
    if (L->exact.key[i]) { /* taken again without a free the log holds: the old one went */
        if (on_exact_free(L, r->t, a->ptr))
            return -1;
        i = idmap_slot(&L->exact, a->ptr);
        u = idmap_slot(&L->exact_units, a->ptr);
    }
    L->exact.count++;
    L->exact_units.count++;
    uint32_t id;
    new_id(L, &id);
    L->exact.key[i] = L->exact_units.key[u] = a->ptr;
    L->exact.val[i] = id;
    L->exact_units.val[u] = (uint32_t)(size / GM_ROUND);
    reserve(L, size);
    if (!push(L->log, RP_EXACT_ALLOC, r->t, size, id, a->site, a->ptr))
        return -1;
    return 0;
}

/* The free of a pass-through block: an exact segment's, with its segment. */
static int on_exact_free(loader_t *L, uint64_t t, uint64_t ptr)
{
    if (!L->exact.cap)
        return 0;
    size_t i = idmap_slot(&L->exact, ptr);
    if (!L->exact.key[i])
        return 0;
    uint32_t id = L->exact.val[i];
    idmap_erase(&L->exact, i);
    size_t u = idmap_slot(&L->exact_units, ptr);
    if (L->exact_units.key[u]) {
        unreserve(L, (uint64_t)L->exact_units.val[u] * GM_ROUND);
        idmap_erase(&L->exact_units, u);
    }
    if (!push(L->log, RP_EXACT_FREE, t, 0, id, 0, 0))
        return -1;
    return release_id(L, id);
}

static int on_alloc(loader_t *L, const rd_rec_t *r)
{
    unsigned kind = (r->flags & GMLOG_KIND_MASK) >> GMLOG_KIND_SHIFT;
    if (kind == GMLOG_KIND_PASS && (r->flags & GMLOG_A_EXACT))
        return on_exact_alloc(L, r);
    if (kind == GMLOG_KIND_PASS)
        L->log->pool_off = 1;
    return on_pool_alloc(L, r);
}

static int on_pool_alloc(loader_t *L, const rd_rec_t *r)
{
    const gmlog_alloc_t *a = (const gmlog_alloc_t *)r->p;
    unsigned kind = (r->flags & GMLOG_KIND_MASK) >> GMLOG_KIND_SHIFT;
    if (kind != GMLOG_KIND_POOL) {
        L->log->unpooled++;
        return 0;
    }
    if (L->map.count * 2 >= L->map.cap && idmap_grow(&L->map))
        return -1;
    size_t i = idmap_slot(&L->map, a->ptr);
    if (L->map.key[i]) { /* allocated again without a free the log holds: it was freed */
        if (on_free(L, r->t, a->ptr, 0))
            return -1;
        i = idmap_slot(&L->map, a->ptr);
    }
    /* A block a thread's cache held: from the cache it keeps its id; from the arena it was given
     * back first (a log whose return was lost). */
    size_t h = L->held.cap ? idmap_slot(&L->held, a->ptr) : 0;
    int held = L->held.cap && L->held.key[h];
    uint32_t id;
    if (held && (r->flags & GMLOG_A_CACHED)) {
        id = L->held.val[h];
        idmap_erase(&L->held, h);
    } else {
        if (held && on_return_slot(L, r->t, h))
            return -1;
        new_id(L, &id);
    }
    L->map.key[i] = a->ptr;
    L->map.val[i] = id;
    L->map.count++;
    int ok = push(L->log, held && (r->flags & GMLOG_A_CACHED) ? RP_ALLOC_CACHED : RP_ALLOC, r->t,
                      a->size & GMLOG_SIZE_MASK, id, a->site, a->ptr);
    if (!ok)
        return -1;
    return 0;
}

static int on_oom(loader_t *L, const rd_rec_t *r)
{
    if (L->tensors && r->type == GMLOG_OOM) { /* PyTorch's segment ask: kept for its T_OOM */
        memcpy(&L->hook_oom, r->p, sizeof L->hook_oom);
        L->hook_oom_seen = 1;
        return 0;
    }
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

static void add_segment_base(void *arg, uint64_t base)
{
    idmap_t *m = arg;
    if (m->count * 2 >= m->cap && idmap_grow(m))
        return;
    size_t i = idmap_slot(m, base);
    if (!m->key[i]) {
        m->key[i] = base;
        m->val[i] = 1;
        m->count++;
    }
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

static int is_segment_base(const idmap_t *m, uint64_t ptr)
{
    return m->cap && m->key[idmap_slot(m, ptr)] == ptr;
}

/* A record of a tensor device: 1 when handled here (a tensor event, or a hook record that
 * PyTorch's own events stand for), 0 for the decoder's usual switch. The block is reusable at
 * T_FREE_COMPLETED: that is when PyTorch's allocator may hand it out again. */
static int tensor_record(loader_t *L, const rd_rec_t *r, int *rc)
{
    *rc = 0;
    if (r->type == GMLOG_SEGMENT_ALLOC || r->type == GMLOG_SEGMENT_FREE)
        return 1;
    if ((r->type == GMLOG_ALLOC || r->type == GMLOG_FREE) && r->len >= 16) {
        uint64_t ptr;
        memcpy(&ptr, r->p + 8, 8);
        return is_segment_base(&L->segbase, ptr);
    }
    if (!torch_is_tensor_type(r->type))
        return 0;
    if (r->len < sizeof(gmlog_tensor_t))
        return 1;
    const gmlog_tensor_t *t = (const gmlog_tensor_t *)r->p;
    switch (r->type) {
    case GMLOG_T_ALLOC: {
        gmlog_alloc_t a;
        memset(&a, 0, sizeof a);
        a.ptr = t->addr;
        a.size = t->size & GMLOG_SIZE_MASK;
        a.site = t->site;
        rd_rec_t n = *r;
        n.p = (const uint8_t *)&a;
        n.flags = GMLOG_KIND_POOL << GMLOG_KIND_SHIFT;
        *rc = t->addr ? on_alloc(L, &n) : 0;
        break;
    }
    case GMLOG_T_FREE_COMPLETED:
        *rc = on_free(L, r->t, t->addr, 0);
        break;
    case GMLOG_T_SEGMENT_ALLOC:
        *rc = on_segment_alloc(L, r->t, t->addr, t->size);
        break;
    case GMLOG_T_SEGMENT_FREE:
        *rc = on_segment_free(L, r->t, t->addr, t->size);
        break;
    case GMLOG_T_SEGMENT_MAP:
        L->log->torch_expandable = 1;
        break;
    case GMLOG_T_OOM: {
        gmlog_oom_t o;
        torch_oom_record(&o, L->hook_oom_seen ? &L->hook_oom : NULL, t);
        o.h.flags = L->hook_oom.h.flags & ~(GMLOG_OOM_RECOVERED | GMLOG_OOM_EXACT); /* a tensor's request */
        if (L->torch_capped)
            o.h.flags |= GMLOG_OOM_LIMIT;
        rd_rec_t n = *r;
        n.p = (const uint8_t *)&o;
        n.type = GMLOG_OOM;
        n.flags = o.h.flags;
        L->tensors = 0; /* on_oom then takes it as an OOM */
        *rc = on_oom(L, &n);
        L->tensors = 1;
        L->hook_oom_seen = 0;
        memset(&L->hook_oom, 0, sizeof L->hook_oom);
        break;
    }
    default:
        break; /* FREE_REQUESTED: the tensor is gone, its block not yet reusable */
    }
    return 1;
}

static int decode(loader_t *L, rd_log_t *lf)
{
    rp_log_t *log = L->log;
    rd_rec_t r;
    int torch = 0;
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
        int rc = 0;
        if (L->tensors && tensor_record(L, &r, &rc)) {
            if (rc)
                return -1;
            continue;
        }
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
        case GMLOG_ALLOC:
            rc = on_alloc(L, &r);
            break;
        case GMLOG_FREE: {
            unsigned kind = (r.flags & GMLOG_KIND_MASK) >> GMLOG_KIND_SHIFT;
            uint64_t ptr = ((const gmlog_free_t *)r.p)->ptr;
            int deferred = (r.flags & GMLOG_F_DEFERRED) != 0;
            if (kind == GMLOG_KIND_POOL && (r.flags & GMLOG_F_RETURNED))
                rc = on_return(L, r.t, ptr);
            else if (kind == GMLOG_KIND_POOL && (r.flags & GMLOG_F_CACHED))
                rc = on_free_cached(L, r.t, ptr, deferred);
            else if (kind == GMLOG_KIND_POOL)
                rc = on_free(L, r.t, ptr, deferred);
            else if (kind == GMLOG_KIND_PASS)
                rc = on_exact_free(L, r.t, ((const gmlog_free_t *)r.p)->ptr);
            break;
        }
        case GMLOG_SEGMENT_ALLOC: {
            const gmlog_segment_t *s = (const gmlog_segment_t *)r.p;
            rc = on_segment_alloc(L, r.t, s->base, s->size);
            break;
        }
        case GMLOG_SEGMENT_FREE: {
            const gmlog_segment_t *s = (const gmlog_segment_t *)r.p;
            rc = on_segment_free(L, r.t, s->base, s->size);
            break;
        }
        case GMLOG_FENCE:
            log->nfences++;
            rc = push(log, RP_FENCE, r.t, ((const gmlog_fence_t *)r.p)->pending_bytes,
                      (uint32_t)((const gmlog_fence_t *)r.p)->seq, 0, 0) ? 0 : -1;
            break;
        case GMLOG_FENCE_WAIT:
            rc = push(log, RP_DONE, r.t, ((const gmlog_fence_wait_t *)r.p)->seq, 0, 0, 0) ? 0 : -1;
            break;
        case GMLOG_EMPTY_CACHE:
            rc = push(log, RP_EMPTY, r.t, r.flags, 0, 0, 0) ? 0 : -1;
            break;
        case GMLOG_OOM:
            rc = on_oom(L, &r);
            break;
        case GMLOG_RESET:
            L->reserved = 0;
            /* Every exact segment went with the device (their ids are not reused: no harm). */
            if (L->exact.cap)
                memset(L->exact.key, 0, L->exact.cap * sizeof *L->exact.key), L->exact.count = 0;
            if (L->exact_units.cap)
                memset(L->exact_units.key, 0, L->exact_units.cap * sizeof *L->exact_units.key), L->exact_units.count = 0;
            rc = push(log, RP_RESET, r.t, 0, 0, 0, 0) ? 0 : -1;
            break;
        default:
            break;
        }
        if (rc)
            return -1;
    }
    if (log->torch_cache_kept == 0 && torch)
        log->torch_cache_kept = 1;
    if (log->torch_cache_kept < 0 || log->torch_tensors)
        log->torch_cache_kept = 0; /* its tensors are the blocks */
    return 0;
}

int rp_load(rp_log_t *log, rd_log_t *lf, int dev)
{
    memset(log, 0, sizeof *log);
    log->dev = dev;
    read_settings(log, lf);
    loader_t L;
    memset(&L, 0, sizeof L);
    L.log = log;
    unsigned char devs[256] = {0};
    if (dev >= 0 && dev < 255)
        L.tensors = log->torch_tensors = torch_events_scan(lf, dev, devs, add_segment_base, &L.segbase);
    if (L.tensors)
        torch_settings(log, lf);
    int returns = lf->returns;
    lf->returns = 1; /* the caches' returns: where their blocks went back to the pool */
    int rc = decode(&L, lf);
    lf->returns = returns;
    uint8_t *fit = log->npacked ? realloc(log->packed, log->npacked) : NULL; /* no room kept for growth */
    if (fit)
        log->packed = fit, log->cappacked = log->npacked;
    free(L.held.key);
    free(L.held.val);
    free(L.segbase.key);
    free(L.segbase.val);
    free(L.exact.key);
    free(L.exact.val);
    free(L.exact_units.key);
    free(L.exact_units.val);
    free(L.map.key);
    free(L.map.val);
    free(L.free_ids);
    if (rc)
        return -1;
    /* Without a driver OOM, what the driver could give the pool is at least what it gave. */
    log->base_cap = log->free_at_start ? log->free_at_start : log->total;
    if (log->base_cap < log->peak_reserved_recorded)
        log->base_cap = log->peak_reserved_recorded;
    if (!log->total)
        log->total = log->base_cap;
    /* Following the recording first learns when its fences completed; then the replay as it ran. */
    rp_cfg_t cfg;
    rp_cfg_recorded(&cfg);
    cfg.guided = 1;
    log->recorded = log->followed = replay_once(log, &cfg);
    rp_cfg_as_recorded(log, &cfg);
    if (!log->foreign)
        log->recorded = replay_once(log, &cfg);
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
