/* The shim's life (shim/init.c), under the preload: a fork child leaves the parent's pool and log
 * alone, a program without CUDA gets no file and no thread, GMSHIM_TORCH=own at load. */
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

START_TEST(test_fork_child_leaves_the_parent_pool_alone)
{
    const char *dir = temp_dir();
    char logenv[512];
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s/fork-%%p.gmlog", dir);
    RUN_OK("tests/integration/fork_child", "FAKECUDA_MEM=1G", logenv);
    /* Only the parent wrote a log. */
    int logs = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        logs += strstr(e->d_name, ".gmlog") != NULL;
    closedir(d);
    ck_assert_msg(logs == 1, "%d logs in %s, expected the parent's only", logs, dir);
}
END_TEST

START_TEST(test_program_without_cuda_gets_no_file_and_no_thread)
{
    const char *dir = temp_dir();
    char logenv[512];
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s/gmshim-%%n-%%p.gmlog", dir);
    RUN_OK("tests/integration/no_cuda", logenv, "GMSHIM_VERBOSE=1");
    DIR *d = opendir(dir);
    struct dirent *e;
    int files = 0;
    while (d && (e = readdir(d)))
        files += e->d_name[0] != '.';
    closedir(d);
    ck_assert_msg(files == 0, "%d files appeared in %s", files, dir);
}
END_TEST

/* A fork while another thread initialises gmshim: the child's mark, cudaMalloc and cudaFree
 * return and it exits, whatever moment the fork hit (tests/integration/fork_init: each child
 * has 5 s; a hang is counted and killed). FORK_TRIALS sets the count (CI: 40; `make
 * fork-trials`: 1 000). */
START_TEST(test_a_fork_during_init_leaves_a_child_that_exits)
{
    /* Neither sanitizer's runtime survives this race by itself (docs/limits.md): GCC 12's
     * AddressSanitizer does not hold its allocator's locks across fork (a child forked while
     * another thread refills a size class waits forever in its first calloc, inside libasan), and
     * the program built with ThreadSanitizer, run without gmshim at all, leaves 17 of 200 children
     * hung inside libtsan. The plain build runs it. */
    const char *san = getenv("GMSHIM_TEST_PRELOAD");
    if (san && (strstr(san, "libasan") || strstr(san, "libtsan"))) {
        printf("fork_init: not run under a sanitizer (its runtime is not fork-safe in a threaded process)\n");
        return;
    }
    const char *n_env = getenv("FORK_TRIALS");
    char n[32];
    snprintf(n, sizeof n, "%d", n_env ? atoi(n_env) : 40);
    const char *env[] = {"FAKECUDA_MEM=1G", NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/fork_init", env, n, &out);
    printf("%s", strstr(out, "fork_init:") ? strstr(out, "fork_init:") : out);
    ck_assert_msg(rc == 0, "exit %d:\n%.2000s", rc, out);
    free(out);
}
END_TEST

/* Forks while threads allocate, free, mark, empty the cache and read the stats (arena, cache and
 * log locks held at any moment, the log switching extents): each child's mark, stats, empty cache,
 * cudaMalloc and cudaFree return and it exits, silently (tests/integration/fork_busy, 5 s a
 * child). */
START_TEST(test_a_fork_while_gmshim_is_busy_leaves_a_child_that_exits_silently)
{
    const char *n_env = getenv("FORK_TRIALS");
    char n[32];
    snprintf(n, sizeof n, "%d", n_env ? atoi(n_env) : 60);
    const char *env[] = {"FAKECUDA_MEM=1G", NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/fork_busy", env, n, &out);
    const char *line = strstr(out, "fork_busy:");
    printf("%s", line ? line : out);
    ck_assert_msg(rc == 0 && line == out, "exit %d, expected only the program's line:\n%.2000s", rc, out);
    free(out);
}
END_TEST

static char *torch_env(const char *const *env, int preload)
{
    const char *argv[] = {build_path("tests/integration/torch_env"), NULL};
    char *out = NULL;
    int rc = run_program(argv, env, preload, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    return out;
}

START_TEST(test_torch_takeover_sets_the_variable_only_when_unset)
{
    const char *own[] = {"GMSHIM_TORCH=own", NULL};
    char *out = torch_env(own, 1);
    ck_assert_msg(strstr(out, "PYTORCH_NO_CUDA_MEMORY_CACHING=1\n") != NULL, "own: %s", out);
    free(out);
    const char *preset[] = {"GMSHIM_TORCH=own", "PYTORCH_NO_CUDA_MEMORY_CACHING=0", NULL};
    out = torch_env(preset, 1);
    ck_assert_msg(strstr(out, "PYTORCH_NO_CUDA_MEMORY_CACHING=0\n") != NULL, "preset: %s", out);
    free(out);
    const char *keep[] = {"GMSHIM_TORCH=keep", NULL};
    out = torch_env(keep, 1);
    ck_assert_msg(strstr(out, "=(unset)") != NULL, "keep: %s", out);
    free(out);
    const char *dflt[] = {NULL};
    out = torch_env(dflt, 1);
    ck_assert_msg(strstr(out, "=(unset)") != NULL, "default: %s", out);
    free(out);
}
END_TEST

Suite *init_suite(void)
{
    Suite *s = suite_create("init");
    TCase *tc = tcase_create("preload");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fork_child_leaves_the_parent_pool_alone);
    tcase_add_test(tc, test_program_without_cuda_gets_no_file_and_no_thread);
    tcase_add_test(tc, test_torch_takeover_sets_the_variable_only_when_unset);
    suite_add_tcase(s, tc);
    TCase *forks = tcase_create("forks");
    tcase_set_timeout(forks, 7200);
    tcase_add_test(forks, test_a_fork_during_init_leaves_a_child_that_exits);
    tcase_add_test(forks, test_a_fork_while_gmshim_is_busy_leaves_a_child_that_exits_silently);
    suite_add_tcase(s, forks);
    return s;
}
