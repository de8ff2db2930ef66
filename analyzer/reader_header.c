/* The log's header and metadata: the file's first pages, checked field by field (magic,
 * version, byte order, sizes) before anything else is read, and the metadata entries after it. */
#include "reader.h"
#include "reader_int.h"
#include "vec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_META 4096
#define MAX_HEADER (64u << 20)


/* Whether the file is what a writer leaves when it ends before its header is written: nothing,
 * or the header's reserved pages still zero (perhaps with the magic stored first). */
int rd_unwritten_header(const rd_log_t *lf)
{
    if (lf->size == 0)
        return 1;
    if (lf->size % GMLOG_HEADER_ALIGN || lf->size > MAX_HEADER)
        return 0;
    uint8_t buf[4096];
    for (uint64_t off = 0; off < lf->size; off += sizeof buf) {
        size_t n = rd_read_at(lf, buf, sizeof buf, off);
        if (n != sizeof buf)
            return 0;
        size_t from = 0;
        if (off == 0 && !memcmp(buf, GMLOG_MAGIC, 8))
            from = 8;
        for (size_t i = from; i < n; i++)
            if (buf[i])
                return 0;
    }
    return 1;
}

/* A pipe or a device has no size to check first: its first 8 bytes decide. The magic: a log, read
 * whole. Zeros: perhaps a header never written, read while they stay zeros, up to a header's
 * largest size. Anything else (or /dev/zero past that size) is refused without reading on. */
int rd_read_stream(rd_log_t *lf, int fd)
{
    size_t cap = 1 << 20, len = 0;
    uint8_t *buf = malloc(cap);
    int zeros = -1; /* unknown until 8 bytes are in; then 1 (all zero so far) or 0 (the magic) */
    for (;;) {
        if (!buf)
            return rd_fail(lf, len, "out of memory reading the input");
        if (len == cap) {
            uint8_t *n = cap < ((size_t)1 << 40) ? vec_grow_raw(buf, &cap, len + 1, 1, 1 << 20) : NULL;
            if (!n)
                free(buf);
            buf = n;
            continue;
        }
        size_t want = cap - len;
        if (zeros == 1 && want > MAX_HEADER + 1 - len)
            want = MAX_HEADER + 1 - len; /* one byte past a header's largest size is enough */
        ssize_t r = read(fd, buf + len, want);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            return rd_fail(lf, len, "read error: %s", strerror(e));
        }
        if (r == 0)
            break;
        size_t from = len;
        len += (size_t)r;
        if (zeros < 0 && len >= 8) {
            static const uint8_t none[8];
            zeros = !memcmp(buf, none, 8) ? 1 : !memcmp(buf, GMLOG_MAGIC, 8) ? 0 : -2;
            if (zeros == -2) {
                free(buf);
                return rd_fail(lf, 0, "not a gmshim log (the input does not start with \"%s\"); the rest was not "
                               "read", GMLOG_MAGIC);
            }
        }
        if (zeros == 1) {
            for (size_t i = from; i < len; i++)
                if (buf[i]) {
                    free(buf);
                    return rd_fail(lf, i, "not a gmshim log (zeros, then other bytes: no header); the rest was "
                                   "not read");
                }
            if (len > MAX_HEADER) {
                free(buf);
                return rd_fail(lf, len, "not a gmshim log (more zeros than a header has); the rest was not read");
            }
        }
    }
    lf->owned = buf;
    lf->data = buf;
    lf->size = len;
    return 0;
}

int rd_parse_header(rd_log_t *lf)
{
    uint8_t d[sizeof(gmlog_file_header_t)];
    size_t size = lf->size;
    size_t have = rd_read_at(lf, d, sizeof d, 0);
    if (have < sizeof d && have < size)
        return rd_fail(lf, have, "read error in the header");
    if (size == 0)
        return rd_fail(lf, 0, "empty file: not a gmshim log");
    size_t m = size < 8 ? size : 8;
    if (memcmp(d, GMLOG_MAGIC, m) != 0)
        return rd_fail(lf, 0, "not a gmshim log (the file does not start with \"%s\")", GMLOG_MAGIC);
    if (size < sizeof(gmlog_file_header_t))
        return rd_fail(lf, size, "truncated header: the file has %zu bytes, a header needs %zu", size,
                    sizeof(gmlog_file_header_t));
    uint32_t bo;
    memcpy(&bo, d + 12, 4);
    if (bo == GMLOG_BYTE_ORDER)
        lf->swapped = 0;
    else if (bo == __builtin_bswap32(GMLOG_BYTE_ORDER))
        lf->swapped = 1;
    else
        return rd_fail(lf, 12, "corrupt header: byte-order mark 0x%08x is neither 0x%08x nor its swap", bo,
                    GMLOG_BYTE_ORDER);
    int s = lf->swapped;
    gmlog_file_header_t *h = &lf->hdr;
    memcpy(h, d, sizeof *h);
    h->version = ld32(d + 8, s);
    h->byte_order = GMLOG_BYTE_ORDER;
    h->header_size = ld32(d + 16, s);
    h->chunk_size = ld32(d + 20, s);
    h->start_realtime_ns = ld64(d + 24, s);
    h->start_mono_ns = ld64(d + 32, s);
    h->pid = ld32(d + 40, s);
    h->flags = ld32(d + 44, s);
    h->end_ns = ld64(d + 48, s);
    h->close_reason = ld32(d + 56, s);
    h->meta_size = ld32(d + 60, s);
    h->chunks_at_close = ld64(d + 64, s);
    h->alive_ns = ld64(d + 72, s);
    if (h->version > GMLOG_VERSION)
        return rd_fail(lf, 8, "log format version %u is newer than this gmshim reads (%u); upgrade gmshim",
                    h->version, GMLOG_VERSION);
    if (h->version == 0)
        return rd_fail(lf, 8, "corrupt header: format version 0");
    if (h->chunk_size < 4096 || h->chunk_size > (64u << 20) || h->chunk_size % 8)
        return rd_fail(lf, 20, "corrupt header: chunk size %u (expected %u)", h->chunk_size, GMLOG_CHUNK_SIZE);
    if (h->header_size < sizeof *h || h->header_size % 8 || h->header_size > MAX_HEADER)
        return rd_fail(lf, 16, "corrupt header: header size %u", h->header_size);
    if (h->header_size > size)
        return rd_fail(lf, size, "truncated header: it is %u bytes long, the file has %zu", h->header_size, size);
    lf->header = malloc(h->header_size);
    if (!lf->header)
        return rd_fail(lf, 0, "out of memory for a %u-byte header", h->header_size);
    if (rd_read_at(lf, lf->header, h->header_size, 0) != h->header_size)
        return rd_fail(lf, 0, "read error in the header");
    return 0;
}

void rd_parse_meta(rd_log_t *lf)
{
    const gmlog_file_header_t *h = &lf->hdr;
    uint64_t end = h->header_size;
    uint64_t declared = sizeof *h + (uint64_t)h->meta_size;
    if (declared > end) {
        rd_diag(lf, 60, 1, "corrupt header: %u bytes of metadata do not fit in a %u-byte header",
                h->meta_size, h->header_size);
    } else {
        end = declared;
    }
    uint64_t at = sizeof *h;
    size_t cap = 0;
    while (at + sizeof(gmlog_meta_t) <= end) {
        uint16_t tag;
        memcpy(&tag, lf->header + at, 2);
        if (lf->swapped)
            tag = __builtin_bswap16(tag);
        uint32_t len = ld32(lf->header + at + 4, lf->swapped);
        if (tag == GMLOG_META_END)
            return;
        if ((uint64_t)len > end - at - sizeof(gmlog_meta_t)) {
            rd_diag(lf, at, 1, "corrupt metadata: an entry of %u bytes runs past the header", len);
            return;
        }
        if (lf->nmeta >= MAX_META) {
            rd_diag(lf, at, 0, "more than %d metadata entries; the rest are ignored", MAX_META);
            return;
        }
        rd_meta_t *n = vec_grow(lf->meta, &cap, lf->nmeta + 1, sizeof *n, 32);
        if (!n)
            return;
        lf->meta = n;
        char *v = malloc((size_t)len + 1);
        if (!v)
            return;
        memcpy(v, lf->header + at + sizeof(gmlog_meta_t), len);
        v[len] = 0;
        lf->meta[lf->nmeta++] = (rd_meta_t){tag, len, v};
        at += sizeof(gmlog_meta_t) + (((uint64_t)len + 7) & ~7ull);
    }
    if (at < end)
        rd_diag(lf, at, 1, "corrupt metadata: it ends without an end entry");
}

const char *rd_meta_get(const rd_log_t *lf, uint16_t tag)
{
    for (size_t i = 0; i < lf->nmeta; i++)
        if (lf->meta[i].tag == tag)
            return lf->meta[i].value;
    return NULL;
}

const char *rd_meta_keyed(const rd_log_t *lf, uint16_t tag, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i < lf->nmeta; i++)
        if (lf->meta[i].tag == tag && !strncmp(lf->meta[i].value, key, kl) && lf->meta[i].value[kl] == '=')
            return lf->meta[i].value + kl + 1;
    return NULL;
}

