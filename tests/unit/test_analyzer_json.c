/* Unit tests of the analyzer's JSON writer (analyzer/json.c): commas and nesting, escapes for
 * every control byte, invalid UTF-8 replaced, NaN written as null, 64-bit numbers exact. */
#include "json.h"
#include "suites.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static char *buf;
static size_t len;
static FILE *mem;
static json_t j;

static void setup(void)
{
    mem = open_memstream(&buf, &len);
    json_init(&j, mem);
}

static const char *text(void)
{
    fflush(mem);
    return buf;
}

static void teardown(void)
{
    fclose(mem);
    free(buf);
    buf = NULL;
}

START_TEST(test_members_and_elements_get_commas_and_nesting)
{
    json_obj(&j, NULL);
    json_u64(&j, "a", 1);
    json_arr(&j, "b");
    json_u64(&j, NULL, 2);
    json_obj(&j, NULL);
    json_bool(&j, "c", 1);
    json_null(&j, "d");
    json_obj_end(&j);
    json_arr_end(&j);
    json_i64(&j, "e", -5);
    json_obj_end(&j);
    ck_assert_msg(!strcmp(text(), "{\"a\":1,\"b\":[2,{\"c\":true,\"d\":null}],\"e\":-5}"), "got %s", text());
}
END_TEST

START_TEST(test_strings_are_escaped_and_invalid_utf8_replaced)
{
    json_arr(&j, NULL);
    json_str(&j, NULL, "q\"b\\s\n\t\x01");
    json_strn(&j, NULL, "caf\xc3\xa9", 5);
    json_strn(&j, NULL, "bad\xff\xc3", 5);
    json_strn(&j, NULL, "nul\0x", 5);
    json_str(&j, NULL, NULL);
    json_arr_end(&j);
    const char *want = "[\"q\\\"b\\\\s\\n\\t\\u0001\",\"caf\xc3\xa9\",\"bad\\ufffd\\ufffd\",\"nul\\u0000x\",null]";
    ck_assert_msg(!strcmp(text(), want), "got %s\nwant %s", text(), want);
}
END_TEST

START_TEST(test_numbers_are_exact_and_nan_is_null)
{
    json_arr(&j, NULL);
    json_u64(&j, NULL, UINT64_MAX);
    json_dbl(&j, NULL, 0.25);
    json_dbl(&j, NULL, NAN);
    json_dbl(&j, NULL, INFINITY);
    json_arr_end(&j);
    ck_assert_msg(!strcmp(text(), "[18446744073709551615,0.25,null,null]"), "got %s", text());
}
END_TEST

Suite *analyzer_json_suite(void)
{
    Suite *s = suite_create("analyzer_json");
    TCase *tc = tcase_create("writer");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_members_and_elements_get_commas_and_nesting);
    tcase_add_test(tc, test_strings_are_escaped_and_invalid_utf8_replaced);
    tcase_add_test(tc, test_numbers_are_exact_and_nan_is_null);
    suite_add_tcase(s, tc);
    return s;
}
