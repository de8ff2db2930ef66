/* What reader.c shares with reader_ckpt.c (a bounded log's checkpoints): nothing else includes
 * this. */
#ifndef GM_READER_INT_H
#define GM_READER_INT_H

#include "reader.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define CHUNK_HDR ((uint32_t)sizeof(gmlog_chunk_header_t))

static inline uint32_t ld32(const uint8_t *p, int swap)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return swap ? __builtin_bswap32(v) : v;
}

static inline uint64_t ld64(const uint8_t *p, int swap)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return swap ? __builtin_bswap64(v) : v;
}

/* reader.c */
int rd_fail(rd_log_t *lf, uint64_t offset, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
size_t rd_read_at(const rd_log_t *lf, void *buf, size_t len, uint64_t off);
void rd_swap_record(uint8_t *buf, unsigned len);

/* reader_ckpt.c: checkpoint spans, and a wrapped log's prologue (its newest complete checkpoint's
 * definitions, history and cuts) */
int rd_ckpt_skip(rd_log_t *lf, rd_stream_t *s, const uint8_t *p, uint32_t len);
int rd_ckpt_scan(rd_log_t *lf);
void rd_ckpt_first_time(rd_log_t *lf, int none);
int rd_prologue_next(rd_log_t *lf, rd_rec_t *rec);
void rd_prologue_rewind(rd_log_t *lf);
void rd_prologue_free(rd_log_t *lf);

#endif
