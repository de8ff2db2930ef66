/* Formatting for the text reports. Units are binary (KiB, MiB, GiB) like the rest of gmshim;
 * colour codes are emitted only when rep_color is set by the CLI's --color logic. */
#include "output.h"
#include "vec.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

int rep_color;

const char *rep_bytes(uint64_t bytes, char buf[32])
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, 32, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 6) {
        v /= 1024;
        u++;
    }
    snprintf(buf, 32, v >= 100 ? "%.0f %s" : v >= 10 ? "%.1f %s" : "%.2f %s", v, units[u]);
    return buf;
}

const char *rep_dur(uint64_t ns, char buf[32])
{
    double v = (double)ns;
    if (ns < 1000)
        snprintf(buf, 32, "%llu ns", (unsigned long long)ns);
    else if (ns < 1000000)
        snprintf(buf, 32, "%.3g us", v / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, 32, "%.3g ms", v / 1e6);
    else if (ns < 1000000000000ull)
        snprintf(buf, 32, "%.3g s", v / 1e9);
    else if (ns < 3600000000000ull * 2)
        snprintf(buf, 32, "%.0f s", v / 1e9);
    else
        snprintf(buf, 32, "%.1f h", v / 3.6e12);
    return buf;
}

const char *rep_time(uint64_t ns, char buf[32])
{
    snprintf(buf, 32, "%.3f s", (double)ns / 1e9);
    return buf;
}

const char *rep_pct(uint64_t part, uint64_t whole, char buf[16])
{
    if (!whole)
        snprintf(buf, 16, "-");
    else
        snprintf(buf, 16, "%.1f%%", 100.0 * (double)part / (double)whole);
    return buf;
}

const char *rep_count(uint64_t n, char buf[32])
{
    char tmp[32];
    int len = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)n);
    int o = 0;
    for (int i = 0; i < len; i++) {
        if (i && (len - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = 0;
    return buf;
}

const char *rep_bold(void) { return rep_color ? "\033[1m" : ""; }
const char *rep_red(void) { return rep_color ? "\033[31m" : ""; }
const char *rep_yellow(void) { return rep_color ? "\033[33m" : ""; }
const char *rep_green(void) { return rep_color ? "\033[32m" : ""; }
const char *rep_dim(void) { return rep_color ? "\033[2m" : ""; }
const char *rep_reset(void) { return rep_color ? "\033[0m" : ""; }

void rep_heading(FILE *f, const char *fmt, ...)
{
    va_list ap;
    fputs(rep_bold(), f);
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputs(rep_reset(), f);
    fputc('\n', f);
}

/* ---- line wrapping ---------------------------------------------------------------------------- */

typedef struct wrap {
    FILE *under;
    int width;
    char *line;
    size_t len, cap;
    int failed;
} wrap_t;

/* The byte after the character (or colour escape) at s[i]; *cols: the columns it takes. */
static size_t next_char(const char *s, size_t i, size_t n, int *cols)
{
    if (s[i] == '\033' && i + 1 < n && s[i + 1] == '[') {
        i += 2;
        while (i < n && !((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z')))
            i++;
        *cols = 0;
        return i < n ? i + 1 : n;
    }
    *cols = 1;
    i++;
    while (i < n && ((unsigned char)s[i] & 0xc0) == 0x80) /* UTF-8 continuation bytes */
        i++;
    return i;
}

/* Where the continuation lines start: under the text after a label ("  cause    leak: ...",
 * "  driver calls  23 ..."), after a list mark ("    - ..."), else two past the indentation. */
static int wrap_indent(const char *s, size_t n, int width)
{
    size_t lead = 0;
    while (lead < n && s[lead] == ' ')
        lead++;
    if (lead + 1 < n && s[lead] == '-' && s[lead + 1] == ' ')
        return (int)lead + 2;
    for (size_t i = lead; i + 2 < n && i < lead + 24; i++)
        if (s[i] != ' ' && s[i + 1] == ' ' && s[i + 2] == ' ') {
            size_t j = i + 1;
            while (j < n && s[j] == ' ')
                j++;
            if (j < n && (int)j <= width / 2) {
                int col = 0, w;
                for (size_t k = 0; k < j; col += w)
                    k = next_char(s, k, j, &w);
                return col;
            }
            break;
        }
    return (int)lead + 2 <= width / 2 ? (int)lead + 2 : 2;
}

static void wrap_emit(wrap_t *w, const char *s, size_t n)
{
    if (n && fwrite(s, 1, n, w->under) != n)
        w->failed = 1;
}

/* One line (without its newline), wrapped. */
static void wrap_line(wrap_t *w, const char *s, size_t n)
{
    if (n >= 3 && !memcmp(s, "== ", 3)) {
        /* a section's heading (a log's path, its program) stays one line */
        wrap_emit(w, s, n);
        wrap_emit(w, "\n", 1);
        return;
    }
    int ind = -1;
    size_t pos = 0;
    for (int first = 1;; first = 0) {
        int limit = first ? w->width : w->width - ind, col = 0, text = 0, cols;
        size_t i = pos, brk = (size_t)-1;
        while (i < n) {
            /* never between a number and its unit ("1.90 GiB", "5 %") */
            int glued = i > pos && s[i - 1] >= '0' && s[i - 1] <= '9' && i + 1 < n &&
                        ((s[i + 1] >= 'A' && s[i + 1] <= 'Z') || (s[i + 1] >= 'a' && s[i + 1] <= 'z') ||
                         s[i + 1] == '%');
            if (s[i] == ' ' && text && !glued) {
                if (col <= limit)
                    brk = i;
                else if (brk == (size_t)-1)
                    brk = i; /* a word longer than the line: break after it */
                if (col > limit)
                    break;
            }
            if (s[i] != ' ')
                text = 1;
            i = next_char(s, i, n, &cols);
            col += cols;
            if (col > limit && brk != (size_t)-1)
                break;
        }
        if (i >= n && (col <= limit || brk == (size_t)-1)) {
            wrap_emit(w, s + pos, n - pos);
            break;
        }
        if (ind < 0)
            ind = wrap_indent(s, n, w->width);
        wrap_emit(w, s + pos, brk - pos);
        wrap_emit(w, "\n", 1);
        for (int k = 0; k < ind; k++)
            wrap_emit(w, " ", 1);
        pos = brk;
        while (pos < n && s[pos] == ' ')
            pos++;
        if (pos >= n)
            break;
    }
    wrap_emit(w, "\n", 1);
}

static ssize_t wrap_write(void *cookie, const char *buf, size_t size)
{
    wrap_t *w = cookie;
    for (size_t i = 0; i < size; i++) {
        if (buf[i] == '\n') {
            wrap_line(w, w->line, w->len);
            w->len = 0;
            continue;
        }
        char *l = vec_grow(w->line, &w->cap, w->len + 1, 1, 256);
        if (!l)
            return -1;
        w->line = l;
        w->line[w->len++] = buf[i];
    }
    if (w->failed || fflush(w->under) != 0)
        return -1;
    return (ssize_t)size;
}

static int wrap_close(void *cookie)
{
    wrap_t *w = cookie;
    if (w->len) { /* a last line without its newline */
        size_t n = w->len;
        w->len = 0;
        wrap_line(w, w->line, n);
    }
    int bad = w->failed || fflush(w->under) != 0;
    free(w->line);
    free(w);
    return bad ? -1 : 0;
}

FILE *rep_wrap_open(FILE *under, int width)
{
    wrap_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->under = under;
    w->width = width < 40 ? 40 : width;
    cookie_io_functions_t io = {NULL, wrap_write, NULL, wrap_close};
    FILE *f = fopencookie(w, "w", io);
    if (!f)
        free(w);
    return f;
}
