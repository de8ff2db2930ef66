/* Logs built record by record for the analyzer's tests (tests/unit/testlog.c): chunks with any
 * index and thread numbering, slots left as zeros, header flags — what a wrapped log holds —
 * and the checkpoint records of gmlog.h. It writes only what gmlog.h describes. */
#ifndef GM_TESTLOG_H
#define GM_TESTLOG_H

#include "gmlog.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tlog {
    uint8_t *buf;
    size_t len, cap;
    size_t chunk;              /* offset of the open chunk, 0 = none */
    uint64_t base;             /* its time base */
} tlog_t;

/* A header (closed at exit, plus `flags`) and no chunks. */
void tlog_begin(tlog_t *b, uint32_t flags);
/* Starts a chunk of thread `tid` with this index and thread_chunk, time base `base`. */
void tlog_chunk(tlog_t *b, uint32_t tid, uint64_t index, uint32_t thread_chunk, uint64_t base);
/* A slot of zeros: an unused chunk, or the space of one the writer let go. */
void tlog_zeros(tlog_t *b);
/* Ends the open chunk (zero padding to its end). */
void tlog_end_chunk(tlog_t *b);
/* A record of `len` bytes (its header's type, device and flags set by the caller), at time t. */
void tlog_rec(tlog_t *b, void *rec, size_t len, uint64_t t);

void tlog_alloc(tlog_t *b, uint64_t t, uint64_t ptr, uint64_t req, unsigned flags, uint32_t site);
void tlog_free(tlog_t *b, uint64_t t, uint64_t ptr);
void tlog_segment(tlog_t *b, uint64_t t, int type, uint64_t base, uint64_t size);
void tlog_mark(tlog_t *b, uint64_t t, uint32_t id, const char *label);
void tlog_site(tlog_t *b, uint64_t t, uint32_t id);
/* A failed allocation of `request` bytes on device 0 (the pool's figures then: `allocated`). */
void tlog_oom(tlog_t *b, uint64_t t, uint64_t request, uint64_t allocated, uint32_t site);
void tlog_device(tlog_t *b, uint64_t t, const char *name, uint64_t total);
void tlog_checkpoint(tlog_t *b, uint64_t t, unsigned flags, uint64_t seq, uint64_t at_ns);
void tlog_cut(tlog_t *b, uint64_t t, const gmlog_cut_t *cut);
void tlog_at(tlog_t *b, uint64_t t, uint64_t at_ns);

/* PyTorch's cache kept: the header's GMSHIM_TORCH=keep, as the shim writes it (call right after
 * tlog_begin); and one of the bridge's tensor records (GMLOG_T_*) on device 0. */
void tlog_torch_keep(tlog_t *b);
void tlog_tensor(tlog_t *b, uint64_t t, unsigned type, uint64_t addr, uint64_t size, uint64_t stream, uint32_t site);

/* Appends a metadata entry to the header (tag GMLOG_META_*, e.g. GMLOG_META_RANK, "RANK=3"). */
void tlog_meta(tlog_t *b, uint16_t tag, const char *text);

/* Turns the log into what a writer of the other byte order writes (the record types above). */
void tlog_swap(tlog_t *b);
/* Writes the bytes to path; 0, or -1. */
int tlog_write(const tlog_t *b, const char *path);
void tlog_free_buf(tlog_t *b);

/* The wrapped log of the tests (times in ms). Device 0; a worker thread and the checkpoint thread:
 *   index 0  worker 0   t 0..200: DEVICE, SITEs 7 and 9, a 64 MiB segment, block A (1 MiB,
 *                        site 7) and D (512 KiB, site 9) kept, ten 8 MiB blocks allocated and
 *                        freed (allocated peaks at 81.5 MiB)                        — overwritten
 *   index 1  worker 1   t 300..500: two more allocated and freed, a failed 1 GiB allocation
 *                        (OOM, site 8) at 350, mark 1 "step 1" at 400 (all before the
 *                        checkpoint: stale, still in the file)
 *   index 2  checkpoint seq 1, at 1000 (end_ckpt: END written; 0: the log is cut inside it):
 *                        DEVICE, SITEs 7 8 9, AT 350 + the OOM, AT 400 + mark 1, CUT at 1001
 *                        (requested 1.5 MiB, peak allocated 81.5 MiB, 15 allocs, 13 frees, 14
 *                        hits, 1 miss, 1 OOM), the segment, blocks A and D
 *   index 3  worker 2   t 600..900: one allocated and freed                     — overwritten
 *   index 4  worker 3   t 2000..2050, in the slot of index 0: B (2 MiB, site 8) allocated and
 *                        freed, a new 8 MiB segment and C (4 MiB) allocated and freed, mark 2
 *                        "step 2", D freed
 * So: 17 allocs, 16 frees, 15 hits, 2 misses, A live at the end (site 7), peak allocated
 * 81.5 MiB from the cut (5.5 MiB after it), 2 marks, 1 OOM, nothing counted twice. With wrapped 0 the header lacks
 * GMLOG_F_WRAPPED and every chunk is there (indices 0..4 in order): the checkpoint's records
 * must then count for nothing. */
void tlog_wrapped_example(tlog_t *b, int wrapped, int end_ckpt);

#define TLOG_MiB ((uint64_t)1 << 20)
#define TLOG_SEG 0x7f0000000000ull
#define TLOG_A (TLOG_SEG + 0x100000)
#define TLOG_D (TLOG_SEG + 0x200000)

#endif
