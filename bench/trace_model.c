/* A recorded trace (../shared/traces format) through the pool's own code in this process, no CUDA
 * and no fences (every free reusable at once: a bound no GPU-side wait improves): the live
 * floor, the classic pool (driver segments), the growable range (GMSHIM_SEGMENTS=vmm) and the
 * planned step (common/steprec.c, stepplan.c) in front of either, each one's peak reserved and
 * its ratio to the floor, as one JSON object. The step's key is the rounded size (a trace has no
 * call sites). `-` reads stdin: xz -dc trace.txt.xz | trace_model -. */
#include "policy.h"
#include "pool.h"
#include "stepplan.h"
#include "steprec.h"
#include "vmm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct op {
    uint64_t key;            /* the recorded pointer */
    uint64_t bytes;          /* an allocation's request; UINT64_MAX: a free */
} op_t;

typedef struct ent {
    uint64_t key;
    uintptr_t ptr;
    uint32_t tag;
    uint8_t planned;
    gm_block_t *b;
} ent_t;

static ent_t *tab;
static size_t tabcap;

static ent_t *slot_of(uint64_t key)
{
    size_t i = (key * 0x9E3779B97F4A7C15ull >> 20) & (tabcap - 1);
    while (tab[i].key && tab[i].key != key)
        i = (i + 1) & (tabcap - 1);
    return &tab[i];
}

static void erase(ent_t *e)
{
    size_t i = (size_t)(e - tab);
    for (;;) {
        tab[i].key = 0;
        size_t j = i;
        for (;;) {
            j = (j + 1) & (tabcap - 1);
            if (!tab[j].key)
                return;
            size_t home = (tab[j].key * 0x9E3779B97F4A7C15ull >> 20) & (tabcap - 1);
            if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j))
                break;
        }
        tab[i] = tab[j];
        i = j;
    }
}

enum { ONLINE_CLASSIC, ONLINE_VMM };

typedef struct run {
    int online, plan;
    gm_heap_t h;
    gm_pool_stats_t st;
    uintptr_t next_base;
    uint64_t range_size;
    steprec_t *rec;
    stepplan_t *plan_p;
    uint64_t plan_reserved, peak, plan_at_op, peak_op;
    uint64_t failed;
    uint64_t tokens, mapped, unmapped, mapped_at_plan, unmapped_at_plan, mapped_steady, unmapped_steady;
    int steady;
    int move;                /* vmm: idle pages go back before the reservation passes its peak */
    uint64_t huge;           /* vmm: requests of at least this many bytes in a heap of their own */
    gm_heap_t hh;
    uint8_t *plan_page;      /* the plan's range: pages mapped (as its blocks first need them) */
} run_t;

static int map_fn(void *arg, gm_segment_t *seg, uintptr_t addr, size_t n, uint64_t *tokens)
{
    (void)seg, (void)addr;
    run_t *r = arg;
    for (size_t i = 0; i < n; i++)
        tokens[i] = ++r->tokens; /* one mapping a page, as the shim's */
    r->mapped += n;
    return 0;
}

static int unmap_fn(void *arg, gm_segment_t *seg, uintptr_t addr, size_t n, const uint64_t *tokens)
{
    (void)seg, (void)addr, (void)tokens;
    ((run_t *)arg)->unmapped += n;
    return 0;
}

static int release_seg(void *arg, gm_segment_t *seg)
{
    pool_remove_segment(&((run_t *)arg)->h, seg);
    return 0;
}

/* What the online pool may reserve before it moves pages: the most reserved so far, less what
 * the plan holds. */
static size_t budget_of(const run_t *r)
{
    uint64_t peak = r->peak > r->st.reserved.peak ? r->peak : r->st.reserved.peak;
    return peak > r->plan_reserved ? peak - r->plan_reserved : 0;
}

static void release_online(run_t *r);

/* The plan's range maps `bytes` more: the online pool's idle memory goes first where the two
 * together would pass the most reserved so far. */
static void plan_maps(run_t *r, uint64_t bytes)
{
    uint64_t now = r->st.reserved.current + r->plan_reserved;
    if (now + bytes > r->peak)
        release_online(r);
    r->plan_reserved += bytes;
}

static gm_block_t *online_alloc(run_t *r, size_t rounded, size_t req)
{
    gm_heap_t *h = &r->h;
    if (r->online == ONLINE_CLASSIC) {
        gm_block_t *b = pool_alloc(h, rounded, req);
        if (b)
            return b;
        size_t size = pool_segment_size(rounded);
        gm_segment_t *seg = pool_add_segment(h, r->next_base, size, pool_is_small(rounded), 0);
        r->next_base += gm_round_up(size, GM_VMM_PAGE);
        return seg ? pool_alloc_fresh(h, seg, rounded, req) : NULL;
    }
    if (r->huge && rounded >= r->huge)
        h = &r->hh;
    int refused = 0;
    unsigned moved = 0;
    gm_block_t *b = r->move ? vmm_alloc_within(h, rounded, req, budget_of(r), map_fn, unmap_fn, r, &refused, &moved)
                            : vmm_alloc(h, rounded, req, map_fn, r, &refused);
    if (b || refused)
        return b;
    size_t size = r->range_size > rounded ? r->range_size : gm_round_up(rounded, GM_VMM_PAGE);
    if (!pool_add_range(h, r->next_base, size, pool_is_small(rounded), 0))
        return NULL;
    r->next_base += size;
    return r->move ? vmm_alloc_within(h, rounded, req, budget_of(r), map_fn, unmap_fn, r, &refused, &moved)
                   : vmm_alloc(h, rounded, req, map_fn, r, &refused);
}

/* The online pool's cache given back (the plan serves the step now). */
static void release_online(run_t *r)
{
    unsigned n = 0;
    if (r->online == ONLINE_VMM) {
        vmm_release_idle(&r->h, 0, 0, 0, unmap_fn, r, &n);
        vmm_release_idle(&r->hh, 0, 0, 0, unmap_fn, r, &n);
    } else {
        policy_release_free(&r->h, 0, 0, release_seg, r, &n);
    }
}

/* The plan made: its range counted whole from now on, the online pool's cache given back. */
static void install_plan(run_t *r, size_t at)
{
    steprec_step_t step;
    if (steprec_step(r->rec, &step) || !(r->plan_p = stepplan_build(&step, GM_ROUND)))
        return;
    r->plan_page = calloc(gm_round_up(stepplan_top(r->plan_p), GM_VMM_PAGE) / GM_VMM_PAGE, 1);
    r->plan_at_op = at;
    unsigned n = 0;
    release_online(r);
    (void)n;
}

static void free_block(run_t *r, gm_block_t *b)
{
    pool_free_block(b->seg->heap, b, 0);
}

static void run_model(run_t *r, const op_t *ops, size_t nops)
{
    for (size_t i = 0; i < nops; i++) {
        const op_t *o = &ops[i];
        ent_t *e = slot_of(o->key);
        if (o->bytes != UINT64_MAX) {
            size_t rounded = pool_round(o->bytes);
            if (e->key) { /* an address the trace reuses without a free: forget the old block */
                if (!e->planned && e->b)
                    free_block(r, e->b);
                erase(e);
                e = slot_of(o->key);
            }
            ent_t ne = {o->key, 0, 0, 0, NULL};
            int32_t s = -1;
            if (r->plan_p && (s = stepplan_next(r->plan_p, rounded)) == 0)
                release_online(r); /* a step begins: what the online pool still caches goes */
            if (r->plan_p && s >= 0) {
                uint64_t off;
                if (stepplan_claim(r->plan_p, s, UINT64_MAX, &off) == 0) {
                    ne.planned = 1, ne.ptr = off;
                    for (uint64_t pg = off / GM_VMM_PAGE; pg <= (off + rounded - 1) / GM_VMM_PAGE; pg++)
                        if (!r->plan_page[pg]) {
                            r->plan_page[pg] = 1;
                            plan_maps(r, GM_VMM_PAGE);
                            r->mapped++;
                        }
                }
                else
                    stepplan_unclaimed(r->plan_p);
            }
            if (!ne.planned) {
                if (!(ne.b = online_alloc(r, rounded, o->bytes))) {
                    r->failed++;
                    continue;
                }
            }
            if (r->plan && !r->plan_p) {
                ne.tag = steprec_alloc(r->rec, rounded, rounded);
                if (steprec_state(r->rec) == STEPREC_READY)
                    install_plan(r, i);
            }
            *e = ne;
        } else if (e->key) {
            if (e->planned)
                stepplan_free(r->plan_p, e->ptr, 0);
            else
                free_block(r, e->b);
            if (e->tag && !r->plan_p)
                steprec_free(r->rec, e->tag);
            erase(e);
        }
        if (r->plan_p && i == r->plan_at_op)
            r->mapped_at_plan = r->mapped, r->unmapped_at_plan = r->unmapped;
        if (r->plan_p && !r->steady && i > r->plan_at_op + 2 * (uint64_t)stepplan_period(r->plan_p) + 16)
            r->steady = 1, r->mapped_steady = r->mapped, r->unmapped_steady = r->unmapped;
        uint64_t res = r->st.reserved.current + r->plan_reserved;
        if (res > r->peak)
            r->peak = res, r->peak_op = i;
        if (getenv("TRACE_MODEL_DEBUG") && r->plan && (i % 1000 == 0 || i == r->plan_at_op))
            fprintf(stderr, "op %zu online %.3f (alloc %.3f) plan %.3f live %.3f\n", i, r->st.reserved.current / 1e9,
                    r->st.allocated.current / 1e9, r->plan_reserved / 1e9, 0.0);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2 || !strcmp(argv[1], "--help")) {
        fprintf(stderr, "usage: trace_model TRACE|-   (xz -dc trace.txt.xz | trace_model -)\n");
        return argc != 2 ? 2 : 0;
    }
    FILE *in = strcmp(argv[1], "-") ? fopen(argv[1], "r") : stdin;
    if (!in) {
        perror(argv[1]);
        return 2;
    }
    size_t nops = 0, capops = 1 << 16;
    op_t *ops = malloc(capops * sizeof *ops);
    char line[256];
    while (ops && fgets(line, sizeof line, in)) {
        char op;
        unsigned long long t, tid, key, bytes = 0;
        int n = sscanf(line, " %c %llu %llu %llx %llu", &op, &t, &tid, &key, &bytes);
        if (n < 4 || (op == 'a' && n < 5) || (op != 'a' && op != 'f')) {
            fprintf(stderr, "trace_model: cannot parse '%.60s'\n", line);
            return 2;
        }
        if (nops == capops && !(ops = realloc(ops, (capops *= 2) * sizeof *ops)))
            break;
        ops[nops++] = (op_t){key ? key : 1, op == 'a' ? bytes : UINT64_MAX};
    }
    if (!ops) {
        fprintf(stderr, "trace_model: out of memory\n");
        return 2;
    }
    tabcap = 1 << 20;
    tab = calloc(tabcap, sizeof *tab);
    /* The floor: live bytes as the pool rounds them. */
    uint64_t live = 0, floor = 0;
    for (size_t i = 0; i < nops; i++) {
        ent_t *e = slot_of(ops[i].key);
        if (ops[i].bytes != UINT64_MAX) {
            if (e->key)
                live -= e->ptr, erase(e), e = slot_of(ops[i].key);
            *e = (ent_t){ops[i].key, pool_round(ops[i].bytes), 0, 0, NULL};
            live += e->ptr;
            floor = live > floor ? live : floor;
        } else if (e->key) {
            live -= e->ptr;
            erase(e);
        }
    }
    memset(tab, 0, tabcap * sizeof *tab);
    printf("{\"trace\":\"%s\",\"ops\":%zu,\"floor\":%llu", argv[1], nops, (unsigned long long)floor);
    static const struct {
        const char *name;
        int online, plan, move;
        uint64_t huge;
    } cfgs[] = {
        {"classic", ONLINE_CLASSIC, 0, 0, 0},
        {"vmm", ONLINE_VMM, 0, 0, 0},
        {"vmm_huge64M", ONLINE_VMM, 0, 0, 64ull << 20},
        {"vmm_huge1G", ONLINE_VMM, 0, 0, 1ull << 30},
        {"vmm_move", ONLINE_VMM, 0, 1, 0},
        {"planned_classic", ONLINE_CLASSIC, 1, 0, 0},
        {"planned_vmm", ONLINE_VMM, 1, 0, 0},
        {"planned_vmm_move", ONLINE_VMM, 1, 1, 0},
    };
    for (size_t k = 0; k < sizeof cfgs / sizeof *cfgs; k++) {
        run_t r;
        memset(&r, 0, sizeof r);
        r.online = cfgs[k].online;
        r.plan = cfgs[k].plan;
        r.move = cfgs[k].move;
        r.huge = cfgs[k].huge;
        r.next_base = GM_VMM_PAGE;
        r.range_size = (uint64_t)200 << 30;
        pool_init(&r.h, &r.st, NULL);
        pool_init(&r.hh, &r.st, NULL);
        if (r.plan && !(r.rec = steprec_create(1u << 17)))
            return 2;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        run_model(&r, ops, nops);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        printf(",\"%s\":{\"peak_reserved\":%llu,\"ratio\":%.4f,\"failed\":%llu,\"pages_mapped\":%llu,\"pages_unmapped\":%llu,\"seconds\":%.3f,\"peak_op\":%llu", cfgs[k].name,
               (unsigned long long)r.peak, floor ? (double)r.peak / (double)floor : 0.0,
               (unsigned long long)r.failed, (unsigned long long)r.mapped, (unsigned long long)r.unmapped, (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9, (unsigned long long)r.peak_op);
        if (r.plan_p) {
            stepplan_stats_t ps;
            stepplan_stats(r.plan_p, &ps);
            printf(",\"period\":%u,\"planned_slots\":%u,\"plan_top\":%llu,\"plan_floor\":%llu,\"from_op\":%llu,\"pages_mapped_before_plan\":%llu,\"pages_unmapped_before_plan\":%llu,"
                   "\"pages_mapped_after_a_step\":%llu,\"pages_unmapped_after_a_step\":%llu,"
                   "\"served_planned\":%llu,\"served_online\":%llu,\"busy\":%llu,\"departures\":%llu,\"resyncs\":%llu",
                   stepplan_period(r.plan_p), stepplan_nplanned(r.plan_p),
                   (unsigned long long)stepplan_top(r.plan_p), (unsigned long long)stepplan_floor(r.plan_p),
                   (unsigned long long)r.plan_at_op, (unsigned long long)r.mapped_at_plan,
                   (unsigned long long)r.unmapped_at_plan, (unsigned long long)(r.mapped - r.mapped_steady),
                   (unsigned long long)(r.unmapped - r.unmapped_steady), (unsigned long long)ps.planned, (unsigned long long)ps.online,
                   (unsigned long long)ps.busy, (unsigned long long)ps.departures, (unsigned long long)ps.resyncs);
        } else if (r.plan) {
            printf(",\"period\":0,\"recogniser\":%d", (int)steprec_state(r.rec));
        }
        printf("}");
        stepplan_destroy(r.plan_p);
        free(r.plan_page);
        steprec_destroy(r.rec);
        pool_destroy(&r.h);
        pool_destroy(&r.hh);
        memset(tab, 0, tabcap * sizeof *tab);
    }
    printf("}\n");
    free(ops);
    free(tab);
    return 0;
}
