/* Fragmentation (analyzer/frag.c over model_snap.c's snapshots): the free bytes of the pool are
 * exactly its external gaps and its cache at every sample of the demo fixture and of the demo
 * recorded under GMSHIM_SEGMENTS=vmm (blocks across 2 MiB pages), the samples are evenly spaced
 * and frag lists each one. */
#include "model.h"
#include "suites.h"
#include "test_analyzer_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every sample's free bytes are its gaps and cache, no block outside a segment. */
static void check_free_bytes(const char *log)
{
    rd_log_t lf;
    memset(&lf, 0, sizeof lf);
    ck_assert_msg(rd_open_path(&lf, log) == 0, "cannot open %s", log);
    model_t *m = calloc(1, sizeof *m);
    ck_assert_msg(m != NULL, "out of memory");
    model_build(m, &lf, MODEL_FRAG | MODEL_EPOCHS | MODEL_SITES);
    ck_assert_msg(m->nfsnap == MODEL_FRAG_SAMPLES, "%zu samples of one device", m->nfsnap);
    for (size_t i = 0; i < m->nfsnap; i++) {
        const model_frag_t *f = &m->fsnap[i];
        ck_assert_msg(f->external + f->cached_whole == f->reserved - f->allocated && f->stray_blocks == 0,
                      "sample %zu at %llu ns: reserved %llu - allocated %llu != external %llu + cached %llu (%llu stray)",
                      i, (unsigned long long)f->t, (unsigned long long)f->reserved, (unsigned long long)f->allocated,
                      (unsigned long long)f->external, (unsigned long long)f->cached_whole,
                      (unsigned long long)f->stray_blocks);
        ck_assert_msg(f->largest_free <= f->external + f->cached_whole, "sample %zu: largest free block above the free bytes", i);
        if (i)
            ck_assert_msg(f->t > m->fsnap[i - 1].t, "sample %zu is not after sample %zu", i, i - 1);
    }
    model_frag_t peak;
    ck_assert_msg(model_frag_at_peak(m, 0, &peak) == 0 && peak.reserved == m->dev[0]->peak_reserved,
                  "at the peak: reserved %llu, the peak %llu", (unsigned long long)peak.reserved,
                  (unsigned long long)m->dev[0]->peak_reserved);
    model_free(m);
    free(m);
    rd_close(&lf);
}

START_TEST(test_free_bytes_are_gaps_or_cache_at_every_sample)
{
    check_free_bytes(FIXTURE);
}
END_TEST

/* Under GMSHIM_SEGMENTS=vmm every 2 MiB page is a segment and the demo's blocks of tens of MiB
 * cover many: each page a block covers holds it, none reads as cached. */
START_TEST(test_vmm_blocks_fill_every_page_they_cover)
{
    char log[600], env_log[700];
    snprintf(log, sizeof log, "%s/vmm-demo.gmlog", temp_dir());
    unlink(log);
    snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s", log);
    char prog[600];
    snprintf(prog, sizeof prog, "%s", build_path("tests/integration/demo_train"));
    const char *argv[] = {prog, NULL};
    const char *env[] = {env_log, "GMSHIM_SEGMENTS=vmm", "FAKECUDA_MEM=1G", NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0, "demo_train under vmm exited %d:\n%s", rc, out);
    free(out);
    check_free_bytes(log);
    unlink(log);
}
END_TEST

START_TEST(test_frag_lists_every_sample)
{
    char *out;
    int rc = gm(&out, "--json", "frag", FIXTURE, NULL);
    const char *s = out ? strstr(out, "\"samples\":[") : NULL;
    const char *e = s ? strchr(s, ']') : NULL;
    size_t n = 0;
    for (const char *p = s; p && p < e && (p = strstr(p, "{\"t\":")) && p < e; p++)
        n++;
    ck_assert_msg(rc == 0 && n == MODEL_FRAG_SAMPLES, "frag --json: exit %d, %zu samples:\n%.2000s", rc, n, out);
    free(out);
}
END_TEST

Suite *analyzer_frag_suite(void)
{
    Suite *s = suite_create("analyzer_frag");
    TCase *tc = tcase_create("frag");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_free_bytes_are_gaps_or_cache_at_every_sample);
    tcase_add_test(tc, test_frag_lists_every_sample);
    tcase_add_test(tc, test_vmm_blocks_fill_every_page_they_cover);
    suite_add_tcase(s, tc);
    return s;
}
