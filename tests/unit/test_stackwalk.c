/* The cached stack walker (shim/stackwalk.c) against backtrace(): the same return addresses for
 * frames without frame pointers, with alloca, with a realigned stack, through libc and on a new
 * thread, and a second walk of a stack that computes no rule; -1 where it cannot know; a walk
 * remembered answers only for the same stack and context. */
#include "suites.h"
#include "stackwalk.h"

#include <alloca.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unwind.h>

#define MAXF 64

typedef struct walk {
    void *bt[MAXF], *uw[MAXF];
    int nbt, nuw;
} walk_t;

/* What glibc's backtrace() does, on libgcc's unwinder itself: a sanitizer's runtime replaces
 * backtrace() with its own (another first frame, its own walk), so the reference is taken here. */
typedef struct ref {
    void **out;
    int n, max;
} ref_t;

static _Unwind_Reason_Code ref_step(struct _Unwind_Context *ctx, void *arg)
{
    ref_t *r = arg;
    if (r->n >= 0)
        r->out[r->n] = (void *)_Unwind_GetIP(ctx);
    return ++r->n == r->max ? _URC_END_OF_STACK : _URC_NO_REASON;
}

static int __attribute__((noinline)) ref_backtrace(void **out, int max)
{
    ref_t r = {out, -1, max}; /* -1: this function's own frame is not counted */
    _Unwind_Backtrace(ref_step, &r);
    if (r.n > 1 && out[r.n - 1] == NULL)
        r.n--;
    return r.n < 0 ? 0 : r.n;
}

/* Both walks from one function: their first entries are the two calls' return addresses. */
static void __attribute__((noinline)) take(walk_t *w)
{
    w->nbt = ref_backtrace(w->bt, MAXF);
    w->nuw = stackwalk_backtrace(w->uw, MAXF);
    __asm__ volatile("" ::: "memory");
}

static void check_same(const walk_t *w, const char *what)
{
    ck_assert_msg(w->nuw > 0, "%s: the walker gave %d (backtrace %d frames)", what, w->nuw, w->nbt);
    ck_assert_msg(w->nuw == w->nbt, "%s: %d frames against libgcc's %d", what, w->nuw, w->nbt);
    uintptr_t d = (uintptr_t)w->uw[0] - (uintptr_t)w->bt[0];
    ck_assert_msg(d > 0 && d < 256, "%s: the first frames are %p and %p, not one function's two calls", what,
                  w->uw[0], w->bt[0]);
    for (int i = 1; i < w->nbt; i++)
        ck_assert_msg(w->uw[i] == w->bt[i], "%s: frame %d is %p, libgcc has %p", what, i, w->uw[i], w->bt[i]);
}

#define NOFP __attribute__((noinline, optimize("omit-frame-pointer")))

static volatile int sink;

static int NOFP plain(walk_t *w, int depth)
{
    volatile char pad[24 + 8 * (depth % 5)];
    pad[0] = (char)depth;
    if (depth == 0)
        take(w);
    else
        sink += plain(w, depth - 1);
    return pad[0];
}

static int NOFP with_alloca(walk_t *w, int n)
{
    volatile char *p = alloca((size_t)n);
    p[0] = 1;
    if (n > 64)
        sink += with_alloca(w, n / 2);
    else
        take(w);
    return p[0];
}

static int NOFP realigned(walk_t *w, int depth)
{
    char buf[96] __attribute__((aligned(64)));
    memset(buf, depth, sizeof buf);
    __asm__ volatile("" : : "r"(buf) : "memory");
    if (depth == 0)
        take(w);
    else
        sink += realigned(w, depth - 1);
    return buf[depth % 96];
}

static walk_t *cmp_walk;
static int cmp_calls;

static int cmp_take(const void *a, const void *b)
{
    if (cmp_calls++ == 0)
        take(cmp_walk);
    return *(const int *)a - *(const int *)b;
}

START_TEST(test_frames_without_frame_pointers_match_backtrace)
{
    for (int depth = 0; depth < 40; depth += 7) {
        walk_t w;
        plain(&w, depth);
        char what[64];
        snprintf(what, sizeof what, "%d frames without frame pointers", depth + 1);
        check_same(&w, what);
    }
}
END_TEST

START_TEST(test_frames_with_alloca_match_backtrace)
{
    walk_t w;
    with_alloca(&w, 4096);
    check_same(&w, "alloca frames");
}
END_TEST

START_TEST(test_a_realigned_stack_matches_backtrace_or_falls_back)
{
    walk_t w;
    realigned(&w, 3);
    if (w.nuw == -1) /* a rule beyond the walker: backtrace() serves, which is correct */
        return;
    check_same(&w, "realigned frames");
}
END_TEST

START_TEST(test_frames_through_libc_match_backtrace)
{
    walk_t w;
    int v[8] = {5, 3, 7, 1, 8, 2, 6, 4};
    cmp_walk = &w;
    cmp_calls = 0;
    qsort(v, 8, sizeof *v, cmp_take);
    check_same(&w, "a qsort comparator's frames");
}
END_TEST

static void *thread_walk(void *arg)
{
    plain(arg, 5);
    return NULL;
}

START_TEST(test_a_new_threads_stack_matches_backtrace_to_its_end)
{
    walk_t w;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, thread_walk, &w), 0);
    pthread_join(t, NULL);
    check_same(&w, "a new thread's frames");
}
END_TEST

START_TEST(test_a_repeated_stack_computes_no_rule)
{
    walk_t w;
    unsigned long long c0, r0, c1, r1, m;
    for (volatile int i = 0; i < 2; i++) { /* one call site, so one stack (volatile: not peeled) */
        stackwalk_counts(&c0, &r0, &m);
        plain(&w, 12);
    }
    stackwalk_counts(&c1, &r1, &m);
    check_same(&w, "the second walk");
    ck_assert_msg(r1 == r0, "the second walk of one stack computed %llu rules", r1 - r0);
    ck_assert_msg(c1 - c0 >= (unsigned long long)w.nuw, "the second walk read %llu cached rules for %d frames",
                  c1 - c0, w.nuw);
}
END_TEST

START_TEST(test_a_short_buffer_gets_the_innermost_frames)
{
    walk_t w;
    plain(&w, 20);
    void *few[4];
    int n = stackwalk_backtrace(few, 4);
    ck_assert_int_eq(n, 4);
    check_same(&w, "the full walk");
}
END_TEST

static walk_t ctx_walk;
static ucontext_t ctx_main, ctx_other;

static void on_other_stack(void)
{
    take(&ctx_walk);
}

START_TEST(test_a_stack_of_unknown_bounds_falls_back)
{
    size_t size = 256 * 1024;
    char *stack = malloc(size);
    ck_assert_ptr_nonnull(stack);
    getcontext(&ctx_other);
    ctx_other.uc_stack.ss_sp = stack;
    ctx_other.uc_stack.ss_size = size;
    ctx_other.uc_link = &ctx_main;
    makecontext(&ctx_other, on_other_stack, 0);
    ck_assert_int_eq(swapcontext(&ctx_main, &ctx_other), 0);
    free(stack);
    ck_assert_msg(ctx_walk.nuw == -1, "a walk on a heap stack gave %d frames, not the fallback", ctx_walk.nuw);
}
END_TEST

typedef struct probe {
    void *f[MAXF];
    int n;
    uint32_t value;
} probe_t;

static void __attribute__((noinline)) memo_probe(probe_t *p, uint64_t ctx)
{
    p->n = stackwalk_backtrace_memo(p->f, MAXF, ctx, &p->value);
    __asm__ volatile("" ::: "memory");
}

/* Two calls from one function: the same stack pointer, different return addresses. */
static void NOFP two_sites(probe_t *a, probe_t *b, uint64_t ctx)
{
    memo_probe(a, ctx);
    memo_probe(b, ctx);
}

static void NOFP repeat_site(probe_t *p, int times, uint64_t ctx)
{
    for (volatile int i = 0; i < times; i++) {
        memo_probe(p, ctx);
        if (p->n >= 0)
            stackwalk_remember(4242);
    }
}

START_TEST(test_a_remembered_walk_answers_without_walking)
{
    probe_t p;
    unsigned long long c0, r0, m0, c1, r1, m1;
    stackwalk_counts(&c0, &r0, &m0);
    repeat_site(&p, 4, 7); /* one walk, then three of the same stack */
    stackwalk_counts(&c1, &r1, &m1);
    ck_assert_msg(p.n == -2 && p.value == 4242, "a walk of the same stack gave %d (value %u), not the memory", p.n,
                  p.value);
    ck_assert_msg(m1 - m0 == 3, "three walks of one stack: %llu answered from memory", m1 - m0);
}
END_TEST

START_TEST(test_a_stack_that_differs_in_one_word_is_walked_again)
{
    probe_t a, b;
    two_sites(&a, &b, 9); /* nothing remembered yet: both walk */
    ck_assert_msg(a.n > 0 && b.n > 0, "the walks gave %d and %d", a.n, b.n);
    stackwalk_remember(1); /* files b's walk */
    two_sites(&a, &b, 9);
    ck_assert_msg(a.n > 0, "a's stack (another return address at the same stack pointer) was answered from b's memory");
    ck_assert_msg(b.n == -2 || b.n > 0, "b gave %d", b.n);
    walk_t w;
    plain(&w, 3);
    check_same(&w, "a walk after the memory was asked");
}
END_TEST

START_TEST(test_a_remembered_walk_is_kept_apart_by_its_context)
{
    probe_t p;
    repeat_site(&p, 2, 11);
    ck_assert_int_eq(p.n, -2);
    repeat_site(&p, 1, 12);
    ck_assert_msg(p.n > 0, "another context was answered from memory (%d)", p.n);
}
END_TEST

/* Code built without frame pointers keeps data in %rbp; a callee that saves the register puts the
 * data on the stack, where the walk reads it back but never uses it. */
static void NOFP data_in_bp(probe_t *p, walk_t *w, uintptr_t data, uint64_t ctx)
{
    __asm__ volatile("mov %0, %%rbp" : : "r"(data) : "rbp");
    if (w)
        take(w);
    else
        memo_probe(p, ctx);
    sink++; /* no tail call: the data stays in %rbp during the call */
}

START_TEST(test_data_in_the_frame_pointer_register_does_not_defeat_the_memory)
{
    walk_t w;
    data_in_bp(NULL, &w, 0x5eed0000, 0);
    check_same(&w, "frames below a function that keeps data in %rbp");
    probe_t p;
    unsigned long long c, r, m0, m1;
    stackwalk_counts(&c, &r, &m0);
    for (volatile int i = 0; i < 4; i++) {
        data_in_bp(&p, NULL, 0x5eed0000 + 64 * (uintptr_t)i, 21);
        if (p.n >= 0)
            stackwalk_remember(99);
    }
    stackwalk_counts(&c, &r, &m1);
    ck_assert_msg(p.n == -2 && p.value == 99 && m1 - m0 == 3,
                  "four walks that differ only in an unused saved %%rbp: %llu answered from memory (last gave %d)",
                  m1 - m0, p.n);
}
END_TEST

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
/* The reference is glibc's backtrace() where no sanitizer replaces it. */
static void __attribute__((noinline)) take_both(void **a, int *na, void **b, int *nb)
{
    *na = ref_backtrace(a, MAXF);
    *nb = backtrace(b, MAXF);
}

START_TEST(test_the_reference_is_what_backtrace_gives)
{
    void *a[MAXF], *b[MAXF];
    int na, nb;
    take_both(a, &na, b, &nb);
    ck_assert_msg(na == nb, "the reference gave %d frames, backtrace() %d", na, nb);
    for (int i = 1; i < na; i++)
        ck_assert_msg(a[i] == b[i], "frame %d: the reference %p, backtrace() %p", i, a[i], b[i]);
}
END_TEST
#endif

Suite *stackwalk_suite(void)
{
    Suite *s = suite_create("stackwalk");
    TCase *tc = tcase_create("walk");
    tcase_add_test(tc, test_frames_without_frame_pointers_match_backtrace);
    tcase_add_test(tc, test_frames_with_alloca_match_backtrace);
    tcase_add_test(tc, test_a_realigned_stack_matches_backtrace_or_falls_back);
    tcase_add_test(tc, test_frames_through_libc_match_backtrace);
    tcase_add_test(tc, test_a_new_threads_stack_matches_backtrace_to_its_end);
    tcase_add_test(tc, test_a_repeated_stack_computes_no_rule);
    tcase_add_test(tc, test_a_short_buffer_gets_the_innermost_frames);
    tcase_add_test(tc, test_a_stack_of_unknown_bounds_falls_back);
    tcase_add_test(tc, test_a_remembered_walk_answers_without_walking);
    tcase_add_test(tc, test_a_stack_that_differs_in_one_word_is_walked_again);
    tcase_add_test(tc, test_a_remembered_walk_is_kept_apart_by_its_context);
    tcase_add_test(tc, test_data_in_the_frame_pointer_register_does_not_defeat_the_memory);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    tcase_add_test(tc, test_the_reference_is_what_backtrace_gives);
#endif
    suite_add_tcase(s, tc);
    return s;
}
