/* `gmshim whatif` (analyzer/whatif*.c): its answers in JSON and exit codes by whether the run
 * fits, the settings asked for replayed, the setting in force never suggested again, and the
 * smallest device found to a mebibyte, on workloads that end in a real OOM (tests/integration). */
#include "advice.h"
#include "causes.h"
#include "commands.h"
#include "suites.h"
#include "test_analyzer_cli.h"

#include <errno.h>
#include <fcntl.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB ((uint64_t)1 << 20)

START_TEST(test_whatif_answers_in_json_and_exits_by_whether_it_fits)
{
    classic_pool_test();
    free(gm_oom_report("oom_split", NULL, 1));
    char *out = NULL;
    int rc = gm(&out, "--json", "whatif", gm_last_log, NULL);
    ck_assert_msg(rc == 0 && strstr(out, "\"min_device_bytes\":") && strstr(out, "\"recommendation\":{\"env\":{\"GMSHIM_") &&
                  strstr(out, "\"why\":") && strstr(out, "\"runs\":["), "oom_split: rc %d:\n%s", rc, out);
    free(out);
    free(gm_oom_report("oom_capacity", NULL, 1));
    rc = gm(&out, "--json", "whatif", gm_last_log, NULL);
    ck_assert_msg(rc == 3 && strstr(out, "\"env\":{}"), "oom_capacity: rc %d (want 3: nothing fits):\n%s", rc, out);
    free(out);
    rc = gm(&out, "whatif", "tests/fixtures/h200_cupti_static_inject.gmlog", NULL, NULL);
    ck_assert_msg(rc == 0 && strstr(out, "fits as it ran"), "a log without OOM: rc %d:\n%s", rc, out);
    free(out);
    rc = gm(&out, "whatif", "--max-split", "10M", gm_last_log);
    ck_assert_msg(rc == 1 && strstr(out, "more than 20 MiB"), "--max-split 10M: rc %d:\n%s", rc, out);
    free(out);
    rc = gm(&out, "whatif", "/nonexistent.gmlog", NULL, NULL);
    ck_assert_msg(rc == 1, "a missing log: rc %d:\n%s", rc, out);
    free(out);
    rc = gm(&out, "whatif", "--max-split", "256M", NULL);
    ck_assert_msg(rc == 1, "no log: rc %d:\n%s", rc, out);
    free(out);
}
END_TEST

/* The recommendation, applied to the program that recorded the OOM, gets past it: oom_split's
 * fragmentation, which a split limit, growable ranges and the planned step all cure (the least
 * reserved of them named), the setting run again under the fake runtime. */
START_TEST(test_whatif_recommends_a_setting_that_gets_the_program_past_its_oom)
{
    classic_pool_test();
    free(gm_oom_report("oom_split", NULL, 1));
    char *out = NULL;
    int rc = gm(&out, "--json", "whatif", gm_last_log, NULL);
    const char *env = strstr(out, "\"recommendation\":{\"env\":{\"");
    ck_assert_msg(rc == 0 && env, "oom_split: rc %d:\n%s", rc, out);
    char name[64] = "", value[64] = "", setting[160], prog[4096];
    ck_assert_msg(sscanf(env + strlen("\"recommendation\":{\"env\":{\""), "%63[^\"]\":\"%63[^\"]", name, value) == 2,
                  "no setting recommended:\n%s", out);
    free(out);
    snprintf(setting, sizeof setting, "%s=%s", name, value);
    snprintf(prog, sizeof prog, "%s", build_path("tests/integration/oom_split"));
    const char *argv[] = {prog, NULL};
    const char *envs[] = {"GMSHIM_LOG=off", "FAKECUDA_MEM=1G", setting, NULL};
    rc = run_program(argv, envs, 1, &out);
    ck_assert_msg(rc == 0 && strstr(out, "no OOM"), "oom_split under the recommended %s: rc %d:\n%s", setting, rc, out);
    free(out);
}
END_TEST

/* Whether the run labelled `label` in whatif's JSON failed no allocation (its own object only). */
static int run_passed(const char *json, const char *label)
{
    char key[128];
    snprintf(key, sizeof key, "\"label\":\"%s\"", label);
    const char *at = strstr(json, key);
    ck_assert_msg(at != NULL, "no run '%s' in:\n%s", label, json);
    const char *next = strstr(at + 1, "\"label\":");
    char *run = strndup(at, next ? (size_t)(next - at) : strlen(at));
    int ok = strstr(run, "\"failures\":0,") != NULL;
    free(run);
    return ok;
}

/* GMSHIM_PLAN=1 has not run on a GPU: its row is shown, passed where it gets past the OOM (the
 * frag scenario: its cache's gaps) and failed where it does not (the weights scenario:
 * capacity), but the rule recommends what was measured (there growable ranges), never the plan. */
START_TEST(test_whatif_shows_the_plans_row_but_recommends_only_measured_settings)
{
    char *out = NULL;
    int rc = gm(&out, "--json", "whatif", "tests/fixtures/h200_scen_frag_own.gmlog", NULL);
    ck_assert_msg(rc == 0 && strstr(out, "\"recommendation\":{\"env\":{\"GMSHIM_SEGMENTS\":\"vmm\"}") &&
                  run_passed(out, "GMSHIM_PLAN=1"), "frag: rc %d:\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "--json", "whatif", "tests/fixtures/h200_scen_weights_own.gmlog", NULL);
    ck_assert_msg(!run_passed(out, "GMSHIM_PLAN=1") && !strstr(out, "\"recommendation\":{\"env\":{\"GMSHIM_PLAN\""),
                  "weights: rc %d:\n%.2000s", rc, out);
    free(out);
}
END_TEST

/* Holes under a cap (oom_capped_fragmentation): the planned step's replay gets past the OOM
 * with the least reserved of every candidate and with headroom, yet the rule recommends
 * another (growable ranges), and no run that turns the plan on. */
START_TEST(test_whatif_never_recommends_the_plan_even_where_its_replay_is_best)
{
    classic_pool_test();
    free(gm_oom_report("oom_capped_fragmentation", "GMSHIM_DEVICE_LIMIT=512M", 1));
    rd_log_t lf;
    rp_log_t log;
    ck_assert(rd_open_path(&lf, gm_last_log) == 0 && rp_load(&log, &lf, 0) == 0);
    wi_opts_t o;
    wi_opts_default(&o);
    wi_plan_t p;
    ck_assert(wi_plan_make(&log, NULL, &o, &p) == 0);
    int plan = -1, best = -1;
    for (size_t i = 0; i < p.nruns; i++) {
        const wi_run_t *r = &p.runs[i];
        if (!r->candidate || r->res.failures)
            continue;
        if (!strcmp(r->env_name, "GMSHIM_PLAN"))
            plan = (int)i;
        if (best < 0 || r->res.peak_reserved < p.runs[best].res.peak_reserved)
            best = (int)i;
    }
    ck_assert_msg(plan >= 0 && best == plan, "the plan's replay is not the best: plan run %d, best %d (%s)", plan, best,
                  best >= 0 ? p.runs[best].label : "none");
    rp_cfg_t cfg = p.runs[plan].cfg;
    cfg.limit = p.runs[0].res.first.cap - p.headroom;
    rp_result_t tight = replay_once(&log, &cfg);
    ck_assert_msg(!tight.failures, "the plan fails with %llu bytes less to reserve: not the case this test needs",
                  (unsigned long long)p.headroom);
    ck_assert_msg(p.rec >= 0 && p.rec != plan && advice_plan_off(&log, &p.runs[p.rec]) &&
                      !strstr(p.runs[p.rec].label, "GMSHIM_PLAN"),
                  "recommended run %d (%s), the plan's is %d", p.rec, p.rec >= 0 ? p.runs[p.rec].label : "none", plan);
    ck_assert_msg(!advice_plan_off(&log, &p.runs[plan]), "the plan's run counts as a remedy");
    wi_plan_free(&p);
    rp_log_free(&log);
    rd_close(&lf);
}
END_TEST

START_TEST(test_whatif_replays_the_settings_asked_for)
{
    classic_pool_test();
    free(gm_oom_report("oom_split", NULL, 1));
    char *out = NULL;
    int rc = gm(&out, "--color=never", "whatif", "--max-split=64M", gm_last_log);
    ck_assert_msg(rc == 0 && strstr(out, "the settings asked for") && strstr(out, "smallest device:") &&
                  strstr(out, "recommendation"), "rc %d:\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_whatif_never_suggests_the_setting_in_force)
{
    classic_pool_test();
    /* 512 MiB does not keep the 400 MiB block whole: oom_split still fails under it. */
    free(gm_oom_report("oom_split", "GMSHIM_MAX_SPLIT=512M", 1));
    char *out = NULL;
    gm(&out, "--json", "whatif", gm_last_log, NULL);
    ck_assert_msg(strstr(out, "\"GMSHIM_MAX_SPLIT\":\"256M\"") && !strstr(out, "\"GMSHIM_MAX_SPLIT\":\"512M\""),
                  "the split limit in force was tried again:\n%s", out);
    free(out);
}
END_TEST

/* PyTorch's segments taken at their exact size (a libc10_cuda.so stand-in under the cap): a split
 * limit never changes them, so the split limits tried stop at twice the pool's own largest
 * request (400 MiB), not the failed 700 MiB exact segment's; the cap that fits with its headroom
 * (1452M) is tried but not recommended: the second 700 MiB segment asked for more than the job had
 * ever held, so what it needs past the recording is unknown (advice.c). */
START_TEST(test_whatif_sizes_split_limits_by_the_pools_requests_not_exact_segments)
{
    classic_pool_test();
    char log[600], logenv[700], prog[4096];
    snprintf(log, sizeof log, "%s/caching_release_limit.gmlog", temp_dir());
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
    snprintf(prog, sizeof prog, "%s", build_path("tests/integration/caching_release"));
    const char *argv[] = {prog, "limit", NULL};
    const char *env[] = {logenv, "FAKECUDA_MEM=2G", "GMSHIM_DEVICE_LIMIT=1G", NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0, "caching_release limit exited %d:\n%s", rc, out);
    free(out);
    rc = gm(&out, "--json", "whatif", log, NULL);
    ck_assert_msg(rc == 3 && strstr(out, "\"GMSHIM_MAX_SPLIT\":\"512M\"") && !strstr(out, "\"GMSHIM_MAX_SPLIT\":\"1G\"") &&
                      strstr(out, "\"GMSHIM_DEVICE_LIMIT\":\"1452M\"") &&
                      strstr(out, "\"recommendation\":{\"env\":{}") && strstr(out, "\"climbing\":true"),
                  "rc %d: the split limits tried, or the recommendation, are not those expected:\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_whatif_finds_the_smallest_device_to_a_mebibyte)
{
    free(gm_oom_report("oom_capacity", NULL, 1));
    rd_log_t lf;
    rp_log_t log;
    ck_assert(rd_open_path(&lf, gm_last_log) == 0 && rp_load(&log, &lf, 0) == 0);
    wi_opts_t o;
    wi_opts_default(&o);
    wi_plan_t p;
    ck_assert(wi_plan_make(&log, NULL, &o, &p) == 0);
    ck_assert_msg(p.min_found && p.min_device_bytes % MiB == 0 && p.bisect_beside_runs, "min %llu, beside the runs %d",
                  (unsigned long long)p.min_device_bytes, p.bisect_beside_runs);
    rp_cfg_t cfg;
    rp_cfg_as_recorded(&log, &cfg);
    cfg.device_bytes = p.min_device_bytes;
    rp_result_t fits = replay_once(&log, &cfg);
    cfg.device_bytes = p.min_device_bytes - MiB;
    rp_result_t fails = replay_once(&log, &cfg);
    ck_assert_msg(!fits.failures && fails.failures, "at %llu: %llu failures; 1 MiB less: %llu",
                  (unsigned long long)p.min_device_bytes, (unsigned long long)fits.failures,
                  (unsigned long long)fails.failures);
    wi_plan_free(&p);
    rp_log_free(&log);
    rd_close(&lf);
}
END_TEST

/* The bisection's first round replays the size it starts from beside other sizes, one a thread:
 * below it where it is likely to fit, twice, four times... it where the recording failed at it, so
 * that the start costs no round of its own; one thread finds the same size one replay a round. */
static void bisect_rounds_check(const char *path)
{
    rd_log_t lf;
    rp_log_t log;
    ck_assert_msg(rd_open_path(&lf, path) == 0 && rp_load(&log, &lf, 0) == 0, "%s", path);
    wi_opts_t o;
    wi_opts_default(&o);
    o.threads = 4;
    wi_plan_t p;
    ck_assert(wi_plan_make(&log, NULL, &o, &p) == 0);
    ck_assert_msg(p.min_found && p.bisect_rounds >= 2 && p.bisect_first == 4 &&
                      p.bisect_replays > 4 * (p.bisect_rounds - 1) && p.bisect_beside_runs,
                  "%s: %u replays in %u rounds, the first of %u; beside the runs %d", path, p.bisect_replays,
                  p.bisect_rounds, p.bisect_first, p.bisect_beside_runs);
    uint64_t min = p.min_device_bytes;
    wi_plan_free(&p);
    o.threads = 1;
    ck_assert(wi_plan_make(&log, NULL, &o, &p) == 0);
    ck_assert_msg(p.min_found && p.min_device_bytes == min && p.bisect_rounds == p.bisect_replays,
                  "%s, one thread: %llu bytes (4 threads: %llu), %u replays in %u rounds", path,
                  (unsigned long long)p.min_device_bytes, (unsigned long long)min, p.bisect_replays,
                  p.bisect_rounds);
    wi_plan_free(&p);
    rp_log_free(&log);
    rd_close(&lf);
}

START_TEST(test_whatif_bisects_with_its_start_in_the_first_round)
{
    free(gm_oom_report("oom_capacity", NULL, 1)); /* failed at its start */
    bisect_rounds_check(gm_last_log);
    bisect_rounds_check("tests/fixtures/h100_vit_keep.gmlog"); /* fits at its start */
}
END_TEST

/* On a terminal whatif says on stderr how far it is and how fast it replays; into a pipe it says
 * neither (the report alone). */
START_TEST(test_whatif_refuses_a_device_without_events_naming_those_present)
{
    char *out = NULL;
    int rc = gm(&out, "whatif", "--device", "5", FIXTURE);
    ck_assert_msg(rc == 1 && strstr(out, "device 5") && strstr(out, "devices with events: 0") &&
                  !strstr(out, "recommendation"), "--device 5 on a one-device log: rc %d:\n%s", rc, out);
    free(out);
    rc = gm(&out, "whatif", "--device", "0", FIXTURE);
    ck_assert_msg(rc != 1 && strstr(out, "device 0: "), "--device 0, the log's own: rc %d:\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_whatif_shows_its_progress_on_a_terminal_only)
{
    classic_pool_test();
    free(gm_oom_report("oom_split", NULL, 1));
    char bin[4096];
    snprintf(bin, sizeof bin, "%s", build_path("gmshim"));
    int fd;
    pid_t pid = forkpty(&fd, NULL, NULL, NULL);
    ck_assert_msg(pid >= 0, "forkpty: %s", strerror(errno));
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY); /* the report away: stderr alone on the terminal */
        if (null < 0 || dup2(null, 1) < 0)
            _exit(126);
        execl(bin, "gmshim", "whatif", gm_last_log, (char *)NULL);
        _exit(127);
    }
    char tty[8192];
    size_t n = 0;
    for (;;) {
        ssize_t k = read(fd, tty + n, sizeof tty - 1 - n);
        if (k <= 0)
            break; /* EIO once the child has gone */
        n += (size_t)k;
    }
    tty[n] = 0;
    close(fd);
    int status;
    ck_assert(waitpid(pid, &status, 0) == pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "whatif on a terminal: status %d:\n%s", status, tty);
    ck_assert_msg(strstr(tty, "\rwhatif: ") && strstr(tty, " replays done") &&
                      strstr(tty, "M events/s per configuration"),
                  "no progress or speed on the terminal:\n%s", tty);
    char *out = NULL;
    int rc = gm(&out, "whatif", gm_last_log, NULL);
    ck_assert_msg(rc == 0 && !strstr(out, "replays done") && !strstr(out, "events/s"),
                  "progress into a pipe: rc %d:\n%s", rc, out);
    free(out);
}
END_TEST

/* The peak resident memory, in bytes, of build/gmshim run with these arguments (its output
 * discarded); the test fails when it does not exit 0 (or whatif's 3: nothing tried fits). */
static uint64_t gmshim_peak_rss(const char *const *args)
{
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1), dup2(null, 2);
        const char *argv[16] = {build_path("gmshim")};
        for (int i = 0; args[i] && i < 14; i++)
            argv[i + 1] = args[i];
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status;
    struct rusage ru;
    ck_assert_msg(pid > 0 && wait4(pid, &status, 0, &ru) == pid, "cannot run gmshim");
    ck_assert_msg(WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 3),
                  "gmshim %s exited with status 0x%x", args[0], status);
    return (uint64_t)ru.ru_maxrss * 1024;
}

/* whatif holds a device's events for its many replays: packed, a few bytes each, not the 40 of
 * their decoded form (3.9 GB at 100 M events where the other commands stay under 75 MB). Beyond
 * what `summary` of the same log needs, it may take at most 16 bytes an event. */
START_TEST(test_whatif_holds_a_few_bytes_an_event)
{
    const char *san = getenv("GMSHIM_TEST_PRELOAD");
    if (san && *san)
        return; /* under a sanitizer's allocator (shadow, quarantine) peak memory measures the sanitizer */
    char log[600], gen[600];
    snprintf(log, sizeof log, "%s/big.gmlog", temp_dir());
    snprintf(gen, sizeof gen, "%s", build_path("fuzz/genlog"));
    unlink(log);
    const uint64_t events = 1000000;
    char nev[32];
    snprintf(nev, sizeof nev, "%llu", (unsigned long long)events);
    const char *argv[] = {gen, log, nev, "4", "steps", NULL};
    char *out = NULL;
    ck_assert_msg(run_program(argv, NULL, 0, &out) == 0, "genlog:\n%s", out);
    free(out);
    uint64_t summary = gmshim_peak_rss((const char *const[]){"summary", log, NULL});
    uint64_t whatif = gmshim_peak_rss((const char *const[]){"whatif", "--threads", "1", log, NULL});
    ck_assert_msg(whatif < summary + 16 * events, "whatif on %llu events: %llu MiB at its peak, summary %llu MiB "
                  "(%.1f bytes an event beyond it)", (unsigned long long)events, (unsigned long long)(whatif >> 20),
                  (unsigned long long)(summary >> 20), (double)(whatif > summary ? whatif - summary : 0) / (double)events);
    unlink(log);
}
END_TEST

Suite *analyzer_whatif_suite(void)
{
    Suite *s = suite_create("analyzer_whatif");
    TCase *tc = tcase_create("workloads");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_whatif_answers_in_json_and_exits_by_whether_it_fits);
    tcase_add_test(tc, test_whatif_replays_the_settings_asked_for);
    tcase_add_test(tc, test_whatif_recommends_a_setting_that_gets_the_program_past_its_oom);
    tcase_add_test(tc, test_whatif_shows_the_plans_row_but_recommends_only_measured_settings);
    tcase_add_test(tc, test_whatif_never_recommends_the_plan_even_where_its_replay_is_best);
    tcase_add_test(tc, test_whatif_never_suggests_the_setting_in_force);
    tcase_add_test(tc, test_whatif_sizes_split_limits_by_the_pools_requests_not_exact_segments);
    tcase_add_test(tc, test_whatif_finds_the_smallest_device_to_a_mebibyte);
    tcase_add_test(tc, test_whatif_bisects_with_its_start_in_the_first_round);
    tcase_add_test(tc, test_whatif_shows_its_progress_on_a_terminal_only);
    tcase_add_test(tc, test_whatif_refuses_a_device_without_events_naming_those_present);
    tcase_add_test(tc, test_whatif_holds_a_few_bytes_an_event);
    suite_add_tcase(s, tc);
    return s;
}
