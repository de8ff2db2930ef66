/* A bounded log's checkpoint (gmlog.h), written by the log's helper thread (logstate.c) once the
 * ring asks for one: the copies logkeep.c holds, then each device's cut, after which logring.c
 * may reuse the space of older records. It never calls CUDA and never holds gm_log.lock while it
 * takes another lock. Installed by checkpoint_set_cut (the roof calls it before the log opens). */
#include "logstate.h"
#include "evlog.h"
#include "logkeep.h"
#include "logring.h"

#include <string.h>

static struct {
    uint64_t seq;
    evlog_cut_fn cut;
} C;

static void write_checkpoint(void);

void checkpoint_set_cut(evlog_cut_fn fn)
{
    C.cut = fn;
    logstate_set_checkpoint_writer(write_checkpoint);
}

static uint64_t append_copy(const kept_t *k, uint64_t now)
{
    uint8_t buf[GMLOG_CHUNK_SIZE / 8] __attribute__((aligned(8)));
    if (k->len > sizeof buf)
        return 0;
    memcpy(buf, k->bytes, k->len);
    evlog_append(buf, k->len, now);
    return 1;
}

/* A kept record from before `at`, behind an AT record with its own time: the records written. */
static uint64_t append_at(const kept_t *k, uint64_t at, uint64_t now)
{
    if (!k || k->at > at)
        return 0;
    gmlog_at_t a;
    evlog_hdr(&a.h, GMLOG_AT, sizeof a, GMLOG_NO_DEVICE, 0);
    a.at_ns = k->at;
    evlog_append(&a, sizeof a, now);
    return 1 + append_copy(k, now);
}

/* Writes one checkpoint (see gmlog.h) from the log's helper thread. */
static void write_checkpoint(void)
{
    uint64_t now = gm_now_ns(), at = now - gm_log.start_mono, n = 0;
    gmlog_checkpoint_t c;
    memset(&c, 0, sizeof c);
    evlog_hdr(&c.h, GMLOG_CHECKPOINT, sizeof c, GMLOG_NO_DEVICE, GMLOG_CKPT_BEGIN);
    c.seq = ++C.seq;
    c.at_ns = at;
    evlog_append(&c, sizeof c, now);
    logkeep_lock();
    size_t defs_len;
    const uint8_t *defs = logkeep_defs(&defs_len);
    for (size_t off = 0; off < defs_len;) {
        const kept_t *k = (const kept_t *)(defs + off);
        n += append_copy(k, now);
        off += gm_round_up(sizeof(kept_t) + k->len, 8);
    }
    uint64_t count = logkeep_history_count();
    uint64_t first = count > KEEP_HISTORY ? count - KEEP_HISTORY : 0;
    for (uint64_t i = first; i < count; i++)
        n += append_at(logkeep_history(i), at, now);
    for (unsigned dev = 0; dev < 256; dev++) /* each device's last sample, at its own time */
        n += append_at(logkeep_ledger(dev), at, now);
    logkeep_copied_history(at);
    logkeep_unlock();
    if (C.cut)
        n += C.cut(gm_log.start_mono);
    c.h.flags = GMLOG_CKPT_END;
    c.records = n;
    c.dropped_before_ns = at;
    evlog_append(&c, sizeof c, gm_now_ns());
    /* Give the chunk up: the next checkpoint starts in a fresh one, and this one's space can be
     * reused once a newer checkpoint is complete. */
    after_unlock_t after = {0};
    pthread_mutex_lock(&gm_log.lock);
    int complete = gm_log.enabled && gm_log_tls.chunk;
    logring_release_chunk_locked(gm_now_ns() - gm_log.start_mono, &after);
    if (complete)
        gm_log.ckpt_done_at = at;
    gm_log.ckpt_busy = 0;
    pthread_mutex_unlock(&gm_log.lock);
    logring_after_unlock(&after);
}

