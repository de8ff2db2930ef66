/* `gmshim timeline` (analyzer/timeline*.c): the SVG and the HTML page each self-contained, with
 * the chart's parts, and the page driven in a headless Chromium (tests/browser/timeline_test.py),
 * skipped with one line without it. */
#include "suites.h"
#include "test_analyzer_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURES "tests/fixtures"

/* Runs a program with arguments up to NULL: exit status, output in *out. */
static int runv(char **out, const char *prog, const char *const *args)
{
    const char *argv[24] = {prog};
    for (int i = 0; args[i] && i < 22; i++)
        argv[i + 1] = args[i];
    return run_program(argv, NULL, 0, out);
}
#define py(out, ...) runv(out, "/usr/bin/env", (const char *const[]){"python3", __VA_ARGS__, NULL})

START_TEST(test_timeline_is_a_self_contained_svg_or_html)
{
    const char *dir = temp_dir();
    char svg[512], html[512];
    snprintf(svg, sizeof svg, "%s/t.svg", dir);
    snprintf(html, sizeof html, "%s/t.html", dir);
    char *out;
    int rc = gm(&out, "timeline", "--svg", svg, FIXTURE, NULL, NULL);
    ck_assert_msg(rc == 0, "timeline --svg exited %d:\n%s", rc, out);
    free(out);
    rc = gm(&out, "timeline", "--html", html, FIXTURE, NULL, NULL);
    ck_assert_msg(rc == 0, "timeline --html exited %d:\n%s", rc, out);
    free(out);
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(i ? html : svg, "r");
        ck_assert_msg(f != NULL, "%s was not written", i ? html : svg);
        static char doc[1 << 20];
        size_t n = fread(doc, 1, sizeof doc - 1, f);
        fclose(f);
        doc[n] = 0;
        ck_assert_msg(strstr(doc, "<svg") && strstr(doc, "</svg>") && strstr(doc, "class=\"alloc\"") &&
                      strstr(doc, "class=\"res\"") && gm_count(doc, "class=\"mark\"") >= 13 && strstr(doc, "class=\"oom\""),
                      "%s lacks the chart's parts", i ? html : svg);
        ck_assert_msg(!strstr(doc, "src=") && !strstr(doc, "href=") && gm_count(doc, "http") == 1,
                      "%s refers to something outside itself", i ? html : svg);
        if (i)
            ck_assert_msg(strstr(doc, "<!DOCTYPE html>") && strstr(doc, "<script>") && strstr(doc, "leak"),
                          "the HTML page lacks its read-out or OOM table");
    }
}
END_TEST

START_TEST(test_timeline_page_answers_hover_click_zoom_in_headless_chromium)
{
    const char *dir = temp_dir();
    char *out;
    int rc = py(&out, "tests/browser/timeline_test.py", build_path("gmshim"), FIXTURES, dir);
    if (rc == 0 && strstr(out, "skipped"))
        fprintf(stderr, "%s", out); /* the one line saying why, in the test run's output */
    ck_assert_msg(rc == 0, "the timeline page in Chromium (exit %d):\n%s", rc, out);
    free(out);
}
END_TEST

Suite *analyzer_timeline_suite(void)
{
    Suite *s = suite_create("analyzer_timeline");
    TCase *tc = tcase_create("timeline");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_timeline_is_a_self_contained_svg_or_html);
    suite_add_tcase(s, tc);
    TCase *br = tcase_create("browser");
    tcase_set_timeout(br, 300);
    tcase_add_test(br, test_timeline_page_answers_hover_click_zoom_in_headless_chromium);
    suite_add_tcase(s, br);
    return s;
}
