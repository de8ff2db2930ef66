/* The JSON writer. Escapes every string it is given (labels, paths and names come from logs and
 * may hold any byte); never writes NaN or Infinity, which JSON does not have. */
#include "json.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

void json_init(json_t *j, FILE *f)
{
    memset(j, 0, sizeof *j);
    j->f = f;
}

static void put_escaped(FILE *f, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    fputc('"', f);
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc((int)c, f);
            p++;
        } else if (c < 0x20 || c == 0x7f) {
            switch (c) {
            case '\n': fputs("\\n", f); break;
            case '\t': fputs("\\t", f); break;
            case '\r': fputs("\\r", f); break;
            default: fprintf(f, "\\u00%c%c", hex[c >> 4], hex[c & 15]); break;
            }
            p++;
        } else if (c < 0x80) {
            fputc((int)c, f);
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
                fwrite(p, 1, len, f);
                p += len;
            } else {
                fputs("\\ufffd", f);
                p++;
            }
        }
    }
    fputc('"', f);
}

static void member(json_t *j, const char *key)
{
    if (j->depth > 0 && j->depth <= JSON_MAX_DEPTH) {
        if (j->count[j->depth - 1]++)
            fputc(',', j->f);
    }
    if (key) {
        put_escaped(j->f, key, strlen(key));
        fputc(':', j->f);
    }
}

static void open_level(json_t *j, const char *key, char c)
{
    member(j, key);
    fputc(c, j->f);
    if (j->depth < JSON_MAX_DEPTH)
        j->count[j->depth] = 0;
    j->depth++;
}

void json_obj(json_t *j, const char *key) { open_level(j, key, '{'); }
void json_arr(json_t *j, const char *key) { open_level(j, key, '['); }

void json_obj_end(json_t *j)
{
    j->depth--;
    fputc('}', j->f);
}

void json_arr_end(json_t *j)
{
    j->depth--;
    fputc(']', j->f);
}

void json_u64(json_t *j, const char *key, uint64_t v)
{
    member(j, key);
    fprintf(j->f, "%" PRIu64, v);
}

void json_i64(json_t *j, const char *key, int64_t v)
{
    member(j, key);
    fprintf(j->f, "%" PRId64, v);
}

void json_dbl(json_t *j, const char *key, double v)
{
    member(j, key);
    if (isfinite(v))
        fprintf(j->f, "%.6g", v);
    else
        fputs("null", j->f);
}

void json_bool(json_t *j, const char *key, int v)
{
    member(j, key);
    fputs(v ? "true" : "false", j->f);
}

void json_null(json_t *j, const char *key)
{
    member(j, key);
    fputs("null", j->f);
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
    fputc('\n', j->f);
}
