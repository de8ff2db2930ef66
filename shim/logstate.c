/* The log writer's shared state (logstate.h) and what every part of it needs: the file's
 * reservation and clean-end marks, stopping the log, and the log's helper thread, which faults in
 * the extent mapped ahead and writes a bounded log's checkpoints (written by checkpoint.c,
 * installed at init). */
#include "logstate.h"
#include "diag.h"
#include "logkeep.h"
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

evlog_state_t gm_log = {.fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

__thread evlog_tls_t gm_log_tls __attribute__((tls_model("initial-exec")));
pthread_key_t evlog_exit_key;

/* posix_fallocate, except past the file size limit (`ulimit -f`), where the kernel would send
 * SIGXFSZ, which ends the program: EFBIG then. */
int logstate_reserve(int fd, off_t off, off_t len)
{
    struct rlimit lim;
    if (getrlimit(RLIMIT_FSIZE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY && (rlim_t)(off + len) > lim.rlim_cur)
        return EFBIG;
    return posix_fallocate(fd, off, len);
}

/* Header fields of a clean end; async-signal-safe (plain stores into the mapped header). */
void logstate_mark_closed(uint32_t reason)
{
    gmlog_file_header_t *h = gm_log.hdr;
    if (!h)
        return;
    struct timespec mono;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    uint64_t now = (uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec;
    h->end_ns = now - gm_log.start_mono;
    h->close_reason = reason;
    /* Not trimmed at a signal or a stopped writer: the chunks claimed so far, a floor that tells
     * a copy cut at a chunk boundary (threads still running may claim more). */
    if (!h->chunks_at_close)
        h->chunks_at_close = gm_log.wrapped ? (uint64_t)gm_log.nslots * EXTENT_CHUNKS
                                            : __atomic_load_n(&gm_log.next_chunk, __ATOMIC_RELAXED);
    /* One atomic or: a thread setting GMLOG_F_WRAPPED meanwhile keeps its bit. */
    __atomic_or_fetch(&h->flags, GMLOG_F_CLOSED, __ATOMIC_RELEASE);
}

void logstate_mark_alive(void)
{
    gmlog_file_header_t *h = gm_log.hdr;
    if (!h || (__atomic_load_n(&h->flags, __ATOMIC_ACQUIRE) & GMLOG_F_CLOSED))
        return;
    struct timespec mono;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    uint64_t now = (uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec;
    __atomic_store_n(&h->alive_ns, now - gm_log.start_mono, __ATOMIC_RELAXED);
}

void logstate_stop_writing(const char *why, int err)
{
    /* EFBIG is never the kernel's here (logstate_reserve stops short of SIGXFSZ): say which limit. */
    diag_warn_once(&gm_log.warned, "the log %s stopped: %s: %s; the program goes on", gm_log.path, why,
                   err == EFBIG ? "the file size limit (ulimit -f) is reached" : strerror(err));
    __atomic_store_n(&gm_log.enabled, 0, __ATOMIC_RELEASE);
    gm_log.closed = 1;
    logstate_mark_closed(GMLOG_CLOSE_DISK);
}


/* ---- the log's helper thread ---------------------------------------------------------------- */

/* One thread does the log's slow work off the writers' path: it faults in the pages of the
 * extent mapped ahead (a writer that outruns it faults its own), and writes a bounded log's
 * checkpoints. Started the first time either is asked for. Idle, it wakes every
 * GMLOG_ALIVE_PERIOD_NS to say in the header that the process is alive: a log killed without its
 * close (SIGKILL) then tells how long its process lived, a hung one included. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int wanted, stop, started, failed;
    size_t populate;                     /* an extent number + 1 to fault in; 0: none */
    unsigned populate_gen;
    void (*populate_fn)(size_t extent, unsigned gen);
    void (*write)(void);
} C = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static void *helper_main(void *arg)
{
    (void)arg;
    gm_log_tls.in_checkpoint = 1;
    gm_depth = 1; /* nothing it calls may enter the hooks */
    for (;;) {
        pthread_mutex_lock(&C.lock);
        while (!C.wanted && !C.populate && !C.stop) {
            logstate_mark_alive();
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += (time_t)(GMLOG_ALIVE_PERIOD_NS / 1000000000u);
            pthread_cond_timedwait(&C.wake, &C.lock, &until);
        }
        int stop = C.stop, wanted = C.wanted;
        size_t populate = C.populate;
        unsigned gen = C.populate_gen;
        void (*populate_fn)(size_t, unsigned) = C.populate_fn;
        C.wanted = 0;
        C.populate = 0;
        pthread_mutex_unlock(&C.lock);
        if (stop || !__atomic_load_n(&gm_log.enabled, __ATOMIC_RELAXED))
            break;
        if (populate)
            populate_fn(populate - 1, gen);
        if (wanted && C.write)
            C.write();
    }
    return NULL;
}

/* 0 once the thread runs; -1 if it cannot (the caller does the work itself). C.lock held. */
static int start_helper_locked(void)
{
    if (C.started || C.failed)
        return C.started ? 0 : -1;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the host's signals go to the host's threads */
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    C.started = pthread_create(&t, &attr, helper_main, NULL) == 0;
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (C.started)
        return 0;
    C.failed = 1;
    if (gm_log.max_slots) {
        gm_log.keep = 0; /* no checkpoint will repeat them */
        diag_warn("cannot start the log's helper thread; the log grows past GMSHIM_LOG_LIMIT");
    }
    return -1; /* unbounded, nothing is lost: the writers fault their pages in themselves */
}

void logstate_checkpoint_request(void)
{
    if (!C.write)
        return; /* no writer installed (a program that links the writer alone) */
    pthread_mutex_lock(&C.lock);
    if (start_helper_locked() == 0) {
        C.wanted = 1;
        pthread_cond_signal(&C.wake);
    }
    pthread_mutex_unlock(&C.lock);
}

int logstate_request_populate(void (*fn)(size_t extent, unsigned gen), size_t extent, unsigned gen)
{
    pthread_mutex_lock(&C.lock);
    int ok = !C.stop && start_helper_locked() == 0;
    if (ok) {
        C.populate_fn = fn;
        C.populate = extent + 1;
        C.populate_gen = gen;
        pthread_cond_signal(&C.wake);
    }
    pthread_mutex_unlock(&C.lock);
    return ok ? 0 : -1;
}

void logstate_checkpoint_stop(void)
{
    pthread_mutex_lock(&C.lock);
    C.stop = 1;
    pthread_cond_signal(&C.wake);
    pthread_mutex_unlock(&C.lock);
}

void logstate_checkpoint_forget(void)
{
    /* A fork child has no helper thread, and its locks may have been copied held. */
    pthread_mutex_init(&C.lock, NULL);
    pthread_cond_init(&C.wake, NULL);
    C.started = 0;
    C.wanted = 0;
    C.populate = 0;
    logkeep_forget();
}

void logstate_set_checkpoint_writer(void (*write)(void))
{
    C.write = write;
}
