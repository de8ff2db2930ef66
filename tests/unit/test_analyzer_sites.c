/* Call sites as the reports name them (analyzer/sites.c): a PyTorch run's growing site reads as
 * its Python line, Python frames first; an unknown site is said to be unknown, not a crash. */
#include "model.h"
#include "sites.h"
#include "suites.h"
#include "symbolize.h"
#include "test_analyzer_cli.h"

#include <stdlib.h>
#include <string.h>

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
        if (strcmp(label, "<module> (torch_leak_oom.py:21)"))
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

Suite *analyzer_sites_suite(void)
{
    Suite *s = suite_create("analyzer_sites");
    TCase *tc = tcase_create("sites");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_a_python_site_is_named_by_its_innermost_python_line);
    suite_add_tcase(s, tc);
    return s;
}
