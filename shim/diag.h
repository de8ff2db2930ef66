/* Messages to stderr: warnings (always, but each at most once where asked) and verbose notes
 * (only with GMSHIM_VERBOSE). The host program's output is sacred: nothing else prints. */
#ifndef GM_DIAG_H
#define GM_DIAG_H

#include <stdarg.h>

void diag_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints only the first time `once` is seen zero; `once` is a caller-owned flag. */
void diag_warn_once(int *once, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void diag_verbose(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
