/* Writes one damaged copy of a gmshim log, chosen by a seed, for the corruption smoke test
 * (tests/fuzz/corrupt-smoke.sh): byte flips, cuts (inside a chunk and at chunk boundaries),
 * zeroed ranges, swapped or duplicated chunks, bad chunk headers and bad record headers. The
 * same seed always gives the same bytes. A test tool: never linked into gmshim.
 *
 *   corrupt IN OUT SEED    prints the kind of damage done (one word) on stdout */
#include "gmlog.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng;

static uint64_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static size_t below(size_t n)
{
    return n ? (size_t)(next() % n) : 0;
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 20, n = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            uint8_t *b = realloc(buf, cap * 2);
            if (!b)
                break;
            buf = b, cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        if (!r)
            break;
        n += r;
    }
    fclose(f);
    *len = n;
    return buf;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fputs("usage: corrupt IN OUT SEED\n", stderr);
        return 1;
    }
    size_t len;
    uint8_t *d = slurp(argv[1], &len);
    if (!d || len < sizeof(gmlog_file_header_t)) {
        fprintf(stderr, "corrupt: %s: cannot read a log\n", argv[1]);
        return 1;
    }
    rng = strtoull(argv[3], NULL, 10) * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    for (int i = 0; i < 8; i++)
        next();
    gmlog_file_header_t h;
    memcpy(&h, d, sizeof h);
    size_t hs = h.header_size >= sizeof h && h.header_size < len ? h.header_size : 4096;
    size_t cs = GMLOG_CHUNK_SIZE, nchunks = len > hs ? (len - hs) / cs : 0;
    size_t out_len = len;
    static const char *const kinds[] = {"flip", "cut", "cut-chunk", "zero", "swap", "dup", "chunk-header",
                                        "record", "header", "mix"};
    unsigned kind = (unsigned)below(sizeof kinds / sizeof kinds[0]);
    unsigned rounds = kind == 9 ? 2 + (unsigned)below(3) : 1;
    for (unsigned r = 0; r < rounds; r++) {
        unsigned k = kind == 9 ? (unsigned)below(9) : kind;
        switch (k) {
        case 0: /* a few random bytes anywhere */
            for (size_t i = 0, n = 1 + below(16); i < n; i++)
                d[below(out_len)] = (uint8_t)next();
            break;
        case 1: /* a cut anywhere */
            out_len = below(out_len + 1);
            break;
        case 2: /* a cut at a chunk boundary, or just after the header */
            if (out_len > hs)
                out_len = hs + below((out_len - hs) / cs + 1) * cs;
            break;
        case 3: { /* a zeroed range */
            size_t at = below(out_len), n = 1 + below(k == 3 && below(2) ? cs : 512);
            memset(d + at, 0, n < out_len - at ? n : out_len - at);
            break;
        }
        case 4: /* two chunks swapped */
            if (nchunks >= 2 && out_len >= hs + nchunks * cs) {
                size_t a = below(nchunks), b = below(nchunks);
                uint8_t *tmp = malloc(cs);
                if (tmp && a != b) {
                    memcpy(tmp, d + hs + a * cs, cs);
                    memcpy(d + hs + a * cs, d + hs + b * cs, cs);
                    memcpy(d + hs + b * cs, tmp, cs);
                }
                free(tmp);
                break;
            }
            /* one chunk: duplicate it instead */
            /* fall through */
        case 5: /* a chunk copied over another, or appended */
            if (nchunks >= 1 && out_len >= hs + cs) {
                size_t a = below(nchunks), b = below(nchunks + 1);
                if (b == nchunks && out_len == len) {
                    uint8_t *nd = realloc(d, len + cs);
                    if (!nd)
                        break;
                    d = nd;
                    memcpy(d + len, d + hs + a * cs, cs);
                    out_len = len += cs;
                } else if (hs + (b + 1) * cs <= out_len) {
                    memmove(d + hs + b * cs, d + hs + a * cs, cs);
                }
            }
            break;
        case 6: /* one field of a chunk header */
            if (nchunks >= 1) {
                size_t at = hs + below(nchunks) * cs + 4 * below(8);
                if (at + 4 <= out_len) {
                    uint32_t v = below(2) ? (uint32_t)next() : (uint32_t)below(4);
                    memcpy(d + at, &v, 4);
                }
            }
            break;
        case 7: { /* a record header: walk a chunk's records, damage one */
            if (!nchunks)
                break;
            size_t c = hs + below(nchunks) * cs, pos = sizeof(gmlog_chunk_header_t), want = below(64);
            while (c + pos + 8 <= out_len && pos + 8 <= cs && d[c + pos] && d[c + pos + 1] && want--) {
                size_t l = (size_t)d[c + pos + 1] * 8;
                if (pos + l + 8 > cs)
                    break;
                pos += l;
            }
            if (c + pos + 8 <= out_len) {
                switch (below(4)) {
                case 0: d[c + pos] = (uint8_t)below(GMLOG_TYPE_MAX + 3); break;
                case 1: d[c + pos + 1] = (uint8_t)below(4); break;
                case 2: d[c + pos + 1] = (uint8_t)next(); break;
                default: memset(d + c + pos + 8, 0xff, c + pos + 24 <= out_len ? 16 : 0); break;
                }
            }
            break;
        }
        case 8: { /* one header field */
            size_t at = 4 * below(sizeof h / 4);
            uint32_t v = below(2) ? (uint32_t)next() : (uint32_t)below(3);
            if (at + 4 <= out_len)
                memcpy(d + at, &v, 4);
            break;
        }
        }
    }
    FILE *f = fopen(argv[2], "wb");
    if (!f || fwrite(d, 1, out_len, f) != out_len || fclose(f) != 0) {
        fprintf(stderr, "corrupt: cannot write %s\n", argv[2]);
        return 1;
    }
    printf("%s\n", kinds[kind]);
    free(d);
    return 0;
}
