/* GMSHIM_WARN (shim/warn.c), under the preload on the fake runtime: a job leaking 16 MiB a step,
 * with marks and without, is warned once, before its OOM, naming the leaking function and giving
 * a sane estimate; steady jobs (constant steps, a cache that fills then stays, random sizes with
 * and without marks) never are; the same under GMSHIM_POOL=0; nothing is said unless asked; no
 * log, no crash; from Python, the line. */
#include "suites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WARN_LINE "leak suspected on device 0: +16.0 MiB per step at "

static char *warn_run(const char *mode, const char *warn, const char *extra)
{
    const char *env[] = {"FAKECUDA_MEM=1G", warn, extra, NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/warn_job", env, mode, &out);
    ck_assert_msg(rc == 0, "warn_job %s (%s) exited %d:\n%s", mode, warn, rc, out);
    return out;
}

static unsigned count_of(const char *hay, const char *needle)
{
    unsigned n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* One warning, naming leak_step, printed during a step well before the OOM's, its steps left
 * within the steps the job really had left. */
static void check_leak_warned(const char *mode, const char *extra)
{
    char *out = warn_run(mode, "GMSHIM_WARN=1", extra);
    const char *w = strstr(out, WARN_LINE);
    ck_assert_msg(w && count_of(out, "leak suspected") == 1, "%s: not one warning:\n%s", mode, out);
    ck_assert_msg(!strncmp(w + strlen(WARN_LINE), "leak_step (warn_job)", 20), "%s: not leak_step's:\n%s", mode, w);
    const char *oom = strstr(out, "oom at step ");
    ck_assert_msg(oom && oom > w, "%s: no OOM after the warning:\n%s", mode, out);
    unsigned oom_step = (unsigned)atoi(oom + strlen("oom at step "));
    /* the last "step N" line before the warning: the step it came in */
    unsigned warned_step = 0;
    for (const char *p = out; (p = strstr(p, "step ")) && p < w; p += 5)
        if (p == out || p[-1] == '\n')
            warned_step = (unsigned)atoi(p + 5);
    const char *left = strstr(w, "device is full in ~");
    const char *paren = left ? strchr(left, '(') : NULL;
    unsigned est = paren ? (unsigned)atoi(paren + 1) : 0;
    ck_assert_msg(warned_step && warned_step + 20 < oom_step, "%s: warned at step %u, OOM at %u:\n%s", mode,
                  warned_step, oom_step, out);
    unsigned real = oom_step - warned_step;
    /* the estimate counts to the whole device; the OOM comes a step's activations (64 MiB) sooner */
    ck_assert_msg(est >= real && est <= real + 8, "%s: %u steps estimated, %u left in fact:\n%s", mode, est, real,
                  w);
    free(out);
}

START_TEST(test_a_leak_with_marks_is_warned_once_before_its_oom)
{
    check_leak_warned("leak-marks", NULL);
}
END_TEST

START_TEST(test_a_leak_without_marks_is_warned_once_before_its_oom)
{
    check_leak_warned("leak-troughs", NULL);
}
END_TEST

START_TEST(test_steady_jobs_are_never_warned)
{
    static const char *const modes[] = {"steady", "warmup", "noisy-marks", "noisy-troughs"};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        char *out = warn_run(modes[i], "GMSHIM_WARN=1", NULL);
        ck_assert_msg(!strstr(out, "leak suspected") && strstr(out, "done 60 steps"), "%s:\n%s", modes[i], out);
        free(out);
    }
}
END_TEST

/* Steps of 1 ms, ten to one of the shim's readings: each is a step (the rate per step, not per
 * reading), in the pool and forwarding; a noisy job of such steps is never warned. */
START_TEST(test_steps_shorter_than_a_reading_are_each_a_step)
{
    check_leak_warned("leak-brief-troughs", NULL);
    check_leak_warned("leak-brief-troughs", "GMSHIM_POOL=0");
    static const char *const pools[] = {"GMSHIM_POOL=1", "GMSHIM_POOL=0"};
    for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++) {
        char *out = warn_run("noisy-brief-troughs", "GMSHIM_WARN=1", pools[i]);
        ck_assert_msg(!strstr(out, "leak suspected") && strstr(out, "done 60 steps"), "%s:\n%s", pools[i], out);
        free(out);
    }
}
END_TEST

/* A leak whose step holds only a 16 MiB scratch beside it (a list of kept tensors): its live bytes
 * are soon ten times its steps' swing, and each step is still one, in the pool and forwarding. */
START_TEST(test_a_leak_that_outgrows_its_steps_swing_is_warned)
{
    check_leak_warned("leak-lean-troughs", NULL);
    check_leak_warned("leak-lean-troughs", "GMSHIM_POOL=0");
}
END_TEST

/* GMSHIM_POOL=0: the forwarded blocks are counted as the pool's are, low-water mark included. */
START_TEST(test_pass_through_warns_as_the_pool_does)
{
    check_leak_warned("leak-troughs", "GMSHIM_POOL=0");
    static const char *const modes[] = {"steady", "noisy-troughs"};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        char *out = warn_run(modes[i], "GMSHIM_WARN=1", "GMSHIM_POOL=0");
        ck_assert_msg(!strstr(out, "leak suspected") && strstr(out, "done 60 steps"), "%s:\n%s", modes[i], out);
        free(out);
    }
}
END_TEST

/* A line whose transient bytes grow faster than the leak (an activation 32 MiB larger each step,
 * freed within it): the warning names the line whose bytes outlive the steps, in the pool and
 * forwarding, with steps longer and shorter than a reading. */
START_TEST(test_the_warning_names_the_line_that_outlives_steps_not_a_growing_transient)
{
    static const char *const modes[] = {"leak-curriculum-troughs", "leak-curriculum-brief-troughs"};
    static const char *const pools[] = {"GMSHIM_POOL=1", "GMSHIM_POOL=0"};
    for (size_t i = 0; i < 2; i++) {
        for (size_t j = 0; j < 2; j++) {
            const char *env[] = {"FAKECUDA_MEM=4G", "GMSHIM_WARN=1", pools[j], NULL};
            char *out = NULL;
            int rc = run_built("tests/integration/warn_job", env, modes[i], &out);
            ck_assert_msg(rc == 0, "%s %s exited %d:\n%.3000s", modes[i], pools[j], rc, out);
            const char *w = strstr(out, WARN_LINE);
            const char *oom = strstr(out, "oom at step ");
            ck_assert_msg(w && count_of(out, "leak suspected") == 1 && oom && oom > w, "%s %s: not one warning "
                          "before the OOM:\n%.3000s", modes[i], pools[j], out);
            ck_assert_msg(!strncmp(w + strlen(WARN_LINE), "leak_step (warn_job)", 20), "%s %s: not leak_step's:\n%.300s",
                          modes[i], pools[j], w);
            free(out);
        }
    }
}
END_TEST

START_TEST(test_nothing_is_said_unless_asked)
{
    char *out = warn_run("leak-marks", "GMSHIM_WARN=0", NULL);
    ck_assert_msg(!strstr(out, "gmshim") && strstr(out, "oom at step"), "GMSHIM_WARN=0:\n%s", out);
    free(out);
    out = warn_run("leak-marks", "GMSHIM_VERBOSE=0", NULL); /* not set at all */
    ck_assert_msg(!strstr(out, "gmshim") && strstr(out, "oom at step"), "by default:\n%s", out);
    free(out);
}
END_TEST

/* Without a log there are no call sites: the warning still comes, naming no site. */
START_TEST(test_without_a_log_the_warning_names_no_site)
{
    char *out = warn_run("leak-marks", "GMSHIM_WARN=1", "GMSHIM_LOG=off");
    ck_assert_msg(strstr(out, WARN_LINE "an unknown site") && strstr(out, "oom at step"), "%s", out);
    free(out);
}
END_TEST

/* From Python, the site is the line: train_step at the marked line of pywarn.py. */
START_TEST(test_a_python_leak_names_its_function_and_line)
{
    const char *python = frames_python();
    if (!python)
        return; /* no CPython whose frames gmshim reads: nothing to check here */
    static char src[8192];
    FILE *f = fopen("tests/integration/pywarn.py", "r");
    ck_assert_msg(f != NULL, "tests/integration/pywarn.py is missing (run from the repository root)");
    src[fread(src, 1, sizeof src - 1, f)] = 0;
    fclose(f);
    const char *at = strstr(src, "# LEAK_LINE");
    ck_assert_msg(at != NULL, "pywarn.py has no LEAK_LINE");
    unsigned line = 1;
    for (const char *p = src; p < at; p++)
        line += *p == '\n';
    char fake[4096], want[128];
    snprintf(fake, sizeof fake, "FAKE_CUDART=%s", build_path("fake/libcudart.so.13"));
    const char *env[] = {"FAKECUDA_MEM=1G", "GMSHIM_WARN=1", fake, "ASAN_OPTIONS=detect_leaks=0", NULL};
    const char *argv[] = {python, "tests/integration/pywarn.py", NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0, "%s exited %d:\n%s", python, rc, out);
    snprintf(want, sizeof want, WARN_LINE "train_step (pywarn.py:%u); at this rate", line);
    const char *w = strstr(out, want), *oom = strstr(out, "oom at step");
    ck_assert_msg(w && oom && w < oom && count_of(out, "leak suspected") == 1, "not one '%s' before the OOM:\n%s",
                  want, out);
    free(out);
}
END_TEST

Suite *warn_suite(void)
{
    Suite *s = suite_create("warn");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_a_leak_with_marks_is_warned_once_before_its_oom);
    tcase_add_test(tc, test_a_leak_without_marks_is_warned_once_before_its_oom);
    tcase_add_test(tc, test_steps_shorter_than_a_reading_are_each_a_step);
    tcase_add_test(tc, test_a_leak_that_outgrows_its_steps_swing_is_warned);
    tcase_add_test(tc, test_steady_jobs_are_never_warned);
    tcase_add_test(tc, test_pass_through_warns_as_the_pool_does);
    tcase_add_test(tc, test_the_warning_names_the_line_that_outlives_steps_not_a_growing_transient);
    tcase_add_test(tc, test_nothing_is_said_unless_asked);
    tcase_add_test(tc, test_without_a_log_the_warning_names_no_site);
    tcase_add_test(tc, test_a_python_leak_names_its_function_and_line);
    suite_add_tcase(s, tc);
    return s;
}
