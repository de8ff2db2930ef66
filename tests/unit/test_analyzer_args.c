/* The gmshim CLI as people type it: options and logs in any order, `--`, every --help, mistakes
 * told rather than swallowed, `gmshim run`'s log directory and JSON, units and folded frames in
 * the reports, and every command line the README shows run as written (on the demo log). */
#include "suites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEMO "tests/fixtures/demo.gmlog"
#define DEMO_DIR "tests/fixtures"
#define TORCH "tests/fixtures/h200_torch_leak_oom.gmlog"

/* build/gmshim with the arguments up to the first NULL; stdout and stderr in *out. */
static int gmv(char **out, const char *const *args)
{
    const char *argv[24] = {build_path("gmshim")};
    for (int i = 0; args[i] && i < 22; i++)
        argv[i + 1] = args[i];
    return run_program(argv, NULL, 0, out);
}
#define gm(out, ...) gmv(out, (const char *const[]){__VA_ARGS__, NULL})

/* A shell command line; stdout and stderr in *out. */
static int sh(char **out, const char *cmd)
{
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    const char *san = getenv("GMSHIM_TEST_PRELOAD");
    static char pre[4200];
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s", san ? san : "");
    const char *env[] = {"FAKECUDA_MEM=1G", "ASAN_OPTIONS=verify_asan_link_order=0", san && *san ? pre : NULL, NULL};
    return run_program(argv, env, 0, out);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* ---- point 1: options and files in any order ------------------------------------------------ */

START_TEST(test_options_after_the_logs_work_for_every_command)
{
    const char *dir = temp_dir();
    char html[512], svg[512];
    snprintf(html, sizeof html, "%s/t.html", dir);
    snprintf(svg, sizeof svg, "%s/t.svg", dir);
    char *out;
    int rc = gm(&out, "summary", DEMO, "--json");
    ck_assert_msg(rc == 0 && !strncmp(out, "{\"command\":\"summary\"", 20) && !strstr(out, "cannot open"),
                  "summary LOG --json: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "timeline", DEMO, "--html", html);
    ck_assert_msg(rc == 0 && exists(html), "timeline LOG --html FILE: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "timeline", "-s", svg, DEMO);
    ck_assert_msg(rc == 0 && exists(svg), "timeline -s FILE LOG: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "leaks", DEMO, "--at", "3", "--symbol-path", DEMO_DIR, "--top=1");
    ck_assert_msg(rc == 0 && strstr(out, "at mark 3 \"iteration 3\"") && strstr(out, "load_weights (demo_train.c:31)") &&
                  strstr(out, "1 more sites"),
                  "leaks LOG --at 3 --symbol-path DIR --top=1 (a global option after the command): exit %d\n%.3000s",
                  rc, out);
    free(out);
    rc = gm(&out, "oom", DEMO, "-j");
    ck_assert_msg(rc == 0 && strstr(out, "\"cause\":\"leak\""), "oom LOG -j: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "frag", DEMO, "--json");
    ck_assert_msg(rc == 0 && !strncmp(out, "{\"command\":\"frag\"", 17), "frag LOG --json: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "dump", DEMO, "--json");
    ck_assert_msg(rc == 0 && !strncmp(out, "{\"record\":\"header\"", 18), "dump LOG --json: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "report", DEMO, "--depth", "1", "--color=never", "--json");
    ck_assert_msg(rc == 0 && !strncmp(out, "{\"command\":\"report\"", 19), "report LOG ... --json: exit %d\n%.2000s",
                  rc, out);
    free(out);
    /* `--` ends the options: what follows is a file, whatever it looks like */
    rc = gm(&out, "summary", "--", "--json");
    ck_assert_msg(rc == 1 && strstr(out, "--json: byte 0: cannot open"), "summary -- --json: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "summary", "--nosuch", DEMO);
    ck_assert_msg(rc == 1 && count(out, "\n") == 1 && strstr(out, "unknown option '--nosuch'"),
                  "an unknown option: exit %d\n%.2000s", rc, out);
    free(out);
    unlink(html);
    unlink(svg);
    rmdir(dir);
}
END_TEST

/* run's options end at the command: the command's own options are its own. */
START_TEST(test_run_leaves_the_commands_options_to_it)
{
    const char *dir = temp_dir();
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/r-%%p.gmlog", dir);
    char *out;
    int rc = gm(&out, "run", "--no-report", "-o", tmpl, "/bin/echo", "--json", "-o", "x");
    ck_assert_msg(rc == 0 && strstr(out, "--json -o x\n"), "run CMD --json -o x: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "run", "-o", tmpl, "--", "/bin/sh", "-c", "exit 7");
    ck_assert_msg(rc == 7, "run -- sh -c 'exit 7': exit %d\n%.2000s", rc, out);
    free(out);
    rmdir(dir);
}
END_TEST

/* ---- point 2: gmshim run ---------------------------------------------------------------------- */

START_TEST(test_run_refuses_a_log_directory_it_cannot_write)
{
    const char *dir = temp_dir();
    char marker[512], tmpl[600], script[1200];
    snprintf(marker, sizeof marker, "%s/ran", dir);
    snprintf(tmpl, sizeof tmpl, "%s/missing/x-%%p.gmlog", dir);
    snprintf(script, sizeof script, "touch '%s'", marker);
    char *out;
    int rc = gm(&out, "run", "-o", tmpl, "--", "/bin/sh", "-c", script);
    ck_assert_msg(rc == 2 && count(out, "\n") == 1 && strstr(out, "gmshim run: not starting /bin/sh: the log's directory") &&
                  strstr(out, "No such file or directory") && !exists(marker),
                  "run -o MISSING_DIR/x.gmlog: exit %d, the job %s\n%.2000s", rc, exists(marker) ? "ran" : "did not run",
                  out);
    free(out);
    /* a file where the directory should be */
    snprintf(tmpl, sizeof tmpl, "%s/ran/x.gmlog", dir);
    FILE *f = fopen(marker, "w");
    ck_assert_msg(f && fclose(f) == 0, "cannot create %s", marker);
    rc = gm(&out, "run", "-o", tmpl, "--", "/bin/true");
    ck_assert_msg(rc == 2 && strstr(out, "Not a directory"), "run -o FILE/x.gmlog: exit %d\n%.2000s", rc, out);
    free(out);
    unlink(marker);
    rmdir(dir);
}
END_TEST

START_TEST(test_run_json_has_stdout_to_itself_and_keeps_the_exit_status)
{
    const char *dir = temp_dir();
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' run --json -o '%s/j-%%p.gmlog' -- /bin/sh -c 'echo job-output; '\"'%s'\"'; exit 5' "
             "2>/dev/null", build_path("gmshim"), dir, build_path("tests/integration/oom_leak"));
    char *out;
    int rc = sh(&out, cmd);
    size_t len = strlen(out);
    ck_assert_msg(rc == 5 && !strncmp(out, "{\"command\":\"report\"", 19) && len > 2 && !strcmp(out + len - 2, "}\n") &&
                  count(out, "\n") == 1 && !strstr(out, "job-output") && strstr(out, "\"cause\":\"leak\""),
                  "stdout of run --json: exit %d\n%.3000s", rc, out);
    free(out);
    /* the job's output is not lost: it is on stderr */
    snprintf(cmd, sizeof cmd, "'%s' run --json -o '%s/k-%%p.gmlog' -- /bin/sh -c 'echo job-output' 2>&1 >/dev/null",
             build_path("gmshim"), dir);
    rc = sh(&out, cmd);
    ck_assert_msg(rc == 0 && strstr(out, "job-output\n"), "stderr of run --json: exit %d\n%.3000s", rc, out);
    free(out);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir); /* and the logs the runs wrote */
    ck_assert_msg(system(cmd) == 0, "cannot remove %s", dir);
}
END_TEST

/* ---- point 5: mistakes told ------------------------------------------------------------------- */

START_TEST(test_two_outputs_or_an_option_given_twice_are_errors)
{
    const char *dir = temp_dir();
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/a.html", dir);
    snprintf(b, sizeof b, "%s/b.svg", dir);
    char *out;
    int rc = gm(&out, "timeline", "--html", a, "--svg", b, DEMO);
    ck_assert_msg(rc == 1 && !exists(a) && !exists(b) && strstr(out, "one output at a time"),
                  "timeline --html a --svg b: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "timeline", "--svg", a, "--svg", b, DEMO);
    ck_assert_msg(rc == 1 && !exists(a) && !exists(b), "timeline --svg a --svg b: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "--json", "timeline", "--svg", b, DEMO);
    ck_assert_msg(rc == 1 && !exists(b) && strstr(out, "--json and --svg"), "--json timeline --svg b: exit %d\n%.2000s",
                  rc, out);
    free(out);
    rc = gm(&out, "leaks", "--top", "3", DEMO, "--top", "5");
    ck_assert_msg(rc == 1 && strstr(out, "--top is given twice"), "leaks --top 3 --top 5: exit %d\n%.2000s", rc, out);
    free(out);
    rc = gm(&out, "run", "-o", a, "-o", b, "--", "/bin/true");
    ck_assert_msg(rc == 1 && strstr(out, "--output is given twice"), "run -o a -o b: exit %d\n%.2000s", rc, out);
    free(out);
    rmdir(dir);
}
END_TEST

START_TEST(test_every_form_of_help_works)
{
    static const char *const cmds[] = {"report", "summary", "leaks", "frag", "oom", "timeline", "dump", "run"};
    char *out;
    const char *const *forms[] = {
        (const char *const[]){"help", "--help", NULL}, (const char *const[]){"help", "help", NULL},
        (const char *const[]){"help", NULL}, (const char *const[]){"--help", NULL},
        (const char *const[]){"-h", NULL}, (const char *const[]){"help", "-h", NULL},
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        int rc = gmv(&out, forms[i]);
        ck_assert_msg(rc == 0 && strstr(out, "usage: gmshim [--json]") && strstr(out, "timeline"),
                      "gmshim %s %s: exit %d\n%.2000s", forms[i][0], forms[i][1] ? forms[i][1] : "", rc, out);
        free(out);
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "usage: gmshim %s ", cmds[i]);
        const char *const *cmd_forms[] = {
            (const char *const[]){"help", cmds[i], NULL}, (const char *const[]){cmds[i], "--help", NULL},
            (const char *const[]){cmds[i], "-h", NULL}, (const char *const[]){cmds[i], DEMO, "--help", NULL},
            (const char *const[]){"--json", cmds[i], "--help", NULL},
        };
        /* (after run's first operand everything is the command's: `run CMD --help` runs CMD) */
        size_t forms_n = sizeof cmd_forms / sizeof cmd_forms[0];
        for (size_t k = 0; k < forms_n; k++) {
            if (!strcmp(cmds[i], "run") && k == 3)
                continue;
            int rc = gmv(&out, cmd_forms[k]);
            ck_assert_msg(rc == 0 && strstr(out, want) && !strstr(out, "gmshim: "), "gmshim %s %s %s: exit %d\n%.2000s",
                          cmd_forms[k][0], cmd_forms[k][1], cmd_forms[k][2] ? cmd_forms[k][2] : "", rc, out);
            free(out);
        }
    }
}
END_TEST

Suite *analyzer_args_suite(void)
{
    Suite *s = suite_create("analyzer_args");
    TCase *tc = tcase_create("args");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_options_after_the_logs_work_for_every_command);
    tcase_add_test(tc, test_run_leaves_the_commands_options_to_it);
    tcase_add_test(tc, test_run_refuses_a_log_directory_it_cannot_write);
    tcase_add_test(tc, test_run_json_has_stdout_to_itself_and_keeps_the_exit_status);
    tcase_add_test(tc, test_two_outputs_or_an_option_given_twice_are_errors);
    tcase_add_test(tc, test_every_form_of_help_works);
    suite_add_tcase(s, tc);
    return s;
}
