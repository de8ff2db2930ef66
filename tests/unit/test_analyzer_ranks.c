/* Unit tests of the cross-rank verdict (analyzer/ranks.c): jobs of several processes of
 * tests/integration/rank_job on the fake runtime, run at once, each with its own log (one OOMs,
 * the others abort later, one keeps more; or hang until killed; or two runs in one directory),
 * then `gmshim report` on their directory. */
#include "ranks.h"
#include "suites.h"

#include "gmlog.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
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

/* Starts `rank_job hang` as RANK=rank of 3 under the preload; returns its pid once its weights are
 * in its log. */
static pid_t start_hung(const char *dir, const char *rank)
{
    int pfd[2];
    ck_assert(pipe(pfd) == 0);
    pid_t pid = fork();
    ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        char log[600], pre[8192];
        const char *san = getenv("GMSHIM_TEST_PRELOAD");
        snprintf(log, sizeof log, "%s/gm-rank%%r-%%p.gmlog", dir);
        snprintf(pre, sizeof pre, "%s%s%s", san && *san ? san : "", san && *san ? " " : "", build_path("libgmshim.so"));
        setenv("GMSHIM_LOG", log, 1);
        setenv("LD_PRELOAD", pre, 1);
        setenv("FAKECUDA_MEM", "1G", 1);
        setenv("RANK", rank, 1);
        setenv("WORLD_SIZE", "3", 1);
        const char *prog = build_path("tests/integration/rank_job");
        execl(prog, prog, "hang", (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    char buf[16] = {0};
    ssize_t got = read(pfd[0], buf, sizeof buf - 1);
    close(pfd[0]);
    ck_assert_msg(got > 0 && !strncmp(buf, "ready", 5), "rank_job hang (rank %s) did not start: '%s'", rank, buf);
    return pid;
}

/* Sets the time of every log of the directory matching pattern (NULL times: now). */
static void set_mtimes(const char *dir, const char *pattern, const struct timespec *ts)
{
    char pat[700];
    snprintf(pat, sizeof pat, "%s/%s", dir, pattern);
    glob_t g;
    ck_assert_msg(glob(pat, 0, NULL, &g) == 0, "no log matches %s", pat);
    for (size_t i = 0; i < g.gl_pathc; i++)
        ck_assert_msg(utimensat(AT_FDCWD, g.gl_pathv[i], ts, 0) == 0, "utimensat %s: %s", g.gl_pathv[i], strerror(errno));
    globfree(&g);
}

/* Stores v at the header offset `at` of every log of the directory matching pattern. */
static void set_header_u64(const char *dir, const char *pattern, off_t at, uint64_t v)
{
    char pat[700];
    snprintf(pat, sizeof pat, "%s/%s", dir, pattern);
    glob_t g;
    ck_assert_msg(glob(pat, 0, NULL, &g) == 0, "no log matches %s", pat);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        int fd = open(g.gl_pathv[i], O_RDWR);
        ck_assert_msg(fd >= 0 && pwrite(fd, &v, sizeof v, at) == sizeof v, "cannot write %s", g.gl_pathv[i]);
        close(fd);
    }
    globfree(&g);
}

/* Ranks 0 and 2 hang in a collective with their weights allocated; then rank 1 runs out of memory
 * and exits; then 0 and 2 are killed (SIGKILL: their logs are never closed), at once, or 1.5 s
 * later with `heartbeat` (their headers' alive_ns then past the OOM); without it their alive_ns
 * is cleared, as writers before it leave it. Their files' times are set to the Unix epoch's first
 * second: they tell nothing. */
static const char *hung_job(int heartbeat)
{
    const char *dir = temp_dir();
    pid_t h0 = start_hung(dir, "0"), h2 = start_hung(dir, "2");
    const proc_t oom[] = {{"oom", NULL, {"RANK=1", "WORLD_SIZE=3", NULL}}};
    run_job(dir, oom, 1);
    struct timespec nap = {1, 500000000};
    while (heartbeat && nanosleep(&nap, &nap) != 0)
        ;
    pid_t h[] = {h0, h2};
    for (int i = 0; i < 2; i++) {
        int st;
        kill(h[i], SIGKILL);
        while (waitpid(h[i], &st, 0) < 0 && errno == EINTR)
            ;
    }
    if (!heartbeat)
        set_header_u64(dir, "gm-rank[02]-*.gmlog", offsetof(gmlog_file_header_t, alive_ns), 0);
    struct timespec early[2] = {{1, 0}, {1, 0}};
    set_mtimes(dir, "gm-rank[02]-*.gmlog", early);
    return dir;
}

START_TEST(test_hung_ranks_killed_later_are_not_first_and_make_the_order_uncertain)
{
    const char *dir = hung_job(0);
    char *out = report(dir, 0);
    const char *v = verdict_of(out);
    ck_assert_msg(strstr(v, "first failure  rank 1 on host ") && strstr(v, "out of memory, cause capacity"),
                  "rank 1's OOM is not the first failure:\n%s", v);
    const char *u = strstr(v, "  uncertain    ranks 0, 2: their logs were not closed");
    ck_assert_msg(u != NULL, "the order is not uncertain because of ranks 0 and 2's unclosed logs:\n%s", v);
    free(out);
    out = report(dir, 1);
    const char *ff = strstr(out, "\"first_failure\":{\"rank\":1,");
    ck_assert_msg(ff && strstr(ff, "\"kind\":\"oom\"") && strstr(ff, "\"uncertain\":true,\"uncertain_reason\":\"ranks 0, 2"),
                  "JSON: rank 1's OOM first, uncertain because of ranks 0, 2:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_hung_ranks_whose_logs_were_written_after_the_oom_are_ordered_after_it)
{
    const char *dir = hung_job(0);
    /* After rank 1's OOM: 2 s from now, not "now", which the kernel's coarse file clock may put
     * a few ms before the OOM's time (the OOM came only ms ago). */
    struct timespec later[2];
    clock_gettime(CLOCK_REALTIME, &later[0]);
    later[0].tv_sec += 2;
    later[1] = later[0];
    set_mtimes(dir, "gm-rank[02]-*.gmlog", later);
    char *out = report(dir, 0);
    const char *v = verdict_of(out);
    ck_assert_msg(strstr(v, "first failure  rank 1 on host ") && !strstr(v, "uncertain") &&
                  strstr(v, "the others     ranks 0, 2: not closed") && strstr(v, " later (the file's last write)"),
                  "ranks 0 and 2, alive after the OOM by their files' times, do not follow it for certain:\n%s", v);
    free(out);
    out = report(dir, 1);
    ck_assert_msg(strstr(out, "\"uncertain\":false") && strstr(out, "\"alive_until_source\":\"file_mtime\""),
                  "JSON: certain, ranks 0 and 2 alive until their files' writes:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_hung_ranks_alive_after_the_oom_by_their_heartbeat_are_ordered_after_it)
{
    const char *dir = hung_job(1);
    char *out = report(dir, 0);
    const char *v = verdict_of(out);
    ck_assert_msg(strstr(v, "first failure  rank 1 on host ") && !strstr(v, "uncertain") &&
                  strstr(v, "the others     ranks 0, 2: not closed") && strstr(v, " later (its log's heartbeat)"),
                  "ranks 0 and 2, alive after the OOM by their logs' heartbeats, do not follow it:\n%s", v);
    free(out);
    out = report(dir, 1);
    ck_assert_msg(strstr(out, "\"uncertain\":false") && strstr(out, "\"alive_until_source\":\"heartbeat\""),
                  "JSON: certain, ranks 0 and 2 alive until their heartbeats:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_each_ranks_oom_in_a_job_is_listed_as_an_oom)
{
    const char *dir = temp_dir();
    const proc_t p[] = {
        {"oom", NULL, {"RANK=0", "WORLD_SIZE=3", NULL}},
        {"oom", NULL, {"RANK=1", "WORLD_SIZE=3", NULL}},
        {"oom", NULL, {"RANK=2", "WORLD_SIZE=3", NULL}},
    };
    run_job(dir, p, 3);
    char *out = report(dir, 0);
    const char *v = verdict_of(out);
    ck_assert_msg(strstr(v, "out of memory, cause capacity") && strstr(v, "the others     ranks ") &&
                  strstr(v, ": out of memory (cause capacity) ") && strstr(v, ", then exit"),
                  "the other ranks' OOMs are not listed as OOMs:\n%s", v);
    free(out);
    out = report(dir, 1);
    int ooms = 0;
    for (const char *at = strstr(out, "\"ranks\":["); at && (at = strstr(at, "\"failure\":\"oom\"")); at++)
        ooms++;
    ck_assert_msg(ooms == 3, "JSON: %d ranks with \"failure\":\"oom\", not 3:\n%s", ooms, out);
    free(out);
}
END_TEST

/* Moves a log's start back by `ns`, as if its run had been that long ago. */
static void shift_start(const char *path, uint64_t ns)
{
    int fd = open(path, O_RDWR);
    ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
    uint64_t start;
    off_t at = offsetof(gmlog_file_header_t, start_realtime_ns);
    ck_assert(pread(fd, &start, sizeof start, at) == sizeof start);
    start -= ns;
    ck_assert(pwrite(fd, &start, sizeof start, at) == sizeof start);
    close(fd);
}

static int count_of(const char *s, const char *what)
{
    int n = 0;
    for (const char *at = s; (at = strstr(at, what)); at++)
        n++;
    return n;
}

START_TEST(test_two_unrelated_runs_in_one_directory_are_reported_apart)
{
    const char *dir = temp_dir();
    const proc_t p[] = {
        {"oom", NULL, {"RANK=0", "WORLD_SIZE=2", NULL}},
        {"300", NULL, {"RANK=1", "WORLD_SIZE=2", NULL}},
    };
    run_job(dir, p, 2);
    char pat[700];
    snprintf(pat, sizeof pat, "%s/gm-rank*.gmlog", dir);
    glob_t g;
    ck_assert(glob(pat, 0, NULL, &g) == 0 && g.gl_pathc == 2);
    for (size_t i = 0; i < g.gl_pathc; i++)
        shift_start(g.gl_pathv[i], 2ull * 24 * 3600 * 1000000000ull); /* two days ago */
    globfree(&g);
    run_job(dir, p, 2);
    char *out = report(dir, 0);
    const char *v = verdict_of(out);
    ck_assert_msg(strstr(v, "== Run 1 of 2: 2 logs, 1 host ==") && strstr(v, "== Run 2 of 2: 2 logs, 1 host ==") &&
                  count_of(v, "first failure  rank 0 on host ") == 2 && count_of(v, "rank 1: SIGABRT") == 2,
                  "two runs two days apart are not two runs, each with its rank 0's OOM first:\n%s", v);
    free(out);
    out = report(dir, 1);
    ck_assert_msg(strstr(out, "\"run_count\":2") && count_of(out, "\"first_failure\":{\"rank\":0,") == 2,
                  "JSON: not two runs with their own first failure:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_runs_at_once_are_told_apart_by_their_torchrun_variables)
{
    const char *dir = temp_dir();
    const proc_t p[] = {
        {"oom", NULL, {"RANK=0", "WORLD_SIZE=2", "TORCHELASTIC_RUN_ID=run-a", "MASTER_PORT=29500"}},
        {"300", NULL, {"RANK=1", "WORLD_SIZE=2", "TORCHELASTIC_RUN_ID=run-b", "MASTER_PORT=29501"}},
    };
    run_job(dir, p, 2);
    char *out = report(dir, 0);
    const char *v = verdict_of(out);
    ck_assert_msg(strstr(v, "== Run 1 of 2") && strstr(v, "== Run 2 of 2") &&
                  strstr(v, "run            TORCHELASTIC_RUN_ID=run-a, MASTER_PORT=29500\n") &&
                  strstr(v, "run            TORCHELASTIC_RUN_ID=run-b, MASTER_PORT=29501\n"),
                  "two torchrun runs at once are not told apart by their run ids:\n%s", v);
    free(out);
    out = report(dir, 1);
    ck_assert_msg(strstr(out, "\"run\":\"TORCHELASTIC_RUN_ID=run-a, MASTER_PORT=29500\""),
                  "JSON: the run's variables are not named:\n%s", out);
    free(out);
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
    tcase_add_test(tc, test_hung_ranks_killed_later_are_not_first_and_make_the_order_uncertain);
    tcase_add_test(tc, test_hung_ranks_whose_logs_were_written_after_the_oom_are_ordered_after_it);
    tcase_add_test(tc, test_hung_ranks_alive_after_the_oom_by_their_heartbeat_are_ordered_after_it);
    tcase_add_test(tc, test_each_ranks_oom_in_a_job_is_listed_as_an_oom);
    tcase_add_test(tc, test_two_unrelated_runs_in_one_directory_are_reported_apart);
    tcase_add_test(tc, test_runs_at_once_are_told_apart_by_their_torchrun_variables);
    suite_add_tcase(s, tc);
    TCase *clocks = tcase_create("clocks");
    tcase_add_test(clocks, test_hosts_closer_than_the_assumed_skew_are_uncertain);
    suite_add_tcase(s, clocks);
    return s;
}
