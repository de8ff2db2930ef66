/* The table's allocation and rehash (table.h has the probing). */
#include "table.h"

#include <stdlib.h>

int table_init(void **slots, size_t *cap, unsigned *shift, size_t esize, size_t want)
{
    unsigned bits = 0;
    while (((size_t)1 << bits) < want)
        bits++;
    void *s = calloc((size_t)1 << bits, esize);
    if (!s)
        return -1;
    *slots = s;
    *cap = (size_t)1 << bits;
    *shift = 64 - bits;
    return 0;
}

int table_grow(void **slots, size_t *cap, unsigned *shift, size_t esize)
{
    void *ns;
    size_t ncap;
    unsigned nshift;
    if (table_init(&ns, &ncap, &nshift, esize, *cap ? *cap * 2 : 64))
        return -1;
    for (size_t i = 0; i < *cap; i++) {
        uint64_t k = table_key(*slots, esize, i);
        if (!k)
            continue;
        int found;
        memcpy(table_probe(ns, ncap, nshift, esize, k, &found), table_at(*slots, esize, i), esize);
    }
    free(*slots);
    *slots = ns;
    *cap = ncap;
    *shift = nshift;
    return 0;
}

void table_map_free(table_map_t *mp)
{
    free(mp->slots);
    memset(mp, 0, sizeof *mp);
}
