/* A log read while its writer is still at work: chunks the writer claims or reuses under the
 * reader. Whether a chunk read now is still the one the open indexed, and whether the file as a
 * whole still is what the open saw (else the open is made again: what it found missing may have
 * been written meanwhile). Part of the reader (reader_log.c); shares its internals through
 * reader_int.h. It never writes the file. */
#include "reader.h"
#include "reader_int.h"

#include <stdlib.h>
#include <sys/stat.h>

int rd_chunk_moved(const rd_log_t *lf, const rd_chunk_t *c, const uint8_t *hdr)
{
    int s = lf->swapped;
    return ld32(hdr, s) != GMLOG_CHUNK_MAGIC || ld32(hdr + 4, s) != c->tid || ld64(hdr + 16, s) != c->base_ns ||
           ld32(hdr + 24, s) != c->thread_chunk;
}

int rd_open_unchanged(const rd_log_t *lf)
{
    struct stat st;
    if (lf->fd < 0)
        return 1;
    if (fstat(lf->fd, &st) != 0 || (uint64_t)st.st_size != lf->size)
        return 0;
    const gmlog_file_header_t *h = &lf->hdr;
    const rd_chunk_t **at = calloc(lf->nslots ? lf->nslots : 1, sizeof *at);
    if (!at)
        return 1; /* cannot tell: take the open as it is */
    for (size_t i = 0; i < lf->nchunks; i++) {
        uint64_t slot = (lf->chunks[i].off - h->header_size) / h->chunk_size;
        if (slot < lf->nslots)
            at[slot] = &lf->chunks[i];
    }
    int same = 1;
    for (size_t i = 0; i < lf->nslots && same; i++) {
        uint8_t c[CHUNK_HDR];
        if (rd_read_at(lf, c, CHUNK_HDR, h->header_size + (uint64_t)i * h->chunk_size) != CHUNK_HDR)
            continue; /* a cut last chunk: as the open saw it */
        same = at[i] ? !rd_chunk_moved(lf, at[i], c) : ld32(c, lf->swapped) != GMLOG_CHUNK_MAGIC;
    }
    free(at);
    return same;
}
