/* Where the log's chunks go in the file (logring.c): extents mapped while written, the ring of
 * slots of a bounded log. Part of the log writer; nothing outside it includes this. */
#ifndef GM_LOGRING_H
#define GM_LOGRING_H

#include "logstate.h"

/* This thread's chunk is full (or gone stale): gives it up and claims the next. 0, or -1 when
 * the log cannot take more. */
int logring_switch_chunk(uint64_t rel);
/* This thread gives its chunk up (it ends, or a checkpoint is done). gm_log.lock held. */
void logring_release_chunk_locked(uint64_t rel, after_unlock_t *after);
/* What a thread does once gm_log.lock is released (pages in or out, a checkpoint to ask for). */
void logring_after_unlock(const after_unlock_t *after);
/* The thread-exit destructor of evlog_exit_key. */
void logring_thread_exit(void *unused);
/* Forgets every extent and slot (a fork child, which must not touch the parent's file). */
void logring_forget(void);

#endif
