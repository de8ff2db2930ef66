/* The step recogniser (steprec.h). Candidate periods come from the earlier occurrences of the
 * key just seen (the period of a repeating sequence is the distance to one of them); each is
 * checked in constant time by prefix hashes of the keys, then, once, exactly. */
#include "steprec.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX
#define DEAD_NOT_SEEN UINT64_MAX
#define CHAIN_WALK 4096u    /* earlier occurrences of a key tried as periods, nearest first */
#define HBASE 0x9E3779B97F4A7C15ull

typedef struct kslot {
    uint64_t key;
    uint32_t last_plus1;     /* 0: empty */
} kslot_t;

struct steprec {
    steprec_state_t state;
    uint32_t max, n, cap;
    uint64_t *key, *size, *birth, *death, *livea, *ph, *pw;
    uint32_t *prev;
    kslot_t *kt;
    uint32_t ktcap, ktn;
    uint64_t clock, live, histmax;
    uint32_t w, period;      /* CLOSE, READY: the repetition [w, w + period) */
    uint64_t clock_period;   /* READY: the clock's advance over one period */
    planpack_iv_t *iv;
    uint8_t *planned;
};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 32;
    return x | 1;
}

steprec_t *steprec_create(uint32_t max_allocs)
{
    steprec_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->max = max_allocs < 2 * STEPREC_MIN_PERIOD ? 2 * STEPREC_MIN_PERIOD : max_allocs;
    return r;
}

static void drop_arrays(steprec_t *r)
{
    free(r->key), free(r->size), free(r->birth), free(r->death), free(r->livea);
    free(r->ph), free(r->pw), free(r->prev), free(r->kt);
    r->key = r->size = r->birth = r->death = r->livea = r->ph = r->pw = NULL;
    r->prev = NULL;
    r->kt = NULL;
}

void steprec_destroy(steprec_t *r)
{
    if (!r)
        return;
    drop_arrays(r);
    free(r->iv);
    free(r->planned);
    free(r);
}

steprec_state_t steprec_state(const steprec_t *r)
{
    return r->state;
}

static int grow(steprec_t *r)
{
    uint32_t cap = r->cap ? r->cap * 2 : 1024;
    if (cap > r->max)
        cap = r->max;
    uint64_t **arr[] = {&r->key, &r->size, &r->birth, &r->death, &r->livea};
    for (size_t k = 0; k < sizeof arr / sizeof *arr; k++) {
        uint64_t *g = realloc(*arr[k], cap * sizeof *g);
        if (!g)
            return -1;
        *arr[k] = g;
    }
    uint64_t *ph = realloc(r->ph, (cap + 1) * sizeof *ph), *pw;
    if (!ph)
        return -1;
    r->ph = ph;
    if (!(pw = realloc(r->pw, (cap + 1) * sizeof *pw)))
        return -1;
    r->pw = pw;
    uint32_t *prev = realloc(r->prev, cap * sizeof *prev);
    if (!prev)
        return -1;
    r->prev = prev;
    if (!r->cap)
        r->ph[0] = 0, r->pw[0] = 1;
    r->cap = cap;
    return 0;
}

/* The key table: a key's latest index (+1), open addressing, kept under half full. */
static kslot_t *kslot(steprec_t *r, uint64_t key)
{
    if (2 * (r->ktn + 1) > r->ktcap) {
        uint32_t ncap = r->ktcap ? 2 * r->ktcap : 1024;
        kslot_t *nt = calloc(ncap, sizeof *nt);
        if (!nt)
            return NULL;
        for (uint32_t i = 0; i < r->ktcap; i++)
            if (r->kt[i].last_plus1) {
                uint32_t j = (uint32_t)(mix(r->kt[i].key) >> 7) & (ncap - 1);
                while (nt[j].last_plus1)
                    j = (j + 1) & (ncap - 1);
                nt[j] = r->kt[i];
            }
        free(r->kt);
        r->kt = nt;
        r->ktcap = ncap;
    }
    uint32_t j = (uint32_t)(mix(key) >> 7) & (r->ktcap - 1);
    while (r->kt[j].last_plus1 && r->kt[j].key != key)
        j = (j + 1) & (r->ktcap - 1);
    if (!r->kt[j].last_plus1)
        r->kt[j].key = key, r->ktn++;
    return &r->kt[j];
}

/* The hash of keys [a, b). */
static uint64_t hash_of(const steprec_t *r, uint32_t a, uint32_t b)
{
    return r->ph[b] - r->ph[a] * r->pw[b - a];
}

static uint64_t gap(uint64_t x, uint64_t y)
{
    return x > y ? x - y : y - x;
}

/* Whether the last 2P allocations (ending with allocation n) make period P. */
static int is_period(const steprec_t *r, uint32_t n, uint32_t p)
{
    uint32_t end = n + 1, mid = end - p, start = end - 2 * p;
    if (hash_of(r, start, mid) != hash_of(r, mid, end))
        return 0;
    /* Live bytes where each repetition starts (before its first allocation) alike. */
    uint64_t before_mid = r->livea[mid] - r->size[mid], before_start = r->livea[start] - r->size[start];
    if (gap(before_mid, before_start) * 64 > r->histmax)
        return 0;
    uint64_t winmax = 0;
    for (uint32_t i = mid; i < end; i++)
        winmax = r->livea[i] > winmax ? r->livea[i] : winmax;
    if (winmax * 16 < r->histmax * 15)
        return 0;
    return memcmp(&r->key[start], &r->key[mid], p * sizeof *r->key) == 0;
}

static void look_for_period(steprec_t *r, uint32_t n)
{
    uint32_t walked = 0;
    for (uint32_t m = r->prev[n]; m != NONE && walked < CHAIN_WALK; m = r->prev[m], walked++) {
        uint32_t p = n - m;
        if (2 * (uint64_t)p > (uint64_t)n + 1)
            return;
        if (p >= STEPREC_MIN_PERIOD && is_period(r, n, p)) {
            r->state = STEPREC_CLOSE;
            r->period = p;
            r->w = n + 1 - p;
            return;
        }
    }
}

/* The repetition [w, w + P) as lives on the circle, once the next one was allocated. */
static void make_ready(steprec_t *r)
{
    uint32_t p = r->period, w = r->w;
    r->iv = calloc(p, sizeof *r->iv);
    r->planned = calloc(p, 1);
    if (!r->iv || !r->planned) {
        r->state = STEPREC_FULL;
        return;
    }
    uint64_t base = r->birth[w], period = r->birth[w + p] - base;
    for (uint32_t k = 0; k < p; k++) {
        uint32_t i = w + k;
        uint64_t d = r->death[i];
        /* Dead before its own next instance was born, within one period. */
        if (d == DEAD_NOT_SEEN || d > r->birth[i + p] || d - r->birth[i] > period)
            continue;
        r->iv[k] = (planpack_iv_t){r->birth[i] - base, d - base, r->size[i]};
        r->planned[k] = 1;
    }
    r->clock_period = period;
    r->state = STEPREC_READY;
}

uint32_t steprec_alloc(steprec_t *r, uint64_t key, uint64_t size)
{
    if (r->state >= STEPREC_READY)
        return 0;
    uint32_t n = r->n;
    if (n == r->cap && (n == r->max || grow(r))) {
        r->state = STEPREC_FULL;
        drop_arrays(r);
        return 0;
    }
    kslot_t *ks = kslot(r, key);
    if (!ks) {
        r->state = STEPREC_FULL;
        drop_arrays(r);
        return 0;
    }
    r->key[n] = key, r->size[n] = size;
    r->birth[n] = r->clock++;
    r->death[n] = DEAD_NOT_SEEN;
    r->live += size;
    r->livea[n] = r->live;
    r->histmax = r->live > r->histmax ? r->live : r->histmax;
    r->ph[n + 1] = r->ph[n] * HBASE + mix(key);
    r->pw[n + 1] = r->pw[n] * HBASE;
    r->prev[n] = ks->last_plus1 ? ks->last_plus1 - 1 : NONE;
    ks->last_plus1 = n + 1;
    r->n = n + 1;
    if (r->state == STEPREC_LEARN)
        look_for_period(r, n);
    else if (r->key[n] != r->key[n - r->period]) { /* CLOSE: the period broke off */
        r->state = STEPREC_LEARN;
        look_for_period(r, n);
    }
    else if (n + 1 == r->w + 2 * r->period)
        make_ready(r);
    return n + 1;
}

void steprec_free(steprec_t *r, uint32_t tag)
{
    if (!tag || r->state >= STEPREC_READY || tag > r->n)
        return;
    uint32_t i = tag - 1;
    if (r->death[i] != DEAD_NOT_SEEN)
        return;
    r->death[i] = r->clock++;
    r->live -= r->size[i];
}

int steprec_step(const steprec_t *r, steprec_step_t *out)
{
    if (r->state != STEPREC_READY)
        return -1;
    out->period = r->period;
    out->clock_period = r->clock_period;
    out->keys = &r->key[r->w];
    out->iv = r->iv;
    out->planned = r->planned;
    return 0;
}
