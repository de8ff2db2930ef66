/* Unit tests of the analyzer's symbolizer (analyzer/symbolize.c): function names from .symtab
 * and file:line from DWARF 5 (this runner, built by make) and DWARF 4 (a program compiled here
 * with -gdwarf-4), build-id checks, search paths, and files that are missing or not ELF. */
#include "suites.h"
#include "symbolize.h"

#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const int probe_line = __LINE__ + 2;
__attribute__((noinline, used)) int gm_sym_probe_function_b41c(int x);
__attribute__((noinline, used)) int gm_sym_probe_function_b41c(int x)
{
    return x * 3 + 1;
}

/* A function with a C++ name, given by its mangled form (this file is C). */
__attribute__((noinline, used)) int gm_cxx_probe(int x) __asm__("_ZN6gmtest11probe_cplusEi");
__attribute__((noinline, used)) int gm_cxx_probe(int x)
{
    return x * 5 + 2;
}

static int first_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(uintptr_t *)data = info->dlpi_addr; /* the first object is the program itself */
    return 1;
}

/* This executable's path and the probe's offset from its load bias, plus 1 (a return address). */
static void self_offset(char *exe, size_t len, uint64_t *offset)
{
    ssize_t n = readlink("/proc/self/exe", exe, len - 1);
    ck_assert_msg(n > 0, "no /proc/self/exe");
    exe[n] = 0;
    uintptr_t bias = 0;
    dl_iterate_phdr(first_object, &bias);
    *offset = (uint64_t)((uintptr_t)gm_sym_probe_function_b41c - bias) + 1;
}

START_TEST(test_function_and_line_of_this_runner_are_found)
{
    char exe[PATH_MAX];
    uint64_t off;
    self_offset(exe, sizeof exe, &off);
    sym_frame_t f;
    sym_resolve(exe, NULL, 0, off, &f);
    ck_assert_msg(!f.no_file, "%s could not be read", exe);
    ck_assert_msg(f.function && !strcmp(f.function, "gm_sym_probe_function_b41c"), "function %s at offset 0x%llx",
                  f.function ? f.function : "(none)", (unsigned long long)off);
    ck_assert_msg(f.file && strstr(f.file, "test_analyzer_symbolize.c"), "file %s", f.file ? f.file : "(none)");
    ck_assert_msg(f.line >= (unsigned)probe_line && f.line <= (unsigned)probe_line + 2, "line %u, want %d",
                  f.line, probe_line);
    ck_assert_msg(!f.build_id_differs, "no build id was given, yet it differs");
    sym_reset();
}
END_TEST

START_TEST(test_cpp_names_are_demangled_and_the_symbol_kept)
{
    char exe[PATH_MAX];
    uint64_t off;
    self_offset(exe, sizeof exe, &off);
    uintptr_t bias = (uintptr_t)gm_sym_probe_function_b41c - (uintptr_t)(off - 1);
    sym_frame_t f;
    sym_resolve(exe, NULL, 0, (uint64_t)((uintptr_t)gm_cxx_probe - bias) + 1, &f);
    ck_assert_msg(f.function && !strcmp(f.function, "gmtest::probe_cplus(int)"), "function %s",
                  f.function ? f.function : "(none)");
    ck_assert_msg(f.symbol && !strcmp(f.symbol, "_ZN6gmtest11probe_cplusEi"), "symbol %s",
                  f.symbol ? f.symbol : "(none)");
    ck_assert_ptr_null(sym_demangle("gm_sym_probe_function_b41c")); /* a C name stays as it is */
    ck_assert_ptr_null(sym_demangle("_Z!!not-a-name"));
    char *d = sym_demangle("_ZN2at6native5emptyEv");
    ck_assert_str_eq(d, "at::native::empty()");
    free(d);
    sym_reset();
}
END_TEST

START_TEST(test_a_different_build_id_is_reported)
{
    char exe[PATH_MAX];
    uint64_t off;
    self_offset(exe, sizeof exe, &off);
    uint8_t id[20];
    size_t n = sym_file_build_id(exe, id, sizeof id);
    ck_assert_msg(n > 0, "the runner has no build id");
    sym_frame_t f;
    sym_resolve(exe, id, n, off, &f);
    ck_assert_msg(!f.build_id_differs, "its own build id differs");
    id[0] ^= 0xff;
    sym_resolve(exe, id, n, off, &f);
    ck_assert_msg(f.build_id_differs, "a changed build id went unnoticed");
    ck_assert_msg(f.function && !strcmp(f.function, "gm_sym_probe_function_b41c"), "function %s",
                  f.function ? f.function : "(none)");
    sym_reset();
}
END_TEST

START_TEST(test_missing_and_foreign_files_give_no_names)
{
    sym_frame_t f;
    sym_resolve("/nonexistent/libnothing.so", NULL, 0, 0x1234, &f);
    ck_assert_msg(f.no_file && !f.function && !f.file, "a missing file gave a name");
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s/notelf.so", temp_dir());
    FILE *out = fopen(tmp, "w");
    ck_assert_msg(out != NULL, "cannot write %s", tmp);
    for (int i = 0; i < 1000; i++)
        fputs("\x7f" "ELF but not really ", out);
    fclose(out);
    sym_resolve(tmp, NULL, 0, 0x40, &f);
    ck_assert_msg(f.no_file && !f.function, "a non-ELF file gave a name");
    sym_resolve("/proc/self/exe", NULL, 0, 0x40, &f);
    ck_assert_msg(f.no_file, "a /proc path was read");
    sym_reset();
}
END_TEST

START_TEST(test_search_path_finds_a_moved_module)
{
    char exe[PATH_MAX];
    uint64_t off;
    self_offset(exe, sizeof exe, &off);
    uint8_t id[20];
    size_t n = sym_file_build_id(exe, id, sizeof id);
    const char *base = strrchr(exe, '/') + 1;
    char moved[PATH_MAX + 64];
    snprintf(moved, sizeof moved, "/nonexistent/dir/%s", base);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", (int)(base - exe - 1), exe);
    sym_set_search_path(dir);
    sym_frame_t f;
    sym_resolve(moved, id, n, off, &f);
    sym_set_search_path(NULL);
    ck_assert_msg(!f.no_file && f.function && !strcmp(f.function, "gm_sym_probe_function_b41c") && !f.build_id_differs,
                  "searching %s for %s: no_file %d function %s", dir, base, f.no_file, f.function ? f.function : "(none)");
    sym_reset();
}
END_TEST

/* DWARF 4: compile tests/integration/sym_unique.c with -gdwarf-4, run it under the preload and
 * let `gmshim leaks` name the function and the line of its cudaMalloc. */
START_TEST(test_dwarf4_line_tables_are_read)
{
    const char *cc = getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
    const char *cuda = getenv("CUDA_HOME") && *getenv("CUDA_HOME") ? getenv("CUDA_HOME") : "/usr/local/cuda";
    const char *dir = temp_dir();
    char bin[512], cmd[4096], log[512];
    snprintf(bin, sizeof bin, "%s/sym4", dir);
    snprintf(log, sizeof log, "%s/sym4.gmlog", dir);
    snprintf(cmd, sizeof cmd, "%s -std=c11 -O1 -gdwarf-4 -I%s/include tests/integration/sym_unique.c -o %s -L%s "
             "-Wl,-rpath,%s -lcudart 2>&1", cc, cuda, bin, build_path("fake"), build_path("fake"));
    int rc = system(cmd);
    ck_assert_msg(rc == 0, "could not compile with -gdwarf-4: %s", cmd);
    char logenv[600];
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
    const char *argv[] = {bin, NULL};
    const char *env[] = {logenv, NULL};
    char *out = NULL;
    rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0, "sym4 exited %d:\n%s", rc, out);
    free(out);
    const char *gargv[] = {build_path("gmshim"), "--json", "leaks", log, NULL};
    rc = run_program(gargv, NULL, 0, &out);
    ck_assert_msg(rc == 0, "gmshim leaks exited %d:\n%s", rc, out);
    int line = 0;
    FILE *src = fopen("tests/integration/sym_unique.c", "r");
    char buf[512];
    for (int n = 1; src && fgets(buf, sizeof buf, src); n++)
        if (strstr(buf, "SYM_UNIQUE_LINE") && strstr(buf, "cudaMalloc"))
            line = n;
    if (src)
        fclose(src);
    char want[64];
    snprintf(want, sizeof want, "\"line\":%d", line);
    ck_assert_msg(strstr(out, "gmshim_test_unique_allocator_7f3a") && strstr(out, "sym_unique.c") && strstr(out, want),
                  "DWARF 4: the frames do not name the function at sym_unique.c:%d:\n%s", line, out);
    free(out);
}
END_TEST

Suite *analyzer_symbolize_suite(void)
{
    Suite *s = suite_create("analyzer_symbolize");
    TCase *tc = tcase_create("elf");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_function_and_line_of_this_runner_are_found);
    tcase_add_test(tc, test_cpp_names_are_demangled_and_the_symbol_kept);
    tcase_add_test(tc, test_a_different_build_id_is_reported);
    tcase_add_test(tc, test_missing_and_foreign_files_give_no_names);
    tcase_add_test(tc, test_search_path_finds_a_moved_module);
    tcase_add_test(tc, test_dwarf4_line_tables_are_read);
    suite_add_tcase(s, tc);
    return s;
}
