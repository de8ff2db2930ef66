/* The loaded objects (shim/modules.c): an address in this program maps to a module and an offset
 * inside it, the same one each time; gmshim's own code is told apart; an address in no object is
 * refused. */
#include "../../shim/modules.h"
#include "suites.h"

#include <dlfcn.h>
#include <stdint.h>

uint64_t modules_test_probe(void);
uint64_t modules_test_probe(void)
{
    return 1;
}

START_TEST(test_an_address_maps_to_a_module_and_an_offset_inside_it)
{
    modules_init();
    uint32_t id = 0, id2 = 0;
    uint64_t off = 0, off2 = 0;
    uintptr_t here = (uintptr_t)modules_test_probe;
    ck_assert_int_eq(modules_lookup(here, &id, &off), 0);
    ck_assert_int_eq(modules_lookup(here + 4, &id2, &off2), 0);
    ck_assert_uint_eq(id, id2);
    ck_assert_uint_eq(off2, off + 4);
    ck_assert_uint_lt(off, here);
    ck_assert_int_eq(modules_lookup(16, &id, &off), -1);
}
END_TEST

START_TEST(test_gmshims_own_code_is_told_apart)
{
    modules_init();
    ck_assert_int_eq(modules_is_self((uintptr_t)modules_is_self), 1);
    void *libc = dlsym(RTLD_DEFAULT, "getpid");
    ck_assert_ptr_nonnull(libc);
    ck_assert_int_eq(modules_is_self((uintptr_t)libc), 0);
}
END_TEST

Suite *modules_suite(void)
{
    Suite *s = suite_create("modules");
    TCase *tc = tcase_create("lookup");
    tcase_add_test(tc, test_an_address_maps_to_a_module_and_an_offset_inside_it);
    tcase_add_test(tc, test_gmshims_own_code_is_told_apart);
    suite_add_tcase(s, tc);
    return s;
}
