/* Logs built record by record for the analyzer's tests (see testlog.h): any chunk layout a
 * writer can leave, wrapped logs with their checkpoints included. */
#include "testlog.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reserve(tlog_t *b, size_t n)
{
    if (b->len + n <= b->cap)
        return;
    while (b->len + n > b->cap)
        b->cap = b->cap ? b->cap * 2 : 1 << 20;
    b->buf = realloc(b->buf, b->cap);
    ck_assert_msg(b->buf != NULL, "out of memory building a log");
}

void tlog_begin(tlog_t *b, uint32_t flags)
{
    memset(b, 0, sizeof *b);
    reserve(b, 4096);
    memset(b->buf, 0, 4096);
    gmlog_file_header_t h = {.version = GMLOG_VERSION, .byte_order = GMLOG_BYTE_ORDER, .header_size = 4096,
                             .chunk_size = GMLOG_CHUNK_SIZE, .pid = 4343, .flags = GMLOG_F_CLOSED | flags,
                             .close_reason = GMLOG_CLOSE_EXIT};
    memcpy(h.magic, GMLOG_MAGIC, 8);
    memcpy(b->buf, &h, sizeof h);
    b->len = 4096;
}

void tlog_end_chunk(tlog_t *b)
{
    if (!b->chunk)
        return;
    size_t end = b->chunk + GMLOG_CHUNK_SIZE;
    reserve(b, end - b->len);
    memset(b->buf + b->len, 0, end - b->len);
    b->len = end;
    b->chunk = 0;
}

void tlog_chunk(tlog_t *b, uint32_t tid, uint64_t index, uint32_t thread_chunk, uint64_t base)
{
    tlog_end_chunk(b);
    reserve(b, GMLOG_CHUNK_SIZE);
    b->chunk = b->len;
    gmlog_chunk_header_t ch = {GMLOG_CHUNK_MAGIC, tid, index, base, thread_chunk, 0};
    memcpy(b->buf + b->len, &ch, sizeof ch);
    b->len += sizeof ch;
    b->base = base;
}

void tlog_zeros(tlog_t *b)
{
    tlog_end_chunk(b);
    reserve(b, GMLOG_CHUNK_SIZE);
    memset(b->buf + b->len, 0, GMLOG_CHUNK_SIZE);
    b->len += GMLOG_CHUNK_SIZE;
}

void tlog_rec(tlog_t *b, void *rec, size_t len, uint64_t t)
{
    ck_assert_msg(b->chunk && len % 8 == 0 && t >= b->base && b->len + len <= b->chunk + GMLOG_CHUNK_SIZE,
                  "a record of %zu bytes at %llu does not fit the open chunk", len, (unsigned long long)t);
    gmlog_rec_t *h = rec;
    h->len8 = (uint8_t)(len / 8);
    h->dt = (uint32_t)(t - b->base);
    reserve(b, len);
    memcpy(b->buf + b->len, rec, len);
    b->len += len;
}

void tlog_alloc(tlog_t *b, uint64_t t, uint64_t ptr, uint64_t req, unsigned flags, uint32_t site)
{
    gmlog_alloc_t a = {{GMLOG_ALLOC, 0, 0, (uint8_t)flags, 0}, ptr, req, site, 100, 0};
    tlog_rec(b, &a, 32, t);
}

void tlog_free(tlog_t *b, uint64_t t, uint64_t ptr)
{
    gmlog_free_t f = {{GMLOG_FREE, 0, 0, 0, 0}, ptr, 0, 50};
    tlog_rec(b, &f, sizeof f, t);
}

void tlog_segment(tlog_t *b, uint64_t t, int type, uint64_t base, uint64_t size)
{
    gmlog_segment_t s = {{(uint8_t)type, 0, 0, 0, 0}, base, size, 5000, 0};
    tlog_rec(b, &s, sizeof s, t);
}

void tlog_mark(tlog_t *b, uint64_t t, uint32_t id, const char *label)
{
    uint8_t rec[80] = {0};
    size_t n = strlen(label) < 64 ? strlen(label) : 64;
    gmlog_mark_t m = {{GMLOG_MARK, 0, GMLOG_NO_DEVICE, 0, 0}, id, (uint32_t)n};
    memcpy(rec, &m, sizeof m);
    memcpy(rec + sizeof m, label, n);
    tlog_rec(b, rec, sizeof m + (n + 7) / 8 * 8, t);
}

void tlog_site(tlog_t *b, uint64_t t, uint32_t id)
{
    uint8_t rec[24] = {0};
    gmlog_site_t s = {{GMLOG_SITE, 0, GMLOG_NO_DEVICE, 0, 0}, id, 1, 0};
    uint64_t frame = (uint64_t)GMLOG_FRAME_UNKNOWN_MODULE << 48 | (0x1000 + id);
    memcpy(rec, &s, sizeof s);
    memcpy(rec + sizeof s, &frame, 8);
    tlog_rec(b, rec, sizeof rec, t);
}

void tlog_oom(tlog_t *b, uint64_t t, uint64_t request, uint64_t allocated, uint32_t site)
{
    gmlog_oom_t o = {.h = {GMLOG_OOM, 0, 0, GMLOG_OOM_RELEASED | GMLOG_OOM_RETRIED, 0}, .request = request,
                     .segment = request, .driver_free = 512 * TLOG_MiB, .driver_total = 80 * 1024 * TLOG_MiB,
                     .reserved = 64 * TLOG_MiB, .allocated = allocated, .requested = allocated,
                     .cached = 64 * TLOG_MiB - allocated, .largest_free = 60 * TLOG_MiB, .free_blocks = 2,
                     .site = site};
    tlog_rec(b, &o, sizeof o, t);
}

void tlog_device(tlog_t *b, uint64_t t, const char *name, uint64_t total)
{
    uint8_t rec[96] = {0};
    size_t n = strlen(name) < 56 ? strlen(name) : 56;
    gmlog_device_t d = {{GMLOG_DEVICE, 0, 0, 0, 0}, total, total, (uint32_t)n, 0};
    memcpy(rec, &d, sizeof d);
    memcpy(rec + sizeof d, name, n);
    tlog_rec(b, rec, sizeof d + (n + 7) / 8 * 8, t);
}

void tlog_checkpoint(tlog_t *b, uint64_t t, unsigned flags, uint64_t seq, uint64_t at_ns)
{
    gmlog_checkpoint_t c = {{GMLOG_CHECKPOINT, 0, GMLOG_NO_DEVICE, (uint8_t)flags, 0}, seq, at_ns, 0,
                            flags == GMLOG_CKPT_END ? at_ns : 0};
    tlog_rec(b, &c, sizeof c, t);
}

void tlog_cut(tlog_t *b, uint64_t t, const gmlog_cut_t *cut)
{
    gmlog_cut_t c = *cut;
    c.h.type = GMLOG_CUT;
    tlog_rec(b, &c, sizeof c, t);
}

void tlog_at(tlog_t *b, uint64_t t, uint64_t at_ns)
{
    gmlog_at_t a = {{GMLOG_AT, 0, GMLOG_NO_DEVICE, 0, 0}, at_ns};
    tlog_rec(b, &a, sizeof a, t);
}

static void sw16(uint8_t *p) { uint16_t v; memcpy(&v, p, 2); v = __builtin_bswap16(v); memcpy(p, &v, 2); }
static void sw32(uint8_t *p) { uint32_t v; memcpy(&v, p, 4); v = __builtin_bswap32(v); memcpy(p, &v, 4); }
static void sw64(uint8_t *p) { uint64_t v; memcpy(&v, p, 8); v = __builtin_bswap64(v); memcpy(p, &v, 8); }

static void swap_rec(uint8_t *p, unsigned len)
{
    sw32(p + 4);
    switch (p[0]) {
    case GMLOG_ALLOC:
        sw64(p + 8), sw64(p + 16), sw32(p + 24), sw32(p + 28);
        if (len >= 40)
            sw64(p + 32);
        break;
    case GMLOG_FREE:
        sw64(p + 8), sw32(p + 16), sw32(p + 20);
        break;
    case GMLOG_SEGMENT_ALLOC:
    case GMLOG_SEGMENT_FREE:
    case GMLOG_DEVICE:
        sw64(p + 8), sw64(p + 16), sw32(p + 24), sw32(p + 28);
        break;
    case GMLOG_MARK:
        sw32(p + 8), sw32(p + 12);
        break;
    case GMLOG_SITE: {
        uint16_t nn;
        memcpy(&nn, p + 12, 2);
        sw32(p + 8), sw16(p + 12), sw16(p + 14);
        for (unsigned i = 0; i < nn && 16 + 8 * i + 8 <= len; i++)
            sw64(p + 16 + 8 * i);
        break;
    }
    case GMLOG_CHECKPOINT:
        for (unsigned o = 8; o < 40; o += 8)
            sw64(p + o);
        break;
    case GMLOG_CUT:
        for (unsigned o = 8; o < 120; o += 8)
            sw64(p + o);
        sw32(p + 120), sw32(p + 124);
        break;
    case GMLOG_AT:
        sw64(p + 8);
        break;
    default:
        break;
    }
}

void tlog_swap(tlog_t *b)
{
    tlog_end_chunk(b);
    uint8_t *h = b->buf;
    for (unsigned o = 8; o < 24; o += 4)
        sw32(h + o);
    sw64(h + 24), sw64(h + 32), sw32(h + 40), sw32(h + 44), sw64(h + 48), sw32(h + 56), sw32(h + 60), sw64(h + 64), sw64(h + 72);
    for (size_t c = 4096; c + GMLOG_CHUNK_SIZE <= b->len; c += GMLOG_CHUNK_SIZE) {
        uint8_t *ch = b->buf + c;
        uint32_t magic;
        memcpy(&magic, ch, 4);
        if (magic != GMLOG_CHUNK_MAGIC)
            continue;
        sw32(ch), sw32(ch + 4), sw64(ch + 8), sw64(ch + 16), sw32(ch + 24), sw32(ch + 28);
        for (size_t pos = sizeof(gmlog_chunk_header_t); pos + 8 <= GMLOG_CHUNK_SIZE;) {
            uint8_t *p = ch + pos;
            unsigned len = (unsigned)p[1] * 8;
            if (!p[0] || !len || pos + len > GMLOG_CHUNK_SIZE)
                break;
            swap_rec(p, len);
            pos += len;
        }
    }
}

int tlog_write(const tlog_t *b, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t n = fwrite(b->buf, 1, b->len, f);
    return fclose(f) == 0 && n == b->len ? 0 : -1;
}

void tlog_free_buf(tlog_t *b)
{
    free(b->buf);
    memset(b, 0, sizeof *b);
}

/* ---- the example of testlog.h ---------------------------------------------------------------- */

#define MiB TLOG_MiB
#define T(ms) ((uint64_t)(ms) * 1000000) /* the example's times are in ms */

static void worker0(tlog_t *b, uint64_t index)
{
    tlog_chunk(b, 1001, index, 0, T(0));
    tlog_device(b, T(1), "Fake H200", 80 * 1024 * MiB);
    tlog_site(b, T(2), 7);
    tlog_site(b, T(3), 8);
    tlog_site(b, T(4), 9);
    tlog_segment(b, T(10), GMLOG_SEGMENT_ALLOC, TLOG_SEG, 64 * MiB);
    tlog_alloc(b, T(20), TLOG_A, MiB, GMLOG_A_MISS, 7);
    tlog_alloc(b, T(30), TLOG_D, MiB / 2, 0, 9);
    for (unsigned i = 0; i < 10; i++)
        tlog_alloc(b, T(50 + i), TLOG_SEG + 0x1000000 + i * 8 * MiB, 8 * MiB, 0, 8);
    for (unsigned i = 0; i < 10; i++)
        tlog_free(b, T(100 + i), TLOG_SEG + 0x1000000 + i * 8 * MiB);
}

static void worker1(tlog_t *b, uint64_t index)
{
    tlog_chunk(b, 1001, index, 1, T(300));
    tlog_alloc(b, T(300), TLOG_SEG + 0x1000000, MiB, 0, 8);
    tlog_free(b, T(310), TLOG_SEG + 0x1000000);
    tlog_alloc(b, T(320), TLOG_SEG + 0x1000000, MiB, 0, 8);
    tlog_free(b, T(330), TLOG_SEG + 0x1000000);
    tlog_oom(b, T(350), 1024 * MiB, MiB + MiB / 2, 8);
    tlog_mark(b, T(400), 1, "step 1");
}

static void worker2(tlog_t *b, uint64_t index)
{
    tlog_chunk(b, 1001, index, 2, T(600));
    tlog_alloc(b, T(600), TLOG_SEG + 0x1000000, MiB, 0, 8);
    tlog_free(b, T(900), TLOG_SEG + 0x1000000);
}

static void worker3(tlog_t *b, uint64_t index)
{
    uint64_t seg2 = TLOG_SEG + 0x10000000;
    tlog_chunk(b, 1001, index, 3, T(2000));
    tlog_alloc(b, T(2000), TLOG_SEG + 0x1000000, 2 * MiB, 0, 8);
    tlog_free(b, T(2010), TLOG_SEG + 0x1000000);
    tlog_segment(b, T(2019), GMLOG_SEGMENT_ALLOC, seg2, 8 * MiB);
    tlog_alloc(b, T(2020), seg2, 4 * MiB, GMLOG_A_MISS, 8);
    tlog_free(b, T(2030), seg2);
    tlog_mark(b, T(2040), 2, "step 2");
    tlog_free(b, T(2050), TLOG_D);
}

static void checkpoint(tlog_t *b, uint64_t index, int end_ckpt)
{
    tlog_chunk(b, 1002, index, 0, T(1000));
    tlog_checkpoint(b, T(1000), GMLOG_CKPT_BEGIN, 1, T(1000));
    tlog_device(b, T(1000), "Fake H200", 80 * 1024 * MiB);
    tlog_site(b, T(1000), 7);
    tlog_site(b, T(1000), 8);
    tlog_site(b, T(1000), 9);
    tlog_at(b, T(1000), T(350));
    tlog_oom(b, T(1000), 1024 * MiB, MiB + MiB / 2, 8);
    tlog_at(b, T(1000), T(400));
    tlog_mark(b, T(1000), 1, "step 1");
    gmlog_cut_t cut = {.h = {GMLOG_CUT, 0, 0, 0, 0}, .cut_ns = T(1001), .requested = MiB + MiB / 2,
                       .allocated = MiB + MiB / 2, .reserved = 64 * MiB, .cached = 64 * MiB - MiB - MiB / 2,
                       .peak_requested = 81 * MiB + MiB / 2, .peak_allocated = 81 * MiB + MiB / 2,
                       .peak_reserved = 64 * MiB, .allocs = 15, .frees = 13, .hits = 14, .misses = 1, .ooms = 1,
                       .segments = 1, .blocks = 2};
    tlog_cut(b, T(1001), &cut);
    tlog_segment(b, T(1001), GMLOG_SEGMENT_ALLOC, TLOG_SEG, 64 * MiB);
    tlog_alloc(b, T(1001), TLOG_A, MiB, 0, 7);
    tlog_alloc(b, T(1001), TLOG_D, MiB / 2, 0, 9);
    if (end_ckpt)
        tlog_checkpoint(b, T(1002), GMLOG_CKPT_END, 1, T(1000));
}

void tlog_wrapped_example(tlog_t *b, int wrapped, int end_ckpt)
{
    tlog_begin(b, wrapped ? GMLOG_F_WRAPPED : 0);
    if (!wrapped) {
        worker0(b, 0);
        worker1(b, 1);
        checkpoint(b, 2, end_ckpt);
        worker2(b, 3);
        worker3(b, 4);
    } else {
        worker3(b, 4);   /* slot 0: index 0's space, reused */
        worker1(b, 1);   /* stale */
        checkpoint(b, 2, end_ckpt);
        tlog_zeros(b);;   /* index 3's space, let go */
    }
    tlog_end_chunk(b);;
}

void tlog_torch_keep(tlog_t *b)
{
    static const char opt[] = "GMSHIM_TORCH=keep";
    gmlog_meta_t e = {GMLOG_META_OPTION, 0, (uint32_t)(sizeof opt - 1)};
    size_t at = sizeof(gmlog_file_header_t), padded = (sizeof opt - 1 + 7) / 8 * 8;
    memcpy(b->buf + at, &e, sizeof e);
    memcpy(b->buf + at + sizeof e, opt, sizeof opt - 1);
    uint32_t meta_size = (uint32_t)(sizeof e + padded + sizeof e); /* and a tag 0 that ends the list */
    memcpy(b->buf + offsetof(gmlog_file_header_t, meta_size), &meta_size, sizeof meta_size);
}

void tlog_meta(tlog_t *b, uint16_t tag, const char *text)
{
    uint32_t meta_size;
    memcpy(&meta_size, b->buf + offsetof(gmlog_file_header_t, meta_size), sizeof meta_size);
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    size_t at = sizeof(gmlog_file_header_t) + (meta_size ? meta_size - sizeof(gmlog_meta_t) : 0);
    ck_assert_msg(at + 2 * sizeof(gmlog_meta_t) + padded <= 4096, "metadata past the header's page");
    gmlog_meta_t e = {tag, 0, (uint32_t)len}, end = {GMLOG_META_END, 0, 0};
    memcpy(b->buf + at, &e, sizeof e);
    memset(b->buf + at + sizeof e, 0, padded);
    memcpy(b->buf + at + sizeof e, text, len);
    memcpy(b->buf + at + sizeof e + padded, &end, sizeof end);
    meta_size = (uint32_t)(at + sizeof e + padded + sizeof end - sizeof(gmlog_file_header_t));
    memcpy(b->buf + offsetof(gmlog_file_header_t, meta_size), &meta_size, sizeof meta_size);
}

void tlog_tensor(tlog_t *b, uint64_t t, unsigned type, uint64_t addr, uint64_t size, uint64_t stream, uint32_t site)
{
    gmlog_tensor_t r = {{(uint8_t)type, 0, 0, 0, 0}, addr, size, stream, site, 0};
    tlog_rec(b, &r, sizeof r, t);
}
