/* Python frames (shim/pyframes.c), under the preload: a Python program's allocations name its lines. */
#include "../../shim/pyframes.h"
#include "suites.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Line of a marker comment in tests/integration/pyleak.py. */
static int marker_line(const char *marker)
{
    FILE *f = fopen("tests/integration/pyleak.py", "r");
    char line[512];
    int n = 0, found = 0;
    while (f && fgets(line, sizeof line, f)) {
        n++;
        if (strstr(line, marker)) {
            found = n;
            break;
        }
    }
    if (f)
        fclose(f);
    return found;
}

START_TEST(test_python_frames_name_the_python_lines)
{
    static const char *const pythons[] = {
        "/root/.pyenv/versions/3.13.0/bin/python3.13", "/root/.pyenv/versions/3.12.1/bin/python3.12",
        "/root/.pyenv/versions/3.11.7/bin/python3.11", "/usr/bin/python3.13", "/usr/bin/python3.12",
        "/usr/bin/python3.11"};
    int tried = 0;
    for (size_t i = 0; i < sizeof pythons / sizeof *pythons; i++) {
        if (access(pythons[i], X_OK) != 0)
            continue;
        tried++;
        const char *dir = temp_dir();
        char logenv[512], fake[4096], log[512];
        snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s/py.gmlog", dir);
        snprintf(fake, sizeof fake, "FAKE_CUDART=%s", build_path("fake/libcudart.so.13"));
        snprintf(log, sizeof log, "%s/py.gmlog", dir);
        /* CPython itself leaks at exit: not for LeakSanitizer to report in the ASan build. */
        const char *env[] = {"FAKECUDA_MEM=1G", logenv, fake, "ASAN_OPTIONS=detect_leaks=0", NULL};
        const char *argv[] = {pythons[i], "tests/integration/pyleak.py", NULL};
        char *out = NULL;
        int rc = run_program(argv, env, 1, &out);
        ck_assert_msg(rc == 0, "%s exited %d:\n%s", pythons[i], rc, out);
        free(out);
        char cli[4096];
        snprintf(cli, sizeof cli, "%s", build_path("gmshim"));
        const char *leaks[] = {cli, "leaks", "--json", log, NULL};
        const char *none[] = {NULL};
        rc = run_program(leaks, none, 0, &out);
        ck_assert_msg(rc == 0, "gmshim leaks exited %d:\n%s", rc, out);
        char *w = out; /* JSON compared without its spaces */
        for (char *r = out; *r; r++)
            if (*r != ' ')
                *w++ = *r;
        *w = 0;
        int lines[] = {marker_line("MAKE_TENSOR_LINE"), marker_line("FORWARD_LINE"), marker_line("LEAK_LINE")};
        const char *funcs[] = {"make_tensor", "Model.forward", "<module>"};
        for (int k = 0; k < 3; k++) {
            char want[256];
            snprintf(want, sizeof want, "\"function\":\"%s\",\"file\":", funcs[k]);
            const char *at = strstr(out, want);
            ck_assert_msg(at != NULL, "%s: no Python frame for %s in:\n%.2000s", pythons[i], funcs[k], out);
            char line[64];
            snprintf(line, sizeof line, "pyleak.py\",\"line\":%d}", lines[k]);
            ck_assert_msg(strstr(at, line) && strstr(at, line) - at < 300, "%s: %s not at line %d:\n%.600s",
                          pythons[i], funcs[k], lines[k], at);
        }
        ck_assert_msg(strstr(out, "\"count\":4") != NULL, "%s: the 4 kept allocations:\n%.2000s", pythons[i], out);
        free(out);
    }
    if (!tried)
        fprintf(stderr, "test_python_frames_name_the_python_lines: no CPython 3.11-3.13 here, skipped\n");
}
END_TEST


/* A thread that is not Python's (this test program, with no interpreter) has no Python frames,
 * and capturing them reads nothing it should not. */
START_TEST(test_a_thread_without_python_has_no_python_frames)
{
    gm_pyframe_raw_t f[8];
    ck_assert_int_eq(pyframes_capture(f, 8), 0);
    ck_assert_ptr_null(pyframes_version());
}
END_TEST

Suite *pyframes_suite(void)
{
    Suite *s = suite_create("pyframes");
    TCase *tc = tcase_create("preload");
    tcase_add_test(tc, test_a_thread_without_python_has_no_python_frames);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_python_frames_name_the_python_lines);
    suite_add_tcase(s, tc);
    return s;
}
