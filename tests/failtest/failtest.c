/* The malloc failer (failtest.h): every GMFAIL_EVERY-th host allocation gmshim makes fails, the
 * first after GMFAIL_PHASE of them (0 by default; GMFAIL_EVERY unset or 0: none fails). Linked
 * only into the test variant of the library; the counter is shared by every thread. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The real functions: failtest.h is not included here (its macros would rename them), so these
 * names are libc's; its prototypes, repeated. */
void *failtest_malloc(size_t n);
void *failtest_calloc(size_t m, size_t n);
void *failtest_realloc(void *p, size_t n);
int failtest_posix_memalign(void **out, size_t align, size_t n);
char *failtest_strdup(const char *s);

static uint64_t every = UINT64_MAX, calls;

static int failtest_fails(void)
{
    uint64_t n = __atomic_load_n(&every, __ATOMIC_RELAXED);
    if (n == UINT64_MAX) {
        const char *e = getenv("GMFAIL_EVERY"), *p = getenv("GMFAIL_PHASE");
        n = e ? strtoull(e, NULL, 10) : 0;
        if (p)
            __atomic_store_n(&calls, strtoull(p, NULL, 10), __ATOMIC_RELAXED);
        __atomic_store_n(&every, n, __ATOMIC_RELAXED);
    }
    return n && __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED) % n == 0;
}

__attribute__((visibility("hidden"))) void *failtest_malloc(size_t n)
{
    return failtest_fails() ? (errno = ENOMEM, NULL) : malloc(n);
}

__attribute__((visibility("hidden"))) void *failtest_calloc(size_t m, size_t n)
{
    return failtest_fails() ? (errno = ENOMEM, NULL) : calloc(m, n);
}

__attribute__((visibility("hidden"))) void *failtest_realloc(void *p, size_t n)
{
    return failtest_fails() ? (errno = ENOMEM, NULL) : realloc(p, n);
}

__attribute__((visibility("hidden"))) int failtest_posix_memalign(void **out, size_t align, size_t n)
{
    return failtest_fails() ? ENOMEM : posix_memalign(out, align, n);
}

__attribute__((visibility("hidden"))) char *failtest_strdup(const char *s)
{
    return failtest_fails() ? (errno = ENOMEM, NULL) : strdup(s);
}
