/* The malloc failer's switch: forced into every file of the test variant of the library
 * (build/failtest/libgmshim.so, `-include`), it turns gmshim's own host allocations into calls
 * that fail every Nth time (GMFAIL_EVERY). The host's allocations, and the production library,
 * are untouched: only the calls written in shim/ and common/ are renamed. */
#ifndef GM_FAILTEST_H
#define GM_FAILTEST_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void *failtest_malloc(size_t n);
void *failtest_calloc(size_t m, size_t n);
void *failtest_realloc(void *p, size_t n);
int failtest_posix_memalign(void **out, size_t align, size_t n);
char *failtest_strdup(const char *s);

#define malloc(n) failtest_malloc(n)
#define calloc(m, n) failtest_calloc(m, n)
#define realloc(p, n) failtest_realloc(p, n)
#define posix_memalign(o, a, n) failtest_posix_memalign(o, a, n)
#define strdup(s) failtest_strdup(s)

#endif
