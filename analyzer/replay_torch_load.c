/* Decodes a keep-mode log's PyTorch events (GMLOG_T_*, written by the bridge) into the events
 * the allocator model runs (replay_torch.h), with the log's PYTORCH_CUDA_ALLOC_CONF and the
 * peak PyTorch reserved. Its segment frees say when the program emptied the cache; its failed
 * cudaMallocs and OutOfMemoryErrors how much the driver had left. Never trusts the log: unknown
 * addresses are skipped, streams beyond RT_MAX_STREAMS share the last. */
#include "replay_torch.h"
#include "vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RT_MAX_STREAMS 64

typedef struct rt_map {      /* recorded address -> tensor id, open addressing */
    uint64_t *key;
    uint32_t *val;
    size_t cap, count;
} rt_map_t;

static size_t map_home(const rt_map_t *m, uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k & (m->cap - 1);
}

static int map_grow(rt_map_t *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 1024;
    uint64_t *nk = calloc(ncap, sizeof *nk);
    uint32_t *nv = calloc(ncap, sizeof *nv);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return -1;
    }
    rt_map_t n = {nk, nv, ncap, 0};
    for (size_t i = 0; i < m->cap; i++)
        if (m->key[i]) {
            size_t j = map_home(&n, m->key[i]);
            while (n.key[j])
                j = (j + 1) & (ncap - 1);
            n.key[j] = m->key[i], n.val[j] = m->val[i], n.count++;
        }
    free(m->key);
    free(m->val);
    *m = n;
    return 0;
}

static size_t map_slot(const rt_map_t *m, uint64_t k)
{
    size_t i = map_home(m, k);
    while (m->key[i] && m->key[i] != k)
        i = (i + 1) & (m->cap - 1);
    return i;
}

/* Removes slot i, moving back the entries after it (linear probing's deletion). */
static void map_del(rt_map_t *m, size_t i)
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
            size_t h = map_home(m, m->key[j]);
            if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j))
                break;
        }
        m->key[i] = m->key[j];
        m->val[i] = m->val[j];
        i = j;
    }
}

int replay_torch_append(rt_log_t *log, unsigned type, uint64_t size, uint32_t id, unsigned stream)
{
    return replay_torch_append_at(log, type, size, id, stream, log->nev ? log->ev[log->nev - 1].t : 0, 0);
}

int replay_torch_append_at(rt_log_t *log, unsigned type, uint64_t size, uint32_t id, unsigned stream, uint64_t t,
                           uint32_t site)
{
    rt_ev_t *n = vec_grow(log->ev, &log->capev, log->nev + 1, sizeof *n, 4096);
    if (!n)
        return -1;
    log->ev = n;
    rt_ev_t e = {size, t, id, site, (uint16_t)stream, (uint8_t)type, 0};
    log->ev[log->nev++] = e;
    if (type == RT_ALLOC && id >= log->nids)
        log->nids = id + 1;
    if (stream >= log->nstreams)
        log->nstreams = stream + 1;
    return 0;
}

int replay_torch_conf_parse(const char *s, rt_conf_t *out)
{
    int named = 0;
    while (s && *s) {
        const char *end = strchr(s, ','), *colon = strchr(s, ':');
        if (colon && (!end || colon < end)) {
            size_t k = (size_t)(colon - s);
            const char *v = colon + 1;
#define KEY(name) (k == sizeof name - 1 && !strncmp(s, name, k))
            if (KEY("expandable_segments"))
                out->expandable = !strncmp(v, "True", 4) || !strncmp(v, "true", 4) || *v == '1', named = 1;
            else if (KEY("max_split_size_mb"))
                out->max_split = strtoull(v, NULL, 10) << 20, named = 1;
            else if (KEY("roundup_power2_divisions") && *v != '[') /* the per-interval list: not followed */
                out->divisions = (unsigned)strtoul(v, NULL, 10), named = 1;
            else if (KEY("garbage_collection_threshold"))
                out->gc_threshold = strtod(v, NULL), named = 1;
            else if (KEY("backend"))
                out->async = !strncmp(v, "cudaMallocAsync", 15), named = 1;
#undef KEY
        }
        s = end ? end + 1 : NULL;
    }
    return named ? 0 : -1;
}

const char *replay_torch_conf_text(const rt_conf_t *c, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
#define ADD(...) (o < len ? (void)(o += (size_t)snprintf(buf + o, len - o, __VA_ARGS__)) : (void)0)
    if (c->async)
        ADD("%sbackend:cudaMallocAsync", o ? "," : "");
    if (c->expandable)
        ADD("%sexpandable_segments:True", o ? "," : "");
    if (c->max_split)
        ADD("%smax_split_size_mb:%llu", o ? "," : "", (unsigned long long)(c->max_split >> 20));
    if (c->divisions)
        ADD("%sroundup_power2_divisions:%u", o ? "," : "", c->divisions);
    if (c->gc_threshold > 0)
        ADD("%sgarbage_collection_threshold:%g", o ? "," : "", c->gc_threshold);
#undef ADD
    return buf;
}

typedef struct rt_loader {
    rt_log_t *log;
    rt_map_t map;
    uint32_t *free_ids;
    size_t nfree, capfree;
    uint64_t streams[RT_MAX_STREAMS];
    unsigned nstreams;
    uint64_t reserved;       /* PyTorch's segments as recorded */
    uint64_t dev_limit;      /* GMSHIM_DEVICE_LIMIT in force: PyTorch's cudaMallocs fail above it */
    int retry;               /* a cudaMalloc failed since the last tensor: its segment frees are the OOM retry's */
    int last_empty;
} rt_loader_t;

static unsigned stream_index(rt_loader_t *L, uint64_t stream, uint32_t pool)
{
    uint64_t key = stream ^ ((uint64_t)pool << 48); /* a graph's private pool apart */
    for (unsigned i = 0; i < L->nstreams; i++)
        if (L->streams[i] == key)
            return i;
    if (L->nstreams < RT_MAX_STREAMS) {
        L->streams[L->nstreams] = key;
        return L->nstreams++;
    }
    return RT_MAX_STREAMS - 1;
}

static int on_tensor_alloc(rt_loader_t *L, const gmlog_tensor_t *t, uint64_t now)
{
    if (!t->addr)
        return 0;
    if (L->map.count * 2 >= L->map.cap && map_grow(&L->map))
        return -1;
    size_t i = map_slot(&L->map, t->addr);
    uint32_t id;
    int fresh = !L->map.key[i];
    if (!fresh) /* allocated twice without a free (damaged): the old one is gone */
        id = L->map.val[i];
    else if (L->nfree)
        id = L->free_ids[--L->nfree];
    else
        id = L->log->nids;
    L->map.key[i] = t->addr, L->map.val[i] = id;
    L->map.count += (size_t)fresh;
    L->retry = 0, L->last_empty = 0;
    return replay_torch_append_at(L->log, RT_ALLOC, t->size, id, stream_index(L, t->stream, t->pool), now, t->site);
}

static int on_tensor_free(rt_loader_t *L, const gmlog_tensor_t *t, uint64_t now)
{
    if (!L->map.cap)
        return 0;
    size_t i = map_slot(&L->map, t->addr);
    if (!L->map.key[i])
        return 0;
    uint32_t id = L->map.val[i];
    map_del(&L->map, i);
    uint32_t *n = vec_grow(L->free_ids, &L->capfree, L->nfree + 1, sizeof *n, 1024);
    if (!n)
        return -1;
    L->free_ids = n;
    L->free_ids[L->nfree++] = id;
    L->last_empty = 0;
    return replay_torch_append_at(L->log, RT_FREE, 0, id, 0, now, 0);
}

static void segment_bytes(rt_loader_t *L, int up, uint64_t size)
{
    if (up) {
        L->reserved += size;
        if (L->reserved > L->log->peak_reserved_recorded)
            L->log->peak_reserved_recorded = L->reserved;
    } else {
        L->reserved = L->reserved > size ? L->reserved - size : 0;
    }
}

/* From here on PyTorch could reserve `room` (the driver's), or less under gmshim's limit. */
static int cap_at(rt_loader_t *L, uint64_t room)
{
    if (L->dev_limit && L->dev_limit < room)
        room = L->dev_limit;
    return replay_torch_append(L->log, RT_CAP, room, 0, 0);
}

static int on_record(rt_loader_t *L, const rd_rec_t *r)
{
    rt_log_t *log = L->log;
    if (r->type >= GMLOG_T_ALLOC && r->type <= GMLOG_T_OOM) {
        if (r->len < sizeof(gmlog_tensor_t))
            return 0;
        const gmlog_tensor_t *t = (const gmlog_tensor_t *)r->p;
        switch (r->type) {
        case GMLOG_T_ALLOC:
            return on_tensor_alloc(L, t, r->t);
        case GMLOG_T_FREE_COMPLETED:
            return on_tensor_free(L, t, r->t);
        case GMLOG_T_SEGMENT_MAP:
            log->conf.expandable = 1; /* what it ran under, whatever the environment said */
            segment_bytes(L, 1, t->size);
            return 0;
        case GMLOG_T_SEGMENT_ALLOC:
            segment_bytes(L, 1, t->size);
            return 0;
        case GMLOG_T_SEGMENT_FREE:
        case GMLOG_T_SEGMENT_UNMAP:
            segment_bytes(L, 0, t->size);
            if (L->retry || L->last_empty)
                return 0;
            L->last_empty = 1;
            return replay_torch_append(log, RT_EMPTY, 0, 0, 0);
        case GMLOG_T_OOM:
            log->nooms++;
            L->retry = 0, L->last_empty = 0;
            /* addr: what the driver had free then; with what PyTorch held, its room */
            if (t->addr && cap_at(L, L->reserved + t->addr))
                return -1;
            return replay_torch_append_at(log, RT_OOM, t->size, 0, stream_index(L, t->stream, t->pool), r->t, t->site);
        default:
            return 0;
        }
    }
    switch (r->type) {
    case GMLOG_DEVICE:
        if (r->len >= sizeof(gmlog_device_t)) {
            const gmlog_device_t *d = (const gmlog_device_t *)r->p;
            log->total = d->total;
            if (!log->cap)
                log->cap = d->free_at_start ? d->free_at_start : d->total;
        }
        return 0;
    case GMLOG_LIMIT: {
        if (r->len < sizeof(gmlog_limit_t))
            return 0;
        uint64_t b = ((const gmlog_limit_t *)r->p)->bytes;
        if (r->flags & GMLOG_LIMIT_TORCH) {
            if (!log->torch_limit)
                log->torch_limit = b;
            return replay_torch_append(log, RT_LIMIT, b, 0, 0);
        }
        L->dev_limit = b; /* gmshim's cap on the cudaMallocs PyTorch makes */
        return cap_at(L, b ? b : log->cap ? log->cap : log->total);
    }
    case GMLOG_OOM: /* a failed cudaMalloc: PyTorch's segment ask, its retry follows */
        if (r->len >= sizeof(gmlog_oom_t)) {
            const gmlog_oom_t *o = (const gmlog_oom_t *)r->p;
            L->retry = 1;
            if (o->driver_free && cap_at(L, L->reserved + o->driver_free))
                return -1;
        }
        return 0;
    default:
        return 0;
    }
}

int replay_torch_load(rt_log_t *log, rd_log_t *lf, int dev)
{
    memset(log, 0, sizeof *log);
    log->dev = dev;
    for (size_t i = 0; i < lf->nmeta; i++) {
        const char *v = lf->meta[i].tag == GMLOG_META_ENV ? lf->meta[i].value : NULL;
        if (v && !strncmp(v, "PYTORCH_CUDA_ALLOC_CONF=", 24))
            log->has_conf = replay_torch_conf_parse(v + 24, &log->conf) == 0;
    }
    rt_loader_t L;
    memset(&L, 0, sizeof L);
    L.log = log;
    int rc = 0, tensors = 0;
    rd_rec_t r;
    rd_rewind(lf);
    while (rc == 0 && rd_next(lf, &r)) {
        if (r.device != dev)
            continue;
        if (r.ckpt == RD_CKPT_STATE) {
            /* A bounded log's checkpoint: the tensors and segments alive then start the model
             * (a free requested but not completed is still held). */
            log->wrapped = 1;
            if (r.type == GMLOG_T_FREE_REQUESTED)
                r.type = GMLOG_T_ALLOC;
            if (r.type == GMLOG_T_ALLOC || r.type == GMLOG_T_SEGMENT_ALLOC || r.type == GMLOG_T_SEGMENT_MAP) {
                tensors = 1;
                rc = on_record(&L, &r);
            }
            continue;
        }
        if (r.ckpt == RD_CKPT_DEF && (r.type == GMLOG_DEVICE || r.type == GMLOG_LIMIT)) {
            rc = on_record(&L, &r); /* the device and the caps in force, repeated by the checkpoint */
            continue;
        }
        if (r.ckpt != RD_EVENT)
            continue;
        int tensor = r.type >= GMLOG_T_ALLOC && r.type <= GMLOG_T_OOM;
        if (tensor && dev >= 0 && dev < 256 && lf->torch_cut[dev] && r.t <= lf->torch_cut_ns[dev])
            continue; /* the checkpoint's state already holds what it did */
        tensors |= tensor;
        rc = on_record(&L, &r);
    }
    free(L.map.key);
    free(L.map.val);
    free(L.free_ids);
    if (rc) {
        replay_torch_free(log);
        return -1;
    }
    if (!tensors) {
        replay_torch_free(log);
        return 1;
    }
    if (log->total && (!log->cap || log->cap > log->total))
        log->cap = log->total;
    if (log->cap < log->peak_reserved_recorded)
        log->cap = log->peak_reserved_recorded;
    return 0;
}

void replay_torch_free(rt_log_t *log)
{
    free(log->ev);
    log->ev = NULL;
    log->nev = log->capev = 0;
}
