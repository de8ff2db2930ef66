/* The model's input (replay_torch.h): a keep-mode log's tensor events on one device, as the
 * decoder (events.h) gives them, by tensor id and stream, with the log's PYTORCH_CUDA_ALLOC_CONF
 * and the peak PyTorch reserved. Its segment releases say when the program emptied the cache;
 * its failed cudaMallocs and OutOfMemoryErrors how much the driver had left. Reads no record
 * layout the decoder reads; never trusts the log: unknown addresses are skipped, streams beyond
 * RT_MAX_STREAMS share the last. */
#include "replay_torch.h"
#include "events.h"
#include "table.h"
#include "vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RT_MAX_STREAMS 64

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

int replay_torch_segment(rt_log_t *log, uint64_t addr, uint64_t size)
{
    size_t cap = log->capsegs;
    uint64_t *a = vec_grow(log->seg_addr, &cap, log->nsegs + 1, sizeof *a, 256);
    if (!a)
        return -1;
    log->seg_addr = a;
    uint64_t *s = vec_grow(log->seg_size, &log->capsegs, log->nsegs + 1, sizeof *s, 256);
    if (!s)
        return -1;
    log->seg_size = s;
    log->seg_addr[log->nsegs] = addr;
    log->seg_size[log->nsegs++] = size;
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

/* Whether item (key:value, n bytes) of a job's conf is one the model's text decides: a key the
 * model follows (its value parsed; a list of roundup_power2_divisions is not), or one text names. */
static int decided(const char *item, size_t n, const char *text)
{
    const char *colon = memchr(item, ':', n);
    size_t k = colon ? (size_t)(colon - item) : n;
    static const char *const followed[] = {"backend", "expandable_segments", "max_split_size_mb",
                                           "roundup_power2_divisions", "garbage_collection_threshold"};
    for (size_t i = 0; i < sizeof followed / sizeof *followed; i++)
        if (strlen(followed[i]) == k && !strncmp(item, followed[i], k))
            return !(colon && k == 24 && colon + 1 < item + n && colon[1] == '[');
    for (const char *t = text; t && *t;) { /* a key text names */
        const char *end = strchr(t, ','), *c = strchr(t, ':');
        size_t tk = c && (!end || c < end) ? (size_t)(c - t) : (end ? (size_t)(end - t) : strlen(t));
        if (tk == k && !strncmp(t, item, k))
            return 1;
        t = end ? end + 1 : NULL;
    }
    return 0;
}

const char *replay_torch_conf_merge(const char *raw, const char *text, char *buf, size_t len)
{
    int o = snprintf(buf, len, "%s", text);
    for (const char *s = raw; o >= 0 && (size_t)o < len && s && *s;) {
        const char *end = strchr(s, ',');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        while (n && (*s == ' ')) /* PyTorch's tokenizer skips spaces around items */
            s++, n--;
        while (n && s[n - 1] == ' ')
            n--;
        if (n && !decided(s, n, text))
            o += snprintf(buf + o, len - (size_t)o, "%s%.*s", o ? "," : "", (int)n, s);
        s = end ? end + 1 : NULL;
    }
    return o >= 0 && (size_t)o < len ? buf : NULL;
}

typedef struct rt_loader {
    rt_log_t *log;
    ev_dec_t ev;             /* the decoder: PyTorch's view of the device */
    table_map_t ids;         /* a live tensor's address -> its id */
    table_map_t mapped;      /* an expandable segment's base (the decoder's whole segments) -> its bytes */
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

/* A tensor's block made (or, from a checkpoint, held): its id, the one it had when the log
 * allocated the address twice without a free (damaged: the old one is gone). */
static int on_alloc(rt_loader_t *L, const ev_t *e, uint64_t now)
{
    if (!e->ptr)
        return 0;
    uint64_t *had = table_map_find(&L->ids, e->ptr);
    uint32_t id = had ? (uint32_t)*had : L->nfree ? L->free_ids[--L->nfree] : L->log->nids;
    if (!had && table_map_put(&L->ids, e->ptr, id))
        return -1;
    L->retry = 0, L->last_empty = 0;
    return replay_torch_append_at(L->log, RT_ALLOC, e->req, id, stream_index(L, e->stream, e->graph), now, e->site);
}

/* A tensor's free completed: its block reusable, its id free. */
static int on_free(rt_loader_t *L, uint64_t ptr, uint64_t now)
{
    uint64_t v;
    if (!table_map_del(&L->ids, ptr, &v))
        return 0;
    uint32_t *n = vec_grow(L->free_ids, &L->capfree, L->nfree + 1, sizeof *n, 1024);
    if (!n)
        return -1;
    L->free_ids = n;
    L->free_ids[L->nfree++] = (uint32_t)v;
    L->last_empty = 0;
    return replay_torch_append_at(L->log, RT_FREE, 0, (uint32_t)v, 0, now, 0);
}

/* From here on PyTorch could reserve `cap`: `room` (the driver's), or less under gmshim's limit.
 * The room is kept beside it, for a run under another limit. */
static int cap_room(rt_loader_t *L, uint64_t cap, uint64_t room)
{
    rt_log_t *log = L->log;
    if (replay_torch_append(log, RT_CAP, cap, (uint32_t)(room >> 32), 0))
        return -1;
    log->ev[log->nev - 1].site = (uint32_t)room;
    return 0;
}

/* Under gmshim's limit the free memory the program saw is what the limit left (the hooks answer
 * cudaMemGetInfo so): the driver's room is unknown then (0), a run under another limit takes that. */
static int cap_at(rt_loader_t *L, uint64_t room)
{
    return cap_room(L, L->dev_limit && L->dev_limit < room ? L->dev_limit : room, L->dev_limit ? 0 : room);
}

/* One record's segment events: PyTorch's reserved bytes, and a release outside an OOM retry
 * (the program emptied the cache). An expandable segment's change comes as whole segments
 * resized: its bytes are the difference. */
static int on_segments(rt_loader_t *L, const ev_t *ev, int n)
{
    uint64_t up = 0, down = 0;
    int release = 0;
    for (int i = 0; i < n; i++) {
        const ev_t *e = &ev[i];
        int made = e->type == EV_SEGMENT_ALLOC;
        if (!made && e->type != EV_SEGMENT_FREE)
            continue;
        if (!e->mapped) {
            *(made ? &up : &down) += e->size;
            release |= !made;
            if (made && replay_torch_segment(L->log, e->ptr, e->size))
                return -1;
            continue;
        }
        L->log->conf.expandable = 1; /* what it ran under, whatever the environment said */
        uint64_t was = 0;
        if (!table_map_del(&L->mapped, e->ptr, &was))
            was = 0;
        down += was;
        if (made) {
            up += e->size;
            if (table_map_put(&L->mapped, e->ptr, e->size))
                return -1;
        }
    }
    if (up > down) {
        L->reserved += up - down;
        if (L->reserved > L->log->peak_reserved_recorded)
            L->log->peak_reserved_recorded = L->reserved;
        return 0;
    }
    if (down > up)
        release = 1;
    if (!release)
        return 0;
    L->reserved = L->reserved > down - up ? L->reserved - (down - up) : 0;
    if (L->retry || L->last_empty)
        return 0;
    L->last_empty = 1;
    return replay_torch_append(L->log, RT_EMPTY, 0, 0, 0);
}

/* The events of one record of the device (a checkpoint's state: `held`, its tensors' blocks,
 * a free requested but not completed still held). */
static int on_events(rt_loader_t *L, const ev_t *ev, int n, uint64_t now, int held)
{
    const ev_t *e = &ev[0];
    switch (e->type) {
    case EV_ALLOC: return e->tensor ? on_alloc(L, e, now) : 0;
    case EV_FREE: return e->tensor && held ? on_alloc(L, e, now) : 0;
    case EV_FREE_COMPLETED: return on_free(L, e->ptr, now);
    case EV_SEGMENT_ALLOC:
    case EV_SEGMENT_FREE: return e->tensor ? on_segments(L, ev, n) : 0;
    case EV_OOM:
        if (!e->tensor)
            return 0;
        L->log->nooms++;
        L->retry = 0, L->last_empty = 0;
        /* a tensor's OOM: ptr, what the driver had free then; with what PyTorch held, its room */
        if (e->ptr && cap_at(L, L->reserved + e->ptr))
            return -1;
        return replay_torch_append_at(L->log, RT_OOM, e->oom->request, 0, stream_index(L, e->stream, e->graph), now,
                                      e->site);
    case EV_NONE:
        /* the hooks' failed cudaMalloc: PyTorch's segment ask, its retry follows */
        if (e->tensor || !e->oom)
            return 0;
        L->retry = 1;
        return e->oom->driver_free ? cap_at(L, L->reserved + e->oom->driver_free) : 0;
    default: return 0;
    }
}

/* A record the decoder leaves to its handlers: the device, and the caps in force. */
static int on_setting(rt_loader_t *L, const rd_rec_t *r)
{
    rt_log_t *log = L->log;
    if (r->type == GMLOG_DEVICE && r->len >= sizeof(gmlog_device_t)) {
        const gmlog_device_t *d = (const gmlog_device_t *)r->p;
        log->total = d->total;
        if (!log->cap)
            log->cap = d->free_at_start ? d->free_at_start : d->total;
        return 0;
    }
    if (r->type != GMLOG_LIMIT || r->len < sizeof(gmlog_limit_t))
        return 0;
    uint64_t b = ((const gmlog_limit_t *)r->p)->bytes;
    if (r->flags & GMLOG_LIMIT_TORCH) {
        if (!log->torch_limit)
            log->torch_limit = b;
        return replay_torch_append(log, RT_LIMIT, b, 0, 0);
    }
    L->dev_limit = b; /* gmshim's cap on the cudaMallocs PyTorch makes */
    uint64_t room = log->cap ? log->cap : log->total;
    return cap_room(L, b ? b : room, room);
}

/* A checkpoint's state record the model starts from: PyTorch's tensors and segments alive then. */
static int state_record(unsigned type)
{
    return type == GMLOG_T_ALLOC || type == GMLOG_T_FREE_REQUESTED || type == GMLOG_T_SEGMENT_ALLOC ||
           type == GMLOG_T_SEGMENT_MAP;
}

static int decode(rt_loader_t *L, rd_log_t *lf, int dev, int *tensors)
{
    rt_log_t *log = L->log;
    rd_rec_t r;
    rd_rewind(lf);
    while (rd_next(lf, &r)) {
        if (r.device != dev)
            continue;
        int held = r.ckpt == RD_CKPT_STATE;
        if (held) {
            log->wrapped = 1; /* a bounded log: the checkpoint's state starts the model */
            if (!state_record(r.type))
                continue;
        } else if (r.ckpt == RD_CKPT_DEF && (r.type == GMLOG_DEVICE || r.type == GMLOG_LIMIT)) {
            if (on_setting(L, &r)) /* repeated by the checkpoint */
                return -1;
            continue;
        } else if (r.ckpt != RD_EVENT) {
            continue;
        } else if (torch_is_tensor_type(r.type) && dev < 256 && lf->torch_cut[dev] && r.t <= lf->torch_cut_ns[dev]) {
            continue; /* the checkpoint's state already holds what it did */
        }
        ev_t ev[EV_MAX];
        int n = ev_decode(&L->ev, &r, ev);
        if (n < 0)
            return -1;
        if (n == 0) {
            if (!held && on_setting(L, &r))
                return -1;
            continue;
        }
        *tensors |= ev[0].tensor;
        if (on_events(L, ev, n, r.t, held))
            return -1;
    }
    return 0;
}

int replay_torch_load(rt_log_t *log, rd_log_t *lf, int dev)
{
    memset(log, 0, sizeof *log);
    log->dev = dev;
    for (size_t i = 0; i < lf->nmeta; i++) {
        const char *v = lf->meta[i].tag == GMLOG_META_ENV ? lf->meta[i].value : NULL;
        if (v && !strncmp(v, "PYTORCH_CUDA_ALLOC_CONF=", 24)) {
            log->has_conf = replay_torch_conf_parse(v + 24, &log->conf) == 0;
            snprintf(log->conf_raw, sizeof log->conf_raw, "%s", v + 24);
        }
    }
    rt_loader_t L;
    memset(&L, 0, sizeof L);
    L.log = log;
    int rc = 0, tensors = 0;
    if (dev >= 0 && dev < 255 && ev_dec_scan(&L.ev, lf, dev))
        rc = decode(&L, lf, dev, &tensors);
    ev_dec_free(&L.ev);
    table_map_free(&L.ids);
    table_map_free(&L.mapped);
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
    free(log->seg_addr);
    free(log->seg_size);
    log->seg_addr = log->seg_size = NULL;
    log->nsegs = log->capsegs = 0;
}
