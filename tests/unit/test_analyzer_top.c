/* gmshim top (analyzer/top.c): --once --json over a log still being written by a program under
 * the preload (then killed), over a finished log (the same figures as summary and leaks), over a
 * wrapped log; the repeated samples of --count when stdout is not a terminal; the keys on a pty;
 * bad input; the leak warning; a running process named by its PID. */
#include "suites.h"
#include "testlog.h"
#include "test_analyzer_cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LIVE_SOURCE "tests/integration/top_live.c"

/* Runs python3 with a script on the file holding `json` and the extra arguments; returns its exit
 * status, its output in *out. */
static int top_py(const char *json, const char *script, const char *arg1, const char *arg2, char **out)
{
    char path[512];
    snprintf(path, sizeof path, "%s/top.json", temp_dir());
    gm_spew(path, json, strlen(json));
    const char *argv[] = {"/usr/bin/env", "python3", "-c", script, path, arg1 ? arg1 : "", arg2 ? arg2 : "", NULL};
    return run_program(argv, NULL, 0, out);
}

/* "keep_state (top_live.c:N)", N the line marked as the growing one in the source. */
static const char *growing_key(void)
{
    static char key[64];
    size_t len;
    char *src = (char *)gm_slurp(LIVE_SOURCE, &len);
    const char *at = strstr(src, "/* the growing line */");
    ck_assert_msg(at != NULL, "%s has no line marked as the growing one", LIVE_SOURCE);
    unsigned line = 1;
    for (const char *p = src; p < at; p++)
        line += *p == '\n';
    snprintf(key, sizeof key, "keep_state (top_live.c:%u)", line);
    free(src);
    return key;
}

/* Reads the first line the program prints (its "ready" line) into buf. */
static void read_line(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    buf[0] = 0;
    while (got < cap - 1 && !strchr(buf, '\n')) {
        ssize_t n = read(fd, buf + got, cap - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
        buf[got] = 0;
    }
}

static const char live_check[] =
    "import json,sys\n"
    "d=json.load(open(sys.argv[1]))\n"
    "steps,keep=map(int,sys.argv[3].split())\n"
    "assert d['command']=='top' and d['sample']==1 and len(d['logs'])==1, d\n"
    "log=d['logs'][0]\n"
    "assert log['closed'] is False and log['partial'] is False, log\n"
    "dev=log['devices'][0]\n"
    "assert dev['steps']['by']=='marks' and dev['steps']['count']==steps, dev['steps']\n"
    "assert dev['steps']['per_second']>0, dev['steps']\n"
    "g=dev['growing'][0]\n"
    "assert g['label']==sys.argv[2] and g['growth_per_step']==keep, g\n"
    "assert g['bytes']==steps*keep and g['count']==steps, g\n"
    "assert sum(s['bytes'] for s in dev['holding'])==dev['allocated'], dev\n"
    "assert dev['peak_allocated']>=dev['allocated'] and dev['peak_reserved']>=dev['reserved'], dev\n";

START_TEST(test_once_json_reads_a_log_still_being_written_and_after_a_kill)
{
    char log[512], logenv[600];
    snprintf(log, sizeof log, "%s/live.gmlog", temp_dir());
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
    const char *env[] = {logenv, "FAKECUDA_MEM=1G", NULL};
    int fd;
    pid_t pid = spawn_preloaded("tests/integration/top_live", env, &fd);
    ck_assert_msg(pid > 0, "cannot start top_live: %s", strerror(errno));
    char ready[128];
    read_line(fd, ready, sizeof ready);
    close(fd);
    char counts[64] = "";
    int ok = sscanf(ready, "ready %63[0-9 ]", counts) == 1;
    char *out = NULL, *py = NULL;
    int rc = ok ? gm(&out, "--json", "top", "--once", "--top", "0", log) : -1;
    int alive = kill(pid, 0) == 0; /* still running while it was read */
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    ck_assert_msg(ok, "top_live never said it was ready: '%s'", ready);
    ck_assert_msg(alive, "top_live had ended before top read its log");
    ck_assert_msg(rc == 0, "top --once --json of a running log exited %d:\n%s", rc, out);
    int prc = top_py(out, live_check, growing_key(), counts, &py);
    ck_assert_msg(prc == 0, "the running log's sample:\n%s\npython: %s", out, py);
    free(out);
    free(py);
    rc = gm(&out, "--json", "top", "--once", "--top", "0", log);
    ck_assert_msg(rc == 0, "top --once --json of the killed job's log exited %d:\n%s", rc, out);
    prc = top_py(out, live_check, growing_key(), counts, &py);
    ck_assert_msg(prc == 0, "the killed job's sample:\n%s\npython: %s", out, py);
    free(out);
    free(py);
    unlink(log);
}
END_TEST

/* A finished log: the figures are summary's and the growing site is leaks' first. */
static const char finished_check[] =
    "import json,sys\n"
    "t=json.load(open(sys.argv[1]))\n"
    "s=json.loads(open(sys.argv[2]).read())\n"
    "leaks=open(sys.argv[3]).read()\n"
    "log=t['logs'][0]\n"
    "assert log['closed'] is True, log\n"
    "dev=log['devices'][0]\n"
    "sd=s['logs'][0]['devices'][0]\n"
    "for k in ('peak_allocated','peak_reserved'): assert dev[k]==sd[k], (k,dev[k],sd[k])\n"
    "assert dev['growing'], dev\n"
    "assert dev['growing'][0]['label'] in leaks, (dev['growing'][0], leaks)\n";

START_TEST(test_once_json_of_a_finished_log_gives_summary_and_leaks_figures)
{
    char *top, *sum, *leaks, *py;
    int rc = gm(&top, "--json", "top", "--once", FIXTURE);
    ck_assert_msg(rc == 0, "top exited %d:\n%s", rc, top);
    rc = gm(&sum, "--json", "summary", FIXTURE);
    ck_assert_msg(rc == 0, "summary exited %d:\n%s", rc, sum);
    rc = gm(&leaks, "--color=never", "leaks", FIXTURE);
    ck_assert_msg(rc == 0, "leaks exited %d:\n%s", rc, leaks);
    char sp[512], lp[512];
    snprintf(sp, sizeof sp, "%s/summary.json", temp_dir());
    snprintf(lp, sizeof lp, "%s/leaks.txt", temp_dir());
    gm_spew(sp, sum, strlen(sum));
    gm_spew(lp, leaks, strlen(leaks));
    int prc = top_py(top, finished_check, sp, lp, &py);
    ck_assert_msg(prc == 0, "top:\n%s\npython: %s", top, py);
    free(top);
    free(sum);
    free(leaks);
    free(py);
}
END_TEST

/* A log that reached GMSHIM_LOG_LIMIT: the peak still covers the whole run, as summary says. */
START_TEST(test_once_json_over_a_wrapped_log_keeps_the_whole_runs_peak)
{
    char path[512];
    snprintf(path, sizeof path, "%s/wrapped.gmlog", temp_dir());
    tlog_t b;
    tlog_wrapped_example(&b, 1, 1);
    ck_assert_msg(tlog_write(&b, path) == 0, "cannot write %s", path);
    tlog_free_buf(&b);
    char *top, *sum, *py;
    int rc = gm(&top, "--json", "top", "--once", path);
    ck_assert_msg(rc == 0, "top of a wrapped log exited %d:\n%s", rc, top);
    rc = gm(&sum, "--json", "summary", path);
    ck_assert_msg(rc == 0, "summary exited %d:\n%s", rc, sum);
    char sp[512];
    snprintf(sp, sizeof sp, "%s/summary.json", temp_dir());
    gm_spew(sp, sum, strlen(sum));
    int prc = top_py(top,
                     "import json,sys\n"
                     "t=json.load(open(sys.argv[1]))['logs'][0]['devices'][0]\n"
                     "s=json.load(open(sys.argv[2]))['logs'][0]['devices'][0]\n"
                     "assert t['peak_allocated']==s['peak_allocated'] and t['peak_reserved']==s['peak_reserved'], (t,s)\n",
                     sp, NULL, &py);
    ck_assert_msg(prc == 0, "top:\n%s\nsummary:\n%s\npython: %s", top, sum, py);
    free(top);
    free(sum);
    free(py);
}
END_TEST

/* A job past GMSHIM_LOG_LIMIT, read while it still runs: sampled until its log has wrapped, which
 * reads whole (not partial) and unclosed; once the job ends, top's peaks are summary's. The job
 * runs up to a minute (a sanitizer's slowdown), ended by its stop file once the sample was seen. */
START_TEST(test_once_json_reads_a_running_log_past_its_size_limit)
{
    char log[512], logenv[600], stop[512], stopenv[600];
    snprintf(log, sizeof log, "%s/bounded.gmlog", temp_dir());
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
    snprintf(stop, sizeof stop, "%s/bounded.stop", temp_dir());
    snprintf(stopenv, sizeof stopenv, "STOP_FILE=%s", stop);
    unlink(stop);
    const char *env[] = {logenv, stopenv, "GMSHIM_LOG_LIMIT=64M", "SECONDS_TO_RUN=60", "THREADS=2", "LEAK_EVERY=200000",
                         "FAKECUDA_MEM=1G", NULL};
    int fd;
    pid_t pid = spawn_preloaded("tests/integration/log_bounded", env, &fd);
    ck_assert_msg(pid > 0, "cannot start log_bounded: %s", strerror(errno));
    char *out = NULL;
    int rc = -1, seen = 0, status = 0, ended = 0;
    while (!seen && !(ended = waitpid(pid, &status, WNOHANG) == pid)) {
        usleep(100000);
        free(out);
        out = NULL;
        rc = gm(&out, "--json", "top", "--once", log);
        seen = rc == 0 && strstr(out, "\"closed\":false,\"partial\":false,\"wrapped\":true");
    }
    if (!ended) {
        gm_spew(stop, "", 0); /* seen: the job ends now, its log closed */
        waitpid(pid, &status, 0);
    }
    unlink(stop);
    char buf[256];
    while (read(fd, buf, sizeof buf) > 0)
        ;
    close(fd);
    ck_assert_msg(seen, "no sample of the running log read it wrapped, whole and unclosed: exit %d\n%s", rc, out);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "log_bounded ended with status 0x%x", status);
    free(out);
    char *sum, *py;
    rc = gm(&out, "--json", "top", "--once", log);
    ck_assert_msg(rc == 0, "top of the ended job's log exited %d:\n%s", rc, out);
    rc = gm(&sum, "--json", "summary", log);
    ck_assert_msg(rc == 0, "summary exited %d:\n%s", rc, sum);
    char sp[512];
    snprintf(sp, sizeof sp, "%s/summary.json", temp_dir());
    gm_spew(sp, sum, strlen(sum));
    int prc = top_py(out,
                     "import json,sys\n"
                     "l=json.load(open(sys.argv[1]))['logs'][0]\n"
                     "assert l['wrapped'] is True and l['closed'] is True, l\n"
                     "t=l['devices'][0]\n"
                     "s=json.load(open(sys.argv[2]))['logs'][0]['devices'][0]\n"
                     "assert t['peak_allocated']==s['peak_allocated'] and t['peak_reserved']==s['peak_reserved'], (t,s)\n",
                     sp, NULL, &py);
    ck_assert_msg(prc == 0, "top:\n%s\npython: %s", out, py);
    free(out);
    free(sum);
    free(py);
    unlink(log);
}
END_TEST

START_TEST(test_count_prints_that_many_samples_in_sequence_off_a_terminal)
{
    char *out;
    int rc = gm(&out, "--color=never", "top", "--count", "3", "--interval", "0.05", FIXTURE);
    ck_assert_msg(rc == 0, "top --count 3 exited %d:\n%s", rc, out);
    ck_assert_msg(gm_count(out, "gmshim top  sample ") == 3 && strstr(out, "sample 3,"), "not 3 samples:\n%s", out);
    ck_assert_msg(gm_count(out, "\n\ngmshim top  sample ") == 2, "samples not separated by a blank line:\n%s", out);
    ck_assert_msg(!strchr(out, '\033'), "escape codes off a terminal:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_json_count_prints_one_object_a_line_per_sample)
{
    char *out, *py;
    int rc = gm(&out, "--json", "top", "--count", "2", "--interval", "0.05", FIXTURE);
    ck_assert_msg(rc == 0, "top --json --count 2 exited %d:\n%s", rc, out);
    int prc = top_py(out,
                     "import json,sys\n"
                     "lines=open(sys.argv[1]).read().splitlines()\n"
                     "assert [json.loads(l)['sample'] for l in lines]==[1,2], lines\n",
                     NULL, NULL, &py);
    ck_assert_msg(prc == 0, "%s\npython: %s", out, py);
    free(out);
    free(py);
}
END_TEST

START_TEST(test_a_directory_shows_every_log_in_it)
{
    const char *dir = temp_dir();
    char job[512], a[600], b[600];
    snprintf(job, sizeof job, "%s/job", dir);
    ck_assert_msg(mkdir(job, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", job, strerror(errno));
    size_t len;
    uint8_t *data = gm_slurp(FIXTURE, &len);
    snprintf(a, sizeof a, "%s/a.gmlog", job);
    snprintf(b, sizeof b, "%s/b.gmlog", job);
    gm_spew(a, data, len);
    gm_spew(b, data, len);
    free(data);
    char *out;
    int rc = gm(&out, "--json", "top", "--once", job);
    ck_assert_msg(rc == 0 && gm_count(out, "\"path\":") == 2 && strstr(out, "a.gmlog") && strstr(out, "b.gmlog"),
                  "exit %d, not both logs:\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_once_with_another_count_is_a_usage_error)
{
    char *out;
    int rc = gm(&out, "top", "--once", "--count", "3", FIXTURE);
    ck_assert_msg(rc == 1 && strstr(out, "--once and --count"), "exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_a_bad_interval_is_a_usage_error)
{
    char *out;
    int rc = gm(&out, "top", "--interval", "0", FIXTURE);
    ck_assert_msg(rc == 1 && strstr(out, "--interval: '0'"), "exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_an_unreadable_log_exits_1)
{
    char path[512];
    snprintf(path, sizeof path, "%s/missing.gmlog", temp_dir());
    char *out;
    int rc = gm(&out, "top", "--once", path);
    char want[600];
    snprintf(want, sizeof want, "gmshim: %s: byte 0: ", path);
    ck_assert_msg(rc == 1 && strstr(out, want), "exit %d, no '%s' line:\n%s", rc, want, out);
    free(out);
}
END_TEST

/* On a terminal (a pty from Python): `s` redraws with the other sort at once, `q` or SIGTERM ends
 * it with exit 0 and the terminal's echo and line mode back. */
static const char pty_script[] =
    "import os, pty, sys, termios, time, signal, select\n"
    "gm, log, how = sys.argv[1], sys.argv[2], sys.argv[3]\n"
    "m, s = pty.openpty()\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.setsid()\n"
    "    os.dup2(s, 0); os.dup2(s, 1); os.dup2(s, 2)\n"
    "    os.execv(gm, [gm, \"top\", \"--interval\", \"30\", log])\n"
    "def read_until(text, secs):\n"
    "    buf = b\"\"; end = time.time() + secs\n"
    "    while text not in buf and time.time() < end:\n"
    "        r, _, _ = select.select([m], [], [], 0.1)\n"
    "        if r:\n"
    "            buf += os.read(m, 65536)\n"
    "    assert text in buf, (text, buf[-2000:])\n"
    "    return buf\n"
    "read_until(b\"sort: bytes\", 10)\n"
    "assert not termios.tcgetattr(s)[3] & termios.ECHO, \"no raw mode while running\"\n"
    "os.write(m, b\"s\")\n"
    "read_until(b\"sort: growth\", 5)\n"
    "if how == \"q\":\n"
    "    os.write(m, b\"q\")\n"
    "else:\n"
    "    os.kill(pid, signal.SIGTERM)\n"
    "end = time.time() + 5\n"
    "while time.time() < end:\n"
    "    p, st = os.waitpid(pid, os.WNOHANG)\n"
    "    if p: break\n"
    "    try:\n"
    "        if select.select([m], [], [], 0.05)[0]: os.read(m, 65536)\n"
    "    except OSError: pass\n"
    "assert p == pid, \"top did not end on \" + how\n"
    "assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, st\n"
    "lf = termios.tcgetattr(s)[3]\n"
    "assert lf & termios.ECHO and lf & termios.ICANON, \"the terminal was left in raw mode\"\n"
    "print(\"ok\")\n";

static void run_on_pty(const char *how)
{
    char *out;
    const char *argv[] = {"/usr/bin/env", "python3", "-c", pty_script, build_path("gmshim"), FIXTURE, how, NULL};
    int rc = run_program(argv, NULL, 0, &out);
    ck_assert_msg(rc == 0 && strstr(out, "ok"), "top on a pty, ended by %s: exit %d\n%s", how, rc, out);
    free(out);
}

START_TEST(test_keys_on_a_terminal_sort_and_q_quits_restoring_the_terminal)
{
    run_on_pty("q");
}
END_TEST

START_TEST(test_sigterm_on_a_terminal_restores_it)
{
    run_on_pty("term");
}
END_TEST

/* A job that leaks 16 MiB a step (tests/integration/warn_job.c), logged without GMSHIM_WARN: top
 * says what the shim would have said, by the same rule, at the line's function; a steady job's
 * sample has no warning. */
START_TEST(test_once_shows_the_leak_warning_of_a_leaking_log_only)
{
    char leak[512], steady[512], env1[600], env2[600];
    snprintf(leak, sizeof leak, "%s/leak.gmlog", temp_dir());
    snprintf(steady, sizeof steady, "%s/steady.gmlog", temp_dir());
    snprintf(env1, sizeof env1, "GMSHIM_LOG=%s", leak);
    snprintf(env2, sizeof env2, "GMSHIM_LOG=%s", steady);
    const char *envs[][3] = {{"FAKECUDA_MEM=1G", env1, NULL}, {"FAKECUDA_MEM=1G", env2, NULL}};
    const char *modes[] = {"leak-marks", "steady"};
    char *out = NULL;
    int rc;
    for (int i = 0; i < 2; i++) {
        rc = run_built("tests/integration/warn_job", envs[i], modes[i], &out);
        ck_assert_msg(rc == 0, "warn_job %s exited %d:\n%s", modes[i], rc, out);
        free(out);
    }
    rc = gm(&out, "--color=never", "top", "--once", leak);
    ck_assert_msg(rc == 0, "top exited %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "    leak suspected on device 0: +16.0 MiB per step at leak_step (warn_job.c:") &&
                      strstr(out, "; at this rate the device is full in ~"),
                  "no warning line for the leaking log:\n%s", out);
    free(out);
    rc = gm(&out, "--json", "top", "--once", leak);
    ck_assert_msg(rc == 0 && strstr(out, "\"warning\":\"leak suspected on device 0: +16.0 MiB per step at leak_step"),
                  "exit %d, no warning in the JSON:\n%s", rc, out);
    free(out);
    rc = gm(&out, "--json", "top", "--once", steady);
    ck_assert_msg(rc == 0 && strstr(out, "\"warning\":null") && !strstr(out, "leak suspected"),
                  "exit %d, a steady job warned:\n%s", rc, out);
    free(out);
}
END_TEST

/* `top PID`: the log the process has open, whatever its name. */
START_TEST(test_a_pid_names_the_log_its_process_has_open)
{
    char log[512], logenv[600], pid_arg[32];
    snprintf(log, sizeof log, "%s/named-anyhow.bin", temp_dir());
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
    const char *env[] = {logenv, "FAKECUDA_MEM=1G", NULL};
    int fd;
    pid_t pid = spawn_preloaded("tests/integration/top_live", env, &fd);
    ck_assert_msg(pid > 0, "cannot start top_live: %s", strerror(errno));
    char ready[128];
    read_line(fd, ready, sizeof ready);
    close(fd);
    snprintf(pid_arg, sizeof pid_arg, "%d", (int)pid);
    char *out = NULL;
    int rc = gm(&out, "--json", "top", "--once", pid_arg);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    char want[600];
    snprintf(want, sizeof want, "\"path\":\"%s\"", log);
    ck_assert_msg(rc == 0 && strstr(out, want) && strstr(out, "\"closed\":false"), "exit %d, not %s:\n%s", rc, log, out);
    free(out);
    unlink(log);
}
END_TEST

START_TEST(test_a_pid_without_a_log_exits_2_naming_it)
{
    pid_t pid = fork();
    ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        pause();
        _exit(0);
    }
    char pid_arg[32], want[128];
    snprintf(pid_arg, sizeof pid_arg, "%d", (int)pid);
    char *out = NULL;
    int rc = gm(&out, "top", "--once", pid_arg);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    snprintf(want, sizeof want, "gmshim top: process %d has no gmshim log open", (int)pid);
    ck_assert_msg(rc == 2 && strstr(out, want), "exit %d:\n%s", rc, out);
    free(out);
    /* the process is gone now */
    rc = gm(&out, "top", "--once", pid_arg);
    snprintf(want, sizeof want, "gmshim top: no process %d", (int)pid);
    ck_assert_msg(rc == 2 && strstr(out, want), "exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

Suite *analyzer_top_suite(void)
{
    Suite *s = suite_create("analyzer_top");
    TCase *tc = tcase_create("top");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_once_json_reads_a_log_still_being_written_and_after_a_kill);
    tcase_add_test(tc, test_once_json_of_a_finished_log_gives_summary_and_leaks_figures);
    tcase_add_test(tc, test_once_json_over_a_wrapped_log_keeps_the_whole_runs_peak);
    tcase_add_test(tc, test_once_json_reads_a_running_log_past_its_size_limit);
    tcase_add_test(tc, test_count_prints_that_many_samples_in_sequence_off_a_terminal);
    tcase_add_test(tc, test_json_count_prints_one_object_a_line_per_sample);
    tcase_add_test(tc, test_a_directory_shows_every_log_in_it);
    tcase_add_test(tc, test_once_with_another_count_is_a_usage_error);
    tcase_add_test(tc, test_a_bad_interval_is_a_usage_error);
    tcase_add_test(tc, test_an_unreadable_log_exits_1);
    tcase_add_test(tc, test_keys_on_a_terminal_sort_and_q_quits_restoring_the_terminal);
    tcase_add_test(tc, test_sigterm_on_a_terminal_restores_it);
    tcase_add_test(tc, test_once_shows_the_leak_warning_of_a_leaking_log_only);
    tcase_add_test(tc, test_a_pid_names_the_log_its_process_has_open);
    tcase_add_test(tc, test_a_pid_without_a_log_exits_2_naming_it);
    suite_add_tcase(s, tc);
    return s;
}
