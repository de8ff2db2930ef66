/* The log writer. Each thread appends to its own 64 KiB chunk of a MAP_SHARED file: a record is
 * a few stores and one 8-byte header store, no system call, no shared lock. Chunks are claimed
 * under a mutex, in 16 MiB extents reserved with posix_fallocate (a full disk is found then,
 * not as a SIGBUS); the thread that opens an extent maps the next one and the log's helper thread
 * faults its pages in (MADV_POPULATE_WRITE), so that the writers do not each take a page fault
 * every 4 KiB nor wait for the 16 MiB. What was
 * stored survives kill -9: it is in the page cache. */
#include "evlog.h"
#include "logstate.h"
#include "logkeep.h"
#include "logring.h"
#include "diag.h"
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

int evlog_enabled(void)
{
    return __atomic_load_n(&gm_log.enabled, __ATOMIC_RELAXED);
}

int evlog_bounded(void)
{
    return __atomic_load_n(&gm_log.keep, __ATOMIC_RELAXED) != 0;
}

#define MAX_RECORD (GMLOG_CHUNK_SIZE - sizeof(gmlog_chunk_header_t) - sizeof(gmlog_clock_t))

const char *evlog_path(void)
{
    return gm_log.fd >= 0 ? gm_log.path : NULL;
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
}

/* What the program or the environment chooses (%n, %r, %h) becomes one plain file name: only
 * [A-Za-z0-9._-] (a slash would make a directory, a newline an odd name), never "." or "..". */
static void plain_name(char *s)
{
    for (char *c = s; *c; c++)
        if (!(*c >= '0' && *c <= '9') && !(*c >= 'a' && *c <= 'z') && !(*c >= 'A' && *c <= 'Z') && *c != '-' &&
            *c != '_' && *c != '.')
            *c = '_';
    if (!strcmp(s, ".") || !strcmp(s, ".."))
        s[0] = '_';
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
            case 'h': gethostname(buf, sizeof buf - 1); buf[sizeof buf - 1] = 0; plain_name(buf); break;
            case 'n': program_name(buf, sizeof buf); plain_name(buf); break;
            case 'r':
                /* a rank is a number, but whatever it holds must not make a directory */
                snprintf(buf, sizeof buf, "%s", rank_value());
                plain_name(buf);
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
    /* What tells this run from another in the same directory (gmshim report's runs). */
    static const char *const job[] = {"TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "MASTER_ADDR",
                                      "MASTER_PORT", "SLURM_JOB_ID", "SLURM_STEP_ID"};
    for (size_t i = 0; i < GM_ARRAY_LEN(job); i++) {
        const char *v = getenv(job[i]);
        if (v) {
            int l = snprintf(s, sizeof s, "%s=%s", job[i], v);
            if (l >= (int)sizeof s)
                l = (int)sizeof s - 1;
            at = meta_put(buf, at, cap, GMLOG_META_JOB, s, (size_t)l);
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

/* ---- open, close ----------------------------------------------------------------------------- */

/* Never overwrite: on a name collision with an earlier log (a regular file) try name.1 ...
 * name.99; a name that is something else (/dev/full, a directory, a fifo), or a symlink to
 * something else (/dev/stdout), is refused, so that no file appears beside it. A symlink is never
 * followed (O_NOFOLLOW): one to a regular file, which another user may have planted in a shared
 * directory, is passed over for the next name. The descriptor is never 0, 1 or 2: a host started
 * with one of those closed would write its own output over the log. */
static int open_exclusive(const char *tmpl_path)
{
    for (int i = 0; i < 100; i++) {
        if (i == 0)
            snprintf(gm_log.path, sizeof gm_log.path, "%s", tmpl_path);
        else if (snprintf(gm_log.path, sizeof gm_log.path, "%s.%d", tmpl_path, i) >= (int)sizeof gm_log.path)
            return -1;
        int fd = open(gm_log.path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 && fd <= 2) {
            int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
            close(fd);
            if (high < 0)
                unlink(gm_log.path);
            return high;
        }
        if (fd >= 0 || errno != EEXIST)
            return fd;
        struct stat st;
        int lst = lstat(tmpl_path, &st);
        if (lst == 0 && S_ISLNK(st.st_mode))
            lst = stat(tmpl_path, &st); /* only to tell what it leads to: a dangling one is passed over */
        if (lst == 0 && !S_ISREG(st.st_mode)) {
            errno = EINVAL;
            snprintf(gm_log.path, sizeof gm_log.path, "%s", tmpl_path);
            return -1;
        }
    }
    errno = EEXIST;
    return -1;
}

static void install_signal_handlers(void);

/* What the log maps at most at once besides its header: the extent being written, the one mapped
 * ahead, and its helper thread's stack (the default: 8 MiB). */
#define LOG_MAPS (2 * EXTENT_BYTES + ((size_t)8 << 20))

/* Under an address-space limit (ulimit -v), the room the process has left; SIZE_MAX without
 * one. The log is written only where it takes at most half of that room: a host sized to its
 * limit must get the memory it gets without gmshim. */
static size_t address_space_left(void)
{
    struct rlimit lim;
    if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY)
        return SIZE_MAX;
    char statm[128];
    size_t n = read_file("/proc/self/statm", statm, sizeof statm - 1);
    statm[n] = 0;
    size_t used = (size_t)strtoull(statm, NULL, 10) * (size_t)sysconf(_SC_PAGESIZE);
    return lim.rlim_cur > used ? (size_t)(lim.rlim_cur - used) : 0;
}


void evlog_open(void)
{
    pthread_mutex_lock(&gm_log.lock);
    if (gm_log.fd >= 0 || gm_log.closed) {
        pthread_mutex_unlock(&gm_log.lock);
        return;
    }
    const char *tmpl = options_get_str(GM_OPT_LOG);
    if (!strcmp(tmpl, "off") || !strcmp(tmpl, "0") || !strcmp(tmpl, "none")) {
        pthread_mutex_unlock(&gm_log.lock);
        return;
    }
    struct timespec rt, mono;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    char path[PATH_MAX];
    if (evlog_expand_path(tmpl, path, sizeof path, rt.tv_sec) != 0) {
        diag_warn_once(&gm_log.warned, "GMSHIM_LOG='%s' expands to an empty or too long path; no log", tmpl);
        pthread_mutex_unlock(&gm_log.lock);
        return;
    }
    size_t left = address_space_left();
    if (left < 2 * LOG_MAPS) {
        diag_warn_once(&gm_log.warned, "the address-space limit (ulimit -v) leaves %zu MiB and the log would map "
                       "%zu MiB of it; no log, the program goes on without it", left >> 20, LOG_MAPS >> 20);
        pthread_mutex_unlock(&gm_log.lock);
        return;
    }
    int fd = open_exclusive(path);
    if (fd < 0) {
        diag_warn_once(&gm_log.warned, "cannot create the log %s: %s; the program goes on without it",
                       path, errno == EINVAL ? "it exists and is not a regular file" : strerror(errno));
        pthread_mutex_unlock(&gm_log.lock);
        return;
    }
    size_t cap = 256 * 1024;
    uint8_t *meta = calloc(1, cap);
    size_t meta_len = meta ? build_meta(meta, cap) : 0;
    uint32_t header_size = (uint32_t)gm_round_up(sizeof(gmlog_file_header_t) + meta_len, GMLOG_HEADER_ALIGN);
    int err = logstate_reserve(fd, 0, header_size);
    void *map = err ? MAP_FAILED : mmap(NULL, header_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        diag_warn_once(&gm_log.warned, "cannot write the log %s: %s; the program goes on without it",
                       gm_log.path, strerror(err ? err : errno));
        free(meta);
        close(fd);
        unlink(gm_log.path);
        pthread_mutex_unlock(&gm_log.lock);
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
    gm_log.fd = fd;
    gm_log.hdr = h;
    gm_log.header_size = header_size;
    gm_log.start_mono = h->start_mono_ns;
    gm_log.next_chunk = 0;
    gm_log.nextents = gm_log.nslots = 0;
    gm_log.wrapped = 0;
    gm_log.ckpt_done_at = gm_log.ckpt_extent = 0;
    gm_log.ckpt_busy = 0;
    uint64_t limit = (uint64_t)options_get(GM_OPT_LOG_LIMIT);
    gm_log.max_slots = limit ? (uint32_t)(limit / EXTENT_BYTES) : 0;
    if (gm_log.max_slots && gm_log.max_slots < 4)
        gm_log.max_slots = 4;
    gm_log.keep = gm_log.max_slots != 0;
    if (!gm_log.exit_key_made)
        gm_log.exit_key_made = pthread_key_create(&evlog_exit_key, logring_thread_exit) == 0;
    __atomic_add_fetch(&gm_log.gen, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&gm_log.enabled, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&gm_log.lock);
    install_signal_handlers();
    diag_verbose("writing the event log to %s", gm_log.path);
}

void evlog_close(uint32_t reason)
{
    if (!gm_log.hdr)
        return;
    if (evlog_enabled()) {
        gmlog_end_t rec;
        memset(&rec, 0, sizeof rec);
        evlog_hdr(&rec.h, GMLOG_END, sizeof rec, GMLOG_NO_DEVICE, 0);
        rec.reason = reason;
        evlog_append(&rec, sizeof rec, gm_now_ns());
    }
    logstate_checkpoint_stop();
    pthread_mutex_lock(&gm_log.lock);
    if (!gm_log.closed) {
        gm_log.closed = 1;
        /* Chunks nobody claimed are cut off (before the log wrapped, they are at the end);
         * claimed ones stay mapped for their writers. */
        uint64_t chunks = gm_log.wrapped ? (uint64_t)gm_log.nslots * EXTENT_CHUNKS : gm_log.next_chunk;
        if (gm_log.fd >= 0 && !gm_log.wrapped &&
            ftruncate(gm_log.fd, (off_t)gm_log.header_size + (off_t)(chunks * GMLOG_CHUNK_SIZE)) != 0)
            diag_verbose("could not trim the log: %s", strerror(errno));
        if (gm_log.hdr)
            gm_log.hdr->chunks_at_close = chunks;
        logstate_mark_closed(reason);
    }
    pthread_mutex_unlock(&gm_log.lock);
}

void evlog_abandon(void)
{
    __atomic_store_n(&gm_log.enabled, 0, __ATOMIC_RELEASE);
    __atomic_add_fetch(&gm_log.gen, 1, __ATOMIC_RELEASE);
    gm_log.closed = 1;
    gm_log.keep = 0;
    logring_forget();
    logstate_checkpoint_forget();
    if (gm_log.hdr)
        munmap(gm_log.hdr, gm_log.header_size);
    gm_log.hdr = NULL;
    if (gm_log.fd >= 0)
        close(gm_log.fd);
    gm_log.fd = -1;
}

void evlog_fork_prepare(void) { pthread_mutex_lock(&gm_log.lock); }
void evlog_fork_release(void) { pthread_mutex_unlock(&gm_log.lock); }

/* Bytes ahead of the record being written whose cache line is asked for, for writing, now:
 * about four pairs' records. A store that misses the cache is cheap by itself, but the thread's
 * next locked instruction (a thread cache's or an arena's lock) waits until its line has come. */
#define GM_LOG_AHEAD 256

static inline void prefetch_for_write(const void *p)
{
#if defined(__x86_64__)
    __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p)); /* a no-op where unsupported */
#else
    __builtin_prefetch(p, 1, 3);
#endif
}

static inline void store_record(const void *rec, size_t fixed, const void *tail, size_t tail_len,
                                size_t len, uint32_t dt)
{
    uint8_t *at = gm_log_tls.chunk + gm_log_tls.used;
    if (likely(gm_log_tls.used + GM_LOG_AHEAD < GMLOG_CHUNK_SIZE)) /* not into another thread's chunk */
        prefetch_for_write(at + GM_LOG_AHEAD);
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
    gm_log_tls.used += (uint32_t)len;
}

void evlog_append2(void *rec, size_t fixed, const void *tail, size_t tail_len, uint64_t now)
{
    if (unlikely(!__atomic_load_n(&gm_log.enabled, __ATOMIC_RELAXED)))
        return;
    size_t len = fixed + gm_round_up(tail_len, 8);
    if (unlikely(len > MAX_RECORD || len / 8 > 255))
        return;
    ((gmlog_rec_t *)rec)->len8 = (uint8_t)(len / 8);
    uint64_t rel = now > gm_log.start_mono ? now - gm_log.start_mono : 0;
    if (unlikely(gm_log.keep) && (KEEP_MASK >> ((gmlog_rec_t *)rec)->type & 1) && !gm_log_tls.in_checkpoint)
        rel = logkeep_add(rec, fixed, tail, tail_len, len, rel);
    if (unlikely(!gm_log_tls.chunk || gm_log_tls.gen != __atomic_load_n(&gm_log.gen, __ATOMIC_RELAXED) || gm_log_tls.used + len + sizeof(gmlog_clock_t) > GMLOG_CHUNK_SIZE)) {
        if (logring_switch_chunk(rel))
            return;
    }
    if (unlikely(rel < gm_log_tls.base))
        rel = gm_log_tls.base; /* a timestamp taken before the chunk was claimed */
    if (unlikely(rel - gm_log_tls.base > 0xffffffffull)) {
        gmlog_clock_t c;
        evlog_hdr(&c.h, GMLOG_CLOCK, sizeof c, GMLOG_NO_DEVICE, 0);
        c.base_ns = rel;
        store_record(&c, sizeof c, NULL, 0, sizeof c, 0);
        gm_log_tls.base = rel;
    }
    store_record(rec, fixed, tail, tail_len, len, (uint32_t)(rel - gm_log_tls.base));
}

void evlog_append(void *rec, size_t len, uint64_t now)
{
    evlog_append2(rec, len, NULL, 0, now);
}

/* The hit path's records (ALLOC, FREE): whole words, no tail, none that a checkpoint keeps.
 * Straight into the thread's chunk when it has room and the time fits its base, with
 * evlog_append2's result; anything else (no chunk yet, a new log, a full chunk, a time before
 * the chunk's base or past its 4.29 s) through evlog_append2 itself. The caller checked that the
 * log is on. */
static inline void append_words(void *rec, size_t len, uint64_t now)
{
    uint64_t start = gm_log.start_mono, base = gm_log_tls.base, rel = now - start;
    uint32_t used = gm_log_tls.used;
    if (unlikely(!gm_log_tls.chunk || gm_log_tls.gen != __atomic_load_n(&gm_log.gen, __ATOMIC_RELAXED) ||
                 used + len + sizeof(gmlog_clock_t) > GMLOG_CHUNK_SIZE || now < start || rel < base ||
                 rel - base > 0xffffffffull)) {
        evlog_append2(rec, len, NULL, 0, now);
        return;
    }
    ((gmlog_rec_t *)rec)->len8 = (uint8_t)(len / 8);
    store_record(rec, len, NULL, 0, len, (uint32_t)(rel - base));
}

/* ---- chunks and records ------------------------------------------------------------------- */

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
    append_words(&r, len, now);
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
    append_words(&r, sizeof r, now);
}

/* A thread cache's hit: its ALLOC or FREE has one shape (no duration: a hit is not timed), so its
 * words go straight into the thread's chunk, without the general helpers' cases and without a
 * call on the way: anything else (the counter not in use, no room, a time outside the chunk's
 * base, an extra that does not fit) goes to evlog_alloc / evlog_free. The time is read only when
 * the log is on, and raised to the cache's last stamp (*last, under the cache's lock). */
static inline uint64_t rec_head(int type, size_t len, int dev, unsigned flags)
{
    return (uint64_t)type | (uint64_t)(len / 8) << 8 | (uint64_t)(uint8_t)dev << 16 | (uint64_t)(uint8_t)flags << 24;
}

/* Where a record of len bytes stamped `now` goes in the thread's chunk, its dt in *dt; NULL when
 * append_words' general way must take it. */
static inline uint8_t *room_for(size_t len, uint64_t now, uint32_t *dt)
{
    uint64_t rel = now - gm_log.start_mono - gm_log_tls.base; /* wraps when before either */
    uint32_t used = gm_log_tls.used;
    if (unlikely(!gm_log_tls.chunk || gm_log_tls.gen != __atomic_load_n(&gm_log.gen, __ATOMIC_RELAXED) ||
                 used + len + sizeof(gmlog_clock_t) > GMLOG_CHUNK_SIZE || rel > 0xffffffffull))
        return NULL;
    *dt = (uint32_t)rel;
    uint8_t *at = gm_log_tls.chunk + used;
    if (likely(used + GM_LOG_AHEAD < GMLOG_CHUNK_SIZE))
        prefetch_for_write(at + GM_LOG_AHEAD);
    gm_log_tls.used = used + (uint32_t)len;
    return at;
}

static inline void put_words(uint8_t *at, uint64_t head, uint32_t dt, uint64_t w1, uint64_t w2, uint64_t w3, int n)
{
    typedef uint64_t __attribute__((may_alias)) word_t;
    word_t *dst = (word_t *)at;
    dst[1] = w1;
    dst[2] = w2;
    if (n > 3)
        dst[3] = w3;
    __atomic_store_n((uint64_t *)at, head | (uint64_t)dt << 32, __ATOMIC_RELEASE); /* the header last */
}

static GM_COLD void cached_alloc_slow(int dev, uint64_t *last, uint64_t ptr, uint64_t requested, uint64_t block,
                                      uint32_t site)
{
    uint64_t now = stamp_after(last, gm_now_unordered_ns());
    evlog_alloc(dev, GMLOG_A_CACHED, ptr, requested, block, site, now, now);
}

static GM_COLD void cached_free_slow(int dev, uint64_t *last, unsigned flags, uint64_t ptr, uint32_t site)
{
    uint64_t now = stamp_after(last, gm_now_unordered_ns());
    evlog_free(dev, GMLOG_F_CACHED | flags, ptr, site, now, now);
}

/* t: the counter's time, or 0 where it is not calibrated. */
static inline void cached_alloc_at(uint64_t t, int dev, uint64_t *last, uint64_t ptr, uint64_t requested,
                                   uint64_t block, uint32_t site)
{
    uint64_t req = requested & GMLOG_SIZE_MASK, rounded = gm_round_up(req ? req : 1, 512);
    uint64_t extra = (block - rounded) / 512;
    if (unlikely(!t)) {
        cached_alloc_slow(dev, last, ptr, requested, block, site);
        return;
    }
    uint32_t dt;
    uint64_t now = stamp_after(last, t);
    uint8_t *at = block < rounded || (block - rounded) % 512 || extra >= 0xffff ? NULL : room_for(32, now, &dt);
    if (unlikely(!at)) {
        evlog_alloc(dev, GMLOG_A_CACHED, ptr, requested, block, site, now, now);
        return;
    }
    put_words(at, rec_head(GMLOG_ALLOC, 32, dev, GMLOG_A_CACHED), dt, ptr, req | extra << GMLOG_SIZE_BITS, site, 4);
}

static inline void cached_free_at(uint64_t t, int dev, uint64_t *last, unsigned flags, uint64_t ptr, uint32_t site)
{
    if (unlikely(!t)) {
        cached_free_slow(dev, last, flags, ptr, site);
        return;
    }
    uint32_t dt;
    uint64_t now = stamp_after(last, t);
    uint8_t *at = room_for(24, now, &dt);
    if (unlikely(!at)) {
        evlog_free(dev, GMLOG_F_CACHED | flags, ptr, site, now, now);
        return;
    }
    put_words(at, rec_head(GMLOG_FREE, 24, dev, GMLOG_F_CACHED | flags), dt, ptr, site, 0, 3);
}

void evlog_cached_alloc(int dev, uint64_t *last, uint64_t ptr, uint64_t requested, uint64_t block, uint32_t site)
{
    if (__atomic_load_n(&gm_log.enabled, __ATOMIC_RELAXED))
        cached_alloc_at(gm_counter_unordered_ns(), dev, last, ptr, requested, block, site);
}

void evlog_cached_free(int dev, uint64_t *last, unsigned flags, uint64_t ptr, uint32_t site)
{
    if (__atomic_load_n(&gm_log.enabled, __ATOMIC_RELAXED))
        cached_free_at(gm_counter_unordered_ns(), dev, last, flags, ptr, site);
}

void evlog_cached_alloc_at(uint64_t t, int dev, uint64_t *last, uint64_t ptr, uint64_t requested, uint64_t block,
                           uint32_t site)
{
    if (__atomic_load_n(&gm_log.enabled, __ATOMIC_RELAXED))
        cached_alloc_at(t, dev, last, ptr, requested, block, site);
}

void evlog_cached_free_at(uint64_t t, int dev, uint64_t *last, unsigned flags, uint64_t ptr, uint32_t site)
{
    if (__atomic_load_n(&gm_log.enabled, __ATOMIC_RELAXED))
        cached_free_at(t, dev, last, flags, ptr, site);
}

void evlog_segment(int type, int dev, uint64_t base, uint64_t size, uint32_t graph, unsigned flags, uint64_t now,
                   uint64_t t0)
{
    gmlog_segment_t r;
    evlog_hdr(&r.h, type, sizeof r, dev, flags);
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

int evlog_mark(const char *label, unsigned flags)
{
    if (!evlog_enabled())
        return -1;
    gmlog_mark_t r;
    size_t n = label ? strnlen(label, 2000) : 0; /* a record is at most 2040 bytes */
    evlog_hdr(&r.h, GMLOG_MARK, sizeof r, GMLOG_NO_DEVICE, flags);
    r.id = __atomic_add_fetch(&gm_log.next_mark, 1, __ATOMIC_RELAXED);
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
            logstate_mark_closed(GMLOG_CLOSE_SIGNAL | (uint32_t)sig << 8);
            sigaction(sig, &dfl, NULL);
            return; /* the fault comes again, now with the default action */
        } else if (old->sa_handler != SIG_DFL) {
            old->sa_handler(sig);
            return;
        }
        /* The default action ends the process: close the log, then let it. */
        logstate_mark_closed(GMLOG_CLOSE_SIGNAL | (uint32_t)sig << 8);
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
