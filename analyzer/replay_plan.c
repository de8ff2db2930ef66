/* The replay's growable ranges and planned step (replay_plan.h): what shim/ranges.c and
 * shim/planner.c do around common/vmm.c, steprec.c and stepplan.c, with pages counted, not
 * mapped. The key, the recogniser, the packing and the slots' rule are the shim's own code, so
 * the replay learns and serves the step the shim would. */
#include "replay_plan.h"
#include "stepplan.h"
#include "steprec.h"
#include "vmm.h"

#include <stdlib.h>
#include <string.h>

#define PAGE GM_VMM_PAGE
#define LEARN_MAX (1u << 17) /* as shim/planner.c: allocations the recogniser records at most */

enum { ST_OFF = 0, ST_LEARN, ST_SERVE };

struct rplan {
    int state;
    uint32_t nids;
    steprec_t *rec;          /* ST_LEARN */
    uint32_t *tag;           /* by block id: the recogniser's tag (learning), 0: none */
    stepplan_t *sp;          /* ST_SERVE */
    uint64_t *off1;          /* by block id: its offset in the plan's range + 1, 0: not the plan's */
    uint8_t *page;           /* the plan's range: pages mapped */
    size_t npages;
    uint64_t planned, mapped;
};

rplan_t *rplan_create(uint32_t nids)
{
    rplan_t *p = calloc(1, sizeof *p);
    size_t n = nids ? nids : 1;
    if (!p || !(p->tag = calloc(n, sizeof *p->tag)) || !(p->off1 = calloc(n, sizeof *p->off1)) ||
        !(p->rec = steprec_create(LEARN_MAX))) {
        rplan_destroy(p);
        return NULL;
    }
    p->nids = nids;
    p->state = ST_LEARN;
    return p;
}

void rplan_destroy(rplan_t *p)
{
    if (!p)
        return;
    steprec_destroy(p->rec);
    stepplan_destroy(p->sp);
    free(p->tag), free(p->off1), free(p->page);
    free(p);
}

void rplan_reset(rplan_t *p)
{
    stepplan_destroy(p->sp);
    steprec_destroy(p->rec);
    free(p->page);
    p->sp = NULL, p->page = NULL, p->npages = 0, p->mapped = 0;
    size_t n = p->nids ? p->nids : 1;
    memset(p->tag, 0, n * sizeof *p->tag);
    memset(p->off1, 0, n * sizeof *p->off1);
    p->rec = steprec_create(LEARN_MAX);
    p->state = p->rec ? ST_LEARN : ST_OFF;
}

/* The recogniser has its step: the plan and its range (no page mapped), as the shim installs it. */
static int install(rplan_t *p)
{
    steprec_step_t step;
    stepplan_t *sp = steprec_step(p->rec, &step) == 0 ? stepplan_build(&step, GM_ROUND) : NULL;
    size_t npages = sp ? gm_round_up(stepplan_top(sp), PAGE) / PAGE : 0;
    uint8_t *page = sp ? calloc(npages ? npages : 1, 1) : NULL;
    steprec_destroy(p->rec);
    p->rec = NULL;
    memset(p->tag, 0, (p->nids ? p->nids : 1) * sizeof *p->tag);
    if (!page) {
        stepplan_destroy(sp);
        p->state = ST_OFF;
        return 0;
    }
    p->sp = sp, p->page = page, p->npages = npages;
    p->state = ST_SERVE;
    return 1;
}

int rplan_learning(const rplan_t *p)
{
    return p->state == ST_LEARN;
}

int rplan_serving(const rplan_t *p)
{
    return p->state == ST_SERVE;
}

int rplan_note(rplan_t *p, uint32_t id, uint32_t site, size_t rounded)
{
    if (p->state != ST_LEARN || id >= p->nids)
        return 0;
    p->tag[id] = steprec_alloc(p->rec, steprec_key(site, rounded), rounded);
    if (steprec_state(p->rec) == STEPREC_READY)
        return install(p);
    if (steprec_state(p->rec) == STEPREC_FULL) { /* no step the recogniser finds: no plan */
        steprec_destroy(p->rec);
        p->rec = NULL;
        p->state = ST_OFF;
    }
    return 0;
}

void rplan_note_free(rplan_t *p, uint32_t id)
{
    if (p->state != ST_LEARN || id >= p->nids || !p->tag[id])
        return;
    steprec_free(p->rec, p->tag[id]);
    p->tag[id] = 0;
}

int32_t rplan_next(rplan_t *p, uint32_t site, size_t rounded)
{
    if (p->state != ST_SERVE)
        return -1;
    int32_t s = stepplan_next(p->sp, steprec_key(site, rounded));
    if (s >= 0 && rounded > stepplan_slot_size(p->sp, s)) { /* a key alike but larger */
        stepplan_unclaimed(p->sp);
        return -1;
    }
    return s;
}

uint64_t rplan_claim(rplan_t *p, int32_t s, uint64_t done, uint64_t *off)
{
    return stepplan_claim(p->sp, s, done, off);
}

void rplan_unclaimed(rplan_t *p, int32_t s)
{
    if (s < 0)
        stepplan_unclaimed(p->sp);
    else
        stepplan_release(p->sp, s);
}

uint64_t rplan_missing(const rplan_t *p, uint64_t off, size_t n)
{
    uint64_t missing = 0;
    for (size_t i = off / PAGE; i <= (off + n - 1) / PAGE && i < p->npages; i++)
        missing += !p->page[i];
    return missing * PAGE;
}

void rplan_map(rplan_t *p, uint64_t off, size_t n)
{
    for (size_t i = off / PAGE; i <= (off + n - 1) / PAGE && i < p->npages; i++)
        if (!p->page[i]) {
            p->page[i] = 1;
            p->mapped += PAGE;
        }
}

uint64_t rplan_give_back(rplan_t *p)
{
    if (!p->sp || !p->page || !p->mapped)
        return 0;
    uint8_t *held = calloc(p->npages, 1);
    if (!held)
        return 0;
    stepplan_held_pages(p->sp, PAGE, UINT64_MAX, held);
    uint64_t bytes = 0;
    for (size_t i = 0; i < p->npages; i++)
        if (p->page[i] && !held[i]) {
            p->page[i] = 0;
            bytes += PAGE;
        }
    p->mapped -= bytes;
    free(held);
    return bytes;
}

uint64_t rplan_taken(rplan_t *p, uint32_t id, int32_t s, uint64_t off)
{
    if (id < p->nids)
        p->off1[id] = off + 1;
    p->planned++;
    return stepplan_slot_size(p->sp, s);
}

int rplan_free(rplan_t *p, uint32_t id, uint64_t seq, uint64_t *bytes)
{
    if (id >= p->nids || !p->off1[id])
        return 0;
    uint64_t off = p->off1[id] - 1;
    p->off1[id] = 0;
    int32_t s = p->sp ? stepplan_live_slot(p->sp, off) : -1;
    if (s < 0)
        return 0;
    *bytes = stepplan_slot_size(p->sp, s);
    stepplan_free(p->sp, off, seq);
    return 1;
}

void rplan_stats(const rplan_t *p, rplan_stats_t *out)
{
    memset(out, 0, sizeof *out);
    out->planned = p->planned;
    out->mapped = p->mapped;
    if (p->sp) {
        out->period = stepplan_period(p->sp);
        out->top = (uint64_t)p->npages * PAGE;
    }
}

/* ---- growable ranges -------------------------------------------------------------------------- */

typedef struct pages {
    gm_heap_t *h;
    uint64_t cap;
} pages_t;

/* One mapping a page, as the shim's (its token the page's number); refused where the
 * reservation would pass the cap. */
static int map_pages(void *arg, gm_segment_t *seg, uintptr_t addr, size_t n, uint64_t *tokens)
{
    pages_t *pg = arg;
    (void)seg;
    if (pg->h->stats->reserved.current + n * PAGE > pg->cap)
        return -1;
    for (size_t i = 0; i < n; i++)
        tokens[i] = addr / PAGE + i + 1;
    return 0;
}

static int unmap_pages(void *arg, gm_segment_t *seg, uintptr_t addr, size_t n, const uint64_t *tokens)
{
    (void)arg, (void)seg, (void)addr, (void)n, (void)tokens;
    return 0;
}

gm_block_t *rplan_range_alloc(gm_heap_t *h, size_t rounded, size_t req, uint64_t cap, uint64_t budget, int *refused)
{
    pages_t pg = {h, cap};
    unsigned moved = 0;
    *refused = 0;
    if (budget)
        return vmm_alloc_within(h, rounded, req, budget, map_pages, unmap_pages, &pg, refused, &moved);
    return vmm_alloc(h, rounded, req, map_pages, &pg, refused);
}

size_t rplan_range_wanted(const gm_heap_t *h, size_t rounded)
{
    size_t pages = vmm_pages_wanted(h, rounded);
    return pages == SIZE_MAX ? gm_round_up(rounded, PAGE) : pages * PAGE;
}

int rplan_range_add(gm_heap_t *h, uintptr_t base, size_t size, size_t rounded)
{
    return pool_add_range(h, base, size, pool_is_small(rounded), 0) ? 0 : -1;
}

size_t rplan_range_release(gm_heap_t *h, size_t keep, uint64_t idle_ns, uint64_t now)
{
    unsigned n = 0;
    return vmm_release_idle(h, keep, idle_ns, now, unmap_pages, NULL, &n);
}
