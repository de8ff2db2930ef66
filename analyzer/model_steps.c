/* The steps of an unmarked run, found from its repeating allocations: every step of a training
 * loop allocates the same (call site, size) keys, so a key that comes once a step, with the same
 * multiset of keys between each two of its occurrences, gives the period, and the step begins at
 * the allocation that follows the step's fewest transient bytes (live bytes less the blocks that
 * outlive a step: what a leak keeps or the weights are would otherwise pull the low point towards
 * the anchor). One pass over a bounded prefix of the
 * log before the replay, O(n log n); the replay then opens a step at each step's first allocation
 * (steps_note, model_int.h). It trusts nothing in the log: a damaged one finds no period, and the
 * low-water troughs stay. */
#include "model_int.h"
#include "torch_events.h"
#include "vec.h"

#define STEPS_PREFIX (1u << 18)    /* allocations searched per device: hundreds of steps */
#define STEPS_TOTAL (1u << 20)     /* and in all */
#define STEPS_MIN_NORMAL 3         /* steps alike that make a period */
#define STEPS_SAMPLES 64           /* steps whose fewest transient bytes place the step's start */

typedef struct stream {
    uint32_t *key;                 /* the key of each allocation */
    uint64_t *size;                /* its bytes */
    uint32_t *died;                /* allocations made before its free; UINT32_MAX: not freed */
    size_t n, capk, capz, capd;
    int full;
} stream_t;

typedef struct scan {
    model_map_t keymap;            /* hash of (device, site, size) -> key index + 1 */
    uint32_t *ksite;
    uint64_t *ksize;
    size_t nkeys, caps, capz;
    model_map_t live;              /* block -> its allocation's index | device << 48 */
    stream_t *dev[MODEL_MAX_DEVICES];
    unsigned ndevs, nfull;
    size_t total;
    uint64_t marks;
} scan_t;

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 31;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 32;
    x *= 0xD6E8FEB86659FD93ull;
    return x ^ (x >> 32);
}

static uint32_t key_index(scan_t *s, unsigned dev, uint32_t site, uint64_t size)
{
    uint64_t h = mix64(size * 0x9E3779B97F4A7C15ull ^ ((uint64_t)site << 8 | dev)) | 1;
    uint64_t *v = map_find(&s->keymap, h);
    if (v)
        return (uint32_t)(*v - 1);
    uint32_t *ks = vec_grow_raw(s->ksite, &s->caps, s->nkeys + 1, sizeof *ks, 256);
    if (ks)
        s->ksite = ks;
    uint64_t *kz = vec_grow_raw(s->ksize, &s->capz, s->nkeys + 1, sizeof *kz, 256);
    if (kz)
        s->ksize = kz;
    if (!ks || !kz)
        model_die_oom();
    s->ksite[s->nkeys] = site;
    s->ksize[s->nkeys] = size;
    map_put(&s->keymap, h, ++s->nkeys);
    return (uint32_t)(s->nkeys - 1);
}

static stream_t *stream_of(scan_t *s, unsigned dev)
{
    if (!s->dev[dev]) {
        s->dev[dev] = calloc(1, sizeof *s->dev[dev]);
        if (!s->dev[dev])
            model_die_oom();
        s->ndevs++;
    }
    return s->dev[dev];
}

static void scan_free(scan_t *s, uint64_t ptr);

/* A block allocated; `keyed`: an event of the stream (a checkpoint's live block outlives every
 * step: it is not followed). */
static void scan_alloc(scan_t *s, unsigned dev, uint64_t ptr, uint64_t size, uint32_t site, int keyed)
{
    stream_t *st = stream_of(s, dev);
    if (st->full || !ptr)
        return;
    scan_free(s, ptr); /* a block at the same address: its free was lost */
    if (!keyed)
        return;
    size &= MODEL_48;
    uint32_t *k = vec_grow_raw(st->key, &st->capk, st->n + 1, sizeof *k, 1024);
    if (k)
        st->key = k;
    uint64_t *z = vec_grow_raw(st->size, &st->capz, st->n + 1, sizeof *z, 1024);
    if (z)
        st->size = z;
    uint32_t *d = vec_grow_raw(st->died, &st->capd, st->n + 1, sizeof *d, 1024);
    if (d)
        st->died = d;
    if (!k || !z || !d)
        model_die_oom();
    st->key[st->n] = key_index(s, dev, site, size);
    st->size[st->n] = size;
    st->died[st->n] = UINT32_MAX;
    map_put(&s->live, ptr, st->n | (uint64_t)dev << 48);
    st->n++;
    s->total++;
    if (st->n >= STEPS_PREFIX) {
        st->full = 1;
        s->nfull++;
    }
}

static void scan_free(scan_t *s, uint64_t ptr)
{
    uint64_t v;
    if (!ptr || !map_del(&s->live, ptr, &v))
        return;
    stream_t *st = s->dev[v >> 48 & 0xff];
    uint64_t i = v & MODEL_48;
    if (st && i < st->n)
        st->died[i] = (uint32_t)st->n;
}

/* One record of the prefix, as the decoder makes it an event (on PyTorch's devices the tensors
 * are the allocations, its segments are not). 0 once the search has all it needs (or marks
 * decide). */
static int scan_record(scan_t *s, ev_dec_t *x, const rd_rec_t *r)
{
    if (r->type == GMLOG_MARK && r->ckpt != RD_CKPT_DEF && !(r->flags & GMLOG_MARK_END))
        return ++s->marks < 3; /* marks win where there are 3 (model_epoch_system) */
    if (r->device >= MODEL_MAX_DEVICES || r->ckpt == RD_CKPT_DEF || r->ckpt == RD_CKPT_HISTORY)
        return 1;
    int keyed = r->ckpt == RD_EVENT;
    ev_t ev[EV_MAX];
    int n = ev_decode(x, r, ev);
    for (int i = 0; i < n; i++) {
        if (ev[i].malformed)
            continue;
        if (ev[i].type == EV_ALLOC)
            scan_alloc(s, r->device, ev[i].ptr, ev[i].req, ev[i].site, keyed);
        else if (ev[i].type == EV_FREE)
            scan_free(s, ev[i].ptr);
    }
    return s->total < STEPS_TOTAL && (!s->ndevs || s->nfull < s->ndevs);
}

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The most frequent value of v[0..n) (sorted in place) and how often it comes. */
static uint64_t mode_of(uint64_t *v, size_t n, size_t *count)
{
    qsort(v, n, sizeof *v, by_u64);
    uint64_t best = n ? v[0] : 0;
    size_t bestn = 0;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i; j < n && v[j] == v[i]; j++)
            ;
        if (j - i > bestn)
            best = v[i], bestn = j - i;
    }
    *count = bestn;
    return best;
}

/* The multiset of the keys from allocation a up to b (excluded), with its length. */
static inline uint64_t span_sig(const uint64_t *h, uint32_t a, uint32_t b)
{
    return h[b] - h[a] + (uint64_t)(b - a) * 0x9E3779B97F4A7C15ull;
}

typedef struct period {
    uint32_t key;                  /* the anchor: once a step */
    uint64_t sig;                  /* the multiset of a step */
    uint32_t len;                  /* allocations in a step */
    size_t normal;                 /* steps between its occurrences that have that multiset */
    long score;                    /* those less the others */
    uint32_t first;                /* where it first comes */
} period_t;

/* The anchor whose occurrences cut the stream into the most steps alike, fewest unlike: a step's
 * multiset must hold more than the anchor, and at least 4 in 5 of the steps between its
 * occurrences must be alike past two of warm-up (an eval every few steps is tolerated). Of the
 * keys whose steps are those, the one that comes least often: a key an eval allocates too makes
 * steps alike of the training step and the eval together. The steps alike must cover at least half
 * of the stream's n allocations from the key's first on (not one layer of many, not a burst). */
static int find_anchor(size_t n, size_t nkeys, const uint32_t *cnt, const size_t *off, const uint32_t *pos,
                       const uint64_t *h, period_t *best)
{
    size_t maxc = 0, ncand = 0;
    for (size_t k = 0; k < nkeys; k++)
        maxc = cnt[k] > maxc ? cnt[k] : maxc;
    uint64_t *sig = malloc((maxc ? maxc : 1) * sizeof *sig);
    period_t *cand = malloc((nkeys ? nkeys : 1) * sizeof *cand);
    if (!sig || !cand)
        model_die_oom();
    for (size_t k = 0; k < nkeys; k++) {
        size_t c = cnt[k];
        if (c < STEPS_MIN_NORMAL + 1)
            continue;
        const uint32_t *p = &pos[off[k]];
        for (size_t j = 0; j + 1 < c; j++)
            sig[j] = span_sig(h, p[j], p[j + 1]);
        size_t normal;
        uint64_t d = mode_of(sig, c - 1, &normal);
        size_t judged = c - 1 > 2 ? c - 1 - 2 : 0;
        if (normal < STEPS_MIN_NORMAL || normal * 5 < judged * 4)
            continue;
        uint32_t len = 0;
        for (size_t j = 0; j + 1 < c && !len; j++)
            if (span_sig(h, p[j], p[j + 1]) == d)
                len = p[j + 1] - p[j];
        if (len < 2) /* the same key over and over: no step to speak of */
            continue;
        /* The steps alike must make at least half of the stream from the key's first on: a key
         * that comes once per identical layer (a transformer's blocks) cuts each step into layers
         * alike and one long unlike rest — the backward, the optimizer — that is most of it; a
         * burst (the optimizer's states made one parameter after another) is a sliver of it. */
        if ((uint64_t)normal * len * 2 < (uint64_t)(n - p[0]))
            continue;
        cand[ncand++] = (period_t){(uint32_t)k, d, len, normal, 2 * (long)normal - (long)(c - 1), p[0]};
    }
    size_t b = 0;
    for (size_t i = 1; i < ncand; i++)
        if (cand[i].score > cand[b].score || (cand[i].score == cand[b].score && cand[i].first < cand[b].first))
            b = i;
    size_t a = b;
    for (size_t i = 0; i < ncand; i++) {
        if (cand[i].sig != cand[b].sig)
            continue;
        uint32_t ci = cnt[cand[i].key], ca = cnt[cand[a].key];
        if (ci < ca || (ci == ca && (cand[i].score > cand[a].score ||
                                     (cand[i].score == cand[a].score && cand[i].first < cand[a].first))))
            a = i;
    }
    if (ncand)
        *best = cand[a];
    free(sig);
    free(cand);
    return ncand > 0;
}

/* The transient bytes live just before each allocation (lo[0..n]): the blocks freed before the
 * allocation a step after their own (within a step); a block kept longer (the weights, the
 * optimizer's state, what a leak keeps, one not freed in the prefix) is left out. Between two
 * allocations there are only frees, so the bytes just before an allocation are the gap's fewest. */
static uint64_t *transient_lows(const stream_t *st, uint32_t len)
{
    uint64_t *lo = calloc(st->n + 1, sizeof *lo);
    if (!lo)
        model_die_oom();
    for (size_t j = 0; j < st->n; j++) /* a difference array: + at j + 1, - where it died */
        if (st->died[j] != UINT32_MAX && st->died[j] - j <= len) {
            lo[j + 1] += st->size[j];
            lo[st->died[j]] -= st->size[j];
        }
    for (size_t i = 1; i <= st->n; i++)
        lo[i] += lo[i - 1];
    return lo;
}

/* Where a step starts, as an offset from the anchor: the allocation after the fewest transient
 * bytes, the most common place over up to STEPS_SAMPLES steps alike. *at gets a step where it is. */
static uint32_t step_phase(const stream_t *st, const uint32_t *p, size_t c, const uint64_t *h, const period_t *pd,
                           uint32_t *at)
{
    uint64_t *lo = transient_lows(st, pd->len);
    uint64_t offs[STEPS_SAMPLES];
    uint32_t starts[STEPS_SAMPLES] = {p[0]};
    size_t n = 0;
    for (size_t j = 0; j + 1 < c && n < STEPS_SAMPLES; j++) {
        if (span_sig(h, p[j], p[j + 1]) != pd->sig)
            continue;
        uint32_t best = 0;
        for (uint32_t o = 1; o < pd->len; o++)
            if (lo[p[j] + o] < lo[p[j] + best])
                best = o;
        starts[n] = p[j];
        offs[n++] = best;
    }
    uint64_t mine[STEPS_SAMPLES];
    memcpy(mine, offs, n * sizeof *offs);
    size_t count;
    uint32_t phase = (uint32_t)mode_of(mine, n, &count);
    *at = starts[0];
    for (size_t i = 0; i < n; i++)
        if (offs[i] == phase) {
            *at = starts[i];
            break;
        }
    free(lo);
    return phase;
}

/* The keys that open a step: its first allocation, and the once-a-step key at or before it that
 * arms it (a first key that comes more than once a step, or in an eval too, opens only its first
 * time after the arming one). Once a step: once in this step, and no more often in the whole
 * stream than the anchor. */
static void step_keys(const stream_t *st, const uint32_t *cnt, uint32_t *cnt2, uint32_t anchor, uint32_t b,
                      uint32_t len, uint32_t phase, uint32_t *first, uint32_t *arm)
{
    for (uint32_t o = 0; o < len; o++)
        cnt2[st->key[b + o]]++;
    uint32_t k = st->key[b + phase];
    int found = 0;
    for (uint32_t d = 0; d < len && !found; d++) {
        uint32_t x = st->key[b + (phase + len - d) % len];
        if (cnt2[x] == 1 && cnt[x] <= cnt[anchor])
            *first = k, *arm = x, found = 1;
        else if (d && x == k)
            break;
    }
    for (uint32_t d = 0; d < len && !found; d++) {
        uint32_t x = st->key[b + (phase + d) % len];
        if (cnt2[x] == 1 && cnt[x] <= cnt[anchor])
            *first = *arm = x, found = 1;
    }
    for (uint32_t o = 0; o < len; o++)
        cnt2[st->key[b + o]] = 0;
}

/* The period of one device's stream (keys ksite/ksize, nk of them) into *out; 0 when it has none. */
static int stream_period(const stream_t *st, size_t nk, const uint32_t *ksite, const uint64_t *ksize,
                         model_stepkey_t *out)
{
    size_t n = st->n;
    if (n < 2 * (STEPS_MIN_NORMAL + 1))
        return 0;
    uint32_t *cnt = calloc(nk, sizeof *cnt), *pos = malloc(n * sizeof *pos);
    size_t *off = malloc((nk + 1) * sizeof *off);
    uint64_t *h = malloc((n + 1) * sizeof *h);
    if (!cnt || !pos || !off || !h)
        model_die_oom();
    h[0] = 0;
    for (size_t i = 0; i < n; i++) {
        cnt[st->key[i]]++;
        h[i + 1] = h[i] + mix64(st->key[i] + 0x51ED27ull);
    }
    off[0] = 0;
    for (size_t k = 0; k < nk; k++)
        off[k + 1] = off[k] + cnt[k];
    for (size_t i = 0; i < n; i++) /* each key's positions, in order: off[] counts back up */
        pos[off[st->key[i]]++] = (uint32_t)i;
    for (size_t k = nk; k > 0; k--)
        off[k] = off[k - 1];
    off[0] = 0;
    period_t pd;
    int ok = find_anchor(n, nk, cnt, off, pos, h, &pd);
    if (ok) {
        uint32_t at, first = pd.key, arm = pd.key;
        uint32_t phase = step_phase(st, &pos[off[pd.key]], cnt[pd.key], h, &pd, &at);
        uint32_t *cnt2 = calloc(nk, sizeof *cnt2);
        if (!cnt2)
            model_die_oom();
        step_keys(st, cnt, cnt2, pd.key, at, pd.len, phase, &first, &arm);
        free(cnt2);
        *out = (model_stepkey_t){ksite[first], ksite[arm], ksize[first], ksize[arm], pd.len, 0};
    }
    free(cnt);
    free(pos);
    free(off);
    free(h);
    return ok;
}

/* The period by call site alone: where each step's sizes differ (sequences of other lengths,
 * the last batch) but its lines do not. */
static int stream_period_by_site(const scan_t *s, const stream_t *st, model_stepkey_t *out)
{
    model_map_t sites;
    map_init(&sites, 256);
    stream_t v = *st;
    uint32_t *vsite = malloc((st->n ? st->n : 1) * sizeof *vsite);
    v.key = malloc((st->n ? st->n : 1) * sizeof *v.key);
    uint64_t *vsize = calloc(st->n ? st->n : 1, sizeof *vsize);
    if (!vsite || !v.key || !vsize)
        model_die_oom();
    size_t nv = 0;
    for (size_t i = 0; i < st->n; i++) {
        uint32_t site = s->ksite[st->key[i]];
        uint64_t *x = map_find(&sites, (uint64_t)site + 1);
        if (!x) {
            vsite[nv] = site;
            map_put(&sites, (uint64_t)site + 1, ++nv);
            x = map_find(&sites, (uint64_t)site + 1);
        }
        v.key[i] = (uint32_t)(*x - 1);
    }
    int ok = stream_period(&v, nv, vsite, vsize, out);
    out->any_size = 1;
    map_free(&sites);
    free(vsite);
    free(vsize);
    free(v.key);
    return ok;
}

void model_steps_scan(model_t *m, rd_log_t *lf)
{
    rd_log_t rd;
    memset(&rd, 0, sizeof rd);
    if (rd_clone(lf, &rd))
        return;
    scan_t *s = calloc(1, sizeof *s);
    if (!s)
        model_die_oom();
    map_init(&s->keymap, 1024);
    map_init(&s->live, 1024);
    ev_dec_t x;
    memset(&x, 0, sizeof x);
    if (ev_dec_seed(&x, &m->ev) != 0)
        model_die_oom();
    rd_rewind(&rd);
    rd_rec_t r;
    int more = 1;
    while (more && rd_next(&rd, &r))
        more = scan_record(s, &x, &r);
    ev_dec_free(&x);
    rd_close(&rd);
    for (unsigned d = 0; d < MODEL_MAX_DEVICES && s->marks < 3; d++) {
        model_stepkey_t k;
        if (!s->dev[d])
            continue;
        /* By (site, size); by site alone where that finds none, or a step a whole number of
         * times shorter (sizes that cycle over a few steps repeat only over all of them). */
        model_stepkey_t bs;
        int full = stream_period(s->dev[d], s->nkeys, s->ksite, s->ksize, &k);
        int site = stream_period_by_site(s, s->dev[d], &bs);
        if (site && (!full || (bs.period < k.period && k.period % bs.period == 0)))
            k = bs, full = 1;
        if (!full)
            continue;
        if (!m->stepkeys) {
            m->stepkeys = calloc(MODEL_MAX_DEVICES, sizeof *m->stepkeys);
            if (!m->stepkeys)
                model_die_oom();
        }
        m->stepkeys[d] = k;
    }
    for (unsigned d = 0; d < MODEL_MAX_DEVICES; d++) {
        if (!s->dev[d])
            continue;
        free(s->dev[d]->key);
        free(s->dev[d]->size);
        free(s->dev[d]->died);
        free(s->dev[d]);
    }
    map_free(&s->keymap);
    map_free(&s->live);
    free(s->ksite);
    free(s->ksize);
    free(s);
}
