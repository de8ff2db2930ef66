/* The one open-addressing hash table of the model's maps (live blocks, segments, site
 * statistics, sites, strings): linear probing from a multiplicative hash, entries of any size
 * keyed by the nonzero uint64_t they start with (0 marks an empty slot), deletion by backward
 * shift, so that churn never leaves tombstones to slow lookups. Inline, so that each map's
 * entry size is a constant where it is probed; it never allocates but through table_grow. */
#ifndef GM_TABLE_H
#define GM_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TABLE_GOLDEN 0x9E3779B97F4A7C15ull

static inline size_t table_home(unsigned shift, uint64_t key)
{
    return (size_t)((key * TABLE_GOLDEN) >> shift);
}

static inline void *table_at(void *slots, size_t esize, size_t i)
{
    return (char *)slots + i * esize;
}

static inline uint64_t table_key(const void *slots, size_t esize, size_t i)
{
    uint64_t k;
    memcpy(&k, (const char *)slots + i * esize, sizeof k);
    return k;
}

/* The entry of key (never 0), else the empty slot where it would go: *found says which. */
static inline void *table_probe(void *slots, size_t cap, unsigned shift, size_t esize, uint64_t key, int *found)
{
    for (size_t i = table_home(shift, key);; i = (i + 1) & (cap - 1)) {
        uint64_t k = table_key(slots, esize, i);
        if (k == key) {
            *found = 1;
            return table_at(slots, esize, i);
        }
        if (!k) {
            *found = 0;
            return table_at(slots, esize, i);
        }
    }
}

/* The entry of key, or NULL. Key 0 finds the first empty slot on its path (callers check). */
static inline void *table_find(void *slots, size_t cap, unsigned shift, size_t esize, uint64_t key)
{
    for (size_t i = table_home(shift, key);; i = (i + 1) & (cap - 1)) {
        uint64_t k = table_key(slots, esize, i);
        if (k == key)
            return table_at(slots, esize, i);
        if (!k)
            return NULL;
    }
}

/* Empties slot i, moving back the entries after it whose home is not in (i, j]. Only the key
 * of the slot left empty is cleared. */
static inline void table_remove_at(void *slots, size_t cap, unsigned shift, size_t esize, size_t i)
{
    size_t mask = cap - 1;
    for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        uint64_t k = table_key(slots, esize, j);
        if (!k)
            break;
        size_t home = table_home(shift, k);
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            memcpy(table_at(slots, esize, i), table_at(slots, esize, j), esize);
            i = j;
        }
    }
    memset(table_at(slots, esize, i), 0, sizeof(uint64_t));
}

/* Zeroed slots for at least `want` entries (rounded up to a power of two) in *slots, *cap and
 * *shift; -1 when out of memory. */
int table_init(void **slots, size_t *cap, unsigned *shift, size_t esize, size_t want);
/* Twice the slots (64 when there were none), the entries moved over in slot order; -1 when out
 * of memory (the table is then unchanged). */
int table_grow(void **slots, size_t *cap, unsigned *shift, size_t esize);

#endif
