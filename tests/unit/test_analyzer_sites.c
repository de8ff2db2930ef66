/* Call sites as the reports name them (analyzer/sites.c): a PyTorch run's growing site reads as
 * its Python line, Python frames first; an unknown site is said to be unknown, not a crash. */
#include "model.h"
#include "sites.h"
#include "suites.h"
#include "symbolize.h"
#include "test_analyzer_cli.h"
#include "testlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

START_TEST(test_a_python_site_is_named_by_its_innermost_python_line)
{
    sym_set_enabled(0);
    rd_log_t lf;
    memset(&lf, 0, sizeof lf);
    ck_assert_msg(rd_open_path(&lf, H200_TORCH_LEAK) == 0, "cannot open %s", H200_TORCH_LEAK);
    model_t *m = calloc(1, sizeof *m);
    ck_assert_msg(m != NULL, "out of memory");
    model_build(m, &lf, MODEL_SITES | MODEL_EPOCHS);
    int named = 0;
    for (size_t i = 0; i < m->nsites; i++) {
        char label[256];
        uint32_t id = m->sites[i].id;
        site_label(m, id, label, sizeof label);
        if (strncmp(label, "<module> (torch_leak_oom.py:21)", 31))
            continue;
        named++;
        site_frame_t fr[SITE_MAX_FRAMES];
        size_t n = site_frames(m, id, fr, SITE_MAX_FRAMES);
        ck_assert_msg(n > 1 && fr[0].python && !strcmp(fr[0].function, "<module>") && fr[0].line == 21 &&
                          fr[0].file && strstr(fr[0].file, "torch_leak_oom.py"),
                      "site %u: %zu frames, the first %s %s:%u", id, n, fr[0].function, fr[0].file ? fr[0].file : "?",
                      fr[0].line);
        ck_assert_msg(!fr[n - 1].python, "site %u: its last frame is a Python one, not native", id);
    }
    ck_assert_msg(named >= 1, "no site of %zu is named '<module> (torch_leak_oom.py:21)'", m->nsites);
    char label[64];
    site_label(m, 0xfffffff0u, label, sizeof label);
    ck_assert_msg(*label, "an unknown site has an empty label");
    model_free(m);
    free(m);
    rd_close(&lf);
    sym_set_enabled(1);
}
END_TEST

static void string_rec(tlog_t *b, uint64_t t, uint32_t id, const char *text)
{
    uint8_t rec[64] = {0};
    size_t n = strlen(text);
    gmlog_string_t r = {{GMLOG_STRING, 0, GMLOG_NO_DEVICE, 0, 0}, id, (uint32_t)n};
    memcpy(rec, &r, sizeof r);
    memcpy(rec + sizeof r, text, n);
    tlog_rec(b, rec, (sizeof r + n + 7) / 8 * 8, t);
}

/* A site of two Python frames: step (train.py:10) called from `caller` at line `line`. */
static void py_site(tlog_t *b, uint64_t t, uint32_t id, uint32_t caller, unsigned line)
{
    uint8_t rec[sizeof(gmlog_site_t) + 2 * sizeof(gmlog_pyframe_t)] = {0};
    gmlog_site_t s = {{GMLOG_SITE, 0, GMLOG_NO_DEVICE, 0, 0}, id, 0, 2};
    gmlog_pyframe_t py[2] = {{1, 2, 10, 0}, {1, caller, line, 0}};
    memcpy(rec, &s, sizeof s);
    memcpy(rec + sizeof s, py, sizeof py);
    tlog_rec(b, rec, sizeof rec, t);
}

/* Two sites of one line, reached from two callers, are two lines of a report: their labels
 * must differ, or the reader cannot tell which stack a figure belongs to. */
START_TEST(test_two_sites_with_one_label_are_told_apart)
{
    tlog_t b = {0};
    tlog_begin(&b, 0);
    tlog_chunk(&b, 1, 0, 0, 0);
    tlog_device(&b, 1, "dev", 1ull << 30);
    string_rec(&b, 2, 1, "train.py");
    string_rec(&b, 3, 2, "step");
    string_rec(&b, 4, 3, "loop_a");
    string_rec(&b, 5, 4, "loop_b");
    py_site(&b, 6, 1, 3, 20);
    py_site(&b, 7, 2, 4, 30);
    tlog_segment(&b, 8, GMLOG_SEGMENT_ALLOC, TLOG_SEG, 64 * TLOG_MiB);
    tlog_alloc(&b, 9, TLOG_SEG, 8 * TLOG_MiB, 0, 1);
    tlog_alloc(&b, 10, TLOG_SEG + 8 * TLOG_MiB, 4 * TLOG_MiB, 0, 2);
    tlog_end_chunk(&b);
    char path[600];
    snprintf(path, sizeof path, "%s/twins.gmlog", temp_dir());
    ck_assert_msg(tlog_write(&b, path) == 0, "cannot write %s", path);
    tlog_free_buf(&b);
    char *out = NULL;
    int rc = gm(&out, "--color=never", "leaks", path, NULL, NULL, NULL);
    /* the two lines "8.00 MiB  1 x  LABEL" */
    const char *l1 = out ? strstr(out, " x  ") : NULL;
    const char *l2 = l1 ? strstr(l1 + 1, " x  ") : NULL;
    ck_assert_msg(rc == 0 && l1 && l2, "leaks of two sites: rc %d\n%.3000s", rc, out);
    char s1[128] = "", s2[128] = "";
    sscanf(l1 + 4, "%127[^\n]", s1);
    sscanf(l2 + 4, "%127[^\n]", s2);
    ck_assert_msg(strstr(s1, "step (train.py:10)") && strstr(s2, "step (train.py:10)") && strcmp(s1, s2),
                  "the two sites read \"%s\" and \"%s\"", s1, s2);
    free(out);
    unlink(path);
}
END_TEST

Suite *analyzer_sites_suite(void)
{
    Suite *s = suite_create("analyzer_sites");
    TCase *tc = tcase_create("sites");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_a_python_site_is_named_by_its_innermost_python_line);
    tcase_add_test(tc, test_two_sites_with_one_label_are_told_apart);
    suite_add_tcase(s, tc);
    return s;
}
