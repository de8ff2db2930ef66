/* The fixture of the in-process pool tests (test_hit, test_fencepol, test_slowpath, test_device):
 * device 0 of the fake runtime with 512 MiB, the log off, this thread in arena 0; helpers that
 * allocate and free through the hit path, in an arena of one's choosing. */
#ifndef GM_TEST_POOLTEST_H
#define GM_TEST_POOLTEST_H

#include <check.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

static gm_device_t *d;

static inline void setup(void)
{
    setenv("FAKECUDA_MEM", "512M", 1);
    unsetenv("GMSHIM_LOG");
    /* The pool's own rules: a run of the suite with GMSHIM_PLAN=1 set (the plan under every
     * program the preload tests run) leaves these in-process tests without it. */
    unsetenv("GMSHIM_PLAN");
    options_reset();
    d = device_get(0);
    ck_assert_ptr_nonnull(d);
    hit_use_arena(0);
}

static inline void *alloc_or_fail(size_t n)
{
    void *p = NULL;
    cudaError_t e = hit_alloc(d, n, 0, &p);
    ck_assert_msg(e == cudaSuccess, "hit_alloc(%zu) = %d", n, (int)e);
    return p;
}

static inline void free_ok(void *p)
{
    cudaError_t e = cudaErrorUnknown;
    ck_assert_msg(hit_free(d, p, 0, &e) == GM_FREE_DONE && e == cudaSuccess, "hit_free(%p)", p);
}

static inline gmshim_stats_t stats(void)
{
    gmshim_stats_t st;
    memset(&st, 0, sizeof st);
    device_get_stats(d, &st);
    return st;
}

typedef struct job {
    int arena;
    void *in, *out;
    size_t size;
} job_t;

static inline void *in_arena(void *arg)
{
    job_t *j = arg;
    hit_use_arena(j->arena);
    if (j->in)
        free_ok(j->in);
    if (j->size)
        j->out = alloc_or_fail(j->size);
    return NULL;
}

static inline void run_in_arena(job_t *j)
{
    pthread_t th;
    pthread_create(&th, NULL, in_arena, j);
    pthread_join(th, NULL);
}

static inline void late_write(void *p)
{
    *(volatile int *)p = 0xAA;
}

static inline void mark_done(void *p)
{
    __atomic_store_n((int *)p, 1, __ATOMIC_RELEASE);
}

static inline double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline void setup_gpu_order(void)
{
    setenv("GMSHIM_GPU_ORDER", "1", 1);
    setup();
    ck_assert_int_eq(d->gpu_order, 1);
}

/* Every fence recorded (one more for the frees since the last), completed on the fake GPU and
 * taken in by arena 0. */
static inline void complete_fences(void)
{
    gm_arena_t *a = d->arenas[0];
    pthread_mutex_lock(&a->lock);
    ck_assert_int_eq(fencepol_issue(a, GMLOG_FENCE_BY_NEED), 0);
    pthread_mutex_unlock(&a->lock);
    fakecuda_drain();
    pthread_mutex_lock(&a->lock);
    fencepol_harvest(a, 1);
    pthread_mutex_unlock(&a->lock);
}

static inline int outstanding(void)
{
    pthread_mutex_lock(&d->fence_lock);
    int n = fence_outstanding(&d->fences);
    pthread_mutex_unlock(&d->fence_lock);
    return n;
}

/* ---- GMSHIM_CACHE_LIMIT's trimmer pass ------------------------------------------------------ */

#define CACHE_CAP (64u << 20)

static inline void setup_cache_limit(void)
{
    setenv("GMSHIM_CACHE_LIMIT", "64M", 1);
    setup();
    ck_assert_uint_eq(d->cache_limit, CACHE_CAP);
}

/* Three 32 MiB blocks from arena `arena`, each its own segment, freed (pending: no allocation
 * polls them). */
static inline void free_three_in_arena(int arena)
{
    void *p[3];
    for (int i = 0; i < 3; i++) {
        job_t j = {.arena = arena, .size = 32u << 20};
        run_in_arena(&j);
        p[i] = j.out;
    }
    for (int i = 0; i < 3; i++) {
        job_t j = {.arena = arena, .in = p[i]};
        run_in_arena(&j);
    }
}

#endif
