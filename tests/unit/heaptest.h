/* The fixture of the tests on one bare heap (test_pool, test_policy): a heap with its stats, on
 * made-up addresses from BASE, made before each test and destroyed after. */
#ifndef GM_TEST_HEAPTEST_H
#define GM_TEST_HEAPTEST_H

#include "pool.h"

#include <string.h>

#define MiB ((size_t)1 << 20)
#define BASE ((uintptr_t)1 << 40)

static gm_pool_stats_t stats;
static gm_heap_t heap;

static void setup(void)
{
    memset(&stats, 0, sizeof stats);
    pool_init(&heap, &stats, NULL);
}

static void teardown(void)
{
    pool_destroy(&heap);
}

#endif
