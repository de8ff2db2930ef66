/* A made-up training loop for the recogniser's and the plan's tests: weights first, then steps
 * of `layers` alike layers (forward keeps an activation each, backward frees them in reverse
 * with a temporary each), a loss and an optimizer loop over alike parameters; the first step
 * also makes the optimizer's state. Keys are sizes; sizes differ by layer position only. */
#ifndef GM_TEST_STEPTEST_H
#define GM_TEST_STEPTEST_H

#include <stdint.h>

#define ST_MAX_LIVE 4096

typedef struct st_loop {
    int layers;
    /* what a caller does with each event */
    uint32_t (*alloc)(void *arg, uint64_t key, uint64_t size);
    void (*free)(void *arg, uint32_t tag);
    void *arg;
    uint64_t allocs;
} st_loop_t;

static uint32_t st_alloc(st_loop_t *l, uint64_t size)
{
    l->allocs++;
    return l->alloc(l->arg, size, size);
}

static void st_weights(st_loop_t *l)
{
    for (int i = 0; i < l->layers; i++)
        st_alloc(l, 1 << 20);
}

/* One step; `first`: it makes the optimizer's state (kept for ever). `extra`: a departure (an
 * allocation of a size no step makes, freed at once) after layer `extra - 1`'s forward. */
static void st_step(st_loop_t *l, int first, int extra)
{
    uint32_t act[64];
    uint32_t input = st_alloc(l, 3 << 20);
    for (int i = 0; i < l->layers; i++) {
        act[i] = st_alloc(l, (uint64_t)(8 + i % 2) << 20);
        uint32_t tmp = st_alloc(l, 512 << 10);
        l->free(l->arg, tmp);
        if (extra && i == extra - 1) {
            uint32_t odd = st_alloc(l, 777 << 10);
            l->free(l->arg, odd);
        }
    }
    uint32_t loss = st_alloc(l, 4096);
    for (int i = l->layers - 1; i >= 0; i--) {
        uint32_t grad = st_alloc(l, (uint64_t)(8 + i % 2) << 20);
        l->free(l->arg, act[i]);
        l->free(l->arg, grad);
    }
    l->free(l->arg, loss);
    l->free(l->arg, input);
    for (int i = 0; i < l->layers; i++) {
        if (first)
            st_alloc(l, 1 << 20), st_alloc(l, 1 << 20);
        uint32_t upd = st_alloc(l, 1 << 20);
        l->free(l->arg, upd);
    }
}

#endif
