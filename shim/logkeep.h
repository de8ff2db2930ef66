/* The copies a bounded log's checkpoints repeat: every SITE, STRING, MODULE, DEVICE and LIMIT
 * record (up to 64 MiB of them), the most recent marks and OOMs, and each device's last LEDGER
 * sample (the card's context and other processes), kept as they are written.
 * Part of the log writer; nothing outside it includes this. */
#ifndef GM_LOGKEEP_H
#define GM_LOGKEEP_H

#include "gmlog.h"

#include <stddef.h>
#include <stdint.h>

#define KEEP_HISTORY 4096u                    /* the most recent marks and OOMs repeated */

typedef struct kept {
    uint64_t at;                               /* log time */
    uint32_t len;
    uint8_t bytes[];                           /* the whole record, header first */
} kept_t;

/* A copy of a record a checkpoint repeats (a type in KEEP_MASK); rel is its log time. Returns
 * the time to write it at: a MARK, OOM or LIMIT timed at or before a checkpoint that has already
 * made its copies without it is moved just after that checkpoint (else it would be in neither). */
uint64_t logkeep_add(const void *rec, size_t fixed, const void *tail, size_t tail_len, size_t len,
                     uint64_t rel);
/* Drops every copy (a fork child). */
void logkeep_forget(void);

/* For the checkpoint writer, between lock and unlock: the definitions (kept_t entries back to
 * back, 8-byte aligned), the history ring (entry i of count; NULL where none), and the log time
 * up to which the history was copied. */
void logkeep_lock(void);
void logkeep_unlock(void);
const uint8_t *logkeep_defs(size_t *len);
uint64_t logkeep_history_count(void);
const kept_t *logkeep_history(uint64_t i);
void logkeep_copied_history(uint64_t at);
/* Device dev's last LEDGER sample, or NULL. */
const kept_t *logkeep_ledger(unsigned dev);

#endif
