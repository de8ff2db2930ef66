/* The reports' text helpers (analyzer/output.c): sizes, durations, times, percentages and
 * counts in their printed forms; colour only when on; the wrapping stream. */
#include "output.h"
#include "suites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each case formats into its own buffer. */
static void check_format(const char *got, const char *want)
{
    ck_assert_msg(!strcmp(got, want), "\"%s\", want \"%s\"", got, want);
}

START_TEST(test_numbers_print_in_their_units)
{
    char b[32], p[16];
    check_format(rep_bytes(512, b), "512 B");
    check_format(rep_bytes(1536, b), "1.50 KiB");
    check_format(rep_bytes(3ull << 30, b), "3.00 GiB");
    check_format(rep_bytes(150ull << 20, b), "150 MiB");
    check_format(rep_dur(80, b), "80 ns");
    check_format(rep_dur(45600000, b), "45.6 ms");
    check_format(rep_time(12345000000ull, b), "12.345 s");
    check_format(rep_pct(1, 8, p), "12.5%");
    check_format(rep_pct(3, 0, p), "-");
    check_format(rep_count(12345678, b), "12,345,678");
    check_format(rep_count(999, b), "999");
}
END_TEST

START_TEST(test_colour_escapes_only_when_colour_is_on)
{
    int was = rep_color;
    rep_color = 0;
    ck_assert_msg(!*rep_bold() && !*rep_red() && !*rep_reset(), "escapes with colour off");
    rep_color = 1;
    ck_assert_msg(!strcmp(rep_bold(), "\033[1m") && !strcmp(rep_reset(), "\033[0m"), "escapes with colour on");
    rep_color = was;
}
END_TEST

START_TEST(test_long_lines_wrap_at_a_space_under_their_label)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    ck_assert_msg(mem != NULL, "open_memstream");
    FILE *w = rep_wrap_open(mem, 40);
    ck_assert_msg(w != NULL, "rep_wrap_open");
    fputs("  cause    one two three four five six seven eight nine\nshort\n", w);
    ck_assert_msg(fclose(w) == 0, "closing the wrapping stream");
    fclose(mem);
    const char *want = "  cause    one two three four five six\n           seven eight nine\nshort\n";
    ck_assert_msg(!strcmp(buf, want), "wrapped at 40 columns:\n%s---\nwant:\n%s", buf, want);
    free(buf);
}
END_TEST

Suite *analyzer_output_suite(void)
{
    Suite *s = suite_create("analyzer_output");
    TCase *tc = tcase_create("output");
    tcase_add_test(tc, test_numbers_print_in_their_units);
    tcase_add_test(tc, test_colour_escapes_only_when_colour_is_on);
    tcase_add_test(tc, test_long_lines_wrap_at_a_space_under_their_label);
    suite_add_tcase(s, tc);
    return s;
}
