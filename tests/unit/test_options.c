/* Unit tests of the options table (shim/options.c): parsers, lazy reads, the bad-value rule,
 * and docs/options.md listing every variable with its default. */
#include "options.h"
#include "suites.h"
#include <unistd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reset(void)
{
    for (int i = 0; i < GM_OPT__COUNT; i++)
        unsetenv(options_name((gm_option_t)i));
    options_reset();
}

START_TEST(test_sizes_accept_suffixes_and_binary_multiples)
{
    long long v;
    ck_assert_int_eq(options_parse_size("512", &v), 0);
    ck_assert_int_eq(v, 512);
    ck_assert_int_eq(options_parse_size("512M", &v), 0);
    ck_assert_int_eq(v, 512LL << 20);
    ck_assert_int_eq(options_parse_size("8G", &v), 0);
    ck_assert_int_eq(v, 8LL << 30);
    ck_assert_int_eq(options_parse_size("8GiB", &v), 0);
    ck_assert_int_eq(v, 8LL << 30);
    ck_assert_int_eq(options_parse_size("1.5g", &v), 0);
    ck_assert_int_eq(v, 3LL << 29);
    ck_assert_int_eq(options_parse_size("64kb", &v), 0);
    ck_assert_int_eq(v, 64LL << 10);
    ck_assert_int_eq(options_parse_size("1T", &v), 0);
    ck_assert_int_eq(v, 1LL << 40);
    const char *bad[] = {"", "abc", "12X", "-1", "1.5", "8GG", "G", "1e400"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(options_parse_size(bad[i], &v) != 0, "'%s' accepted as a size", bad[i]);
}
END_TEST

START_TEST(test_booleans_accept_the_documented_words)
{
    long long v;
    const char *yes[] = {"1", "on", "YES", "true"}, *no[] = {"0", "off", "no", "False"};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(options_parse_bool(yes[i], &v), 0);
        ck_assert_int_eq(v, 1);
        ck_assert_int_eq(options_parse_bool(no[i], &v), 0);
        ck_assert_int_eq(v, 0);
    }
    ck_assert_int_ne(options_parse_bool("2", &v), 0);
    ck_assert_int_ne(options_parse_bool("", &v), 0);
}
END_TEST

START_TEST(test_limits_accept_sizes_and_fractions)
{
    long long v;
    ck_assert_int_eq(options_parse_limit("24G", &v), 0);
    ck_assert_int_eq(v, 24LL << 30);
    ck_assert_int_eq(options_parse_limit("0.5", &v), 0);
    ck_assert_int_eq(v, -500000);
    ck_assert_int_eq(options_parse_limit("25%", &v), 0);
    ck_assert_int_eq(v, -250000);
    ck_assert_int_ne(options_parse_limit("150%", &v), 0);
    ck_assert_int_ne(options_parse_limit("0.0", &v), 0);
    ck_assert_int_ne(options_parse_limit("half", &v), 0);
}
END_TEST

START_TEST(test_device_limit_fraction_and_per_device_override)
{
    reset();
    setenv("GMSHIM_DEVICE_LIMIT", "0.25", 1);
    setenv("GMSHIM_DEVICE_LIMIT_1", "3G", 1);
    ck_assert_uint_eq(options_device_limit(0, 8ull << 30), 2ull << 30);
    ck_assert_uint_eq(options_device_limit(1, 8ull << 30), 3ull << 30);
    unsetenv("GMSHIM_DEVICE_LIMIT_1");
    reset();
    ck_assert_uint_eq(options_device_limit(0, 8ull << 30), 0);
}
END_TEST

START_TEST(test_values_are_read_lazily_and_bad_ones_keep_the_default)
{
    reset();
    setenv("GMSHIM_POOL", "0", 1);
    setenv("GMSHIM_FENCE_BYTES", "lots", 1);
    ck_assert_int_eq(options_get(GM_OPT_POOL), 0);
    /* The bad value warns once on stderr: caught here rather than printed into the test run. */
    char path[] = "/tmp/gmshim-warn-XXXXXX";
    int fd = mkstemp(path), saved = dup(STDERR_FILENO);
    ck_assert(fd >= 0 && saved >= 0);
    dup2(fd, STDERR_FILENO);
    long long v = options_get(GM_OPT_FENCE_BYTES);
    dup2(saved, STDERR_FILENO);
    close(saved);
    char text[512] = {0};
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    unlink(path);
    ck_assert_int_eq(v, 0);
    ck_assert_msg(n > 0 && strstr(text, "GMSHIM_FENCE_BYTES='lots' is not a size"), "warning: %s", text);
    setenv("GMSHIM_POOL", "1", 1); /* already read: the first value stays */
    ck_assert_int_eq(options_get(GM_OPT_POOL), 0);
    reset();
    ck_assert_int_eq(options_get(GM_OPT_POOL), 1);
}
END_TEST

START_TEST(test_every_default_parses)
{
    reset();
    for (int i = 0; i < GM_OPT__COUNT; i++) {
        char buf[128];
        options_format((gm_option_t)i, buf, sizeof buf);
        ck_assert_msg(buf[0] || options_kind((gm_option_t)i) == GM_KIND_STRING,
                      "%s has no printable default", options_name((gm_option_t)i));
    }
    ck_assert_str_eq(options_get_str(GM_OPT_LOG), "gmshim-%n-%p.gmlog");
}
END_TEST

START_TEST(test_docs_list_every_variable_with_its_default)
{
    FILE *f = fopen("docs/options.md", "r");
    ck_assert_msg(f != NULL, "docs/options.md is missing (run from the repository root)");
    static char doc[1 << 16];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    doc[n] = 0;
    fclose(f);
    for (int i = 0; i < GM_OPT__COUNT; i++) {
        char row[256];
        snprintf(row, sizeof row, "| `%s` | `%s` |", options_name((gm_option_t)i),
                 options_default_text((gm_option_t)i));
        ck_assert_msg(strstr(doc, row) != NULL, "docs/options.md lacks the row starting %s", row);
    }
}
END_TEST

Suite *options_suite(void)
{
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, test_sizes_accept_suffixes_and_binary_multiples);
    tcase_add_test(tc, test_booleans_accept_the_documented_words);
    tcase_add_test(tc, test_limits_accept_sizes_and_fractions);
    tcase_add_test(tc, test_device_limit_fraction_and_per_device_override);
    tcase_add_test(tc, test_values_are_read_lazily_and_bad_ones_keep_the_default);
    tcase_add_test(tc, test_every_default_parses);
    tcase_add_test(tc, test_docs_list_every_variable_with_its_default);
    suite_add_tcase(s, tc);
    return s;
}
