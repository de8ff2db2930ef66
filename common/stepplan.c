/* A planned step (stepplan.h): the slots, for each the slots planned over any of its addresses
 * (its neighbours, which the plan puts at other moments of the step), and where the plan stands
 * in its step. A claim looks at the slot's neighbours only: a plan that the program follows
 * finds them all free. */
#include "stepplan.h"

#include <stdlib.h>
#include <string.h>

enum { SLOT_FREE = 0, SLOT_LIVE, SLOT_PENDING };

typedef struct slot {
    uint64_t key, off, size, seq;
    uint8_t planned, state;
} slot_t;

typedef struct gram {
    uint64_t h;
    uint32_t pos_plus1;      /* 0: empty; UINT32_MAX: more than one place */
} gram_t;

struct stepplan {
    uint32_t period, nplanned;
    slot_t *slot;
    uint32_t *nb_start, *nb;  /* CSR: slot i's neighbours nb[nb_start[i] .. nb_start[i + 1]) */
    uint32_t *by_off;         /* planned slots by offset */
    gram_t *grams;
    uint32_t ngram_cap;
    uint64_t recent[STEPPLAN_SYNC];
    uint32_t nrecent;
    uint32_t cursor;
    uint32_t expected;        /* unsynchronized: where the step would be had it not departed */
    int synced;
    uint64_t top, floor;
    stepplan_stats_t st;
};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 32;
    x *= 0xD6E8FEB86659FD93ull;
    return x ^ (x >> 29);
}

/* The hash of STEPPLAN_SYNC keys, oldest first. */
static uint64_t gram_hash(const uint64_t *k)
{
    uint64_t h = 0;
    for (uint32_t i = 0; i < STEPPLAN_SYNC; i++)
        h = mix(h ^ k[i]) + i;
    return h | 1;
}

static gram_t *gram_slot(const stepplan_t *p, uint64_t h)
{
    uint32_t j = (uint32_t)(h >> 11) & (p->ngram_cap - 1);
    while (p->grams[j].pos_plus1 && p->grams[j].h != h)
        j = (j + 1) & (p->ngram_cap - 1);
    return &p->grams[j];
}

static int build_grams(stepplan_t *p)
{
    uint32_t cap = 64;
    while (cap < 2 * p->period)
        cap *= 2;
    p->ngram_cap = cap;
    if (!(p->grams = calloc(cap, sizeof *p->grams)))
        return -1;
    for (uint32_t c = 0; c < p->period; c++) {
        uint64_t k[STEPPLAN_SYNC];
        for (uint32_t i = 0; i < STEPPLAN_SYNC; i++)
            k[i] = p->slot[(c + p->period * STEPPLAN_SYNC - (STEPPLAN_SYNC - 1) + i) % p->period].key;
        gram_t *g = gram_slot(p, gram_hash(k));
        g->h = gram_hash(k);
        g->pos_plus1 = g->pos_plus1 ? UINT32_MAX : c + 1;
    }
    return 0;
}

static int overlap(const slot_t *a, const slot_t *b)
{
    return a->off < b->off + b->size && b->off < a->off + a->size;
}

static int cmp_off(const void *x, const void *y, void *arg)
{
    const stepplan_t *p = arg;
    const slot_t *a = &p->slot[*(const uint32_t *)x], *b = &p->slot[*(const uint32_t *)y];
    if (a->off != b->off)
        return a->off < b->off ? -1 : 1;
    return *(const uint32_t *)x < *(const uint32_t *)y ? -1 : 1;
}

/* Neighbours through the slots sorted by offset: those starting before a slot's end, from the
 * earliest that may still reach into it. */
static int build_neighbours(stepplan_t *p)
{
    uint32_t n = p->nplanned;
    p->nb_start = calloc(p->period + 1, sizeof *p->nb_start);
    if (!p->nb_start)
        return -1;
    size_t total = 0, room = 0;
    uint32_t *cnt = calloc(p->period, sizeof *cnt);
    if (!cnt)
        return -1;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t a = 0; a < n; a++)
            for (uint32_t b = a + 1; b < n && p->slot[p->by_off[b]].off < p->slot[p->by_off[a]].off + p->slot[p->by_off[a]].size; b++) {
                uint32_t i = p->by_off[a], j = p->by_off[b];
                if (!overlap(&p->slot[i], &p->slot[j]))
                    continue;
                if (pass) {
                    p->nb[p->nb_start[i] + cnt[i]++] = j;
                    p->nb[p->nb_start[j] + cnt[j]++] = i;
                } else {
                    cnt[i]++, cnt[j]++;
                }
            }
        if (!pass) {
            for (uint32_t i = 0; i < p->period; i++) {
                p->nb_start[i] = (uint32_t)total;
                total += cnt[i];
                cnt[i] = 0;
            }
            p->nb_start[p->period] = (uint32_t)total;
            room = total ? total : 1;
            if (!(p->nb = malloc(room * sizeof *p->nb))) {
                free(cnt);
                return -1;
            }
        }
    }
    free(cnt);
    return 0;
}

stepplan_t *stepplan_build(const steprec_step_t *step, uint64_t align)
{
    uint32_t n = step->period, m = 0;
    stepplan_t *p = calloc(1, sizeof *p);
    planpack_iv_t *iv = malloc((n ? n : 1) * sizeof *iv);
    uint64_t *off = malloc((n ? n : 1) * sizeof *off);
    uint32_t *idx = malloc((n ? n : 1) * sizeof *idx);
    if (!p || !iv || !off || !idx || !n)
        goto fail;
    p->period = n;
    if (!(p->slot = calloc(n, sizeof *p->slot)) || !(p->by_off = malloc(n * sizeof *p->by_off)))
        goto fail;
    for (uint32_t i = 0; i < n; i++) {
        p->slot[i].key = step->keys[i];
        if (step->planned[i])
            idx[m] = i, iv[m++] = step->iv[i];
    }
    if (!m)
        goto fail;
    uint64_t top = planpack_place(iv, m, step->clock_period, align, off);
    if (top == UINT64_MAX)
        goto fail;
    p->top = top;
    p->floor = planpack_floor(iv, m, step->clock_period);
    for (uint32_t k = 0; k < m; k++) {
        slot_t *s = &p->slot[idx[k]];
        s->planned = 1;
        s->off = off[k];
        s->size = (iv[k].size + align - 1) & ~(align - 1);
        p->by_off[k] = idx[k];
    }
    p->nplanned = m;
    qsort_r(p->by_off, m, sizeof *p->by_off, cmp_off, p);
    if (build_neighbours(p) || build_grams(p))
        goto fail;
    p->synced = 1; /* the recogniser's last allocation ended a repetition: the next is the first */
    free(iv), free(off), free(idx);
    return p;
fail:
    free(iv), free(off), free(idx);
    stepplan_destroy(p);
    return NULL;
}

void stepplan_destroy(stepplan_t *p)
{
    if (!p)
        return;
    free(p->slot), free(p->nb_start), free(p->nb), free(p->by_off), free(p->grams);
    free(p);
}

uint64_t stepplan_top(const stepplan_t *p)
{
    return p->top;
}

uint64_t stepplan_floor(const stepplan_t *p)
{
    return p->floor;
}

uint32_t stepplan_period(const stepplan_t *p)
{
    return p->period;
}

uint32_t stepplan_nplanned(const stepplan_t *p)
{
    return p->nplanned;
}

/* Whether the last keys are the plan's just before a place near where the step would be
 * (a few allocations put in or left out): the cursor goes there. Ambiguous grams (alike layers)
 * are found this way. */
static int resync_near(stepplan_t *p)
{
    static const int tries[] = {0, 1, -1, 2, -2, 3, -3};
    for (size_t t = 0; t < sizeof tries / sizeof *tries; t++) {
        uint32_t c = (uint32_t)(((int64_t)p->expected + tries[t] + 2 * (int64_t)p->period) % p->period);
        uint32_t k = 0;
        for (; k < STEPPLAN_SYNC; k++) {
            uint32_t at = (c + p->period * STEPPLAN_SYNC - STEPPLAN_SYNC + k) % p->period;
            if (p->slot[at].key != p->recent[k])
                break;
        }
        if (k == STEPPLAN_SYNC) {
            p->cursor = c;
            p->synced = 1;
            p->st.resyncs++;
            return 1;
        }
    }
    return 0;
}

int32_t stepplan_next(stepplan_t *p, uint64_t key)
{
    memmove(p->recent, p->recent + 1, (STEPPLAN_SYNC - 1) * sizeof *p->recent);
    p->recent[STEPPLAN_SYNC - 1] = key;
    if (p->nrecent < STEPPLAN_SYNC)
        p->nrecent++;
    if (p->synced) {
        uint32_t c = p->cursor;
        if (p->slot[c].key == key) {
            p->cursor = c + 1 == p->period ? 0 : c + 1;
            if (p->slot[c].planned)
                return (int32_t)c;
            p->st.online++;
            return -1;
        }
        p->synced = 0;
        p->st.departures++;
        p->expected = c;
    }
    p->expected = p->expected + 1 == p->period ? 0 : p->expected + 1;
    if (p->nrecent == STEPPLAN_SYNC && resync_near(p))
        return p->st.online++, -1;
    if (p->nrecent == STEPPLAN_SYNC) {
        const gram_t *g = gram_slot(p, gram_hash(p->recent));
        if (g->pos_plus1 && g->pos_plus1 != UINT32_MAX) {
            p->cursor = g->pos_plus1 == p->period ? 0 : g->pos_plus1;
            p->synced = 1;
            p->st.resyncs++;
        }
    }
    p->st.online++;
    return -1;
}

/* Where slot i stands: 0 free, the fence it waits for, or STEPPLAN_BUSY. */
static uint64_t slot_wait(slot_t *s, uint64_t done)
{
    if (s->state == SLOT_LIVE)
        return STEPPLAN_BUSY;
    if (s->state == SLOT_PENDING) {
        if (s->seq > done)
            return s->seq;
        s->state = SLOT_FREE;
    }
    return 0;
}

uint64_t stepplan_claim(stepplan_t *p, int32_t s, uint64_t done, uint64_t *off)
{
    slot_t *me = &p->slot[s];
    uint64_t wait = slot_wait(me, done);
    for (uint32_t k = p->nb_start[s]; k < p->nb_start[s + 1] && wait != STEPPLAN_BUSY; k++) {
        uint64_t w = slot_wait(&p->slot[p->nb[k]], done);
        wait = w > wait ? w : wait;
    }
    if (wait)
        return wait;
    me->state = SLOT_LIVE;
    *off = me->off;
    p->st.planned++;
    return 0;
}

void stepplan_unclaimed(stepplan_t *p)
{
    p->st.online++;
    p->st.busy++;
}

void stepplan_release(stepplan_t *p, int32_t s)
{
    p->slot[s].state = SLOT_FREE;
    p->st.planned--;
    stepplan_unclaimed(p);
}

uint64_t stepplan_slot_size(const stepplan_t *p, int32_t s)
{
    return p->slot[s].size;
}

/* The live slot starting at off, or -1. */
static int32_t live_slot_at(const stepplan_t *p, uint64_t off)
{
    uint32_t lo = 0, hi = p->nplanned;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (p->slot[p->by_off[mid]].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < p->nplanned && p->slot[p->by_off[lo]].off == off; lo++)
        if (p->slot[p->by_off[lo]].state == SLOT_LIVE)
            return (int32_t)p->by_off[lo];
    return -1;
}

int stepplan_free(stepplan_t *p, uint64_t off, uint64_t seq)
{
    int32_t s = live_slot_at(p, off);
    if (s < 0)
        return -1;
    p->slot[s].state = seq ? SLOT_PENDING : SLOT_FREE;
    p->slot[s].seq = seq;
    return 0;
}

int stepplan_slot_live(const stepplan_t *p, int32_t s, uint64_t *off)
{
    if (s < 0 || (uint32_t)s >= p->period || p->slot[s].state != SLOT_LIVE)
        return 0;
    *off = p->slot[s].off;
    return 1;
}

int32_t stepplan_live_slot(const stepplan_t *p, uint64_t off)
{
    return live_slot_at(p, off);
}

int stepplan_live_at(const stepplan_t *p, uint64_t off, uint64_t *size)
{
    int32_t s = live_slot_at(p, off);
    if (s >= 0 && size)
        *size = p->slot[s].size;
    return s >= 0;
}

void stepplan_held_pages(const stepplan_t *p, uint64_t page, uint64_t done, uint8_t *held)
{
    for (uint32_t i = 0; i < p->nplanned; i++) {
        const slot_t *s = &p->slot[p->by_off[i]];
        if (s->state == SLOT_FREE || (s->state == SLOT_PENDING && s->seq <= done) || !s->size)
            continue;
        for (uint64_t k = s->off / page; k <= (s->off + s->size - 1) / page; k++)
            held[k] = 1;
    }
}

void stepplan_stats(const stepplan_t *p, stepplan_stats_t *out)
{
    *out = p->st;
}

const char *stepplan_check(const stepplan_t *p)
{
    uint64_t hi = 0;
    for (uint32_t i = 0; i < p->period; i++) {
        const slot_t *a = &p->slot[i];
        if (!a->planned) {
            if (a->state != SLOT_FREE)
                return "a slot outside the plan is in use";
            continue;
        }
        hi = a->off + a->size > hi ? a->off + a->size : hi;
        if (a->state != SLOT_LIVE && a->state != SLOT_PENDING)
            continue;
        for (uint32_t j = 0; j < i; j++) {
            const slot_t *b = &p->slot[j];
            if (b->planned && (b->state == SLOT_LIVE || b->state == SLOT_PENDING) && overlap(a, b))
                return "two blocks of the plan in use overlap";
        }
    }
    if (hi != p->top)
        return "the plan's top is not its highest end";
    return NULL;
}
