/* The loaded objects' executable spans (shim/objects.c): sorted, searched, and a dlopen noticed. */
#include "../../shim/objects.h"
#include "suites.h"

#include <dlfcn.h>
#include <link.h>
#include <stdint.h>

typedef struct span_entry {
    gm_span_t span;
    int tag;
} span_entry_t;

static int collect_spans(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct {
        span_entry_t e[512];
        int n;
    } *t = data;
    if (t->n < 512 && objects_exec_span(info, &t->e[t->n].span) == 0)
        t->e[t->n].tag = t->n, t->n++;
    return 0;
}

START_TEST(test_object_spans_find_code_and_notice_a_dlopen)
{
    /* The table both the call-site map and CUPTI's caller check build on (shim/objects.c). */
    static struct {
        span_entry_t e[512];
        int n;
    } t;
    dl_iterate_phdr(collect_spans, &t);
    ck_assert_int_ge(t.n, 2);
    objects_sort(t.e, (size_t)t.n, sizeof *t.e);
    for (int i = 1; i < t.n; i++)
        ck_assert(t.e[i - 1].span.lo < t.e[i].span.lo);
    uintptr_t here = (uintptr_t)collect_spans;
    span_entry_t *hit = objects_find(t.e, (size_t)t.n, sizeof *t.e, here);
    ck_assert_ptr_nonnull(hit);
    ck_assert(hit->span.lo <= here && here < hit->span.hi);
    ck_assert_ptr_null(objects_find(t.e, (size_t)t.n, sizeof *t.e, 16));
    unsigned long long stamp[2] = {~0ull, ~0ull};
    ck_assert_int_eq(objects_changed(stamp), 1);
    ck_assert_int_eq(objects_changed(stamp), 0);
    void *h = dlopen(build_path("fake_cupti/libfakeblas.so"), RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h, "dlopen: %s", dlerror());
    ck_assert_int_eq(objects_changed(stamp), 1);
    dlclose(h);
}
END_TEST

Suite *objects_suite(void)
{
    Suite *s = suite_create("objects");
    TCase *tc = tcase_create("spans");
    tcase_add_test(tc, test_object_spans_find_code_and_notice_a_dlopen);
    suite_add_tcase(s, tc);
    return s;
}
