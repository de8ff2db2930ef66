/* The one open-addressing table (analyzer/table.h, table.c) and the model's two maps over it
 * (model_int.h): keys found after inserts and growth, deletion by backward shift that keeps
 * every other key reachable, key 0 never stored. */
#include "model_int.h"
#include "suites.h"
#include "table.h"

#include <stdlib.h>

/* Keys that collide a lot: multiples of a large power of two share their low bits. */
static uint64_t key_of(unsigned i)
{
    return ((uint64_t)i + 1) << 21;
}

START_TEST(test_map_keeps_every_key_through_growth_and_deletions)
{
    model_map_t mp;
    map_init(&mp, 64);
    size_t cap0 = mp.cap;
    const unsigned n = 5000;
    for (unsigned i = 0; i < n; i++)
        map_put(&mp, key_of(i), i * 3);
    ck_assert_msg(mp.count == n && mp.cap > cap0 && mp.count * 4 <= mp.cap * 3,
                  "after %u inserts: count %zu, cap %zu (was %zu)", n, mp.count, mp.cap, cap0);
    for (unsigned i = 0; i < n; i++) {
        uint64_t *v = map_find(&mp, key_of(i));
        ck_assert_msg(v && *v == i * 3, "key %u: %s %llu", i, v ? "value" : "missing", v ? (unsigned long long)*v : 0ull);
    }
    map_put(&mp, key_of(7), 99);
    ck_assert_msg(mp.count == n && *map_find(&mp, key_of(7)) == 99, "a second put of a key replaces its value: %zu",
                  mp.count);
    for (unsigned i = 0; i < n; i += 2) {
        uint64_t v = 0;
        ck_assert_msg(map_del(&mp, key_of(i), &v) && v == (i == 7 ? 99 : i * 3), "delete %u gave %llu", i,
                      (unsigned long long)v);
    }
    for (unsigned i = 0; i < n; i++) {
        uint64_t *v = map_find(&mp, key_of(i));
        if (i % 2)
            ck_assert_msg(v && *v == (i == 7 ? 99 : i * 3), "key %u lost after its neighbours' deletion", i);
        else
            ck_assert_msg(!v, "deleted key %u still found", i);
    }
    ck_assert_msg(mp.count == n / 2 && !map_del(&mp, key_of(0), NULL), "count %zu after deleting half", mp.count);
    map_free(&mp);
}
END_TEST

START_TEST(test_key_zero_is_never_stored_or_found)
{
    model_map_t mp;
    map_init(&mp, 16);
    map_put(&mp, 0, 5);
    ck_assert_msg(mp.count == 0 && !map_find(&mp, 0) && !map_del(&mp, 0, NULL), "key 0: count %zu", mp.count);
    map_free(&mp);
    model_map_t none = {0};
    ck_assert_msg(!map_find(&none, 42) && !map_del(&none, 42, NULL), "a map never made finds nothing");
}
END_TEST

START_TEST(test_live_map_upserts_and_removes_in_place)
{
    model_livemap_t lm;
    live_init(&lm, 16);
    const unsigned n = 3000;
    for (unsigned i = 0; i < n; i++) {
        int found = -1;
        model_live_t *e = live_upsert(&lm, key_of(i), &found);
        ck_assert_msg(!found && e->ptr == key_of(i), "new pointer %u: found %d", i, found);
        e->req = i;
    }
    int found = 0;
    model_live_t *again = live_upsert(&lm, key_of(11), &found);
    ck_assert_msg(found && again->req == 11 && lm.count == n, "an existing pointer is found: %d, req %llu, %zu live",
                  found, (unsigned long long)again->req, lm.count);
    ck_assert_msg(lm.count * 8 <= lm.cap * 5, "load %zu of %zu slots", lm.count, lm.cap);
    for (unsigned i = 0; i < n; i += 3)
        live_remove(&lm, live_find(&lm, key_of(i)));
    for (unsigned i = 0; i < n; i++) {
        model_live_t *e = live_find(&lm, key_of(i));
        if (i % 3)
            ck_assert_msg(e && e->req == i, "pointer %u lost after removals", i);
        else
            ck_assert_msg(!e, "removed pointer %u still found", i);
    }
    ck_assert_msg(lm.count == n - (n + 2) / 3, "%zu live after removing a third", lm.count);
    free(lm.slots);
}
END_TEST

/* An entry of another size in the table itself: the probing does not depend on the map. */
typedef struct wide {
    uint64_t key;
    char payload[40];
} wide_t;

START_TEST(test_table_grows_entries_of_any_size_in_slot_order)
{
    void *slots;
    size_t cap;
    unsigned shift;
    ck_assert_msg(table_init(&slots, &cap, &shift, sizeof(wide_t), 5) == 0 && cap == 8 && shift == 61,
                  "8 slots for 5 wanted: cap %zu shift %u", cap, shift);
    for (unsigned i = 0; i < 5; i++) {
        int found;
        wide_t *w = table_probe(slots, cap, shift, sizeof(wide_t), key_of(i), &found);
        ck_assert_msg(!found, "key %u new", i);
        w->key = key_of(i);
        w->payload[0] = (char)('a' + i);
    }
    ck_assert_msg(table_grow(&slots, &cap, &shift, sizeof(wide_t)) == 0 && cap == 16 && shift == 60,
                  "grown to %zu slots, shift %u", cap, shift);
    for (unsigned i = 0; i < 5; i++) {
        wide_t *w = table_find(slots, cap, shift, sizeof(wide_t), key_of(i));
        ck_assert_msg(w && w->payload[0] == (char)('a' + i), "key %u after growth", i);
    }
    free(slots);
}
END_TEST

Suite *analyzer_table_suite(void)
{
    Suite *s = suite_create("analyzer_table");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, test_map_keeps_every_key_through_growth_and_deletions);
    tcase_add_test(tc, test_key_zero_is_never_stored_or_found);
    tcase_add_test(tc, test_live_map_upserts_and_removes_in_place);
    tcase_add_test(tc, test_table_grows_entries_of_any_size_in_slot_order);
    suite_add_tcase(s, tc);
    return s;
}
