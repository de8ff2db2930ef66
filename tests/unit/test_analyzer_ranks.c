/* Unit tests of the cross-rank verdict (analyzer/ranks.c): jobs of several processes of
 * tests/integration/rank_job on the fake runtime, run at once, each with its own log (one OOMs,
 * the others abort later, one keeps more), then `gmshim report` on their directory. */
#include "ranks.h"
#include "suites.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct proc {
    const char *mode;          /* "oom", or the abort delay in ms */
    const char *leak_mib;      /* abort: MiB kept beyond the others, NULL none */
    const char *env[4];        /* the rank variables */
} proc_t;

/* Runs the processes at once, each under the preload with GMSHIM_LOG=dir/gm-rank%r-%p.gmlog. */
static void run_job(const char *dir, const proc_t *p, int n)
{
    static char logenv[600];
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s/gm-rank%%r-%%p.gmlog", dir);
    pid_t pids[16];
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        ck_assert_msg(pids[i] >= 0, "fork: %s", strerror(errno));
        if (pids[i] == 0) {
            const char *prog = build_path("tests/integration/rank_job");
            int oom = !strcmp(p[i].mode, "oom");
            const char *argv[] = {prog, oom ? "oom" : "abort", oom ? NULL : p[i].mode, p[i].leak_mib, NULL};
            const char *env[8] = {logenv, "FAKECUDA_MEM=1G"};
            for (int k = 0; k < 4 && p[i].env[k]; k++)
                env[2 + k] = p[i].env[k];
            char *out = NULL;
            int rc = run_program(argv, env, 1, &out);
            /* the OOM rank exits 1, the others die of SIGABRT */
            int want = oom ? 1 : 128 + 6;
            if (rc != want)
                fprintf(stderr, "rank_job %s exited %d, not %d:\n%s\n", p[i].mode, rc, want, out);
            _exit(rc == want ? 0 : 1);
        }
    }
    for (int i = 0; i < n; i++) {
        int st;
        while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR)
            ;
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "process %d of the job did not end as planned", i);
    }
}

static char *report(const char *dir, int json)
{
    const char *argv[] = {build_path("gmshim"), json ? "--json" : "--color=never", "report", dir, NULL};
    char *out = NULL;
    int rc = run_program(argv, NULL, 0, &out);
    ck_assert_msg(rc == 0, "gmshim report %s exited %d:\n%s", dir, rc, out);
    return out;
}

/* torchrun's variables; rank 1 OOMs first, 0 and 2 abort later, 2 keeps 256 MiB more, 3 of 4 is
 * never started. */
static const char *torchrun_job(void)
{
    const char *dir = temp_dir();
    const proc_t p[] = {
        {"oom", NULL, {"RANK=1", "LOCAL_RANK=1", "WORLD_SIZE=4", NULL}},
        {"700", NULL, {"RANK=0", "LOCAL_RANK=0", "WORLD_SIZE=4", NULL}},
        {"800", "256", {"RANK=2", "LOCAL_RANK=2", "WORLD_SIZE=4", NULL}},
    };
    run_job(dir, p, 3);
    return dir;
}

/* The text before the first log's own section. */
static char *verdict_of(char *out)
{
    char *end = strstr(out, "\n== rank");
    ck_assert_msg(end != NULL, "no per-log section after the verdict:\n%s", out);
    *end = 0;
    return out;
}

START_TEST(test_torchrun_job_names_the_oom_rank_first_with_its_cause_and_site)
{
    char *out = report(torchrun_job(), 0);
    const char *v = verdict_of(out);
    ck_assert_msg(!strncmp(v, "== Job: 3 logs, 1 host ==", 25), "the report does not open with the verdict:\n%s", v);
    const char *first = strstr(v, "first failure  rank 1 on host ");
    ck_assert_msg(first && strstr(first, "device 0") && strstr(first, "out of memory, cause capacity") &&
                  strstr(first, "forward_pass") && strstr(first, "it ended: exit"),
                  "the first failure is not rank 1's OOM (capacity, from forward_pass):\n%s", v);
    ck_assert_msg(strstr(v, "the others     ranks 0, 2: SIGABRT ") && strstr(v, " s later, the pattern of a collective timeout"),
                  "ranks 0 and 2 are not said to have aborted later:\n%s", v);
    free(out);
}
END_TEST

START_TEST(test_torchrun_job_imbalance_names_the_rank_that_keeps_more)
{
    char *out = report(torchrun_job(), 0);
    const char *v = verdict_of(out);
    const char *table = strstr(v, "Imbalance\n");
    ck_assert_msg(table && strstr(table, "<- outlier"), "no imbalance table with an outlier:\n%s", v);
    const char *row = strstr(table, "\n  2 ");
    ck_assert_msg(row && strstr(row, "272 MiB") && strstr(row, "<- outlier") < strchr(row + 1, '\n'),
                  "rank 2's row (272 MiB peak live) is not the outlier:\n%s", table);
    const char *o = strstr(table, "outlier        rank 2: peak live 272 MiB, 256 MiB over the median (16.0 MiB)");
    ck_assert_msg(o && strstr(o, "256 MiB") && strstr(o, "keep_history"),
                  "the outlier's excess and top site (keep_history) are not named:\n%s", table);
    free(out);
}
END_TEST

START_TEST(test_torchrun_job_verdict_in_json)
{
    char *out = report(torchrun_job(), 1);
    const char *r = strstr(out, "\"ranks\":{");
    ck_assert_msg(r && r < strstr(out, "\"logs\":["), "no \"ranks\" object before \"logs\":\n%s", out);
    const char *ff = strstr(r, "\"first_failure\":{\"rank\":1,");
    ck_assert_msg(ff && strstr(ff, "\"kind\":\"oom\"") && strstr(ff, "\"cause\":\"capacity\"") &&
                  strstr(ff, "\"site\":\"forward_pass") && strstr(ff, "\"device\":0") && strstr(ff, "\"ended\":\"exit\""),
                  "first_failure is not rank 1's OOM:\n%s", r);
    ck_assert_msg(strstr(r, "\"rank\":0,\"local_rank\":0,") && strstr(r, "\"signal_name\":\"SIGABRT\"") &&
                  strstr(r, "\"pattern\":\"collective_timeout_after_peer_failure\""),
                  "the others' SIGABRT and the pattern are missing:\n%s", r);
    const char *ol = strstr(r, "\"outlier\":{\"rank\":2,");
    ck_assert_msg(ol && strstr(ol, "\"excess\":268435456") && strstr(ol, "\"site\":\"keep_history"),
                  "the outlier is not rank 2 with 256 MiB more at keep_history:\n%s", r);
    ck_assert_msg(strstr(r, "\"missing\":[3]") && strstr(r, "\"world_size\":4"), "rank 3 is not missing:\n%s", r);
    free(out);
}
END_TEST

START_TEST(test_a_rank_of_world_size_without_a_log_is_named)
{
    char *out = report(torchrun_job(), 0);
    const char *v = verdict_of(out);
    ck_assert_msg(strstr(v, "ranks          3 of WORLD_SIZE 4 have a log") &&
                  strstr(v, "missing        rank 3: no log (WORLD_SIZE 4)"), "rank 3 is not named missing:\n%s", v);
    free(out);
}
END_TEST

START_TEST(test_slurm_job_orders_by_procid_and_names_the_first_failure)
{
    const char *dir = temp_dir();
    const proc_t p[] = {
        {"600", NULL, {"SLURM_PROCID=0", NULL}},
        {"700", "128", {"SLURM_PROCID=1", NULL}},
        {"oom", NULL, {"SLURM_PROCID=2", NULL}},
    };
    run_job(dir, p, 3);
    char *out = report(dir, 0);
    const char *v = verdict_of(out);
    ck_assert_msg(strstr(v, "first failure  rank 2 on host ") && strstr(v, "cause capacity") && strstr(v, "forward_pass") &&
                  strstr(v, "the others     ranks 0, 1: SIGABRT "),
                  "under SLURM_PROCID, rank 2's OOM is not first with 0, 1 aborting later:\n%s", v);
    ck_assert_msg(strstr(v, "outlier        rank 1: peak live 144 MiB") && !strstr(v, "missing"),
                  "rank 1 (128 MiB more) is not the outlier, or a rank is said missing:\n%s", v);
    free(out);
    out = report(dir, 1);
    ck_assert_msg(strstr(out, "\"first_failure\":{\"rank\":2,") && strstr(out, "\"outlier\":{\"rank\":1,") &&
                  strstr(out, "\"world_size\":null"), "SLURM job, JSON:\n%s", out);
    free(out);
}
END_TEST

/* Two hosts: failures 50 ms apart are closer than the skew assumed between their clocks. */
/* Many logs are opened and replayed by several threads, each section printed in the order the
 * logs were given: the output is the one a single thread gives, byte for byte, unreadable logs
 * and repeats included, with more logs than the window holds. */
START_TEST(test_many_logs_read_in_parallel_report_as_one_thread_does)
{
    const char *dir = torchrun_job();
    char bad[600];
    snprintf(bad, sizeof bad, "%s/not-a-log.gmlog.txt", dir);
    FILE *f = fopen(bad, "w");
    ck_assert(f != NULL);
    fputs("this is not a gmshim log\n", f);
    fclose(f);
    char pat[600], *logs[3];
    int nlogs = 0;
    snprintf(pat, sizeof pat, "ls %s/gm-rank*.gmlog", dir);
    FILE *ls = popen(pat, "r");
    ck_assert(ls != NULL);
    char line[700];
    while (nlogs < 3 && fgets(line, sizeof line, ls)) {
        line[strcspn(line, "\n")] = 0;
        logs[nlogs++] = strdup(line);
    }
    pclose(ls);
    ck_assert_int_eq(nlogs, 3);
    for (int json = 0; json < 2; json++) {
        const char *argv[16] = {build_path("gmshim"), json ? "--json" : "--color=never", "report"};
        int a = 3;
        for (int r = 0; r < 3; r++) /* 9 logs and one unreadable file in the middle */
            for (int i = 0; i < nlogs; i++) {
                argv[a++] = logs[i];
                if (r == 1 && i == 0)
                    argv[a++] = bad;
            }
        argv[a] = NULL;
        char *one = NULL, *many = NULL;
        const char *env1[] = {"GMSHIM_ANALYZER_THREADS=1", NULL}, *env4[] = {"GMSHIM_ANALYZER_THREADS=4", NULL};
        int rc1 = run_program(argv, env1, 0, &one), rc4 = run_program(argv, env4, 0, &many);
        ck_assert_msg(rc1 == 1 && rc4 == 1, "with an unreadable log the report must exit 1 (%d, %d)", rc1, rc4);
        ck_assert_msg(strstr(one, "not-a-log.gmlog.txt") != NULL, "the unreadable log is not named:\n%s", one);
        ck_assert_msg(!strcmp(one, many), "4 threads do not report as 1 does:\n--- 1 thread:\n%s\n--- 4 threads:\n%s",
                      one, many);
        free(one);
        free(many);
    }
    for (int i = 0; i < nlogs; i++)
        free(logs[i]);
    unlink(bad);
}
END_TEST

static void two_hosts(ranks_log_t *r, uint64_t gap_ns)
{
    memset(r, 0, 2 * sizeof *r);
    for (int i = 0; i < 2; i++) {
        r[i].path = i ? "b.gmlog" : "a.gmlog";
        r[i].opened = 1;
        r[i].rank = i;
        r[i].local_rank = 0;
        r[i].world_size = 2;
        snprintf(r[i].host, sizeof r[i].host, "node%d", i);
        r[i].pid = 100 + (uint32_t)i;
        r[i].closed = 1;
        r[i].reason = GMLOG_CLOSE_SIGNAL;
        r[i].fail_dev = -1;
        r[i].fail = RANKS_FAIL_SIGNAL;
    }
    r[0].sig = 11;
    r[1].sig = 6;
    /* rank 1's host started its log 2 s later; rank 0 failed first by its wall clock */
    r[0].start_ns = 1700000000000000000ull;
    r[1].start_ns = r[0].start_ns + 2000000000ull;
    r[0].end_t = r[0].fail_t = 5000000000ull;
    r[1].end_t = r[1].fail_t = 3000000000ull + gap_ns;
}

static char *verdict_text(const ranks_log_t *r, int n, int json)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cli_ctx_t c;
    cli_init(&c, f, stderr, "report");
    c.json = json;
    if (json)
        json_obj(&c.j, NULL);
    ranks_report(&c, r, n);
    if (json)
        json_obj_end(&c.j);
    fclose(f);
    return buf;
}

START_TEST(test_hosts_closer_than_the_assumed_skew_are_uncertain)
{
    ranks_log_t r[2];
    two_hosts(r, 50000000ull);
    char *out = verdict_text(r, 2, 0);
    ck_assert_msg(strstr(out, "first failure  rank 0 on host node0") && strstr(out, "killed by SIGSEGV") &&
                  strstr(out, "uncertain    rank 1 on node1 failed 0.05 s later") &&
                  strstr(out, "assumed NTP-synchronised, within 100 ms"),
                  "a 50 ms gap across hosts is not marked uncertain:\n%s", out);
    free(out);
    out = verdict_text(r, 2, 1);
    ck_assert_msg(strstr(out, "\"uncertain\":true") && strstr(out, "\"clock_skew_assumed_ns\":100000000"),
                  "JSON: %s", out);
    free(out);
    two_hosts(r, 400000000ull);
    out = verdict_text(r, 2, 0);
    ck_assert_msg(strstr(out, "first failure  rank 0") && !strstr(out, "uncertain    rank") &&
                  strstr(out, "rank 1: SIGABRT 0.40 s later"), "a 400 ms gap is certain:\n%s", out);
    free(out);
}
END_TEST

Suite *analyzer_ranks_suite(void)
{
    Suite *s = suite_create("analyzer_ranks");
    TCase *tc = tcase_create("job");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_torchrun_job_names_the_oom_rank_first_with_its_cause_and_site);
    tcase_add_test(tc, test_torchrun_job_imbalance_names_the_rank_that_keeps_more);
    tcase_add_test(tc, test_torchrun_job_verdict_in_json);
    tcase_add_test(tc, test_a_rank_of_world_size_without_a_log_is_named);
    tcase_add_test(tc, test_slurm_job_orders_by_procid_and_names_the_first_failure);
    tcase_add_test(tc, test_many_logs_read_in_parallel_report_as_one_thread_does);
    suite_add_tcase(s, tc);
    TCase *clocks = tcase_create("clocks");
    tcase_add_test(clocks, test_hosts_closer_than_the_assumed_skew_are_uncertain);
    suite_add_tcase(s, clocks);
    return s;
}
