/* A bounded log's checkpoints (gmlog.h): the definitions, marks and OOMs a checkpoint repeats
 * are copied here as they are written; a thread of its own, started the first time a log
 * reaches half its limit, writes each checkpoint, after which logring.c may reuse the space of
 * older records. It never calls CUDA and never holds gm_log.lock while it takes another lock. */
#include "logstate.h"
#include "diag.h"
#include "evlog.h"
#include "state.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* ---- what a checkpoint repeats, kept in memory (bounded logs only) ------------------------- */

#define KEEP_DEFS_MAX (64u << 20)             /* definitions beyond this are not repeated */
#define KEEP_HISTORY 4096u                    /* the most recent marks and OOMs repeated */

typedef struct kept {
    uint64_t at;                               /* log time */
    uint32_t len;
    uint8_t bytes[];                           /* the whole record, header first */
} kept_t;

static struct {
    pthread_mutex_t lock;
    uint8_t *defs;                             /* kept_t entries back to back, 8-byte aligned */
    size_t defs_len, defs_cap;
    int defs_full;
    kept_t *history[KEEP_HISTORY];             /* a ring: marks and OOMs */
    uint64_t nhistory;
    uint64_t history_at;                       /* the newest checkpoint that copied the history */
} K = {.lock = PTHREAD_MUTEX_INITIALIZER};

uint64_t checkpoint_keep(const void *rec, size_t fixed, const void *tail, size_t tail_len, size_t len,
                         uint64_t rel)
{
    uint8_t type = ((const gmlog_rec_t *)rec)->type;
    size_t need = gm_round_up(sizeof(kept_t) + len, 8);
    pthread_mutex_lock(&K.lock);
    kept_t *k = NULL;
    if ((type == GMLOG_MARK || type == GMLOG_OOM || type == GMLOG_LIMIT) && K.history_at && rel <= K.history_at)
        rel = K.history_at + 1;
    if (type == GMLOG_MARK || type == GMLOG_OOM) {
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
    if (!k && type != GMLOG_MARK && type != GMLOG_OOM)
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

static void keep_forget(void)
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
}

/* ---- checkpoints ---------------------------------------------------------------------------- */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int wanted, stop, started, failed;
    uint64_t seq;
    evlog_cut_fn cut;
} C = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

void evlog_set_cut(evlog_cut_fn fn)
{
    C.cut = fn;
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

/* Writes one checkpoint (see gmlog.h) from the checkpoint thread. */
static void write_checkpoint(void)
{
    uint64_t now = gm_now_ns(), at = now - gm_log.start_mono, n = 0;
    gmlog_checkpoint_t c;
    memset(&c, 0, sizeof c);
    evlog_hdr(&c.h, GMLOG_CHECKPOINT, sizeof c, GMLOG_NO_DEVICE, GMLOG_CKPT_BEGIN);
    c.seq = ++C.seq;
    c.at_ns = at;
    evlog_append(&c, sizeof c, now);
    pthread_mutex_lock(&K.lock);
    for (size_t off = 0; off < K.defs_len;) {
        const kept_t *k = (const kept_t *)(K.defs + off);
        n += append_copy(k, now);
        off += gm_round_up(sizeof(kept_t) + k->len, 8);
    }
    uint64_t first = K.nhistory > KEEP_HISTORY ? K.nhistory - KEEP_HISTORY : 0;
    for (uint64_t i = first; i < K.nhistory; i++) {
        const kept_t *k = K.history[i % KEEP_HISTORY];
        if (!k || k->at > at)
            continue;
        gmlog_at_t a;
        evlog_hdr(&a.h, GMLOG_AT, sizeof a, GMLOG_NO_DEVICE, 0);
        a.at_ns = k->at;
        evlog_append(&a, sizeof a, now);
        n += 1 + append_copy(k, now);
    }
    K.history_at = at;
    pthread_mutex_unlock(&K.lock);
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
    ring_release_chunk_locked(gm_now_ns() - gm_log.start_mono, &after);
    if (complete)
        gm_log.ckpt_done_at = at;
    gm_log.ckpt_busy = 0;
    pthread_mutex_unlock(&gm_log.lock);
    ring_after_unlock(&after);
}

static void *checkpoint_main(void *arg)
{
    (void)arg;
    gm_log_tls.in_checkpoint = 1;
    gm_depth = 1; /* nothing it calls may enter the hooks */
    for (;;) {
        pthread_mutex_lock(&C.lock);
        while (!C.wanted && !C.stop)
            pthread_cond_wait(&C.wake, &C.lock);
        int stop = C.stop;
        C.wanted = 0;
        pthread_mutex_unlock(&C.lock);
        if (stop || !evlog_enabled())
            break;
        write_checkpoint();
    }
    return NULL;
}

static void start_checkpoint_thread(void)
{
    if (C.started || C.failed)
        return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the host's signals go to the host's threads */
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    C.started = pthread_create(&t, &attr, checkpoint_main, NULL) == 0;
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!C.started) {
        C.failed = 1;
        gm_log.keep = 0; /* no checkpoint will repeat them */
        diag_warn("cannot start the log's checkpoint thread; the log grows past GMSHIM_LOG_LIMIT");
    }
}

void checkpoint_request(void)
{
    start_checkpoint_thread(); /* the first time a log reaches half its limit */
    pthread_mutex_lock(&C.lock);
    C.wanted = 1;
    pthread_cond_signal(&C.wake);
    pthread_mutex_unlock(&C.lock);
}

void checkpoint_stop(void)
{
    pthread_mutex_lock(&C.lock);
    C.stop = 1;
    pthread_cond_signal(&C.wake);
    pthread_mutex_unlock(&C.lock);
}

void checkpoint_forget(void)
{
    C.started = 0; /* a fork child has no checkpoint thread */
    keep_forget();
}
