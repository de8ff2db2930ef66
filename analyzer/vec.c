/* Growable arrays (vec.h): the one place where the analyzer's arrays grow. It only allocates; it
 * never reads what the arrays hold. */
#include "vec.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void *vec_grow_raw(void *arr, size_t *cap, size_t need, size_t elem, size_t min)
{
    if (need <= *cap)
        return arr;
    if (!elem)
        return NULL;
    /* No object is larger than PTRDIFF_MAX bytes: larger needs are refused, not asked of realloc. */
    size_t max = (size_t)PTRDIFF_MAX / elem, ncap = *cap > min ? *cap : (min ? min : 1);
    if (need > max)
        return NULL;
    while (ncap < need)
        ncap = ncap > max / 2 ? max : ncap * 2;
    void *n = realloc(arr, ncap * elem);
    if (!n)
        return NULL;
    *cap = ncap;
    return n;
}

void *vec_grow(void *arr, size_t *cap, size_t need, size_t elem, size_t min)
{
    size_t old = *cap;
    char *n = vec_grow_raw(arr, cap, need, elem, min);
    if (n && *cap > old)
        memset(n + old * elem, 0, (*cap - old) * elem);
    return n;
}
