/* A bounds-checked cursor over bytes read from a file (ELF notes, DWARF line programs): every
 * read past its end sets err and gives 0 or NULL, so that a parser checks once, after a run of
 * reads, and never reads outside the mapping. */
#ifndef GM_CURSOR_H
#define GM_CURSOR_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct cur {
    const uint8_t *p, *end;
    int err;
} cur_t;

static inline uint64_t rd_n(cur_t *c, unsigned n)
{
    if (c->err || (size_t)(c->end - c->p) < n) {
        c->err = 1;
        return 0;
    }
    uint64_t v = 0;
    for (unsigned i = 0; i < n && i < 8; i++) /* wider values (a bad address size) keep 8 bytes */
        v |= (uint64_t)c->p[i] << (8 * i);
    c->p += n;
    return v;
}

static inline uint64_t uleb(cur_t *c)
{
    uint64_t v = 0;
    unsigned shift = 0;
    for (;;) {
        if (c->err || c->p >= c->end) {
            c->err = 1;
            return 0;
        }
        uint8_t b = *c->p++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80))
            return v;
    }
}

static inline int64_t sleb(cur_t *c)
{
    int64_t v = 0;
    unsigned shift = 0;
    uint8_t b;
    do {
        if (c->err || c->p >= c->end) {
            c->err = 1;
            return 0;
        }
        b = *c->p++;
        if (shift < 64)
            v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
        shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40))
        v |= (int64_t)(~0ull << shift);
    return v;
}

static inline const char *cstr(cur_t *c)
{
    if (c->err)
        return NULL;
    const uint8_t *z = memchr(c->p, 0, (size_t)(c->end - c->p));
    if (!z) {
        c->err = 1;
        return NULL;
    }
    const char *s = (const char *)c->p;
    c->p = z + 1;
    return s;
}

static inline void skip(cur_t *c, uint64_t n)
{
    if (c->err || (uint64_t)(c->end - c->p) < n) {
        c->err = 1;
        return;
    }
    c->p += n;
}

/* A NUL-terminated string at `off` of a section, or NULL. */
static inline const char *sec_str(const uint8_t *sec, size_t size, uint64_t off)
{
    if (!sec || off >= size || !memchr(sec + off, 0, size - off))
        return NULL;
    return (const char *)sec + off;
}

#endif
