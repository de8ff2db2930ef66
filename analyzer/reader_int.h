/* What the reader's files share (reader_log.c, reader_io.c, reader_header.c, reader_records.c,
 * reader_live.c, and reader_ckpt.c for a bounded log's checkpoints): nothing else includes this. */
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

/* reader_io.c: each record type's least length (rd_min_len), read inline by rd_next. */
extern const uint8_t rd_min_lens[GMLOG_TYPE_MAX + 1];
int rd_fail(rd_log_t *lf, uint64_t offset, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
size_t rd_read_at(const rd_log_t *lf, void *buf, size_t len, uint64_t off);

/* reader_records.c */
void rd_swap_record(uint8_t *buf, unsigned len);

/* reader_header.c: whether the file is a header never written (the process ended first); the
 * header (0, or -1 after rd_fail); the metadata entries (damaged ones are diagnosed) */
int rd_unwritten_header(const rd_log_t *lf);
/* a pipe's or device's bytes into lf->owned, refused from its first bytes when they are no log's
 * (0, or -1 after rd_fail) */
int rd_read_stream(rd_log_t *lf, int fd);
int rd_parse_header(rd_log_t *lf);
void rd_parse_meta(rd_log_t *lf);

/* reader_live.c: whether a chunk read now is not the one the open indexed (the writer gave its slot
 * to another); whether the file is still what the open indexed (size and every chunk header) */
int rd_chunk_moved(const rd_log_t *lf, const rd_chunk_t *c, const uint8_t *hdr);
int rd_open_unchanged(const rd_log_t *lf);

/* reader_ckpt.c: checkpoint spans, and a wrapped log's prologue (its newest complete checkpoint's
 * definitions, history and cuts) */
int rd_ckpt_skip(rd_log_t *lf, rd_stream_t *s, const uint8_t *p, uint32_t len);
int rd_ckpt_scan(rd_log_t *lf);
void rd_ckpt_first_time(rd_log_t *lf, int none);
int rd_prologue_next(rd_log_t *lf, rd_rec_t *rec);
void rd_prologue_rewind(rd_log_t *lf);
void rd_prologue_free(rd_log_t *lf);

#endif
