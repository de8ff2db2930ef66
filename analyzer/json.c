/* The JSON writer. Escapes every string it is given (labels, paths and names come from logs and
 * may hold any byte); never writes NaN or Infinity, which JSON does not have. It is on the path
 * of every record `dump --json` prints: plain runs of a string go out in one write, numbers are
 * converted by hand, and characters skip stdio's lock (a stream is written by one thread). */
#include "json.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

void json_init(json_t *j, FILE *f)
{
    memset(j, 0, sizeof *j);
    j->f = f;
}

#define json_putc(c, f) putc_unlocked((c), (f))
#define json_write(p, n, f) fwrite_unlocked((p), 1, (n), (f))
#define json_puts(s, f) fputs_unlocked((s), (f))

/* A character that goes out as it is. */
static inline int json_plain(unsigned c)
{
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
}

static void put_escaped(FILE *f, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    json_putc('"', f);
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        const unsigned char *run = p;
        while (p < end && json_plain(*p))
            p++;
        if (p > run)
            json_write(run, (size_t)(p - run), f);
        if (p == end)
            break;
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            json_putc('\\', f);
            json_putc((int)c, f);
            p++;
        } else if (c < 0x20 || c == 0x7f) {
            switch (c) {
            case '\n': json_puts("\\n", f); break;
            case '\t': json_puts("\\t", f); break;
            case '\r': json_puts("\\r", f); break;
            default: fprintf(f, "\\u00%c%c", hex[c >> 4], hex[c & 15]); break;
            }
            p++;
        } else if (c < 0x80) {
            json_putc((int)c, f);
            p++;
        } else {
            /* Copy a well-formed UTF-8 sequence; anything else becomes U+FFFD. */
            size_t len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
            int ok = len && (size_t)(end - p) >= len;
            for (size_t i = 1; ok && i < len; i++)
                ok = (p[i] & 0xc0) == 0x80;
            if (ok && len == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0)))
                ok = 0;
            if (ok && len == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)))
                ok = 0;
            if (ok) {
                json_write(p, len, f);
                p += len;
            } else {
                json_puts("\\ufffd", f);
                p++;
            }
        }
    }
    json_putc('"', f);
}

static void member(json_t *j, const char *key)
{
    if (j->depth > 0 && j->depth <= JSON_MAX_DEPTH) {
        if (j->count[j->depth - 1]++)
            json_putc(',', j->f);
    }
    if (key) {
        put_escaped(j->f, key, strlen(key));
        json_putc(':', j->f);
    }
}

static void open_level(json_t *j, const char *key, char c)
{
    member(j, key);
    json_putc(c, j->f);
    if (j->depth < JSON_MAX_DEPTH)
        j->count[j->depth] = 0;
    j->depth++;
}

void json_obj(json_t *j, const char *key) { open_level(j, key, '{'); }
void json_arr(json_t *j, const char *key) { open_level(j, key, '['); }

void json_obj_end(json_t *j)
{
    j->depth--;
    json_putc('}', j->f);
}

void json_arr_end(json_t *j)
{
    j->depth--;
    json_putc(']', j->f);
}

/* Decimal digits of v, written at the end of buf[24]; a pointer to the first. */
static char *json_digits(uint64_t v, char *end)
{
    char *p = end;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return p;
}

void json_u64(json_t *j, const char *key, uint64_t v)
{
    char buf[24], *p = json_digits(v, buf + sizeof buf);
    member(j, key);
    json_write(p, (size_t)(buf + sizeof buf - p), j->f);
}

void json_i64(json_t *j, const char *key, int64_t v)
{
    char buf[24], *p = json_digits(v < 0 ? 0 - (uint64_t)v : (uint64_t)v, buf + sizeof buf);
    if (v < 0)
        *--p = '-';
    member(j, key);
    json_write(p, (size_t)(buf + sizeof buf - p), j->f);
}

void json_dbl(json_t *j, const char *key, double v)
{
    member(j, key);
    if (isfinite(v))
        fprintf(j->f, "%.6g", v);
    else
        json_puts("null", j->f);
}

void json_bool(json_t *j, const char *key, int v)
{
    member(j, key);
    json_puts(v ? "true" : "false", j->f);
}

void json_null(json_t *j, const char *key)
{
    member(j, key);
    json_puts("null", j->f);
}

void json_strn(json_t *j, const char *key, const char *s, size_t n)
{
    member(j, key);
    put_escaped(j->f, s ? s : "", s ? n : 0);
}

void json_str(json_t *j, const char *key, const char *s)
{
    if (!s) {
        json_null(j, key);
        return;
    }
    json_strn(j, key, s, strlen(s));
}

void json_line_end(json_t *j)
{
    json_putc('\n', j->f);
}
