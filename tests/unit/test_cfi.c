/* The unwind tables read (shim/cfi.c): a return address's rule as the compiler wrote it — the CFA
 * from the frame pointer in a function that keeps one, from the stack pointer in one that does
 * not — and CFA_FAIL for an address in no loaded object. */
#include "cfi.h"
#include "suites.h"

#include <stdint.h>
#include <sys/mman.h>

static volatile uintptr_t seen_ra;

static void __attribute__((noinline)) note_ra(void)
{
    seen_ra = (uintptr_t)__builtin_return_address(0);
    __asm__ volatile("" ::: "memory");
}

/* Built with frame pointers (the tests' flags): after its prologue, CFA = %rbp + 16, the caller's
 * %rbp saved at CFA - 16. */
static int __attribute__((noinline)) with_fp(int x)
{
    volatile int pad[8];
    pad[0] = x;
    note_ra();
    return pad[0] + 1;
}

static int __attribute__((noinline, optimize("omit-frame-pointer"))) without_fp(int x)
{
    volatile int pad[8];
    pad[0] = x;
    note_ra();
    return pad[0] + 1;
}

START_TEST(test_a_frame_pointer_function_has_its_cfa_from_the_frame_pointer)
{
    with_fp(1);
    rule_t r = cfi_rule_for(seen_ra);
    ck_assert_msg(r.cfa_kind == CFA_BP && r.cfa_off == 16, "kind %d offset %d", r.cfa_kind, r.cfa_off);
    ck_assert_msg(r.bp_kind == BP_AT_CFA && r.bp_off == -16, "frame pointer rule %d at %d", r.bp_kind, r.bp_off);
}
END_TEST

START_TEST(test_a_function_without_frame_pointer_has_its_cfa_from_the_stack_pointer)
{
    without_fp(1);
    rule_t r = cfi_rule_for(seen_ra);
    ck_assert_msg(r.cfa_kind == CFA_SP && r.cfa_off >= 16 && r.cfa_off % 8 == 0, "kind %d offset %d", r.cfa_kind,
                  r.cfa_off);
    ck_assert_msg(r.bp_kind == BP_SAME, "frame pointer rule %d", r.bp_kind);
}
END_TEST

START_TEST(test_code_in_no_loaded_object_is_left_to_backtrace)
{
    void *p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    rule_t r = cfi_rule_for((uintptr_t)p + 64);
    munmap(p, 4096);
    ck_assert_msg(r.cfa_kind == CFA_FAIL, "an anonymous mapping's rule is kind %d, not CFA_FAIL", r.cfa_kind);
}
END_TEST

Suite *cfi_suite(void)
{
    Suite *s = suite_create("cfi");
    TCase *tc = tcase_create("rules");
    tcase_add_test(tc, test_a_frame_pointer_function_has_its_cfa_from_the_frame_pointer);
    tcase_add_test(tc, test_a_function_without_frame_pointer_has_its_cfa_from_the_stack_pointer);
    tcase_add_test(tc, test_code_in_no_loaded_object_is_left_to_backtrace);
    suite_add_tcase(s, tc);
    return s;
}
