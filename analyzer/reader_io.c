/* The reader's floor, below every file of it: bytes read at an offset, what each record type
 * is called and its least length, and the diagnostics a damaged log gets. */
#include "reader.h"
#include "reader_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const uint8_t rd_min_lens[GMLOG_TYPE_MAX + 1] = {
    [GMLOG_ALLOC] = 32,        [GMLOG_FREE] = 24,      [GMLOG_SEGMENT_ALLOC] = 32,
    [GMLOG_SEGMENT_FREE] = 32, [GMLOG_FENCE] = 32,     [GMLOG_FENCE_WAIT] = 24,
    [GMLOG_EMPTY_CACHE] = 24,  [GMLOG_OOM] = 96,       [GMLOG_STATS] = 64,
    [GMLOG_MARK] = 16,         [GMLOG_MODULE] = 40,    [GMLOG_SITE] = 16,
    [GMLOG_STRING] = 16,       [GMLOG_WARNING] = 24,   [GMLOG_DEVICE] = 32,
    [GMLOG_CLOCK] = 16,        [GMLOG_END] = 16,       [GMLOG_CAPTURE] = 32,
    [GMLOG_RESET] = 24,        [GMLOG_LIMIT] = 16,     [GMLOG_CHECKPOINT] = 40,
    [GMLOG_CUT] = 128,         [GMLOG_AT] = 16,
    [GMLOG_T_ALLOC] = 40,      [GMLOG_T_FREE_REQUESTED] = 40, [GMLOG_T_FREE_COMPLETED] = 40,
    [GMLOG_T_SEGMENT_ALLOC] = 40, [GMLOG_T_SEGMENT_FREE] = 40, [GMLOG_T_SEGMENT_MAP] = 40,
    [GMLOG_T_SEGMENT_UNMAP] = 40, [GMLOG_T_OOM] = 40, [GMLOG_LEDGER] = 56, [GMLOG_FENCE_REUSABLE] = 24,
};

static const char *const type_names[GMLOG_TYPE_MAX + 1] = {
    [GMLOG_ALLOC] = "alloc",     [GMLOG_FREE] = "free",         [GMLOG_SEGMENT_ALLOC] = "segment_alloc",
    [GMLOG_SEGMENT_FREE] = "segment_free", [GMLOG_FENCE] = "fence", [GMLOG_FENCE_WAIT] = "fence_wait",
    [GMLOG_EMPTY_CACHE] = "empty_cache", [GMLOG_OOM] = "oom",   [GMLOG_STATS] = "stats",
    [GMLOG_MARK] = "mark",       [GMLOG_MODULE] = "module",     [GMLOG_SITE] = "site",
    [GMLOG_STRING] = "string",   [GMLOG_WARNING] = "warning",   [GMLOG_DEVICE] = "device",
    [GMLOG_CLOCK] = "clock",     [GMLOG_END] = "end",           [GMLOG_CAPTURE] = "capture",
    [GMLOG_RESET] = "reset",     [GMLOG_LIMIT] = "limit",       [GMLOG_CHECKPOINT] = "checkpoint",
    [GMLOG_CUT] = "cut",         [GMLOG_AT] = "at",
    [GMLOG_T_ALLOC] = "torch_alloc", [GMLOG_T_FREE_REQUESTED] = "torch_free_requested",
    [GMLOG_T_FREE_COMPLETED] = "torch_free_completed", [GMLOG_T_SEGMENT_ALLOC] = "torch_segment_alloc",
    [GMLOG_T_SEGMENT_FREE] = "torch_segment_free", [GMLOG_T_SEGMENT_MAP] = "torch_segment_map",
    [GMLOG_T_SEGMENT_UNMAP] = "torch_segment_unmap", [GMLOG_T_OOM] = "torch_oom", [GMLOG_LEDGER] = "ledger",
    [GMLOG_FENCE_REUSABLE] = "fence_reusable",
};

unsigned rd_min_len(unsigned type)
{
    return type >= 1 && type <= GMLOG_TYPE_MAX ? rd_min_lens[type] : 0;
}

const char *rd_type_name(unsigned type)
{
    return type >= 1 && type <= GMLOG_TYPE_MAX ? type_names[type] : NULL;
}

/* ---- diagnostics --------------------------------------------------------------------------- */

/* The model's replay may read in a second thread while the first reports: one lock. */
static pthread_mutex_t diag_lock = PTHREAD_MUTEX_INITIALIZER;

void rd_diag(rd_log_t *lf, uint64_t offset, int partial, const char *fmt, ...)
{
    pthread_mutex_lock(&diag_lock);
    if (partial)
        lf->partial = 1;
    if (lf->quiet) {
        pthread_mutex_unlock(&diag_lock); /* a later pass over records already reported */
        return;
    }
    char msg[sizeof lf->diags[0].msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t kept = lf->ndiags < RD_MAX_DIAGS ? lf->ndiags : RD_MAX_DIAGS;
    for (size_t i = 0; i < kept; i++)
        if (lf->diags[i].offset == offset && !strcmp(lf->diags[i].msg, msg)) {
            pthread_mutex_unlock(&diag_lock); /* met again (a pass stopped early, then another) */
            return;
        }
    if (lf->ndiags < RD_MAX_DIAGS) {
        lf->diags[lf->ndiags].offset = offset;
        memcpy(lf->diags[lf->ndiags].msg, msg, sizeof msg);
    }
    lf->ndiags++;
    pthread_mutex_unlock(&diag_lock);
}

int rd_fail(rd_log_t *lf, uint64_t offset, const char *fmt, ...)
{
    lf->fatal = 1;
    /* The fatal reason goes first so that callers can print diags[0], even when the others
     * filled every place (the last of them then goes, counted only). */
    size_t kept = lf->ndiags < RD_MAX_DIAGS ? lf->ndiags : RD_MAX_DIAGS - 1;
    memmove(&lf->diags[1], &lf->diags[0], kept * sizeof lf->diags[0]);
    rd_diag_t *d = &lf->diags[0];
    d->offset = offset;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
    lf->ndiags++;
    return -1;
}

/* Reads up to len bytes at off; returns how many there were. */
size_t rd_read_at(const rd_log_t *lf, void *buf, size_t len, uint64_t off)
{
    if (off >= lf->size)
        return 0;
    if (len > lf->size - off)
        len = (size_t)(lf->size - off);
    if (lf->fd < 0) {
        memcpy(buf, lf->data + off, len);
        return len;
    }
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(lf->fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    return got;
}
