/* gmshim dump (analyzer/dump.c): every record, as text or as JSON lines. */
#include "gmlog.h"
#include "suites.h"
#include "test_analyzer_cli.h"

#include <errno.h>
#include <fcntl.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

START_TEST(test_dump_writes_every_record_as_text_or_json_lines)
{
    char *out;
    int rc = gm(&out, "--json", "dump", FIXTURE, NULL, NULL, NULL);
    ck_assert_msg(rc == 0, "dump --json exited %d", rc);
    size_t lines = 0, objects = 0;
    for (char *line = out; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        lines++;
        if (len >= 2 && line[0] == '{' && line[len - 1] == '}')
            objects++;
        line += len + (nl != NULL);
    }
    ck_assert_msg(lines == objects && lines > 300, "%zu lines, %zu of them JSON objects", lines, objects);
    ck_assert_msg(!strncmp(out, "{\"record\":\"header\"", 18) && gm_count(out, "\"record\":\"meta\"") >= 5 &&
                  gm_count(out, "\"type\":\"mark\"") == 13, "dump --json content:\n%.2000s", out);
    free(out);
    rc = gm(&out, "dump", FIXTURE, NULL, NULL, NULL, NULL);
    ck_assert_msg(rc == 0 && gm_count(out, " alloc ") + gm_count(out, " alloc  ") > 0 && strstr(out, "label=\"iteration 13\""),
                  "dump: %d\n%.2000s", rc, out);
    free(out);
}
END_TEST

/* PyTorch's events show their fields (they read "len=40" before). */
START_TEST(test_dump_shows_pytorchs_tensor_events_fields)
{
    char *out;
    int rc = gm(&out, "dump", FIXTURE_DIR "/h200_scen_frag_keep.gmlog", NULL, NULL, NULL, NULL);
    ck_assert_msg(rc == 0, "dump exited %d", rc);
    const char *a = strstr(out, " torch_alloc ");
    ck_assert_msg(a && strstr(a, "addr=0x") && strstr(a, "size=") && strstr(a, "stream=") && strstr(a, "site=") &&
                  gm_count(out, " torch_alloc ") == 16 && !strstr(out, "len=40") && strstr(out, "device_free="),
                  "torch records in the dump:\n%.3000s", a ? a : out);
    free(out);
}
END_TEST

/* A large log's dump says how far it is on a terminal's stderr, and nothing of it into a pipe. */
START_TEST(test_dump_of_a_large_log_shows_progress_on_a_terminal_only)
{
    char log[600];
    snprintf(log, sizeof log, "%s/large.gmlog", temp_dir());
    const char *gen[] = {build_path("fuzz/genlog"), log, "1200000", "2", NULL};
    char *out = NULL;
    int rc = run_program(gen, NULL, 0, &out);
    ck_assert_msg(rc == 0, "genlog exited %d:\n%s", rc, out);
    free(out);
    char bin[4096];
    snprintf(bin, sizeof bin, "%s", build_path("gmshim"));
    int fd;
    pid_t pid = forkpty(&fd, NULL, NULL, NULL);
    ck_assert_msg(pid >= 0, "forkpty: %s", strerror(errno));
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY); /* the records away: stderr alone on the terminal */
        if (null < 0 || dup2(null, 1) < 0)
            _exit(126);
        execl(bin, "gmshim", "dump", "--json", log, (char *)NULL);
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
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "dump on a terminal: status %d:\n%s", status, tty);
    ck_assert_msg(strstr(tty, "\rgmshim: dump ") && strstr(tty, "%"), "no progress on the terminal:\n%s", tty);
    char cmd[5000];
    snprintf(cmd, sizeof cmd, "'%s' dump --json '%s' 2>&1 >/dev/null", bin, log);
    const char *sh[] = {"/bin/sh", "-c", cmd, NULL};
    rc = run_program(sh, NULL, 0, &out);
    ck_assert_msg(rc == 0 && !strstr(out, "gmshim: dump "), "progress into a pipe: rc %d\n%s", rc, out);
    free(out);
    unlink(log);
}
END_TEST

Suite *analyzer_dump_suite(void)
{
    Suite *s = suite_create("analyzer_dump");
    TCase *tc = tcase_create("dump");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_dump_writes_every_record_as_text_or_json_lines);
    tcase_add_test(tc, test_dump_shows_pytorchs_tensor_events_fields);
    tcase_add_test(tc, test_dump_of_a_large_log_shows_progress_on_a_terminal_only);
    suite_add_tcase(s, tc);
    return s;
}
