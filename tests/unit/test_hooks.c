/* The exported entry points (shim/hooks.c, drvhooks.c): the library exports the CUDA functions it
 * replaces, the driver's stream functions and dlsym that drvhooks.c watches, the gmshim_* API and
 * the injection entry point, nothing else (a preload must not clash with the
 * host); every hook is thin enough to pass a call straight through while gmshim is inside
 * itself, which the preload tests exercise. */
#include "suites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_one_of(const char *name, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(name, names[i]))
            return 1;
    return 0;
}

START_TEST(test_only_cuda_entry_points_and_the_api_are_exported)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s'", build_path("libgmshim.so"));
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char line[512], name[400];
    static const char *const driver[] = {"cuStreamCreate", "cuStreamCreateWithPriority", "cuStreamDestroy",
                                         "cuStreamDestroy_v2", "cuGreenCtxStreamCreate", "cuGetProcAddress",
                                         "cuGetProcAddress_v2", "dlsym"};
    int cuda = 0, api = 0, inject = 0, drv = 0;
    while (fgets(line, sizeof line, p)) {
        if (sscanf(line, "%*s %*s %399s", name) != 1)
            continue;
        if (!strncmp(name, "__", 2))
            continue; /* the compiler's and a sanitizer's own (a sanitizer build exports some) */
        if (!strncmp(name, "cuda", 4))
            cuda++;
        else if (!strncmp(name, "gmshim_", 7))
            api++;
        else if (!strcmp(name, "InitializeInjection"))
            inject++;
        else if (is_one_of(name, driver, sizeof driver / sizeof *driver))
            drv++;
        else
            ck_abort_msg("libgmshim.so exports %s", name);
    }
    ck_assert_int_eq(pclose(p), 0);
    ck_assert_msg(cuda >= 20 && api >= 4 && inject == 1 && drv == 8,
                  "exports: %d cuda*, %d gmshim_*, %d injection, %d driver", cuda, api, inject, drv);
}
END_TEST

Suite *hooks_suite(void)
{
    Suite *s = suite_create("hooks");
    TCase *tc = tcase_create("exports");
    tcase_add_test(tc, test_only_cuda_entry_points_and_the_api_are_exported);
    suite_add_tcase(s, tc);
    return s;
}
