/* gmshim's own failures never end the host: the malloc failer (tests/failtest) preloaded, every
 * Nth host allocation gmshim makes fails, while threads come and go (tests/integration/
 * thread_churn), classic segments and GMSHIM_SEGMENTS=vmm; the host prints and exits as it does
 * without gmshim, and gmshim says each thing once. FAIL_TRIALS sets the count (CI: 24;
 * `make fail-trials`: 1 000). */
#include "suites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The churn program's own line (the one starting "churn:"), copied into line. */
static void host_line(const char *out, char *line, size_t cap)
{
    const char *p = strstr(out, "churn:");
    snprintf(line, cap, "%.*s", p ? (int)strcspn(p, "\n") : 0, p ? p : "");
}

/* A line gmshim printed twice (its pid left out), or NULL. */
static const char *repeated_warning(const char *out)
{
    static char twice[512];
    const char *lines[256];
    int n = 0;
    for (const char *p = out; *p && n < 256; p += strcspn(p, "\n") + (p[strcspn(p, "\n")] != 0))
        if (!strncmp(p, "gmshim[", 7))
            lines[n++] = strchr(p, ']');
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            size_t a = strcspn(lines[i], "\n"), b = strcspn(lines[j], "\n");
            if (a == b && !strncmp(lines[i], lines[j], a)) {
                snprintf(twice, sizeof twice, "%.*s", (int)a, lines[i]);
                return twice;
            }
        }
    return NULL;
}

/* Runs the churn under the failer: exit status and output. */
static int run_failing(unsigned every, unsigned phase, int vmm, const char *dir, char **out)
{
    static char preload[8192], ev[64], ph[64], log[512];
    const char *san = getenv("GMSHIM_TEST_PRELOAD");
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s%s%s", san && *san ? san : "", san && *san ? " " : "",
             build_path("failtest/libgmshim.so"));
    snprintf(ev, sizeof ev, "GMFAIL_EVERY=%u", every);
    snprintf(ph, sizeof ph, "GMFAIL_PHASE=%u", phase);
    snprintf(log, sizeof log, "GMSHIM_LOG=%s/churn-%%p.gmlog", dir);
    const char *env[] = {preload, ev, ph, log, "FAKECUDA_MEM=4G",
                         vmm ? "GMSHIM_SEGMENTS=vmm" : "GMSHIM_SEGMENTS=classic", NULL};
    const char *argv[] = {build_path("tests/integration/thread_churn"), "6", NULL};
    return run_program(argv, env, 0, out);
}

static void expected_line(char *line, size_t cap)
{
    const char *argv[] = {build_path("tests/integration/thread_churn"), "6", NULL};
    const char *env[] = {"FAKECUDA_MEM=4G", NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 0, &out);
    ck_assert_msg(rc == 0, "without gmshim: exit %d:\n%s", rc, out);
    host_line(out, line, cap);
    free(out);
}

START_TEST(test_the_failer_fails_gmshims_allocations_and_not_the_hosts)
{
    char want[256], got[256];
    expected_line(want, sizeof want);
    char *out = NULL;
    /* Every allocation of gmshim's fails; the host's own (pthread_create, stdio) go on. */
    int rc = run_failing(1, 0, 0, temp_dir(), &out);
    host_line(out, got, sizeof got);
    ck_assert_msg(rc == 0 && !strcmp(got, want), "exit %d, '%s' (without gmshim: '%s'):\n%s", rc, got, want,
                  out);
    ck_assert_msg(strstr(out, "host memory") != NULL, "no warning of host memory:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_gmshim_malloc_failures_leave_the_host_as_without_gmshim)
{
    static const unsigned every[] = {2, 3, 4, 5, 7, 11, 13, 17, 29, 53, 101, 211};
    const char *n_env = getenv("FAIL_TRIALS");
    int trials = n_env ? atoi(n_env) : 24, crashed = 0, differed = 0, repeated = 0, misnamed = 0;
    unsigned seed = (unsigned)time(NULL);
    char want[256];
    expected_line(want, sizeof want);
    const char *dir = temp_dir();
    char first[4096] = "";
    for (int i = 0; i < trials; i++) {
        /* The short form walks the table; a long one draws as well. */
        unsigned r = rand_r(&seed);
        unsigned n = i < 2 * (int)(sizeof every / sizeof every[0]) ? every[i / 2] : 2 + r % 400;
        unsigned phase = i < 2 * (int)(sizeof every / sizeof every[0]) ? (unsigned)i : r >> 9;
        int vmm = i % 2;
        char *out = NULL, got[256];
        int rc = run_failing(n, phase % n, vmm, dir, &out);
        host_line(out, got, sizeof got);
        const char *twice = repeated_warning(out);
        /* The host's memory that ran out is not the runtime's error 2 (cudaErrorMemoryAllocation). */
        int blamed = strstr(out, "CUDA error 2") != NULL;
        int bad = rc != 0 || strcmp(got, want) != 0 || twice || blamed;
        crashed += rc > 128;
        differed += rc <= 128 && (rc != 0 || strcmp(got, want) != 0);
        repeated += twice != NULL;
        misnamed += blamed;
        if (bad && !first[0])
            snprintf(first, sizeof first, "trial %d (every %u, phase %u, %s): exit %d%s%s:\n%.3000s", i, n,
                     phase % n, vmm ? "vmm" : "classic", rc, twice ? ", said twice: " : "", twice ? twice : "",
                     out);
        free(out);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -f %s/churn-*.gmlog", dir);
        if (system(cmd) != 0)
            ck_abort_msg("could not empty %s", dir);
    }
    printf("failtest: %d trials, %d crashed, %d differed from the run without gmshim, %d repeated a "
           "warning, %d blamed the runtime\n", trials, crashed, differed, repeated, misnamed);
    ck_assert_msg(!crashed && !differed && !repeated && !misnamed,
                  "%d crashed, %d differed, %d repeated, %d blamed the runtime of %d; first: %s", crashed, differed,
                  repeated, misnamed, trials, first);
}
END_TEST

Suite *failtest_suite(void)
{
    Suite *s = suite_create("failtest");
    TCase *tc = tcase_create("trials");
    tcase_set_timeout(tc, 7200);
    tcase_add_test(tc, test_the_failer_fails_gmshims_allocations_and_not_the_hosts);
    tcase_add_test(tc, test_gmshim_malloc_failures_leave_the_host_as_without_gmshim);
    suite_add_tcase(s, tc);
    return s;
}
