/* The log writer. Each thread appends to its own 64 KiB chunk of a MAP_SHARED file: a record is
 * a few stores and one 8-byte header store, no system call, no shared lock. Chunks are claimed
 * under a mutex, in 16 MiB extents reserved with posix_fallocate (a full disk is found then,
 * not as a SIGBUS); the thread that opens an extent maps the next one and faults its pages in
 * (MADV_POPULATE_WRITE), so that the writers do not each take a page fault every 4 KiB. What was
 * stored survives kill -9: it is in the page cache. */
#include "evlog.h"
#include "common.h"
#include "diag.h"
#include "init.h"
#include "options.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(gmlog_file_header_t) == 96, "file header layout");
_Static_assert(sizeof(gmlog_chunk_header_t) == 32, "chunk header layout");
_Static_assert(sizeof(gmlog_rec_t) == 8, "record header layout");
_Static_assert(sizeof(gmlog_alloc_t) == 40, "alloc layout");
_Static_assert(sizeof(gmlog_free_t) == 24, "free layout");
_Static_assert(sizeof(gmlog_oom_t) == 96, "oom layout");

#define EXTENT_CHUNKS 256u                    /* 16 MiB of chunks per mapping */
#define EXTENT_BYTES ((size_t)EXTENT_CHUNKS * GMLOG_CHUNK_SIZE)
#define MAX_RECORD (GMLOG_CHUNK_SIZE - sizeof(gmlog_chunk_header_t) - sizeof(gmlog_clock_t))
#define NO_SLOT UINT32_MAX

/* Extent e holds chunks e*256 .. e*256+255, in file slot `slot`. It stays mapped while any of
 * its chunks may still be written: until every one was claimed and every claimant moved on. */
typedef struct extent {
    uint8_t *addr;                             /* NULL once unmapped */
    uint32_t slot;                             /* where in the file: header_size + slot * 16 MiB */
    uint32_t open;                             /* chunks claimed and not yet given up */
    uint32_t usable;                           /* chunks backed by the file (< 256: disk full) */
    uint32_t reserved;
    uint64_t last_release;                     /* log time its last chunk was given up */
} extent_t;

/* What a thread does after unlocking: fault the next extent in, or push a finished one's pages
 * out of memory (outside the lock: both can take milliseconds). */
typedef struct after_unlock {
    uint8_t *populate;
    off_t writeback_off, drop_off;
    int writeback, drop;
    int checkpoint;
} after_unlock_t;

static struct {
    int enabled;                               /* records are being written */
    int closed;                                /* no new chunk may be claimed */
    int fd;
    unsigned gen;                              /* bumped when threads must drop their chunk */
    uint64_t start_mono;
    unsigned keep;                             /* bounded: copy definitions for checkpoints */
    /* Above: read with every record. Below: written when a chunk is claimed, on other lines. */
    _Alignas(64) uint64_t next_chunk;
    uint32_t header_size;
    gmlog_file_header_t *hdr;
    extent_t *extents;                         /* by extent number */
    size_t nextents, extents_cap;
    uint32_t *slot_owner;                      /* extent number in each file slot */
    uint32_t nslots, slots_cap, max_slots;     /* max_slots 0: unbounded */
    uint32_t ring_cursor;                      /* where the search for a reusable slot starts */
    int wrapped;
    uint64_t ckpt_done_at;                     /* log time of the newest complete checkpoint */
    uint64_t ckpt_extent;                      /* extent number when the newest one was asked for */
    int ckpt_busy;
    off_t last_unmapped_off;                   /* an unmapped extent whose pages go next */
    int have_last_unmapped;
    uint32_t next_mark;
    char path[PATH_MAX];
    pthread_mutex_t lock;
} L = {.fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

typedef struct evlog_tls {
    uint8_t *chunk;
    uint32_t used;
    unsigned gen;
    uint64_t base;                             /* time base of the current chunk, ns since start */
    uint64_t chunk_index;
    uint32_t nchunks;
    uint32_t tid;
    int in_checkpoint;                         /* the checkpoint writer: its copies are not kept */
    int exit_hooked;
} evlog_tls_t;

static __thread evlog_tls_t tls __attribute__((tls_model("initial-exec")));
static pthread_key_t exit_key;

static void release_chunk_locked(uint64_t rel, after_unlock_t *after);
static void on_thread_exit(void *unused);
static void do_after_unlock(const after_unlock_t *after);

int evlog_enabled(void)
{
    return __atomic_load_n(&L.enabled, __ATOMIC_RELAXED);
}

/* posix_fallocate, except past the file size limit (`ulimit -f`), where the kernel would send
 * SIGXFSZ, which ends the program: EFBIG then. */
static int reserve(int fd, off_t off, off_t len)
{
    struct rlimit lim;
    if (getrlimit(RLIMIT_FSIZE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY && (rlim_t)(off + len) > lim.rlim_cur)
        return EFBIG;
    return posix_fallocate(fd, off, len);
}

const char *evlog_path(void)
{
    return L.fd >= 0 ? L.path : NULL;
}

/* ---- the path ------------------------------------------------------------------------------ */

static size_t read_file(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t n = 0;
    while (n < len) {
        ssize_t r = read(fd, buf + n, len - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    return n;
}

/* The program's name for %n: argv[0]'s base name, or for "python script.py" the script's. */
static void program_name(char *out, size_t len)
{
    char cmd[4096];
    size_t n = read_file("/proc/self/cmdline", cmd, sizeof cmd - 1);
    cmd[n] = 0;
    const char *argv0 = cmd, *argv1 = n > strlen(cmd) + 1 ? cmd + strlen(cmd) + 1 : "";
    const char *base = strrchr(argv0, '/') ? strrchr(argv0, '/') + 1 : argv0;
    size_t l1 = strlen(argv1);
    if (!strncmp(base, "python", 6) && l1 > 3 && !strcmp(argv1 + l1 - 3, ".py")) {
        const char *b1 = strrchr(argv1, '/') ? strrchr(argv1, '/') + 1 : argv1;
        snprintf(out, len, "%.*s", (int)(strlen(b1) - 3), b1);
    } else {
        snprintf(out, len, "%.200s", *base ? base : "program");
    }
    for (char *p = out; *p; p++)
        if (*p == '/' || *p == ' ')
            *p = '_';
}

static const char *rank_value(void)
{
    static const char *const vars[] = {"RANK", "LOCAL_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"};
    for (size_t i = 0; i < GM_ARRAY_LEN(vars); i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return v;
    }
    return "0";
}

int evlog_expand_path(const char *tmpl, char *out, size_t len, long start_time)
{
    time_t start = (time_t)start_time;
    size_t o = 0;
    for (const char *p = tmpl; *p; p++) {
        char buf[256];
        const char *add = buf;
        buf[0] = 0;
        if (*p != '%' || !p[1]) {
            buf[0] = *p;
            buf[1] = 0;
        } else {
            switch (*++p) {
            case 'p': snprintf(buf, sizeof buf, "%d", (int)getpid()); break;
            case 'h': gethostname(buf, sizeof buf - 1); buf[sizeof buf - 1] = 0; break;
            case 'n': program_name(buf, sizeof buf); break;
            case 'r':
                /* a rank is a number, but whatever it holds must not make a directory */
                snprintf(buf, sizeof buf, "%s", rank_value());
                for (char *c = buf; *c; c++)
                    if (!(*c >= '0' && *c <= '9') && !(*c >= 'a' && *c <= 'z') && !(*c >= 'A' && *c <= 'Z') &&
                        *c != '-' && *c != '_' && *c != '.')
                        *c = '_';
                if (!strcmp(buf, ".") || !strcmp(buf, ".."))
                    buf[0] = '_';
                break;
            case 't': {
                struct tm tm;
                localtime_r(&start, &tm);
                strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
                break;
            }
            case '%': buf[0] = '%'; buf[1] = 0; break;
            default: buf[0] = '%'; buf[1] = *p; buf[2] = 0; break;
            }
        }
        size_t l = strlen(add);
        if (o + l >= len)
            return -1;
        memcpy(out + o, add, l);
        o += l;
    }
    out[o] = 0;
    return o ? 0 : -1;
}

/* ---- the header ---------------------------------------------------------------------------- */

static size_t meta_put(uint8_t *buf, size_t at, size_t cap, uint16_t tag, const void *val, size_t len)
{
    size_t need = sizeof(gmlog_meta_t) + gm_round_up(len, 8);
    if (at + need + sizeof(gmlog_meta_t) > cap)
        return at;
    gmlog_meta_t m = {tag, 0, (uint32_t)len};
    memcpy(buf + at, &m, sizeof m);
    memcpy(buf + at + sizeof m, val, len);
    memset(buf + at + sizeof m + len, 0, need - sizeof m - len);
    return at + need;
}

static const char *log_mode = "preload";

void evlog_set_mode(const char *mode)
{
    log_mode = mode;
}

static size_t build_meta(uint8_t *buf, size_t cap)
{
    size_t at = 0;
    char s[PATH_MAX];
    if (gethostname(s, sizeof s) == 0) {
        s[sizeof s - 1] = 0;
        at = meta_put(buf, at, cap, GMLOG_META_HOST, s, strlen(s));
    }
    ssize_t n = readlink("/proc/self/exe", s, sizeof s - 1);
    if (n > 0)
        at = meta_put(buf, at, cap, GMLOG_META_PROGRAM, s, (size_t)n);
    char cmd[8192];
    size_t cl = read_file("/proc/self/cmdline", cmd, sizeof cmd);
    while (cl && cmd[cl - 1] == 0)
        cl--;
    at = meta_put(buf, at, cap, GMLOG_META_CMDLINE, cmd, cl);
    at = meta_put(buf, at, cap, GMLOG_META_VERSION, GMSHIM_VERSION_STRING, strlen(GMSHIM_VERSION_STRING));
    at = meta_put(buf, at, cap, GMLOG_META_MODE, log_mode, strlen(log_mode));
    static const char *const ranks[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_PROCID"};
    for (size_t i = 0; i < GM_ARRAY_LEN(ranks); i++) {
        const char *v = getenv(ranks[i]);
        if (v) {
            int l = snprintf(s, sizeof s, "%s=%s", ranks[i], v);
            at = meta_put(buf, at, cap, GMLOG_META_RANK, s, (size_t)l);
        }
    }
    static const char *const envs[] = {"PYTORCH_NO_CUDA_MEMORY_CACHING", "PYTORCH_CUDA_ALLOC_CONF",
                                       "CUDA_VISIBLE_DEVICES"};
    for (size_t i = 0; i < GM_ARRAY_LEN(envs); i++) {
        const char *v = getenv(envs[i]);
        if (v) {
            int l = snprintf(s, sizeof s, "%s=%s", envs[i], v);
            at = meta_put(buf, at, cap, GMLOG_META_ENV, s, (size_t)l);
        }
    }
    for (int i = 0; i < GM_OPT__COUNT; i++) {
        char val[256];
        options_format((gm_option_t)i, val, sizeof val);
        int l = snprintf(s, sizeof s, "%s=%s", options_name((gm_option_t)i), val);
        at = meta_put(buf, at, cap, GMLOG_META_OPTION, s, (size_t)l);
    }
    gmlog_meta_t end = {GMLOG_META_END, 0, 0};
    memcpy(buf + at, &end, sizeof end);
    return at + sizeof end;
}

/* ---- what a checkpoint repeats, kept in memory (bounded logs only) ------------------------- */

#define KEEP_MASK ((1u << GMLOG_SITE) | (1u << GMLOG_STRING) | (1u << GMLOG_MODULE) | \
                   (1u << GMLOG_DEVICE) | (1u << GMLOG_LIMIT) | (1u << GMLOG_MARK) | (1u << GMLOG_OOM))
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
} K = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void keep_record(const void *rec, size_t fixed, const void *tail, size_t tail_len, size_t len,
                        uint64_t rel)
{
    uint8_t type = ((const gmlog_rec_t *)rec)->type;
    size_t need = gm_round_up(sizeof(kept_t) + len, 8);
    pthread_mutex_lock(&K.lock);
    kept_t *k = NULL;
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
    uint64_t now = gm_now_ns(), at = now - L.start_mono, n = 0;
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
    pthread_mutex_unlock(&K.lock);
    if (C.cut)
        n += C.cut(L.start_mono);
    c.h.flags = GMLOG_CKPT_END;
    c.records = n;
    c.dropped_before_ns = at;
    evlog_append(&c, sizeof c, gm_now_ns());
    /* Give the chunk up: the next checkpoint starts in a fresh one, and this one's space can be
     * reused once a newer checkpoint is complete. */
    after_unlock_t after = {0};
    pthread_mutex_lock(&L.lock);
    int complete = L.enabled && tls.chunk;
    release_chunk_locked(gm_now_ns() - L.start_mono, &after);
    if (complete)
        L.ckpt_done_at = at;
    L.ckpt_busy = 0;
    pthread_mutex_unlock(&L.lock);
    do_after_unlock(&after);
}

static void *checkpoint_main(void *arg)
{
    (void)arg;
    tls.in_checkpoint = 1;
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
        diag_warn("cannot start the log's checkpoint thread; the log grows past GMSHIM_LOG_LIMIT");
    }
}

static void do_after_unlock(const after_unlock_t *after)
{
#ifdef MADV_POPULATE_WRITE
    /* Best effort: an old kernel refuses it, a log cut meanwhile makes it fail; nothing depends
     * on it. */
    if (after->populate)
        madvise(after->populate, EXTENT_BYTES, MADV_POPULATE_WRITE);
#endif
    int fd = L.fd;
    if (after->writeback && fd >= 0)
        sync_file_range(fd, after->writeback_off, (off_t)EXTENT_BYTES, SYNC_FILE_RANGE_WRITE);
    if (after->drop && fd >= 0)
        posix_fadvise(fd, after->drop_off, (off_t)EXTENT_BYTES, POSIX_FADV_DONTNEED);
    if (after->checkpoint) {
        start_checkpoint_thread(); /* the first time a log reaches half its limit */
        pthread_mutex_lock(&C.lock);
        C.wanted = 1;
        pthread_cond_signal(&C.wake);
        pthread_mutex_unlock(&C.lock);
    }
}

/* ---- open, close ----------------------------------------------------------------------------- */

/* Never overwrite: on a name collision with an earlier log (a regular file) try name.1 ...
 * name.99; a name that is something else (/dev/full, a directory, a fifo) is refused, so that
 * no file appears beside it. The descriptor is never 0, 1 or 2: a host started with one of those
 * closed would write its own output over the log. */
static int open_exclusive(const char *tmpl_path)
{
    for (int i = 0; i < 100; i++) {
        if (i == 0)
            snprintf(L.path, sizeof L.path, "%s", tmpl_path);
        else if (snprintf(L.path, sizeof L.path, "%s.%d", tmpl_path, i) >= (int)sizeof L.path)
            return -1;
        int fd = open(L.path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 && fd <= 2) {
            int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
            close(fd);
            if (high < 0)
                unlink(L.path);
            return high;
        }
        if (fd >= 0 || errno != EEXIST)
            return fd;
        struct stat st;
        if (lstat(tmpl_path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
            errno = EINVAL;
            snprintf(L.path, sizeof L.path, "%s", tmpl_path);
            return -1;
        }
    }
    errno = EEXIST;
    return -1;
}

static void install_signal_handlers(void);

static int log_warned;

void evlog_open(void)
{
    pthread_mutex_lock(&L.lock);
    if (L.fd >= 0 || L.closed) {
        pthread_mutex_unlock(&L.lock);
        return;
    }
    const char *tmpl = options_get_str(GM_OPT_LOG);
    if (!strcmp(tmpl, "off") || !strcmp(tmpl, "0") || !strcmp(tmpl, "none")) {
        pthread_mutex_unlock(&L.lock);
        return;
    }
    struct timespec rt, mono;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    char path[PATH_MAX];
    if (evlog_expand_path(tmpl, path, sizeof path, rt.tv_sec) != 0) {
        diag_warn_once(&log_warned, "GMSHIM_LOG='%s' expands to an empty or too long path; no log", tmpl);
        pthread_mutex_unlock(&L.lock);
        return;
    }
    int fd = open_exclusive(path);
    if (fd < 0) {
        diag_warn_once(&log_warned, "cannot create the log %s: %s; the program goes on without it",
                       path, errno == EINVAL ? "it exists and is not a regular file" : strerror(errno));
        pthread_mutex_unlock(&L.lock);
        return;
    }
    size_t cap = 256 * 1024;
    uint8_t *meta = calloc(1, cap);
    size_t meta_len = meta ? build_meta(meta, cap) : 0;
    uint32_t header_size = (uint32_t)gm_round_up(sizeof(gmlog_file_header_t) + meta_len, GMLOG_HEADER_ALIGN);
    int err = reserve(fd, 0, header_size);
    void *map = err ? MAP_FAILED : mmap(NULL, header_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        diag_warn_once(&log_warned, "cannot write the log %s: %s; the program goes on without it",
                       L.path, strerror(err ? err : errno));
        free(meta);
        close(fd);
        unlink(L.path);
        pthread_mutex_unlock(&L.lock);
        return;
    }
    gmlog_file_header_t *h = map;
    memcpy(h->magic, GMLOG_MAGIC, 8);
    h->version = GMLOG_VERSION;
    h->byte_order = GMLOG_BYTE_ORDER;
    h->header_size = header_size;
    h->chunk_size = GMLOG_CHUNK_SIZE;
    h->start_realtime_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
    h->start_mono_ns = (uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec;
    h->pid = (uint32_t)getpid();
    h->meta_size = (uint32_t)meta_len;
    if (meta)
        memcpy((uint8_t *)map + sizeof *h, meta, meta_len);
    free(meta);
    L.fd = fd;
    L.hdr = h;
    L.header_size = header_size;
    L.start_mono = h->start_mono_ns;
    L.next_chunk = 0;
    L.nextents = L.nslots = 0;
    L.wrapped = 0;
    L.ckpt_done_at = L.ckpt_extent = 0;
    L.ckpt_busy = 0;
    L.have_last_unmapped = 0;
    uint64_t limit = (uint64_t)options_get(GM_OPT_LOG_LIMIT);
    L.max_slots = limit ? (uint32_t)(limit / EXTENT_BYTES) : 0;
    if (L.max_slots && L.max_slots < 4)
        L.max_slots = 4;
    L.keep = L.max_slots != 0;
    static int key_made;
    if (!key_made)
        key_made = pthread_key_create(&exit_key, on_thread_exit) == 0;
    L.gen++;
    __atomic_store_n(&L.enabled, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&L.lock);
    install_signal_handlers();
    diag_verbose("writing the event log to %s", L.path);
}

/* Header fields of a clean end; async-signal-safe (plain stores into the mapped header). */
static void mark_closed(uint32_t reason)
{
    gmlog_file_header_t *h = L.hdr;
    if (!h)
        return;
    struct timespec mono;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    uint64_t now = (uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec;
    h->end_ns = now - L.start_mono;
    h->close_reason = reason;
    __atomic_store_n(&h->flags, h->flags | GMLOG_F_CLOSED, __ATOMIC_RELEASE);
}

void evlog_close(uint32_t reason)
{
    if (!L.hdr)
        return;
    if (evlog_enabled()) {
        gmlog_end_t rec;
        memset(&rec, 0, sizeof rec);
        evlog_hdr(&rec.h, GMLOG_END, sizeof rec, GMLOG_NO_DEVICE, 0);
        rec.reason = reason;
        evlog_append(&rec, sizeof rec, gm_now_ns());
    }
    pthread_mutex_lock(&C.lock);
    C.stop = 1;
    pthread_cond_signal(&C.wake);
    pthread_mutex_unlock(&C.lock);
    pthread_mutex_lock(&L.lock);
    if (!L.closed) {
        L.closed = 1;
        /* Chunks nobody claimed are cut off (before the log wrapped, they are at the end);
         * claimed ones stay mapped for their writers. */
        uint64_t chunks = L.wrapped ? (uint64_t)L.nslots * EXTENT_CHUNKS : L.next_chunk;
        if (L.fd >= 0 && !L.wrapped &&
            ftruncate(L.fd, (off_t)L.header_size + (off_t)(chunks * GMLOG_CHUNK_SIZE)) != 0)
            diag_verbose("could not trim the log: %s", strerror(errno));
        if (L.hdr)
            L.hdr->chunks_at_close = chunks;
        mark_closed(reason);
    }
    pthread_mutex_unlock(&L.lock);
}

void evlog_abandon(void)
{
    __atomic_store_n(&L.enabled, 0, __ATOMIC_RELEASE);
    L.gen++;
    L.closed = 1;
    L.keep = 0;
    C.started = 0; /* a fork child has no checkpoint thread */
    for (size_t i = 0; i < L.nextents; i++)
        if (L.extents[i].addr)
            munmap(L.extents[i].addr, EXTENT_BYTES);
    if (L.hdr)
        munmap(L.hdr, L.header_size);
    free(L.extents);
    free(L.slot_owner);
    L.extents = NULL;
    L.slot_owner = NULL;
    L.nextents = L.extents_cap = 0;
    L.nslots = L.slots_cap = 0;
    keep_forget();
    L.hdr = NULL;
    if (L.fd >= 0)
        close(L.fd);
    L.fd = -1;
}

void evlog_fork_prepare(void) { pthread_mutex_lock(&L.lock); }
void evlog_fork_release(void) { pthread_mutex_unlock(&L.lock); }

/* ---- chunks and records ------------------------------------------------------------------- */

static void stop_writing(const char *why, int err)
{
    diag_warn_once(&log_warned, "the log %s stopped: %s: %s; the program goes on", L.path, why, strerror(err));
    __atomic_store_n(&L.enabled, 0, __ATOMIC_RELEASE);
    L.closed = 1;
    mark_closed(GMLOG_CLOSE_DISK);
}

static off_t slot_offset(uint32_t slot)
{
    return (off_t)L.header_size + (off_t)slot * (off_t)EXTENT_BYTES;
}

/* A file slot for a new extent: the next one at the end of the file while under the limit; at
 * the limit, a slot whose extent is unmapped and all of whose records are older than the newest
 * complete checkpoint (the oldest first). When none is (the checkpoint is still being written),
 * one more at the end: the file outgrows its limit by that extent. L.lock held. */
static uint32_t pick_slot_locked(int *reused)
{
    *reused = 0;
    if (L.max_slots && L.nslots >= L.max_slots && L.ckpt_done_at) {
        for (uint32_t k = 0; k < L.nslots; k++) {
            uint32_t s = (L.ring_cursor + k) % L.nslots;
            const extent_t *x = &L.extents[L.slot_owner[s]];
            if (!x->addr && x->last_release < L.ckpt_done_at) {
                L.ring_cursor = (s + 1) % L.nslots;
                *reused = 1;
                return s;
            }
        }
    }
    if (L.nslots == L.slots_cap) {
        uint32_t ncap = L.slots_cap ? L.slots_cap * 2 : 64;
        uint32_t *n = realloc(L.slot_owner, ncap * sizeof *n);
        if (!n)
            return NO_SLOT;
        L.slot_owner = n;
        L.slots_cap = ncap;
    }
    return L.nslots++;
}

/* The old records of a reused slot read as unused chunks (zeros) before it is mapped again. */
static int clear_slot(uint32_t slot)
{
#ifdef FALLOC_FL_PUNCH_HOLE
    if (fallocate(L.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, slot_offset(slot), (off_t)EXTENT_BYTES) == 0)
        return 0;
#endif
    return -1;
}

/* Maps extent e (reserving its blocks first). L.lock held. 0, or -1: the log stopped, or, for
 * an extent mapped ahead, nothing happened (it is tried again when it is needed). With less room
 * than a whole extent, an extent needed now takes the chunks that fit. */
static int map_extent_locked(size_t e, int ahead)
{
    if (e >= L.extents_cap) {
        size_t ncap = L.extents_cap ? L.extents_cap * 2 : 64;
        while (ncap <= e)
            ncap *= 2;
        extent_t *n = realloc(L.extents, ncap * sizeof *n);
        if (!n) {
            if (!ahead)
                stop_writing("out of host memory", ENOMEM);
            return -1;
        }
        L.extents = n;
        L.extents_cap = ncap;
    }
    int reused;
    uint32_t slot = pick_slot_locked(&reused);
    if (slot == NO_SLOT) {
        if (!ahead)
            stop_writing("out of host memory", ENOMEM);
        return -1;
    }
    off_t off = slot_offset(slot);
    int zeroed = !reused || clear_slot(slot) == 0;
    uint32_t usable = EXTENT_CHUNKS;
    int err = reserve(L.fd, off, (off_t)EXTENT_BYTES);
    while (err && !ahead && !reused && usable > 1) {
        usable /= 2;
        err = reserve(L.fd, off, (off_t)usable * GMLOG_CHUNK_SIZE);
    }
    void *addr = err ? MAP_FAILED : mmap(NULL, EXTENT_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, L.fd, off);
    if (addr == MAP_FAILED) {
        if (!reused)
            L.nslots--;
        if (!ahead)
            stop_writing(err ? "cannot extend the file" : "cannot map the file", err ? err : errno);
        return -1;
    }
    if (!zeroed)
        memset(addr, 0, EXTENT_BYTES);
    if (reused && !L.wrapped) {
        L.wrapped = 1;
        __atomic_or_fetch(&L.hdr->flags, GMLOG_F_WRAPPED, __ATOMIC_RELEASE);
    }
    L.slot_owner[slot] = (uint32_t)e;
    extent_t *x = &L.extents[e];
    memset(x, 0, sizeof *x);
    x->addr = addr;
    x->slot = slot;
    x->usable = usable;
    L.nextents = e + 1;
    return 0;
}

/* Extent e, once all its chunks were claimed and given up, is unmapped: only the extents being
 * written stay mapped. Its pages are then pushed to the disk, and the previous one's dropped
 * from memory, after the lock is released. L.lock held. */
static void maybe_unmap_locked(size_t e, after_unlock_t *after)
{
    extent_t *x = &L.extents[e];
    if (!x->addr || x->open || L.next_chunk < (uint64_t)(e + 1) * EXTENT_CHUNKS)
        return;
    munmap(x->addr, EXTENT_BYTES);
    x->addr = NULL;
    after->writeback = 1;
    after->writeback_off = slot_offset(x->slot);
    if (L.have_last_unmapped) {
        after->drop = 1;
        after->drop_off = L.last_unmapped_off;
    }
    L.last_unmapped_off = after->writeback_off;
    L.have_last_unmapped = 1;
}

/* This thread gives its chunk up (it claims another, or ends). L.lock held. */
static void release_chunk_locked(uint64_t rel, after_unlock_t *after)
{
    if (!tls.chunk || tls.gen != L.gen)
        return;
    size_t e = (size_t)(tls.chunk_index / EXTENT_CHUNKS);
    tls.chunk = NULL;
    if (e >= L.nextents)
        return;
    extent_t *x = &L.extents[e];
    if (x->open)
        x->open--;
    if (rel > x->last_release)
        x->last_release = rel;
    maybe_unmap_locked(e, after);
}

/* Claims a fresh chunk for this thread. L.lock held. The first chunk of an extent also maps the
 * next one, whose pages the caller then faults in outside the lock: the writers find them
 * present instead of each faulting its own, one page at a time. */
static uint8_t *claim_chunk_locked(uint64_t rel, after_unlock_t *after)
{
    if (L.closed || !L.enabled)
        return NULL;
    uint64_t idx = L.next_chunk;
    size_t e = (size_t)(idx / EXTENT_CHUNKS);
    if (e >= L.nextents && map_extent_locked(e, 0))
        return NULL;
    extent_t *x = &L.extents[e];
    if (idx % EXTENT_CHUNKS >= x->usable) {
        stop_writing("cannot extend the file", ENOSPC);
        return NULL;
    }
    if (idx % EXTENT_CHUNKS == 0) {
        if (x->usable == EXTENT_CHUNKS && e + 1 >= L.nextents && map_extent_locked(e + 1, 1) == 0)
            after->populate = L.extents[e + 1].addr;
        if (e > 0)
            maybe_unmap_locked(e - 1, after);
        uint64_t every = L.max_slots > 4 ? L.max_slots / 2 - 1 : 1;
        if (L.max_slots && !L.ckpt_busy && e >= L.ckpt_extent + every) {
            L.ckpt_busy = 1;
            L.ckpt_extent = e;
            after->checkpoint = 1;
        }
    }
    L.next_chunk++;
    x = &L.extents[e]; /* mapping ahead may have moved the table */
    x->open++;
    uint8_t *chunk = x->addr + (idx % EXTENT_CHUNKS) * GMLOG_CHUNK_SIZE;
    if (!tls.tid)
        tls.tid = (uint32_t)syscall(SYS_gettid);
    gmlog_chunk_header_t *ch = (gmlog_chunk_header_t *)chunk;
    ch->tid = tls.tid;
    ch->index = idx;
    ch->base_ns = rel;
    ch->thread_chunk = tls.nchunks++;
    __atomic_store_n(&ch->magic, GMLOG_CHUNK_MAGIC, __ATOMIC_RELEASE);
    tls.chunk_index = idx;
    return chunk;
}

static GM_NOINLINE int switch_chunk(uint64_t rel)
{
    after_unlock_t after = {0};
    pthread_mutex_lock(&L.lock);
    release_chunk_locked(rel, &after);
    uint8_t *chunk = claim_chunk_locked(rel, &after);
    pthread_mutex_unlock(&L.lock);
    do_after_unlock(&after);
    if (!chunk) {
        tls.chunk = NULL;
        return -1;
    }
    if (!tls.exit_hooked || !pthread_getspecific(exit_key)) {
        tls.exit_hooked = 1;
        pthread_setspecific(exit_key, (void *)1);
    }
    tls.chunk = chunk;
    tls.used = sizeof(gmlog_chunk_header_t);
    tls.base = rel;
    tls.gen = L.gen;
    return 0;
}

/* A thread that ends gives up its chunk, so that its extent can be unmapped (and reused). */
static void on_thread_exit(void *unused)
{
    (void)unused;
    if (!tls.chunk)
        return;
    after_unlock_t after = {0};
    pthread_mutex_lock(&L.lock);
    release_chunk_locked(gm_now_ns() - L.start_mono, &after);
    pthread_mutex_unlock(&L.lock);
    do_after_unlock(&after);
}

static inline void store_record(const void *rec, size_t fixed, const void *tail, size_t tail_len,
                                size_t len, uint32_t dt)
{
    uint8_t *at = tls.chunk + tls.used;
    /* Fixed parts are whole 8-byte words: copied word by word (no library call on the hot path). */
    typedef uint64_t __attribute__((may_alias)) word_t;
    const word_t *src = rec;
    word_t *dst = (word_t *)at;
    for (size_t i = 1; i < fixed / 8; i++)
        dst[i] = src[i];
    if (tail_len)
        memcpy(at + fixed, tail, tail_len);
    if (len > fixed + tail_len)
        memset(at + fixed + tail_len, 0, len - fixed - tail_len);
    uint64_t head;
    memcpy(&head, rec, 8);
    head = (head & 0xffffffffull) | (uint64_t)dt << 32;
    __atomic_store_n((uint64_t *)at, head, __ATOMIC_RELEASE);
    tls.used += (uint32_t)len;
}

void evlog_append2(void *rec, size_t fixed, const void *tail, size_t tail_len, uint64_t now)
{
    if (unlikely(!__atomic_load_n(&L.enabled, __ATOMIC_RELAXED)))
        return;
    size_t len = fixed + gm_round_up(tail_len, 8);
    if (unlikely(len > MAX_RECORD || len / 8 > 255))
        return;
    ((gmlog_rec_t *)rec)->len8 = (uint8_t)(len / 8);
    uint64_t rel = now > L.start_mono ? now - L.start_mono : 0;
    if (unlikely(L.keep) && (KEEP_MASK >> ((gmlog_rec_t *)rec)->type & 1) && !tls.in_checkpoint)
        keep_record(rec, fixed, tail, tail_len, len, rel);
    if (unlikely(!tls.chunk || tls.gen != __atomic_load_n(&L.gen, __ATOMIC_RELAXED) || tls.used + len + sizeof(gmlog_clock_t) > GMLOG_CHUNK_SIZE)) {
        if (switch_chunk(rel))
            return;
    }
    if (unlikely(rel < tls.base))
        rel = tls.base; /* a timestamp taken before the chunk was claimed */
    if (unlikely(rel - tls.base > 0xffffffffull)) {
        gmlog_clock_t c;
        evlog_hdr(&c.h, GMLOG_CLOCK, sizeof c, GMLOG_NO_DEVICE, 0);
        c.base_ns = rel;
        store_record(&c, sizeof c, NULL, 0, sizeof c, 0);
        tls.base = rel;
    }
    store_record(rec, fixed, tail, tail_len, len, (uint32_t)(rel - tls.base));
}

void evlog_append(void *rec, size_t len, uint64_t now)
{
    evlog_append2(rec, len, NULL, 0, now);
}

/* ---- typed records ------------------------------------------------------------------------- */

void evlog_alloc(int dev, unsigned flags, uint64_t ptr, uint64_t requested, uint64_t block,
                 uint32_t site, uint64_t now, uint64_t t0)
{
    if (!evlog_enabled())
        return;
    gmlog_alloc_t r;
    size_t len = 32;
    evlog_hdr(&r.h, GMLOG_ALLOC, len, dev, flags);
    r.ptr = ptr;
    r.site = site;
    r.dur_ns = evlog_dur(now, t0);
    uint64_t req = requested & GMLOG_SIZE_MASK;
    unsigned kind = (flags & GMLOG_KIND_MASK) >> GMLOG_KIND_SHIFT;
    r.size = req;
    if (kind == GMLOG_KIND_POOL) {
        uint64_t rounded = gm_round_up(req ? req : 1, 512);
        uint64_t extra = block >= rounded ? (block - rounded) / 512 : 0xffff;
        if (extra < 0xffff && block >= rounded && (block - rounded) % 512 == 0) {
            r.size |= extra << GMLOG_SIZE_BITS;
        } else {
            r.size |= 0xffffull << GMLOG_SIZE_BITS;
            r.block = block;
            len = 40;
        }
    } else if (block && (kind == GMLOG_KIND_ASYNC || kind >= GMLOG_KIND_OBSERVED)) {
        r.block = block;
        len = 40;
    }
    evlog_append(&r, len, now);
}

void evlog_free(int dev, unsigned flags, uint64_t ptr, uint32_t site, uint64_t now, uint64_t t0)
{
    if (!evlog_enabled())
        return;
    gmlog_free_t r;
    evlog_hdr(&r.h, GMLOG_FREE, sizeof r, dev, flags);
    r.ptr = ptr;
    r.site = site;
    r.dur_ns = evlog_dur(now, t0);
    evlog_append(&r, sizeof r, now);
}

void evlog_segment(int type, int dev, uint64_t base, uint64_t size, uint32_t graph, uint64_t now,
                   uint64_t t0)
{
    gmlog_segment_t r;
    evlog_hdr(&r.h, type, sizeof r, dev, 0);
    r.base = base;
    r.size = size;
    r.dur_ns = evlog_dur(now, t0);
    r.graph = graph;
    evlog_append(&r, sizeof r, now);
}

void evlog_warning(int kind, int dev, uint64_t ptr, uint32_t site, uint32_t aux)
{
    if (!evlog_enabled())
        return;
    gmlog_warning_t r;
    evlog_hdr(&r.h, GMLOG_WARNING, sizeof r, dev, (unsigned)kind);
    r.ptr = ptr;
    r.site = site;
    r.aux = aux;
    evlog_append(&r, sizeof r, gm_now_ns());
}

int evlog_mark(const char *label)
{
    if (!evlog_enabled())
        return -1;
    gmlog_mark_t r;
    size_t n = label ? strnlen(label, 2000) : 0; /* a record is at most 2040 bytes */
    evlog_hdr(&r.h, GMLOG_MARK, sizeof r, GMLOG_NO_DEVICE, 0);
    r.id = __atomic_add_fetch(&L.next_mark, 1, __ATOMIC_RELAXED);
    r.len = (uint32_t)n;
    evlog_append2(&r, sizeof r, label, n, gm_now_ns());
    return 0;
}

/* ---- fatal signals: mark the file closed, then die as before ------------------------------ */

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGQUIT};
static struct sigaction old_actions[GM_ARRAY_LEN(fatal_signals)];

static void on_fatal_signal(int sig, siginfo_t *info, void *ctx)
{
    for (size_t i = 0; i < GM_ARRAY_LEN(fatal_signals); i++) {
        if (fatal_signals[i] != sig)
            continue;
        struct sigaction *old = &old_actions[i];
        if (old->sa_flags & SA_SIGINFO) {
            if (old->sa_sigaction) {
                old->sa_sigaction(sig, info, ctx);
                return;
            }
        } else if (old->sa_handler == SIG_IGN) {
            /* The kernel does not let a program ignore a fault it raises itself (SIGSEGV of a bad
             * access, SIGFPE of a division, ...): it ends the process. Returning here would run
             * the faulting instruction again, for ever. Sent ones (kill, raise) stay ignored. */
            if (!info || info->si_code <= 0 || sig == SIGABRT || sig == SIGTERM || sig == SIGQUIT)
                return;
            struct sigaction dfl;
            memset(&dfl, 0, sizeof dfl);
            dfl.sa_handler = SIG_DFL;
            sigemptyset(&dfl.sa_mask);
            mark_closed(GMLOG_CLOSE_SIGNAL | (uint32_t)sig << 8);
            sigaction(sig, &dfl, NULL);
            return; /* the fault comes again, now with the default action */
        } else if (old->sa_handler != SIG_DFL) {
            old->sa_handler(sig);
            return;
        }
        /* The default action ends the process: close the log, then let it. */
        mark_closed(GMLOG_CLOSE_SIGNAL | (uint32_t)sig << 8);
        sigaction(sig, old, NULL);
        raise(sig);
        return;
    }
}

static void install_signal_handlers(void)
{
    static int installed;
    if (__atomic_exchange_n(&installed, 1, __ATOMIC_ACQ_REL))
        return;
    for (size_t i = 0; i < GM_ARRAY_LEN(fatal_signals); i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fatal_signal;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(fatal_signals[i], &sa, &old_actions[i]);
    }
}
