/* Warnings and verbose notes, written with one write(2) each so that lines from several threads
 * and ranks do not interleave mid-line. Never allocates, so it is safe on failure paths. */
#include "diag.h"
#include "options.h"

#include <stdio.h>
#include <unistd.h>

static void diag_vprint(const char *fmt, va_list ap)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "gmshim[%d]: ", (int)getpid());
    if (n < 0 || n >= (int)sizeof line)
        return;
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    if (m < 0)
        return;
    size_t len = (size_t)n + ((size_t)m < sizeof line - (size_t)n - 1 ? (size_t)m : sizeof line - (size_t)n - 2);
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

void diag_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_vprint(fmt, ap);
    va_end(ap);
}

void diag_warn_once(int *once, const char *fmt, ...)
{
    if (__atomic_exchange_n(once, 1, __ATOMIC_RELAXED))
        return;
    va_list ap;
    va_start(ap, fmt);
    diag_vprint(fmt, ap);
    va_end(ap);
}

void diag_verbose(const char *fmt, ...)
{
    if (!options_get(GM_OPT_VERBOSE))
        return;
    va_list ap;
    va_start(ap, fmt);
    diag_vprint(fmt, ap);
    va_end(ap);
}
