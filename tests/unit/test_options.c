/* Unit tests of the options table (shim/options.c): parsers, lazy reads, the bad-value rule,
 * and docs/options.md listing every variable with its default; under the preload, bad settings
 * warned about once, the verbose table, silence by default, and a sweep of hostile values. */
#include "options.h"
#include "suites.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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


START_TEST(test_bad_settings_warn_once_and_keep_defaults)
{
    classic_pool_test();
    const char *env[] = {"FAKECUDA_MEM=1G", "GMSHIM_POOL=maybe", "GMSHIM_FENCE_BYTES=12Q",
                         "GMSHIM_MAX_SPLIT=1M", "GMSHIM_DEVICE_LIMIT=half", NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/pool_hits", env, NULL, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    const char *want[] = {"GMSHIM_POOL='maybe'", "GMSHIM_FENCE_BYTES='12Q'", "GMSHIM_MAX_SPLIT='1M'",
                          "GMSHIM_DEVICE_LIMIT='half'"};
    for (int i = 0; i < 4; i++) {
        const char *at = strstr(out, want[i]);
        ck_assert_msg(at != NULL, "no warning about %s:\n%s", want[i], out);
        ck_assert_msg(strstr(at + 1, want[i]) == NULL, "%s warned twice:\n%s", want[i], out);
    }
    free(out);
}
END_TEST

START_TEST(test_verbose_prints_the_effective_settings)
{
    classic_pool_test();
    const char *env[] = {"FAKECUDA_MEM=1G", "GMSHIM_VERBOSE=1", "GMSHIM_CACHE_LIMIT=1G", NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/pool_hits", env, NULL, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "effective settings") && strstr(out, "GMSHIM_CACHE_LIMIT") &&
                  strstr(out, "1 GiB"), "no settings table:\n%s", out);
    free(out);
}
END_TEST

START_TEST(test_quiet_by_default)
{
    classic_pool_test();
    const char *env[] = {"FAKECUDA_MEM=1G", NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/pool_hits", env, NULL, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "gmshim[") == NULL, "gmshim printed without being asked:\n%s", out);
    free(out);
}
END_TEST

/* ---- the hostile-environment sweep ----------------------------------------------------------- */

typedef struct sweep_job {
    const char *name, *value;   /* the variable set (NULL: none, the baseline) */
    pid_t pid;
    int status;
} sweep_job_t;

/* Runs hostile_env with one variable set, in `dir` (a relative GMSHIM_LOG lands there), its stdout
 * and stderr into dir/out.K and dir/err.K. */
static pid_t sweep_spawn(const char *prog, const char *dir, const char *preload, int k, const sweep_job_t *j)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    char path[4096];
    snprintf(path, sizeof path, "%s/out.%d", dir, k);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    snprintf(path, sizeof path, "%s/err.%d", dir, k);
    int fe = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || fe < 0 || chdir(dir) != 0)
        _exit(126);
    dup2(fd, 1);
    dup2(fe, 2);
    extern char **environ;
    for (char **e = environ; *e; e++)
        if (!strncmp(*e, "GMSHIM_", 7)) {
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)strcspn(*e, "="), *e);
            unsetenv(name);
            e = environ - 1;
        }
    setenv("FAKECUDA_MEM", "1G", 1);
    /* Under TSan each exit would sleep a second (its default), for a thousand runs. */
    const char *tsan = getenv("TSAN_OPTIONS");
    snprintf(path, sizeof path, "%s%satexit_sleep_ms=0", tsan ? tsan : "", tsan && *tsan ? ":" : "");
    setenv("TSAN_OPTIONS", path, 1);
    /* A log costs a run three times as much (its pages are faulted in ahead): only where the
     * variable is the log's or the call sites' that it records. */
    snprintf(path, sizeof path, "%s/%%p.gmlog", dir);
    setenv("GMSHIM_LOG", j->name && (strstr(j->name, "LOG") || strstr(j->name, "DEPTH")) ? path : "off", 1);
    if (j->name)
        setenv(j->name, j->value, 1);
    setenv("LD_PRELOAD", preload, 1);
    execl(prog, prog, (char *)NULL);
    _exit(127);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    static char buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = 0;
    if (f)
        fclose(f);
    return buf;
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[8192];
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* For every GMSHIM_* variable of the table (and a per-device limit), values that are empty,
 * spaced, signed, hex, huge, exponents, nan/inf, tiny fractions, paths, format directives,
 * control bytes, non-ASCII and 10 KB long: the program ends as it does without the variable,
 * by no signal, with at most one line (a gmshim warning) on stderr. */
START_TEST(test_hostile_values_of_every_setting_neither_crash_nor_chatter)
{
    static char digits[10241], letters[10241];
    memset(digits, '9', sizeof digits - 1);
    memset(letters, 'A', sizeof letters - 1);
    const char *values[] = {
        "", " ", "  16", "16 ", "\t1", "+1", "-1", "-0", "0x10", "0X7fffffff", "010x", "1e3", "1e30", "1E-9",
        "nan", "NaN", "inf", "-inf", "infinity", "2147483647", "2147483648", "4294967295", "4294967296",
        "9223372036854775807", "9223372036854775808", "18446744073709551616", "99999999999999999999999999999",
        "0.0000001", "0.00001%", "1..5", "1.5.5", ".", "..", "%", "%%", "%n%n%n", "%s%s%s%s%s", "/", "//", "\\",
        "1 G", "8GiBB", "0.5G ", "5s ", "1\n2", "\x01", "\x7f", "\x1b[31m", "\xc3\xa9", "\xef\xbc\x91",
        "1\xef\xbc\xa7", "\xf0\x9f\x92\xa5", "\xff\xfe", "100%", "101%", "-50%", "0%", "1.0000000001",
        "'", "\"", "$(id)", ";", digits, letters};
    enum { NV = sizeof values / sizeof *values };
    const char *names[GM_OPT__COUNT + 1];
    int nn = 0;
    for (int i = 0; i < GM_OPT__COUNT; i++)
        names[nn++] = options_name((gm_option_t)i);
    names[nn++] = "GMSHIM_DEVICE_LIMIT_0";
    int njobs = 1 + nn * NV;
    sweep_job_t *jobs = calloc((size_t)njobs, sizeof *jobs);
    for (int v = 0; v < nn; v++)
        for (int k = 0; k < NV; k++) {
            /* A log template of "/" once made gmshim create "/.1": try such paths below the
             * run's own directory, so that a regression writes nothing outside it. */
            const char *value = values[k];
            if (!strcmp(names[v], "GMSHIM_LOG") && value[0] == '/')
                value = value[1] ? "sub//" : "./";
            jobs[1 + v * NV + k] = (sweep_job_t){.name = names[v], .value = value};
        }
    char preload[8192];
    const char *san = getenv("GMSHIM_TEST_PRELOAD");
    snprintf(preload, sizeof preload, "%s%s%s", san && *san ? san : "", san && *san ? " " : "",
             build_path("libgmshim.so"));
    char dir[256], prog[4096], base_err[512];
    snprintf(dir, sizeof dir, "%s", temp_dir());
    snprintf(prog, sizeof prog, "%s", build_path("tests/integration/hostile_env"));
    snprintf(base_err, sizeof base_err, "%s/err.0", dir);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int width = cpus < 2 ? 2 : cpus > 16 ? 16 : (int)cpus, running = 0, next = 1;
    /* The baseline first, alone: its status is what every other run must end with. */
    jobs[0].pid = sweep_spawn(prog, dir, preload, 0, &jobs[0]);
    ck_assert_int_gt(jobs[0].pid, 0);
    waitpid(jobs[0].pid, &jobs[0].status, 0);
    ck_assert_msg(WIFEXITED(jobs[0].status) && WEXITSTATUS(jobs[0].status) == 0 && !*slurp(base_err),
                  "baseline: status %#x, stderr:\n%s", jobs[0].status, slurp(base_err));
    while (next < njobs || running) {
        while (next < njobs && running < width) {
            jobs[next].pid = sweep_spawn(prog, dir, preload, next, &jobs[next]);
            ck_assert_int_gt(jobs[next].pid, 0);
            next++;
            running++;
        }
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0 && errno == EINTR)
            continue;
        ck_assert_int_gt(pid, 0);
        for (int k = 1; k < next; k++)
            if (jobs[k].pid == pid) {
                jobs[k].status = status;
                char log[512];
                snprintf(log, sizeof log, "%s/%d.gmlog", dir, (int)pid);
                unlink(log);
            }
        running--;
    }
    char report[16384];
    size_t rl = 0;
    int bad = 0;
    for (int k = 1; k < njobs; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/err.%d", dir, k);
        const char *err = slurp(path);
        int lines = 0, foreign = 0;
        for (const char *l = err; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
            lines++;
            foreign += strncmp(l, "gmshim[", 7) != 0;
        }
        int st = jobs[k].status;
        const char *why = WIFSIGNALED(st)                                      ? "killed by a signal"
                          : !WIFEXITED(st) || WEXITSTATUS(st) != WEXITSTATUS(jobs[0].status) ? "another exit status"
                          : lines > 1                                          ? "more than one line on stderr"
                          : foreign                                            ? "stderr that is not a gmshim warning"
                                                                               : NULL;
        if (!why) {
            snprintf(path, sizeof path, "%s/out.%d", dir, k);
            if (!strstr(slurp(path), "ok ("))
                why = "no 'ok' on stdout";
        }
        if (why && bad++ < 12) {
            char shown[80];
            snprintf(shown, sizeof shown, "%.60s", jobs[k].value);
            for (char *c = shown; *c; c++)
                if ((unsigned char)*c < 0x20)
                    *c = '?';
            snprintf(path, sizeof path, "%s/err.%d", dir, k);
            rl += (size_t)snprintf(report + rl, sizeof report - rl, "%s='%s': %s (status %#x):\n%.400s\n",
                                   jobs[k].name, shown, why, st, slurp(path));
            if (rl >= sizeof report)
                rl = sizeof report - 1;
        }
    }
    remove_dir(dir);
    free(jobs);
    ck_assert_msg(!bad, "%d of %d hostile settings went wrong:\n%s", bad, njobs - 1, report);
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
    TCase *tc2 = tcase_create("preload");
    tcase_set_timeout(tc2, 120);
    tcase_add_test(tc2, test_bad_settings_warn_once_and_keep_defaults);
    tcase_add_test(tc2, test_verbose_prints_the_effective_settings);
    tcase_add_test(tc2, test_quiet_by_default);
    suite_add_tcase(s, tc2);
    tc2 = tcase_create("sweep");
    tcase_set_timeout(tc2, 300);
    tcase_add_test(tc2, test_hostile_values_of_every_setting_neither_crash_nor_chatter);
    suite_add_tcase(s, tc2);
    return s;
}
