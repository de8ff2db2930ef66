/* Which library asked (shim/requester.c): the CUDA stack, gmshim and the C runtime are skipped,
 * every other object can ask; frames of gmshim are machinery, a library's are not. */
#include "../../shim/requester.h"
#include "stacks.h"
#include "suites.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>

START_TEST(test_only_the_cuda_stack_and_gmshim_are_skipped)
{
    const char *cuda[] = {"/usr/lib/x86_64-linux-gnu/libcuda.so.1", "libcudart.so.13",
                          "/sp/nvidia/cu13/lib/libcupti.so.13", "/x/libgmshim.so", "/lib/libc.so.6"};
    const char *user[] = {"/sp/nvidia/cu13/lib/libcublasLt.so.13", "libnccl.so.2", "libcudnn_ops.so.9",
                          "/usr/bin/python3.12", "libcuda_helper.so", "cupti_static_leak"};
    for (size_t i = 0; i < sizeof cuda / sizeof *cuda; i++)
        ck_assert_msg(requester_is_cuda_stack(cuda[i]), "%s must be skipped", cuda[i]);
    for (size_t i = 0; i < sizeof user / sizeof *user; i++)
        ck_assert_msg(!requester_is_cuda_stack(user[i]), "%s can ask for memory", user[i]);
}
END_TEST

/* gmshim's own frames are machinery (this runner links gmshim's code); a library's, such as
 * libm's, are not, nor is an address in no object. */
START_TEST(test_gmshims_frames_are_machinery_a_librarys_are_not)
{
    ck_assert_int_eq(requester_is_machinery((uintptr_t)requester_is_machinery + 1), 1);
    void *libm = dlsym(RTLD_DEFAULT, "cos");
    ck_assert_ptr_nonnull(libm);
    ck_assert_int_eq(requester_is_machinery((uintptr_t)libm + 1), 0);
    ck_assert_int_eq(requester_is_machinery(16), 0);
}
END_TEST

Suite *requester_suite(void)
{
    Suite *s = suite_create("requester");
    TCase *tc = tcase_create("frames");
    tcase_add_test(tc, test_only_the_cuda_stack_and_gmshim_are_skipped);
    tcase_add_test(tc, test_gmshims_frames_are_machinery_a_librarys_are_not);
    suite_add_tcase(s, tc);
    return s;
}
