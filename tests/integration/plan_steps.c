/* GMSHIM_PLAN on a training loop's shape: weights once, then steps that allocate activations
 * (some up to 1 MiB, some larger), a workspace, and gradients freed in reverse. Every block is
 * filled with its own byte when allocated and checked whole when freed: two live blocks that
 * overlapped, or a late kernel of a freed block's old owner writing into its new owner, would
 * show. Modes:
 *   steps    12 steps: the plan is made and serves most of the later steps' allocations
 *   depart   3 steps of another shape in the middle: they go to the pool, then the plan again
 *   capture  a capture after the plan is made: nothing of it planned, the capture stays valid
 *   streams  each step's last activation written late by a kernel on a non-blocking stream
 *            after its free; the new owner writes on another stream: never the old write
 *   fork     a fork child after the plan is made forwards everything; the parent goes on
 *   frees    double and interior frees of planned blocks are refused as the runtime does
 *   oom      after the steps, one block of nearly all the device: it fits only once the plan's
 *            pages no planned block holds go back on the pool's OOM (as the pool's cache does
 *            without the plan); then 3 more steps, from the plan again where there is one
 *   empty    the same after gmshim_empty_cache, which gives them back first: no OOM then
 *   loop     no steps: 20 000 pairs of one 512 B block from one line (the plan's step is that one
 *            small allocation, freed and wanted again at once): no fence a pair; fences shared
 *            among many frees, as the pool without the plan shares them
 * PLAN_STRICT=1 (GPU order): nearly every planned step's allocation must come from the plan;
 * PLAN_EXPECT_NONE=1: no plan may be made (GMSHIM_PLAN off).
 * Prints the plan's counters; exits nonzero on any failure. */
#include "itest.h"

#include <sys/wait.h>
#include <unistd.h>

#define LAYERS 24
#define MAXLIVE 256

typedef struct live {
    unsigned char *p;
    size_t n;
    unsigned char tag;
} live_t;

static live_t lv[MAXLIVE];
static unsigned char next_tag = 1;
static unsigned long long checked_bytes;
static unsigned long long live_bytes, peak_bytes; /* as asked, of the blocks ALLOC made */
static unsigned long long live_rounded, peak_rounded; /* rounded to 512 B, as the pool rounds */

static void check_block(const live_t *b, const char *when)
{
    for (size_t i = 0; i < b->n; i += 4096)
        CHECK(b->p[i] == b->tag, "%s: block %p (%zu B) byte %zu is %u, not its own %u", when, (void *)b->p, b->n, i,
              b->p[i], b->tag);
    CHECK(b->p[b->n - 1] == b->tag, "%s: block %p's last byte is %u, not %u", when, (void *)b->p, b->p[b->n - 1],
          b->tag);
    checked_bytes += b->n;
}

/* Allocates n bytes (the call site is the caller's line through the macro), fills and records it. */
#define ALLOC(slot, n) alloc_at(&(slot), (n), cudaMalloc((void **)&(slot), (n)))
static void alloc_at(unsigned char **slot, size_t n, cudaError_t err)
{
    CHECK(err == cudaSuccess, "cudaMalloc(%zu): %s", n, cudaGetErrorString(err));
    unsigned char *p = *slot;
    for (int i = 0; i < MAXLIVE; i++)
        if (lv[i].p)
            CHECK(p + n <= lv[i].p || lv[i].p + lv[i].n <= p, "%p (%zu B) overlaps the live %p (%zu B)", (void *)p,
                  n, (void *)lv[i].p, lv[i].n);
    for (int i = 0; i < MAXLIVE; i++)
        if (!lv[i].p) {
            lv[i] = (live_t){p, n, next_tag};
            next_tag = next_tag == 255 ? 1 : next_tag + 1;
            live_bytes += n;
            peak_bytes = live_bytes > peak_bytes ? live_bytes : peak_bytes;
            live_rounded += (n + 511) / 512 * 512;
            peak_rounded = live_rounded > peak_rounded ? live_rounded : peak_rounded;
            memset(p, lv[i].tag, n);
            return;
        }
    CHECK(0, "more than %d live blocks", MAXLIVE);
}

static void free_block(void *p)
{
    for (int i = 0; i < MAXLIVE; i++)
        if (lv[i].p == p) {
            check_block(&lv[i], "before its free");
            lv[i].p = NULL;
            live_bytes -= lv[i].n;
            live_rounded -= (lv[i].n + 511) / 512 * 512;
            CUDA_OK(cudaFree(p));
            return;
        }
    CHECK(0, "free of %p, which the test does not hold", p);
}

static size_t act_size(int i, int shape)
{
    return (size_t)((i * 7 + shape) % 9 + 1) * (320u << 10) + (size_t)i * 512; /* 320 KiB .. 2.8 MiB */
}

static void late_write(void *p)
{
    memset(p, 0xEE, 4096);
}

static cudaStream_t side, other;

/* Double and interior frees of the step's planned blocks: refused as the runtime refuses them.
 * Tried in the first step from 8 on whose blocks all came from the plan (without GPU order a
 * slot whose fence has not completed yet goes to the pool, so which step that is varies). */
static int bad_tried;

static void bad_frees(unsigned char *act0, unsigned char *ws, unsigned long long planned_before)
{
    gmshim_stats_t st;
    gm_stats(0, &st);
    if (bad_tried || st.plan_allocs < planned_before + LAYERS + 1)
        return;
    bad_tried = 1;
    cudaError_t e = cudaFree(act0 + 512);
    CHECK(e == cudaErrorInvalidValue, "an interior free of a planned block: %s", cudaGetErrorString(e));
    CHECK(cudaGetLastError() == cudaErrorInvalidValue, "the interior free left no last error");
    e = cudaFree(ws);
    CHECK(e == cudaErrorInvalidValue, "a double free of a planned block: %s", cudaGetErrorString(e));
    CHECK(cudaGetLastError() == cudaErrorInvalidValue, "the double free left no last error");
    CUDA_OK(cudaFree(NULL));
    gm_stats(0, &st);
    CHECK(st.bad_frees >= 2, "bad frees %llu", st.bad_frees);
}

/* One step; `late`: its last activation is written by a late kernel on `side` after its free;
 * `bad`: double and interior frees tried once its workspace is freed. */
static void step(int shape, int late, int bad)
{
    unsigned char *act[LAYERS], *ws, *g;
    gmshim_stats_t st;
    gm_stats(0, &st);
    for (int i = 0; i < LAYERS; i++)
        ALLOC(act[i], act_size(i, shape));
    ALLOC(ws, 8u << 20);
    free_block(ws);
    if (bad)
        bad_frees(act[0], ws, st.plan_allocs);
    for (int i = LAYERS - 1; i >= 0; i--) {
        ALLOC(g, act_size(i, shape));
        if (late && i == LAYERS - 1) {
            /* The old owner's kernel is still to write when the block is freed. */
            CUDA_OK(fakecuda_launch(side, late_write, act[i], 20000));
            for (int k = 0; k < MAXLIVE; k++)
                if (lv[k].p == act[i])
                    lv[k].p = NULL; /* not checked: the late write is the old owner's own */
            CUDA_OK(cudaFree(act[i]));
        } else {
            free_block(act[i]);
        }
        free_block(g);
    }
}

/* Under the late writes: every block a step hands out, written on `other` by its new owner,
 * must hold that write once the device is drained. */
static void step_checked_on_other(void)
{
    unsigned char *act[LAYERS];
    for (int i = 0; i < LAYERS; i++) {
        CUDA_OK(cudaMalloc((void **)&act[i], act_size(i, 0)));
        CUDA_OK(cudaMemsetAsync(act[i], 0x55, act_size(i, 0), other));
    }
    fakecuda_drain();
    for (int i = 0; i < LAYERS; i++)
        for (size_t k = 0; k < act_size(i, 0); k += 4096)
            CHECK(act[i][k] == 0x55, "activation %d (%p) holds %u at %zu: an old owner's late write", i, (void *)act[i],
                  act[i][k], k);
    for (int i = 0; i < LAYERS; i++)
        CUDA_OK(cudaFree(act[i]));
}

/* All the device but the weights and a margin, in one block: more than the driver has free with
 * a plan, so it needs what the pool's OOM release gives back (the plan's idle pages among it), or
 * (`empty`) what gmshim_empty_cache gave back before it; then 3 more steps (main's loop: the step
 * is called from one line), checked as ever, from the plan again where one serves. */
static void large_block(int expect_plan, int empty)
{
    size_t free_b = 0, total = 0;
    unsigned long long (*empty_cache)(void) = (unsigned long long (*)(void))dlsym(RTLD_DEFAULT, "gmshim_empty_cache");
    if (empty && empty_cache)
        empty_cache();
    CUDA_OK(cudaMemGetInfo(&free_b, &total));
    size_t big = total - (16u << 20) - (8u << 20);
    printf("large: driver free %zu of %zu, the block %zu\n", free_b, total, big);
    CHECK(!expect_plan || empty || big > free_b, "the large block (%zu) fits in what the driver has free (%zu): "
          "nothing to give back", big, free_b);
    CHECK(!empty_cache || !empty || big <= free_b, "after gmshim_empty_cache the driver has %zu free, under %zu",
          free_b, big);
    unsigned char *p = NULL;
    cudaError_t e = cudaMalloc((void **)&p, big);
    CHECK(e == cudaSuccess, "cudaMalloc(%zu) of nearly all the device: %s", big, cudaGetErrorString(e));
    CHECK(cudaGetLastError() == cudaSuccess, "the recovered OOM left a last error");
    for (size_t k = 0; k < big; k += big / 8) /* touched here and there: it is the program's */
        p[k] = 0x5A;
    p[big - 1] = 0x5A;
    CUDA_OK(cudaFree(p));
}

/* 20 000 pairs of one small block, each freed and wanted again at once, from one line: the plan
 * learns that step of one allocation, and there is at most one fence per 16 pairs (a fence a pair
 * is what the plan made before: 20 000), the blocks checked as ever. */
static void small_loop(int expect_plan)
{
    enum { PAIRS = 20000 };
    gmshim_stats_t a, b;
    gm_stats(0, &a);
    for (int i = 0; i < PAIRS; i++) {
        unsigned char *x;
        ALLOC(x, 512);
        free_block(x);
    }
    gm_stats(0, &b);
    printf("loop: %d pairs, %llu fences, %llu planned\n", PAIRS, b.fences - a.fences, b.plan_allocs - a.plan_allocs);
    CHECK(!expect_plan || b.plan_period > 0, "no plan of the loop's step of one allocation");
    CHECK(b.fences - a.fences <= PAIRS / 16, "%llu fences for %d pairs of 512 B", b.fences - a.fences, PAIRS);
}

static void print_stats(const char *mode, const gmshim_stats_t *st)
{
    printf("%s: period %llu planned %llu online %llu busy %llu bytes %llu allocs %llu frees %llu checked %llu\n", mode,
           st->plan_period, st->plan_allocs, st->plan_online, st->plan_busy, st->plan_bytes, st->allocs, st->frees,
           checked_bytes);
}

int main(int argc, char **argv)
{
    CHECK(argc == 2, "usage: plan_steps steps|depart|capture|streams|fork|frees|oom|empty|recycle|idle|loop");
    const char *mode = argv[1];
    int expect_plan = getenv("PLAN_EXPECT_NONE") == NULL;
    /* Under GPU order a slot's fence answers at once; without it, when the fake's worker thread
     * got to it: then half the steps' allocations planned is what is asked. */
    unsigned slack = getenv("PLAN_STRICT") != NULL ? 1 : 2;
    int depart = !strcmp(mode, "depart"), capture = !strcmp(mode, "capture"), streams = !strcmp(mode, "streams");
    int forks = !strcmp(mode, "fork"), frees = !strcmp(mode, "frees"), oom = !strcmp(mode, "oom");
    int empty = !strcmp(mode, "empty"), recycle = !strcmp(mode, "recycle"), idle = !strcmp(mode, "idle");
    int loop = !strcmp(mode, "loop");
    CHECK(depart || capture || streams || forks || frees || oom || empty || recycle || idle || loop ||
              !strcmp(mode, "steps"),
          "unknown mode '%s'", mode);
    CUDA_OK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    cudaStream_t cs;
    CUDA_OK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    unsigned char *weights;
    ALLOC(weights, 16u << 20);
    gmshim_stats_t st, at6, mid, at13 = {0};
    struct fakecuda_stats fk8 = {0}, fk10 = {0}, fkend;
    int large = oom || empty;
    if (loop) {
        small_loop(expect_plan);
        free_block(weights);
        return 0;
    }
    /* Every step is called from one line, as a training loop calls its step: the sites repeat. */
    for (int s = 0; s < (large ? 16 : 13); s++) {
        if (s == 13) {
            fakecuda_drain();
            gm_stats(0, &at13);
            large_block(expect_plan, empty);
        }
        if (s == 6) {
            gm_stats(0, &at6);
            CHECK(!expect_plan || at6.plan_period > 0, "no plan after 6 steps (GMSHIM_PLAN on)");
        }
        if (s == 6 && capture)
            CUDA_OK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
        if (s == 6 && forks) {
            pid_t pid = fork();
            CHECK(pid >= 0, "fork");
            if (pid == 0) { /* CUDA is unusable in a fork child; gmshim forwards and touches nothing */
                cudaError_t e = cudaFree(weights);
                void *b = NULL;
                cudaError_t e2 = cudaMalloc(&b, 4096);
                _exit(e == cudaErrorInitializationError && e2 == cudaErrorInitializationError ? 0 : 1);
            }
            int status;
            waitpid(pid, &status, 0);
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
        }
        if (s == 9)
            gm_stats(0, &mid);
        if (s == 8)
            fakecuda_get_stats(0, &fk8);
        if (s == 10)
            fakecuda_get_stats(0, &fk10);
        if (frees && s >= 8)
            CUDA_OK(cudaDeviceSynchronize()); /* the last step's fences complete: its slots free */
        if (recycle && s >= 6)
            fakecuda_drain(); /* every fence so far complete: its events can be used again */
        step(depart && s >= 6 && s < 9 ? 3 : 0, streams && s >= 6, frees && s >= 8);
        if (streams && s >= 6)
            step_checked_on_other();
        if (s == 6 && capture) {
            gm_stats(0, &mid);
            CHECK(mid.plan_allocs == at6.plan_allocs, "%llu allocations planned during a capture",
                  mid.plan_allocs - at6.plan_allocs);
            cudaGraph_t graph;
            CUDA_OK(cudaStreamEndCapture(cs, &graph));
            CUDA_OK(cudaGraphDestroy(graph));
        }
    }
    if (idle) {
        /* Under GMSHIM_IDLE_RELEASE=1 the job idles (up to 15 s; the trimmer's passes come every
         * second: one sees the plan idle, one finds the fence it recorded complete, the next gives
         * back): the plan's pages no block needs go back with the pool's idle segments (the
         * weights stay), then the plan serves the next steps. */
        gmshim_stats_t busy, rested;
        gm_stats(0, &busy);
        int waited = 0;
        do {
            usleep(250000);
            gm_stats(0, &rested);
        } while (++waited < 60 && rested.reserved.current > (24u << 20));
        printf("idle: reserved %llu busy, %llu after %.2f s idle\n", busy.reserved.current, rested.reserved.current,
               waited / 4.0);
        CHECK(!expect_plan || rested.reserved.current <= (24u << 20), "%llu bytes still reserved after %.2f s idle "
              "(%llu busy)", rested.reserved.current, waited / 4.0, busy.reserved.current);
        for (int s = 0; s < 3; s++)
            step(0, 0, 0);
        gm_stats(0, &rested);
        CHECK(!expect_plan || rested.plan_allocs - busy.plan_allocs >= 2 * (2 * LAYERS + 1) / slack,
              "after the idle time the plan served %llu of 3 steps' allocations", rested.plan_allocs - busy.plan_allocs);
    }
    fakecuda_drain();
    gm_stats(0, &st);
    print_stats(mode, &st);
    fakecuda_get_stats(0, &fkend);
    /* The device's peak counts the plan's blocks with the pool's once, as they were live together
     * (not the pool's peak while it learnt plus the plan's). */
    CHECK(strcmp(mode, "steps") || st.requested.peak == peak_bytes, "peak requested %llu, the program's own peak %llu",
          st.requested.peak, peak_bytes);
    CHECK(strcmp(mode, "steps") || (st.allocated.peak >= peak_rounded && st.allocated.peak <= peak_rounded / 10 * 11),
          "peak allocated %llu, the program's own peak %llu rounded", st.allocated.peak, peak_rounded);
    /* The fences' events are recycled once complete: a plan served for steps makes none anew. */
    printf("%s: events made in steps 8-9 %llu, from step 10 on %llu\n", mode, fk10.event_creates - fk8.event_creates,
           fkend.event_creates - fk10.event_creates);
    /* None, as a rule; a few where a slow run (a sanitizer) sent slots to the pool, whose fences
     * made some: never the hundreds of fences never retired (270-375 before they were). */
    CHECK(!recycle || !expect_plan || fkend.event_creates - fk10.event_creates <= 40,
          "%llu events made anew from step 10 on, every earlier fence complete",
          fkend.event_creates - fk10.event_creates);
    const unsigned long long per = 2 * LAYERS + 1;
    if (!expect_plan) {
        CHECK(st.plan_allocs == 0 && st.plan_period == 0, "a plan without GMSHIM_PLAN: %llu planned", st.plan_allocs);
    } else if (depart) {
        CHECK(mid.plan_online >= at6.plan_online + 3 * per, "the other shape's steps did not go to the pool");
        CHECK(st.plan_allocs - mid.plan_allocs >= 3 * per / slack, "the plan served %llu of the last 4 steps' %llu",
              st.plan_allocs - mid.plan_allocs, 4 * per);
    } else if (capture) {
        CHECK(st.plan_allocs - at6.plan_allocs >= 5 * per / slack, "the plan served %llu of the 6 steps after the capture",
              st.plan_allocs - at6.plan_allocs);
    } else if (!streams) {
        CHECK(st.plan_allocs - at6.plan_allocs >= 6 * per / slack, "only %llu of the last 7 steps' %llu allocations planned",
              st.plan_allocs - at6.plan_allocs, 7 * per);
    }
    CHECK(!large || !expect_plan || st.plan_allocs - at13.plan_allocs >= 2 * per / slack,
          "after the large block the plan served %llu of 3 steps' %llu", st.plan_allocs - at13.plan_allocs, 3 * per);
    /* Under GPU order every step from 8 on is planned whole; without it a slot whose fence has not
     * completed goes to the pool, so no step may be (the refusals are then the pool's own). */
    const char *order = getenv("GMSHIM_GPU_ORDER");
    CHECK(!frees || !expect_plan || bad_tried || !order || strcmp(order, "1"),
          "no step from 8 on had all its blocks from the plan under GPU order: no bad frees tried");
    CHECK(!expect_plan || (st.plan_bytes > 0 && st.plan_bytes < 64u << 20), "the plan's range is %llu bytes",
          st.plan_bytes);
    free_block(weights);
    gm_stats(0, &st);
    CHECK(st.allocated.current == 0, "%llu bytes still allocated at the end", st.allocated.current);
    return 0;
}
