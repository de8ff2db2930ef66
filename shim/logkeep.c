/* What a bounded log's checkpoints repeat (logkeep.h), kept in memory as it is written. A leaf:
 * it calls no other part of the log writer. */
#include "logkeep.h"
#include "common.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define KEEP_DEFS_MAX (64u << 20)             /* definitions beyond this are not repeated */


static struct {
    pthread_mutex_t lock;
    uint8_t *defs;                             /* kept_t entries back to back, 8-byte aligned */
    size_t defs_len, defs_cap;
    int defs_full;
    kept_t *history[KEEP_HISTORY];             /* a ring: marks and OOMs */
    uint64_t nhistory;
    uint64_t history_at;                       /* the newest checkpoint that copied the history */
    kept_t *ledger[256];                       /* each device's last LEDGER sample */
} K = {.lock = PTHREAD_MUTEX_INITIALIZER};

uint64_t logkeep_add(const void *rec, size_t fixed, const void *tail, size_t tail_len, size_t len,
                         uint64_t rel)
{
    uint8_t type = ((const gmlog_rec_t *)rec)->type;
    size_t need = gm_round_up(sizeof(kept_t) + len, 8);
    pthread_mutex_lock(&K.lock);
    kept_t *k = NULL;
    if ((type == GMLOG_MARK || type == GMLOG_OOM || type == GMLOG_LIMIT) && K.history_at && rel <= K.history_at)
        rel = K.history_at + 1;
    if (type == GMLOG_LEDGER) { /* only the last: a sample says all a former one did */
        unsigned dev = ((const gmlog_rec_t *)rec)->device;
        if ((k = malloc(need))) {
            free(K.ledger[dev]);
            K.ledger[dev] = k;
        }
    } else if (type == GMLOG_MARK || type == GMLOG_OOM) {
        k = malloc(need);
        if (k) {
            free(K.history[K.nhistory % KEEP_HISTORY]);
            K.history[K.nhistory++ % KEEP_HISTORY] = k;
        }
    } else if (K.defs_len + need <= KEEP_DEFS_MAX) {
        if (K.defs_len + need > K.defs_cap) {
            size_t ncap = K.defs_cap ? K.defs_cap * 2 : 64 * 1024;
            while (ncap < K.defs_len + need)
                ncap *= 2;
            uint8_t *n = realloc(K.defs, ncap);
            if (n) {
                K.defs = n;
                K.defs_cap = ncap;
            }
        }
        if (K.defs_len + need <= K.defs_cap) {
            k = (kept_t *)(K.defs + K.defs_len);
            K.defs_len += need;
        }
    }
    if (!k && type != GMLOG_MARK && type != GMLOG_OOM && type != GMLOG_LEDGER)
        K.defs_full = 1;
    if (k) {
        k->at = rel;
        k->len = (uint32_t)len;
        memcpy(k->bytes, rec, fixed);
        ((gmlog_rec_t *)k->bytes)->dt = 0;
        if (tail_len)
            memcpy(k->bytes + fixed, tail, tail_len);
        memset(k->bytes + fixed + tail_len, 0, len - fixed - tail_len);
    }
    pthread_mutex_unlock(&K.lock);
    return rel;
}

void logkeep_forget(void)
{
    free(K.defs);
    K.defs = NULL;
    K.defs_len = K.defs_cap = 0;
    for (size_t i = 0; i < KEEP_HISTORY; i++) {
        free(K.history[i]);
        K.history[i] = NULL;
    }
    K.nhistory = 0;
    K.history_at = 0;
    for (size_t i = 0; i < 256; i++) {
        free(K.ledger[i]);
        K.ledger[i] = NULL;
    }
}

void logkeep_lock(void)
{
    pthread_mutex_lock(&K.lock);
}

void logkeep_unlock(void)
{
    pthread_mutex_unlock(&K.lock);
}

const uint8_t *logkeep_defs(size_t *len)
{
    *len = K.defs_len;
    return K.defs;
}

uint64_t logkeep_history_count(void)
{
    return K.nhistory;
}

const kept_t *logkeep_history(uint64_t i)
{
    return K.history[i % KEEP_HISTORY];
}

void logkeep_copied_history(uint64_t at)
{
    K.history_at = at;
}

const kept_t *logkeep_ledger(unsigned dev)
{
    return dev < 256 ? K.ledger[dev] : NULL;
}
