/* pickle.h: the pickle writer. Writes what it is asked, in order; it never checks the document's
 * shape (the caller's), only keeps its own list depth and memo within bounds. */
#include "pickle.h"
#include "export_replay.h" /* xr_utf8_len */

#include <string.h>

static const char *const key_text[NKEYS] = {
    "action", "addr", "size", "stream", "time_us", "frames", "filename", "line", "name", "compile_context",
    "user_metadata", "category", "device_free", "device", "address", "total_size", "allocated_size",
    "active_size", "requested_size", "segment_type", "segment_pool_id", "is_expandable", "blocks", "state",
    "stage", "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom", "snapshot",
    "active_allocated", "active_pending_free", "inactive", "large", "small", "N/A", "", "START", "END", "gmshim pool", "unknown",
    "segment_map", "segment_unmap"};

void pickle_byte(pickle_t *p, int c)
{
    fputc(c, p->f);
}

void pickle_u32(pickle_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        pickle_byte(p, (int)(v >> (8 * i)) & 0xff);
}

uint32_t pickle_memoize(pickle_t *p)
{
    pickle_byte(p, 0x94);
    return p->memo++;
}

void pickle_get(pickle_t *p, uint32_t idx)
{
    if (idx < 256) {
        pickle_byte(p, 'h');
        pickle_byte(p, (int)idx);
    } else {
        pickle_byte(p, 'j');
        pickle_u32(p, idx);
    }
}

void pickle_int(pickle_t *p, uint64_t v)
{
    if (v < 256) {
        pickle_byte(p, 'K');
        pickle_byte(p, (int)v);
    } else if (v < 65536) {
        pickle_byte(p, 'M');
        pickle_byte(p, (int)(v & 0xff));
        pickle_byte(p, (int)(v >> 8));
    } else if (v < 0x80000000u) {
        pickle_byte(p, 'J');
        pickle_u32(p, (uint32_t)v);
    } else { /* LONG1: little-endian two's complement, a zero byte when the top bit is set */
        uint8_t b[9];
        int n = 0;
        for (uint64_t x = v; x; x >>= 8)
            b[n++] = (uint8_t)(x & 0xff);
        if (b[n - 1] & 0x80)
            b[n++] = 0;
        pickle_byte(p, 0x8a);
        pickle_byte(p, n);
        fwrite(b, 1, (size_t)n, p->f);
    }
}

/* A str: the log's bytes as valid UTF-8 (a bad byte becomes U+FFFD), whatever they were. */
void pickle_str(pickle_t *p, const char *s)
{
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)u), out = 0;
    for (size_t i = 0; i < n;) {
        int k = xr_utf8_len(u + i, n - i);
        out += k ? (size_t)k : 3;
        i += k ? (size_t)k : 1;
    }
    if (out < 256) {
        pickle_byte(p, 0x8c);
        pickle_byte(p, (int)out);
    } else {
        pickle_byte(p, 'X');
        pickle_u32(p, (uint32_t)out);
    }
    for (size_t i = 0; i < n;) {
        int k = xr_utf8_len(u + i, n - i);
        if (k)
            fwrite(u + i, 1, (size_t)k, p->f);
        else
            fwrite("\xef\xbf\xbd", 1, 3, p->f);
        i += k ? (size_t)k : 1;
    }
}

/* One of the strings every event repeats: written once, then fetched from the memo. */
void pickle_key(pickle_t *p, int k)
{
    if (p->key[k]) {
        pickle_get(p, p->key[k] - 1);
        return;
    }
    pickle_str(p, key_text[k]);
    p->key[k] = pickle_memoize(p) + 1;
}

void pickle_dict(pickle_t *p)
{
    pickle_byte(p, '}');
    pickle_byte(p, '(');
}

void pickle_dict_end(pickle_t *p)
{
    pickle_byte(p, 'u');
}

/* A list; with `memo`, its memo index (memoized before the MARK, where the unpickler's stack
 * top is the list) is stored there. */
void pickle_list_memo(pickle_t *p, uint32_t *memo)
{
    pickle_byte(p, ']');
    if (memo)
        *memo = pickle_memoize(p) + 1;
    if (p->depth < PK_DEPTH)
        p->count[p->depth] = 0;
    p->depth++;
    pickle_byte(p, '(');
}

/* Before each item of the innermost open list. */
void pickle_item(pickle_t *p)
{
    int d = p->depth - 1;
    if (d >= 0 && d < PK_DEPTH && p->count[d]++ == PK_BATCH) {
        pickle_byte(p, 'e');
        pickle_byte(p, '(');
        p->count[d] = 1;
    }
}

void pickle_list(pickle_t *p)
{
    pickle_list_memo(p, NULL);
}

void pickle_list_end(pickle_t *p)
{
    pickle_byte(p, 'e');
    p->depth--;
}
