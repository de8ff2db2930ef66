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

/* What gmshim writes on stderr while fn runs (a bad value warns there), into text. */
static size_t capture_stderr(void (*fn)(void), char *text, size_t len)
{
    char path[] = "/tmp/gmshim-warn-XXXXXX";
    int fd = mkstemp(path), saved = dup(STDERR_FILENO);
    ck_assert(fd >= 0 && saved >= 0);
    dup2(fd, STDERR_FILENO);
    fn();
    dup2(saved, STDERR_FILENO);
    close(saved);
    ssize_t n = pread(fd, text, len - 1, 0);
    close(fd);
    unlink(path);
    text[n > 0 ? n : 0] = 0;
    return n > 0 ? (size_t)n : 0;
}

static long long got;

static void get_all(void)
{
    for (int i = 0; i < GM_OPT__COUNT; i++)
        options_get((gm_option_t)i);
}

static void get_fence_bytes(void)
{
    got = options_get(GM_OPT_FENCE_BYTES);
}

START_TEST(test_values_are_read_lazily_and_bad_ones_keep_the_default)
{
    reset();
    setenv("GMSHIM_POOL", "0", 1);
    setenv("GMSHIM_FENCE_BYTES", "lots", 1);
    ck_assert_int_eq(options_get(GM_OPT_POOL), 0);
    /* The bad value warns once on stderr: caught here rather than printed into the test run. */
    char text[512];
    size_t n = capture_stderr(get_fence_bytes, text, sizeof text);
    ck_assert_int_eq(got, 0);
    ck_assert_msg(n > 0 && strstr(text, "GMSHIM_FENCE_BYTES='lots' is not a size"), "warning: %s", text);
    setenv("GMSHIM_POOL", "1", 1); /* already read: the first value stays */
    ck_assert_int_eq(options_get(GM_OPT_POOL), 0);
    reset();
    ck_assert_int_eq(options_get(GM_OPT_POOL), 1);
}
END_TEST

START_TEST(test_numbers_are_plain_decimal_digits_only)
{
    long long v;
    ck_assert_int_eq(options_parse_int("0", &v), 0);
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(options_parse_int("064", &v), 0);
    ck_assert_int_eq(v, 64);
    const char *bad[] = {"", " 5", "5 ", "\t5", "+5", "-5", "-0", "0x10", "0X10", "1e3", "5.0", "inf", "nan",
                         "5k", "\xd9\xa3" /* Arabic-Indic 3 */, "\xef\xbc\x95" /* fullwidth 5 */};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(options_parse_int(bad[i], &v) != 0, "'%s' accepted as an integer", bad[i]);
    const char *bad_size[] = {" 1G", "1G ", "+1G", "-1G", "0x1G", "1e3", "1e3G", "inf", "nan", "infG", "1 G",
                              "1..5G", "1.5.5G", ".5G", "5.G", "1Gx", "1Bx", "1iB", "1.5", "1.5B", "-0"};
    for (size_t i = 0; i < sizeof bad_size / sizeof *bad_size; i++)
        ck_assert_msg(options_parse_size(bad_size[i], &v) != 0, "'%s' accepted as a size", bad_size[i]);
    const char *bad_seconds[] = {" 1", "1 ", "+1", "-1", "0x1", "1e3", "inf", "nan", "1.", ".5", "1ss", "1m"};
    for (size_t i = 0; i < sizeof bad_seconds / sizeof *bad_seconds; i++)
        ck_assert_msg(options_parse_seconds(bad_seconds[i], &v) != 0, "'%s' accepted as seconds", bad_seconds[i]);
    ck_assert_int_eq(options_parse_seconds("0.5", &v), 0);
    ck_assert_int_eq(v, 500);
    ck_assert_int_eq(options_parse_seconds("2s", &v), 0);
    ck_assert_int_eq(v, 2000);
    const char *bad_limit[] = {" 0.5", "0.5 ", "+0.5", "-0.5", "-50%", "50 %", "0x10", "1e-1", "nan", "inf%",
                               "1.5", "0%", "0.0", "101%"};
    for (size_t i = 0; i < sizeof bad_limit / sizeof *bad_limit; i++)
        ck_assert_msg(options_parse_limit(bad_limit[i], &v) != 0, "'%s' accepted as a limit", bad_limit[i]);
}
END_TEST

START_TEST(test_numbers_past_any_bound_are_refused_not_wrapped)
{
    long long v = 7;
    const char *huge[] = {"9223372036854775807", "9223372036854775808", "18446744073709551616",
                          "99999999999999999999999999999"};
    for (size_t i = 0; i < sizeof huge / sizeof *huge; i++) {
        ck_assert_int_eq(options_parse_int(huge[i], &v), GM_PARSE_HUGE);
        ck_assert_int_eq(options_parse_size(huge[i], &v), GM_PARSE_HUGE);
        ck_assert_int_eq(options_parse_seconds(huge[i], &v), GM_PARSE_HUGE);
    }
    ck_assert_int_eq(options_parse_size("99999999999T", &v), GM_PARSE_HUGE);
    ck_assert_int_eq(v, 7);
}
END_TEST

/* 0 means "none" or "automatic": a value that is not 0 must never read as 0. */
START_TEST(test_a_value_that_would_round_to_zero_is_refused)
{
    long long v = 7;
    ck_assert_int_eq(options_parse_limit("0.0000001", &v), GM_PARSE_TINY);
    ck_assert_int_eq(options_parse_limit("0.00001%", &v), GM_PARSE_TINY);
    ck_assert_int_eq(options_parse_size("0.0001K", &v), GM_PARSE_TINY);
    ck_assert_int_eq(options_parse_seconds("0.0001", &v), GM_PARSE_TINY);
    ck_assert_int_eq(v, 7);
    ck_assert_int_eq(options_parse_limit("0.000001", &v), 0); /* one millionth is the smallest fraction */
    ck_assert_int_eq(v, -1);
    reset();
    setenv("GMSHIM_DEVICE_LIMIT", "0.00001%", 1);
    char out[1024];
    capture_stderr(get_all, out, sizeof out);
    ck_assert_msg(strstr(out, "GMSHIM_DEVICE_LIMIT='0.00001%' is not 0 but below the smallest step"), "%s", out);
    ck_assert_uint_eq(options_device_limit(0, 8ull << 30), 0);
    reset();
    setenv("GMSHIM_DEVICE_LIMIT", "0.000001", 1); /* of a tiny device: still a cap, not "none" */
    ck_assert_uint_eq(options_device_limit(0, 1000), 1);
}
END_TEST

/* Every numeric row has a bound; the bound itself is accepted, one more is refused with the
 * variable, the text, the bound and the default kept named on one line. */
START_TEST(test_every_numeric_row_has_an_upper_bound_in_the_table)
{
    for (int i = 0; i < GM_OPT__COUNT; i++) {
        gm_option_t o = (gm_option_t)i;
        if (options_kind(o) == GM_KIND_STRING || options_kind(o) == GM_KIND_BOOL)
            continue;
        long long max = options_max(o);
        ck_assert_msg(max > 0, "%s has no upper bound", options_name(o));
        char text[64], out[1024];
        int seconds = options_kind(o) == GM_KIND_SECONDS;
        reset();
        snprintf(text, sizeof text, seconds ? "%lld.%03lld" : "%lld", seconds ? max / 1000 : max, max % 1000);
        setenv(options_name(o), text, 1);
        ck_assert_msg(options_get(o) == max, "%s=%s read as %lld", options_name(o), text, options_get(o));
        reset();
        snprintf(text, sizeof text, seconds ? "%lld.%03lld" : "%lld", seconds ? (max + 1) / 1000 : max + 1,
                 (max + 1) % 1000);
        setenv(options_name(o), text, 1);
        capture_stderr(get_all, out, sizeof out);
        char want[128];
        snprintf(want, sizeof want, "%s='%s' is out of range (at most ", options_name(o), text);
        ck_assert_msg(strstr(out, want) && strstr(out, "using the default"), "%s=%s: %s", options_name(o), text,
                      out);
        ck_assert_msg(strchr(out, '\n') == strrchr(out, '\n'), "more than one line: %s", out);
        ck_assert_msg(options_get(o) != max + 1, "%s kept %s", options_name(o), text);
    }
    reset();
}
END_TEST

START_TEST(test_stack_depths_are_at_most_what_stacks_hold)
{
    const char *too_deep[] = {"65", "2147483647", "2147483648", "4294967295", "4294967296"};
    for (size_t i = 0; i < sizeof too_deep / sizeof *too_deep; i++) {
        reset();
        setenv("GMSHIM_STACK_DEPTH", too_deep[i], 1);
        setenv("GMSHIM_PYTHON_DEPTH", too_deep[i], 1);
        char out[1024];
        capture_stderr(get_all, out, sizeof out);
        ck_assert_msg(options_get(GM_OPT_STACK_DEPTH) == 16 && options_get(GM_OPT_PYTHON_DEPTH) == 16,
                      "depth %s read as %lld / %lld", too_deep[i], options_get(GM_OPT_STACK_DEPTH),
                      options_get(GM_OPT_PYTHON_DEPTH));
        ck_assert_msg(strstr(out, "(at most 64); using the default 16"), "%s: %s", too_deep[i], out);
    }
    reset();
    setenv("GMSHIM_STACK_DEPTH", "64", 1);
    ck_assert_int_eq(options_get(GM_OPT_STACK_DEPTH), GM_OPT_DEPTH_MAX);
    reset();
}
END_TEST

START_TEST(test_a_size_bound_is_named_in_human_units)
{
    reset();
    setenv("GMSHIM_MAX_SPLIT", "1M", 1);
    setenv("GMSHIM_CACHE_LIMIT", "300T", 1);
    char out[2048];
    capture_stderr(get_all, out, sizeof out);
    ck_assert_msg(strstr(out, "GMSHIM_MAX_SPLIT='1M' must be 0 or more than 20 MiB; using the default 0"), "%s", out);
    ck_assert_msg(strstr(out, "GMSHIM_CACHE_LIMIT='300T' is out of range (at most 256 TiB); using the default 0"),
                  "%s", out);
    ck_assert_int_eq(options_get(GM_OPT_MAX_SPLIT), 0);
    reset();
}
END_TEST

/* The text of a bad value is shown on one line and cut short: a newline or 10 KB in a variable
 * must not make the warning several lines or swamp the terminal. */
START_TEST(test_a_bad_value_warns_on_one_short_line)
{
    static char big[10240 + 1];
    memset(big, '9', sizeof big - 1);
    const char *values[] = {"1\n2", "\x1b[31m", big, "%n%n%n", "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac"};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        reset();
        setenv("GMSHIM_FENCE_FREES", values[i], 1);
        char out[4096];
        size_t n = capture_stderr(get_all, out, sizeof out);
        ck_assert_msg(n > 0 && n < 300, "value %zu: %zu bytes of warning: %s", i, n, out);
        ck_assert_msg(strchr(out, '\n') == out + n - 1, "value %zu: not one line: %s", i, out);
        ck_assert_msg(strstr(out, "GMSHIM_FENCE_FREES='") && strstr(out, "using the default 64"), "%s", out);
        ck_assert_int_eq(options_get(GM_OPT_FENCE_FREES), 64);
    }
    reset();
}
END_TEST

START_TEST(test_a_log_template_must_name_a_file)
{
    const char *bad[] = {"", "/", "logs/", ".", "..", "/tmp/..", "a\nb"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        reset();
        setenv("GMSHIM_LOG", bad[i], 1);
        char out[1024];
        capture_stderr(get_all, out, sizeof out);
        ck_assert_msg(!strcmp(options_get_str(GM_OPT_LOG), "gmshim-%n-%p.gmlog"), "'%s' kept", bad[i]);
        ck_assert_msg(strstr(out, "GMSHIM_LOG="), "'%s': no warning", bad[i]);
    }
    reset();
    setenv("GMSHIM_LOG", "/tmp/x/%n-%p.gmlog", 1);
    ck_assert_str_eq(options_get_str(GM_OPT_LOG), "/tmp/x/%n-%p.gmlog");
    reset();
}
END_TEST

static void load_all(void)
{
    options_load_all();
}

START_TEST(test_an_unknown_variable_names_the_closest_setting)
{
    reset();
    setenv("GMSHIM_DEVICELIMIT", "1G", 1);
    setenv("GMSHIM_STACKDEPTH", "8", 1);
    setenv("gmshim_pool", "0", 1);
    char out[2048];
    capture_stderr(load_all, out, sizeof out);
    const char *want[] = {
        "GMSHIM_DEVICELIMIT is not a gmshim setting and is ignored; did you mean GMSHIM_DEVICE_LIMIT?",
        "GMSHIM_STACKDEPTH is not a gmshim setting and is ignored; did you mean GMSHIM_STACK_DEPTH?",
        "gmshim_pool is not a gmshim setting and is ignored; did you mean GMSHIM_POOL?"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const char *at = strstr(out, want[i]);
        ck_assert_msg(at && !strstr(at + 1, want[i]), "once '%s' in:\n%s", want[i], out);
    }
    unsetenv("GMSHIM_DEVICELIMIT");
    unsetenv("GMSHIM_STACKDEPTH");
    unsetenv("gmshim_pool");
    reset();
}
END_TEST

/* Names read elsewhere (the CLI, the tests, per-device limits) are not typos. */
START_TEST(test_names_read_elsewhere_are_not_warned_about)
{
    reset();
    const char *names[] = {"GMSHIM_DEVICE_LIMIT_0", "GMSHIM_DEVICE_LIMIT_15", "GMSHIM_BUILD", "GMSHIM_TEST_PRELOAD",
                           "GMSHIM_TEST_CUPTI_NO_SYSTEM", "GMSHIM_FUZZ_BIN", "GMSHIM_LIBRARY", "GMSHIM_SYMBOL_PATH",
                           "GMSHIM_ANALYZER_THREADS", "GMSHIM_POOL", "GMSHIM_LOG"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!getenv(names[i]))
            setenv(names[i], names[i][7] == 'D' ? "1G" : "1", 1);
    setenv("GMSHIM_LOG", "off", 1);
    char out[2048];
    capture_stderr(load_all, out, sizeof out);
    ck_assert_msg(!strstr(out, "not a gmshim setting"), "%s", out);
    setenv("GMSHIM_DEVICE_LIMIT_x", "1G", 1);
    reset();
    capture_stderr(load_all, out, sizeof out);
    ck_assert_msg(strstr(out, "GMSHIM_DEVICE_LIMIT_x is not a gmshim setting"), "%s", out);
    reset();
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
        const char *at = strstr(doc, row);
        ck_assert_msg(at != NULL, "docs/options.md lacks the row starting %s", row);
        /* and states the bound, as the warnings word it */
        gm_option_t o = (gm_option_t)i;
        long long max = options_max(o);
        if (options_kind(o) == GM_KIND_STRING || options_kind(o) == GM_KIND_BOOL)
            continue;
        char bound[64];
        if (options_kind(o) == GM_KIND_SECONDS)
            snprintf(bound, sizeof bound, "at most %lld s", max / 1000);
        else if (options_kind(o) == GM_KIND_INT)
            snprintf(bound, sizeof bound, "at most %lld", max);
        else
            snprintf(bound, sizeof bound, "at most %lld TiB", max >> 40);
        size_t len = strcspn(at, "\n");
        char line[4096];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line - 1 ? len : sizeof line - 1), at);
        ck_assert_msg(strcasestr(line, bound), "the docs/options.md row of %s does not say '%s'", options_name(o),
                      bound);
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
    tcase_add_test(tc, test_numbers_are_plain_decimal_digits_only);
    tcase_add_test(tc, test_numbers_past_any_bound_are_refused_not_wrapped);
    tcase_add_test(tc, test_a_value_that_would_round_to_zero_is_refused);
    tcase_add_test(tc, test_every_numeric_row_has_an_upper_bound_in_the_table);
    tcase_add_test(tc, test_stack_depths_are_at_most_what_stacks_hold);
    tcase_add_test(tc, test_a_size_bound_is_named_in_human_units);
    tcase_add_test(tc, test_a_bad_value_warns_on_one_short_line);
    tcase_add_test(tc, test_a_log_template_must_name_a_file);
    tcase_add_test(tc, test_an_unknown_variable_names_the_closest_setting);
    tcase_add_test(tc, test_names_read_elsewhere_are_not_warned_about);
    tcase_add_test(tc, test_every_default_parses);
    tcase_add_test(tc, test_docs_list_every_variable_with_its_default);
    suite_add_tcase(s, tc);
    return s;
}
