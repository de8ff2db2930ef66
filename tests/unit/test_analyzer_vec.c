/* The analyzer's growable arrays (analyzer/vec.c): the capacity said is the block's, what is new
 * is zeroed, and a size that would overflow is refused with the array kept. */
#include "suites.h"
#include "vec.h"

#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>

START_TEST(test_vec_grow_capacity_is_always_the_blocks_own)
{
    uint64_t *a = NULL;
    size_t cap = 0;
    for (size_t n = 0; n < 20000; n++) {
        uint64_t *g = vec_grow(a, &cap, n + 1, sizeof *a, 16);
        ck_assert_msg(g != NULL, "growing to %zu failed", n + 1);
        a = g;
        ck_assert_msg(cap >= n + 1 && malloc_usable_size(a) >= cap * sizeof *a,
                      "at %zu elements: capacity %zu but the block holds %zu bytes", n + 1, cap, malloc_usable_size(a));
        a[n] = n;
    }
    for (size_t n = 0; n < 20000; n++)
        ck_assert_msg(a[n] == n, "element %zu reads %llu", n, (unsigned long long)a[n]);
    free(a);
}
END_TEST

START_TEST(test_vec_grow_zeroes_what_it_adds_and_starts_at_the_minimum)
{
    size_t cap = 0;
    unsigned char *a = vec_grow(NULL, &cap, 3, 1, 64);
    ck_assert_msg(a && cap == 64, "first growth to 3 with minimum 64: capacity %zu", cap);
    for (size_t i = 0; i < cap; i++)
        a[i] = 0xAB;
    size_t old = cap;
    a = vec_grow(a, &cap, old + 1, 1, 64);
    ck_assert_msg(a && cap == 2 * old, "growth past %zu: capacity %zu", old, cap);
    for (size_t i = 0; i < cap; i++)
        ck_assert_msg(a[i] == (i < old ? 0xAB : 0), "byte %zu reads %#x after growing", i, a[i]);
    ck_assert_msg(vec_grow(a, &cap, 10, 1, 64) == a && cap == 2 * old, "a need within the capacity moved the array");
    free(a);
}
END_TEST

START_TEST(test_vec_grow_refuses_a_size_that_overflows_and_keeps_the_array)
{
    size_t cap = 0;
    uint64_t *a = vec_grow(NULL, &cap, 4, sizeof *a, 4);
    ck_assert_msg(a && cap == 4, "capacity %zu", cap);
    a[3] = 7;
    ck_assert_msg(vec_grow(a, &cap, SIZE_MAX / 4, sizeof *a, 4) == NULL && cap == 4,
                  "a need of SIZE_MAX/4 elements of 8 bytes was granted (capacity %zu)", cap);
    ck_assert_msg(vec_grow(a, &cap, SIZE_MAX, 1, 4) == NULL && cap == 4, "SIZE_MAX bytes granted");
    ck_assert_msg(a[3] == 7, "the array changed after a refusal");
    free(a);
}
END_TEST

Suite *analyzer_vec_suite(void)
{
    Suite *s = suite_create("analyzer_vec");
    TCase *tc = tcase_create("vec");
    tcase_add_test(tc, test_vec_grow_capacity_is_always_the_blocks_own);
    tcase_add_test(tc, test_vec_grow_zeroes_what_it_adds_and_starts_at_the_minimum);
    tcase_add_test(tc, test_vec_grow_refuses_a_size_that_overflows_and_keeps_the_array);
    suite_add_tcase(s, tc);
    return s;
}
