/* The one open-addressing hash table of the analyzer's maps (the model's live blocks,
 * segments, site statistics, sites and strings; the decoder's tensors; the replay's block ids;
 * the exports' blocks and segments): linear probing from a multiplicative hash, entries of any size
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

/* A map of 64-bit keys (0 is never stored) to 64-bit values over the table. */
typedef struct table_kv {
    uint64_t key, val;
} table_kv_t;

typedef struct table_map {
    table_kv_t *slots;
    size_t cap, count;
    unsigned shift;
} table_map_t;

static inline uint64_t *table_map_find(const table_map_t *mp, uint64_t key)
{
    if (!mp->cap || !key)
        return NULL;
    table_kv_t *kv = table_find(mp->slots, mp->cap, mp->shift, sizeof *mp->slots, key);
    return kv ? &kv->val : NULL;
}

/* Sets key's value (key 0 is ignored); -1 when out of memory (the map is then unchanged). */
static inline int table_map_put(table_map_t *mp, uint64_t key, uint64_t val)
{
    if (!key)
        return 0;
    if ((mp->count + 1) * 4 > mp->cap * 3) {
        void *s = mp->slots;
        if (table_grow(&s, &mp->cap, &mp->shift, sizeof *mp->slots))
            return -1;
        mp->slots = s;
    }
    int found;
    table_kv_t *kv = table_probe(mp->slots, mp->cap, mp->shift, sizeof *mp->slots, key, &found);
    if (!found)
        mp->count++;
    kv->key = key;
    kv->val = val;
    return 0;
}

/* Removes key, its value in *val; 0 when it was not there. */
static inline int table_map_del(table_map_t *mp, uint64_t key, uint64_t *val)
{
    if (!mp->cap || !key)
        return 0;
    table_kv_t *kv = table_find(mp->slots, mp->cap, mp->shift, sizeof *mp->slots, key);
    if (!kv)
        return 0;
    if (val)
        *val = kv->val;
    table_remove_at(mp->slots, mp->cap, mp->shift, sizeof *mp->slots, (size_t)(kv - mp->slots));
    mp->count--;
    return 1;
}

/* Every key gone; the slots kept. */
static inline void table_map_clear(table_map_t *mp)
{
    if (mp->cap)
        memset(mp->slots, 0, mp->cap * sizeof *mp->slots);
    mp->count = 0;
}

void table_map_free(table_map_t *mp);

#endif
