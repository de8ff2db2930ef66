/* gmshim dump (analyzer/dump.c): every record, as text or as JSON lines. */
#include "gmlog.h"
#include "suites.h"
#include "test_analyzer_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

Suite *analyzer_dump_suite(void)
{
    Suite *s = suite_create("analyzer_dump");
    TCase *tc = tcase_create("dump");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_dump_writes_every_record_as_text_or_json_lines);
    tcase_add_test(tc, test_dump_shows_pytorchs_tensor_events_fields);
    suite_add_tcase(s, tc);
    return s;
}
