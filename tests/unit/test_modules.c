/* The loaded objects (shim/modules.c): an address in this program maps to a module and an offset
 * inside it, the same one each time; gmshim's own code is told apart; an address in no object is
 * refused. */
#include "../../shim/modules.h"
#include "evlog.h"
#include "options.h"
#include "suites.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* An object loaded through its descriptor (the PyTorch bridge, as /proc/self/fd/N) is logged
 * under its file's name: the reader opens it later, in another process. */
START_TEST(test_an_object_loaded_by_descriptor_is_logged_under_its_file_name)
{
    const char *dir = temp_dir();
    char src[512], so[512], log[512], cmd[2048], by_fd[64];
    snprintf(src, sizeof src, "%s/probe.c", dir);
    snprintf(so, sizeof so, "%s/libprobe.so", dir);
    snprintf(log, sizeof log, "%s/m.gmlog", dir);
    FILE *f = fopen(src, "w");
    ck_assert(f && fputs("int modules_fd_probe(void) { return 7; }\n", f) >= 0 && fclose(f) == 0);
    snprintf(cmd, sizeof cmd, "cc -shared -fPIC -o '%s' '%s'", so, src);
    ck_assert_int_eq(system(cmd), 0);
    setenv("GMSHIM_LOG", log, 1);
    options_reset();
    evlog_open();
    int fd = open(so, O_RDONLY | O_CLOEXEC);
    snprintf(by_fd, sizeof by_fd, "/proc/self/fd/%d", fd);
    void *h = dlopen(by_fd, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "dlopen %s: %s", by_fd, dlerror());
    void *fn = dlsym(h, "modules_fd_probe");
    uint32_t id;
    uint64_t off;
    modules_init();
    ck_assert_int_eq(modules_lookup((uintptr_t)fn, &id, &off), 0);
    evlog_close(GMLOG_CLOSE_EXIT);
    f = fopen(log, "rb");
    ck_assert(f != NULL);
    static char bytes[1 << 22];
    size_t n = fread(bytes, 1, sizeof bytes, f);
    fclose(f);
    ck_assert_msg(memmem(bytes, n, so, strlen(so)) != NULL, "the log does not name %s", so);
    ck_assert_msg(memmem(bytes, n, "/proc/self/fd/", 14) == NULL, "the log names the module /proc/self/fd/N");
}
END_TEST

Suite *modules_suite(void)
{
    Suite *s = suite_create("modules");
    TCase *tc = tcase_create("lookup");
    tcase_add_test(tc, test_an_address_maps_to_a_module_and_an_offset_inside_it);
    tcase_add_test(tc, test_gmshims_own_code_is_told_apart);
    tcase_add_test(tc, test_an_object_loaded_by_descriptor_is_logged_under_its_file_name);
    suite_add_tcase(s, tc);
    return s;
}
