/* Text output helpers shared by the reports: byte sizes, durations, times, colour (only when
 * asked or when stdout is a terminal), percentages. They format into caller buffers and never
 * allocate. */
#ifndef GM_OUTPUT_H
#define GM_OUTPUT_H

#include <stdint.h>
#include <stdio.h>

extern int rep_color;                  /* 1: emit ANSI colour codes */

/* "1.50 GiB", "512 B": binary units, three significant digits. */
const char *rep_bytes(uint64_t bytes, char buf[32]);
/* "1.23 s", "45.6 ms", "120 us", "80 ns". */
const char *rep_dur(uint64_t ns, char buf[32]);
/* A log time (ns since the start) as seconds: "12.345 s". */
const char *rep_time(uint64_t ns, char buf[32]);
/* "12.5%"; "-" when the whole is 0. */
const char *rep_pct(uint64_t part, uint64_t whole, char buf[16]);
/* "12,345,678". */
const char *rep_count(uint64_t n, char buf[32]);

/* Colour escapes, or "" when colour is off. */
const char *rep_bold(void);
const char *rep_red(void);
const char *rep_yellow(void);
const char *rep_green(void);
const char *rep_dim(void);
const char *rep_reset(void);

/* A stream over `under` that wraps each text line longer than `width` columns at a space;
 * the continuation lines are indented under the line's text column (after a label such as
 * "  cause    ", or a "- " list mark). Colour escapes take no columns. Closing it writes what
 * is left; a write error on `under` is an error of this stream. */
FILE *rep_wrap_open(FILE *under, int width);

/* A section heading: bold text, then a newline. */
void rep_heading(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
