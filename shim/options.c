/* The options table (one row per GMSHIM_* variable) and its parsers. Values are read from the
 * environment the first time they are asked for, never at load time. */
#include "options.h"
#include "diag.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct option_row {
    long long value;
    const char *str;
    int initialized;
    int warned;
    const char *name;
    gm_option_kind_t kind;
    const char *default_text;
    const char *doc;
    long long max;           /* the largest value accepted (SECONDS: in ms; LIMIT: as a size) */
    long long more_than;     /* a non-zero value must be more than this */
    const char *choices;     /* STRING: the accepted words, space-separated (NULL: any) */
    int (*check)(const char *text); /* STRING: 0 if the text is acceptable */
} option_row_t;

/* Bounds: past them a value is a typo, not a wish, and could overflow what reads it. */
#define SIZE_MAX_OPT (1LL << 48)                       /* 256 TiB, more than any device has */
#define SECONDS_MAX_MS (7LL * 24 * 3600 * 1000)         /* a week */
#define FENCE_FREES_MAX 1000000LL

static int log_template_check(const char *text);

#define GM_OPT_DEVICES_WARNED 64 /* GMSHIM_DEVICE_LIMIT_<n> warns once per device below this */

static option_row_t table[GM_OPT__COUNT] = {
    [GM_OPT_POOL] = {.name = "GMSHIM_POOL", .kind = GM_KIND_BOOL, .default_text = "1",
        .doc = "serve cudaMalloc/cudaFree from gmshim's caching pool; 0 = forward every call, keep counting",
        .max = 1},
    [GM_OPT_VERBOSE] = {.name = "GMSHIM_VERBOSE", .kind = GM_KIND_BOOL, .default_text = "0",
        .doc = "print the effective settings at the first CUDA call, and notes on what gmshim does", .max = 1},
    [GM_OPT_PENDING_WAIT] = {.name = "GMSHIM_PENDING_WAIT", .kind = GM_KIND_BOOL, .default_text = "1",
        .doc = "on a cache miss, wait for freed blocks still in use by the GPU rather than grow the pool "
        "when they could serve the request", .max = 1},
    [GM_OPT_FENCE_BYTES] = {.name = "GMSHIM_FENCE_BYTES", .kind = GM_KIND_SIZE, .default_text = "0",
        .doc = "freed bytes after which gmshim records a fence (CUDA events) without waiting for a miss; "
        "0 = a 64th of what the pool reserves, at least 2 MiB", .max = SIZE_MAX_OPT},
    [GM_OPT_FENCE_FREES] = {.name = "GMSHIM_FENCE_FREES", .kind = GM_KIND_INT, .default_text = "64",
        .doc = "frees after which gmshim records a fence without waiting for a miss (whichever of "
        "this and GMSHIM_FENCE_BYTES comes first); 0 = by bytes only", .max = FENCE_FREES_MAX},
    [GM_OPT_FENCE_SHARE] = {.name = "GMSHIM_FENCE_SHARE", .kind = GM_KIND_INT, .default_text = "1",
        .doc = "most percent of the time the fences of GMSHIM_FENCE_BYTES and GMSHIM_FENCE_FREES may take: "
        "after each, the next waits for 100/share times its cost (a fence with many streams is dear); "
        "a miss still records one at once; 0 = no limit", .max = 100},
    [GM_OPT_TRUST_STREAM_ORDER] = {.name = "GMSHIM_TRUST_STREAM_ORDER", .kind = GM_KIND_BOOL, .default_text = "0",
        .doc = "UNSAFE unless all device work is on one stream: reuse freed blocks at once, without "
        "waiting for the GPU (cudaFree's guarantee is dropped)", .max = 1},
    [GM_OPT_GPU_ORDER] = {.name = "GMSHIM_GPU_ORDER", .kind = GM_KIND_STRING, .default_text = "auto",
        .doc = "reuse a freed block once a fence covers its free, with every stream made to wait for "
        "that fence on the GPU, instead of the CPU waiting for it; holds while the process uses one "
        "device (a torchrun rank seeing every GPU does). auto = on under GMSHIM_TORCH=own while every "
        "stream is known (runtime and driver streams, static runtimes included), else off; 1 = on "
        "(streams gmshim cannot see are not made to wait); 0 = off",
        .choices = "auto 1 0 on off yes no true false"},
    [GM_OPT_LOG] = {.name = "GMSHIM_LOG", .kind = GM_KIND_STRING, .default_text = "gmshim-%n-%p.gmlog",
        .doc = "event log path template (%p pid, %h host, %n program, %r rank, %t start time); off = no log",
        .check = log_template_check},
    [GM_OPT_STACK_DEPTH] = {.name = "GMSHIM_STACK_DEPTH", .kind = GM_KIND_INT, .default_text = "16",
        .doc = "native frames recorded per allocation call site; 0 = none; at most 64", .max = GM_OPT_DEPTH_MAX},
    [GM_OPT_PYTHON_DEPTH] = {.name = "GMSHIM_PYTHON_DEPTH", .kind = GM_KIND_INT, .default_text = "16",
        .doc = "Python frames (file:line, function) recorded per allocation from a Python thread; 0 = none; "
        "at most 64", .max = GM_OPT_DEPTH_MAX},
    [GM_OPT_UNWIND] = {.name = "GMSHIM_UNWIND", .kind = GM_KIND_STRING, .default_text = "tables",
        .doc = "how native frames are walked: tables = from the unwind tables with each return "
        "address's rule cached per thread (backtrace() where a rule is beyond it); backtrace = "
        "backtrace() for every site", .choices = "tables backtrace"},
    [GM_OPT_DEVICE_LIMIT] = {.name = "GMSHIM_DEVICE_LIMIT", .kind = GM_KIND_LIMIT, .default_text = "0",
        .doc = "never reserve more than this on a device (size, or fraction like 0.5 or 50%); 0 = no cap; "
        "GMSHIM_DEVICE_LIMIT_<n> sets device n", .max = SIZE_MAX_OPT},
    [GM_OPT_CACHE_LIMIT] = {.name = "GMSHIM_CACHE_LIMIT", .kind = GM_KIND_SIZE, .default_text = "0",
        .doc = "most bytes of wholly free segments kept per device; beyond it the oldest go back (within "
        "10 ms of the GPU finishing with freed memory); 0 = no cap", .max = SIZE_MAX_OPT},
    [GM_OPT_MAX_SPLIT] = {.name = "GMSHIM_MAX_SPLIT", .kind = GM_KIND_SIZE, .default_text = "0",
        .doc = "blocks of this size or more are never split (against fragmentation); 0 = no limit; "
        "else more than 20 MiB", .more_than = 20LL << 20, .max = SIZE_MAX_OPT},
    [GM_OPT_EMPTY_CACHE_INTERVAL] = {.name = "GMSHIM_EMPTY_CACHE_INTERVAL", .kind = GM_KIND_SECONDS,
        .default_text = "0",
        .doc = "every this many seconds a background thread returns whole free segments to the "
        "driver (with GMSHIM_IDLE_RELEASE: only those idle that long); 0 = never", .max = SECONDS_MAX_MS},
    [GM_OPT_IDLE_RELEASE] = {.name = "GMSHIM_IDLE_RELEASE", .kind = GM_KIND_SECONDS, .default_text = "0",
        .doc = "return segments that have been wholly free for this many seconds; 0 = off", .max = SECONDS_MAX_MS},
    [GM_OPT_TORCH] = {.name = "GMSHIM_TORCH", .kind = GM_KIND_STRING, .default_text = "keep",
        .doc = "own = set PYTORCH_NO_CUDA_MEMORY_CACHING=1 (unless set) so that gmshim is PyTorch's "
        "allocator; keep = leave PyTorch's own cache alone and follow it from inside (every tensor, "
        "through its trace tracker); segments = leave it alone, log its segments only",
        .choices = "own keep segments"},
    [GM_OPT_CUPTI] = {.name = "GMSHIM_CUPTI", .kind = GM_KIND_BOOL, .default_text = "0",
        .doc = "also observe, through CUPTI, the device allocations that bypass the hooks (cuBLAS, "
        "cuDNN, NCCL, the driver API) and log them as foreign with the requesting library", .max = 1},
    [GM_OPT_LOG_LIMIT] = {.name = "GMSHIM_LOG_LIMIT", .kind = GM_KIND_SIZE, .default_text = "4G",
        .doc = "most bytes the event log takes on disk: past it the log keeps the newest events and a "
        "checkpoint of everything before (live blocks and PyTorch's live tensors with their sites, "
        "peaks, marks, OOMs); 0 = no "
        "bound; else at least 64 MiB", .more_than = (64LL << 20) - 1, .max = SIZE_MAX_OPT},
    [GM_OPT_SEGMENTS] = {.name = "GMSHIM_SEGMENTS", .kind = GM_KIND_STRING, .default_text = "classic",
        .doc = "what the pool is made of: classic = segments from cudaMalloc (PyTorch's sizes); vmm = one "
        "growable range of addresses per arena and class, with physical memory mapped in 2 MiB pages "
        "where blocks need it and unmapped when wholly free (the driver's virtual memory API; classic "
        "where the device lacks it)", .choices = "classic vmm"},
    [GM_OPT_CLOCK] = {.name = "GMSHIM_CLOCK", .kind = GM_KIND_STRING, .default_text = "auto",
        .doc = "the log's clock: auto = the CPU's time-stamp counter, calibrated once against "
        "CLOCK_MONOTONIC, where the kernel itself keeps time with it (clocksource tsc, an invariant "
        "counter), else CLOCK_MONOTONIC; monotonic = always clock_gettime", .choices = "auto monotonic"},
    [GM_OPT_THREAD_CACHE] = {.name = "GMSHIM_THREAD_CACHE", .kind = GM_KIND_SIZE, .default_text = "64M",
        .doc = "most bytes of freed blocks of up to 1 MiB each thread keeps per device for its own next "
        "requests of the same size, reused without a lock once their fence completed; the pool takes "
        "them back before it grows, empties its cache or trims; 0 = no thread caches", .max = SIZE_MAX_OPT},
    [GM_OPT_WARN] = {.name = "GMSHIM_WARN", .kind = GM_KIND_BOOL, .default_text = "0",
        .doc = "print once to stderr when a device's low-water mark rises step after step (marks, else "
        "troughs of allocated bytes): the growth per step, the call site growing most, and when the "
        "device is full at that rate", .max = 1},
    [GM_OPT_LEDGER] = {.name = "GMSHIM_LEDGER", .kind = GM_KIND_BOOL, .default_text = "1",
        .doc = "sample the card for the ledger (docs/ledger.md): the driver's free bytes, the CUDA "
        "context, and other processes on the same GPU through NVML where present; at each device's "
        "first use, each failed allocation, marks and every GMSHIM_LEDGER_INTERVAL", .max = 1},
    [GM_OPT_LEDGER_INTERVAL] = {.name = "GMSHIM_LEDGER_INTERVAL", .kind = GM_KIND_SECONDS, .default_text = "10",
        .doc = "seconds between the ledger's periodic samples; 0 = only at first use, OOMs and marks",
        .max = SECONDS_MAX_MS},
    [GM_OPT_PLAN] = {.name = "GMSHIM_PLAN", .kind = GM_KIND_BOOL, .default_text = "0",
        .doc = "learn each device's repeating step (the same call sites and sizes again) and serve it "
        "from a plan in a growable range of its own, every other allocation from the pool; turns on "
        "growable ranges (GMSHIM_SEGMENTS=vmm), in which idle pages move while the step is learnt", .max = 1},
};

int options_parse_bool(const char *s, long long *out)
{
    static const char *const yes[] = {"1", "on", "yes", "true"};
    static const char *const no[] = {"0", "off", "no", "false"};
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i])) {
            *out = 1;
            return 0;
        }
        if (!strcasecmp(s, no[i])) {
            *out = 0;
            return 0;
        }
    }
    return GM_PARSE_BAD;
}

/* ---- numbers ------------------------------------------------------------------------------- */

/* Digits are compared by hand: isdigit() follows the locale, and strtoll/strtod accept spaces,
 * signs, hex, exponents, inf and nan, none of which a setting should mean. */
static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

#define DEC_HUGE (1ULL << 62)

/* A plain decimal number: its whole part (DEC_HUGE once past what matters), up to 18 digits of
 * its fraction as frac / scale, and whether any digit is not 0. */
typedef struct decimal {
    unsigned long long whole, frac, scale;
    int nonzero, point;
} decimal_t;

/* Reads digits, and if `point_ok` one '.' followed by digits; returns where the number ends, or
 * NULL when s does not start with one. */
static const char *decimal_read(const char *s, decimal_t *d, int point_ok)
{
    memset(d, 0, sizeof *d);
    d->scale = 1;
    if (!is_digit(*s))
        return NULL;
    for (; is_digit(*s); s++) {
        unsigned dig = (unsigned)(*s - '0');
        d->nonzero |= dig != 0;
        d->whole = d->whole >= DEC_HUGE / 10 ? DEC_HUGE : d->whole * 10 + dig;
    }
    if (*s != '.' || !point_ok)
        return s;
    s++;
    if (!is_digit(*s))
        return NULL;
    d->point = 1;
    for (int n = 0; is_digit(*s); s++, n++) {
        unsigned dig = (unsigned)(*s - '0');
        d->nonzero |= dig != 0;
        if (n < 18) {
            d->frac = d->frac * 10 + dig;
            d->scale *= 10;
        }
    }
    return s;
}

/* d × mult, rounded to the nearest integer. */
static int decimal_scale(const decimal_t *d, unsigned long long mult, long long *out)
{
    if (d->whole >= DEC_HUGE || d->whole > DEC_HUGE / mult)
        return GM_PARSE_HUGE;
    unsigned long long v = d->whole * mult;
    /* The fraction's part is below mult: long double holds it closely enough to round. */
    v += (unsigned long long)((long double)d->frac * (long double)mult / (long double)d->scale + 0.5L);
    if (v > DEC_HUGE)
        return GM_PARSE_HUGE;
    if (!v && d->nonzero)
        return GM_PARSE_TINY;
    *out = (long long)v;
    return 0;
}

int options_parse_int(const char *s, long long *out)
{
    decimal_t d;
    const char *end = decimal_read(s, &d, 0);
    if (!end || *end)
        return GM_PARSE_BAD;
    if (d.whole >= DEC_HUGE)
        return GM_PARSE_HUGE;
    *out = (long long)d.whole;
    return 0;
}

/* Sizes: plain bytes, or a number (decimals allowed) with K/M/G/T, optionally followed by "i"
 * and/or "B"; every multiple is binary (1M = 1 MiB), as GPU memory is counted. */
int options_parse_size(const char *s, long long *out)
{
    decimal_t d;
    const char *p = decimal_read(s, &d, 1);
    if (!p)
        return GM_PARSE_BAD;
    unsigned shift = 0;
    if (*p) {
        switch (lower(*p)) {
        case 'b':
            if (p[1])
                return GM_PARSE_BAD;
            break;
        case 'k': shift = 10; break;
        case 'm': shift = 20; break;
        case 'g': shift = 30; break;
        case 't': shift = 40; break;
        default: return GM_PARSE_BAD;
        }
        p++;
        if (shift && lower(*p) == 'i')
            p++;
        if (shift && lower(*p) == 'b')
            p++;
        if (*p)
            return GM_PARSE_BAD;
    }
    if (!shift && d.point)
        return GM_PARSE_BAD; /* a fraction of a byte */
    return decimal_scale(&d, 1ULL << shift, out);
}

/* Seconds, decimals allowed, optional "s" suffix; stored as milliseconds. */
int options_parse_seconds(const char *s, long long *out_ms)
{
    decimal_t d;
    const char *p = decimal_read(s, &d, 1);
    if (!p)
        return GM_PARSE_BAD;
    if (*p == 's')
        p++;
    if (*p)
        return GM_PARSE_BAD;
    return decimal_scale(&d, 1000, out_ms);
}

/* A size, or a fraction of the device ("0.5", "50%"), stored as -(millionths). */
int options_parse_limit(const char *s, long long *out)
{
    decimal_t d;
    const char *p = decimal_read(s, &d, 1);
    if (!p)
        return GM_PARSE_BAD;
    int percent = p[0] == '%' && !p[1];
    if (!percent && (*p || !d.point))
        return options_parse_size(s, out);
    long long millionths = 0;
    int rc = decimal_scale(&d, percent ? 10000 : 1000000, &millionths);
    if (rc == GM_PARSE_TINY)
        return rc;
    if (rc || !millionths || millionths > 1000000)
        return GM_PARSE_BAD; /* none, or more than the device: neither is a fraction of it */
    *out = -millionths;
    return 0;
}

/* ---- the table ------------------------------------------------------------------------------- */

/* A log path template names a file: not empty, not a directory ("/", "logs/", "."), no control
 * characters (they would end up in file names and in messages). */
static int log_template_check(const char *text)
{
    for (const char *p = text; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return -1;
    const char *last = strrchr(text, '/');
    last = last ? last + 1 : text;
    return !*last || !strcmp(last, ".") || !strcmp(last, "..") ? -1 : 0;
}

/* Bytes in the largest binary unit that holds them exactly, e.g. "20 MiB". */
static const char *format_bytes(long long v, char *buf, size_t len)
{
    static const char *const units[] = {"TiB", "GiB", "MiB", "KiB"};
    for (int i = 0; i < 4; i++) {
        int shift = 40 - 10 * i;
        if (v && v % (1LL << shift) == 0) {
            snprintf(buf, len, "%lld %s", v >> shift, units[i]);
            return buf;
        }
    }
    snprintf(buf, len, "%lld B", v);
    return buf;
}

/* A value of the row's kind as text for a message ("64", "256 TiB", "604800 s"). */
static const char *format_value(const option_row_t *row, long long v, char *buf, size_t len)
{
    switch (row->kind) {
    case GM_KIND_SIZE:
    case GM_KIND_LIMIT: return format_bytes(v, buf, len);
    case GM_KIND_SECONDS: snprintf(buf, len, "%g s", (double)v / 1000.0); return buf;
    default: snprintf(buf, len, "%lld", v); return buf;
    }
}

/* The n bytes of s as a message shows them: on one line (control bytes as \xNN) and at most
 * about 64 of them, cut between characters. */
static const char *quote_text(const char *s, size_t n, char *buf, size_t len)
{
    size_t o = 0, i = 0;
    for (; i < n && o + 8 < len && i < 64; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            o += (size_t)snprintf(buf + o, len - o, "\\x%02x", c);
        else
            buf[o++] = (char)c;
    }
    while (i < n && o && ((unsigned char)s[i] & 0xc0) == 0x80) { /* inside a UTF-8 character */
        o--;
        i--;
    }
    buf[o] = 0;
    if (i < n)
        snprintf(buf + o, len - o, "...(%zu bytes)", n);
    return buf;
}

static int parse_into(const option_row_t *row, const char *text, long long *v, const char **s)
{
    switch (row->kind) {
    case GM_KIND_BOOL: return options_parse_bool(text, v);
    case GM_KIND_INT: return options_parse_int(text, v);
    case GM_KIND_SIZE: return options_parse_size(text, v);
    case GM_KIND_SECONDS: return options_parse_seconds(text, v);
    case GM_KIND_LIMIT: return options_parse_limit(text, v);
    case GM_KIND_STRING:
        if (!*text || (row->check && row->check(text)))
            return GM_PARSE_BAD;
        if (row->choices) {
            size_t n = strlen(text);
            const char *c = row->choices;
            int found = 0;
            while (*c && !found) {
                size_t w = strcspn(c, " ");
                found = w == n && !strncmp(c, text, n);
                c += w + (c[w] == ' ');
            }
            if (!found)
                return GM_PARSE_BAD;
        }
        *s = text;
        return 0;
    }
    return GM_PARSE_BAD;
}

static const char *kind_word(const option_row_t *row)
{
    switch (row->kind) {
    case GM_KIND_BOOL: return "not a boolean (1/0, on/off, yes/no, true/false)";
    case GM_KIND_INT: return "not a non-negative integer (plain decimal digits)";
    case GM_KIND_SIZE: return "not a size (e.g. 512M, 8G, 8GiB, or bytes)";
    case GM_KIND_SECONDS: return "not a number of seconds (e.g. 30, 0.5, 2s)";
    case GM_KIND_STRING: return row->choices ? "not one of the accepted words" : "not a file name template";
    case GM_KIND_LIMIT: return "not a size (e.g. 24G) or a fraction (0.5, 50%)";
    }
    return "invalid";
}

static const char *smallest_step(gm_option_kind_t k)
{
    switch (k) {
    case GM_KIND_SECONDS: return "1 ms";
    case GM_KIND_LIMIT: return "1 B, or a millionth of the device";
    default: return "1 B";
    }
}

/* "more than 20 MiB", or "at least 64 MiB" for a bound one byte below a round size. */
static const char *lower_bound_text(const option_row_t *row, char *buf, size_t len)
{
    char below[40], at[40];
    format_value(row, row->more_than, below, sizeof below);
    format_value(row, row->more_than + 1, at, sizeof at);
    size_t lb = strlen(below), la = strlen(at);
    int round_at = la > 2 && strcmp(at + la - 2, " B") != 0;
    int round_below = lb > 2 && strcmp(below + lb - 2, " B") != 0;
    int at_least = round_at && !round_below;
    snprintf(buf, len, at_least ? "at least %s" : "more than %s", at_least ? at : below);
    return buf;
}

/* Parses `text` for `row` and checks it against the row's bounds. A bad value warns once per
 * `*warned` (naming `name`, the text, and `kept`: what is used instead) and returns -1. */
static int parse_checked(const option_row_t *row, const char *name, const char *text, const char *kept,
                         int *warned, long long *v, const char **s)
{
    long long ev = 0;
    const char *es = NULL;
    int rc = parse_into(row, text, &ev, &es);
    if (rc == 0 && ev > row->max && row->kind != GM_KIND_STRING)
        rc = GM_PARSE_HUGE;
    if (rc == 0 && ev > 0 && ev <= row->more_than)
        rc = 1;
    if (rc == 0) {
        *v = ev;
        *s = es;
        return 0;
    }
    if (__atomic_exchange_n(warned, 1, __ATOMIC_RELAXED))
        return -1;
    char shown[160], bound[48];
    quote_text(text, strlen(text), shown, sizeof shown);
    if (rc == GM_PARSE_HUGE)
        diag_warn("%s='%s' is out of range (at most %s); using %s", name, shown,
                  format_value(row, row->max, bound, sizeof bound), kept);
    else if (rc == GM_PARSE_TINY)
        diag_warn("%s='%s' is not 0 but below the smallest step (%s), so it would read as 0; using %s", name,
                  shown, smallest_step(row->kind), kept);
    else if (rc == 1)
        diag_warn("%s='%s' must be 0 or %s; using %s", name, shown, lower_bound_text(row, bound, sizeof bound),
                  kept);
    else
        diag_warn("%s='%s' is %s; using %s", name, shown, kind_word(row), kept);
    return -1;
}

static option_row_t *row_loaded(gm_option_t opt)
{
    option_row_t *row = &table[opt];
    if (__atomic_load_n(&row->initialized, __ATOMIC_ACQUIRE))
        return row;
    long long v = 0;
    const char *s = NULL;
    int rc = parse_into(row, row->default_text, &v, &s);
    (void)rc; /* the defaults are checked by the tests */
    const char *env = getenv(row->name);
    if (env) {
        char kept[160];
        snprintf(kept, sizeof kept, "the default %s", row->default_text);
        parse_checked(row, row->name, env, kept, &row->warned, &v, &s);
    }
    row->value = v;
    row->str = s;
    __atomic_store_n(&row->initialized, 1, __ATOMIC_RELEASE);
    return row;
}

size_t options_device_limit(int dev, size_t total)
{
    static int warned[GM_OPT_DEVICES_WARNED], spare, unknown_warned; /* spare: devices past the array */
    char name[64];
    snprintf(name, sizeof name, "GMSHIM_DEVICE_LIMIT_%d", dev);
    long long v = options_get(GM_OPT_DEVICE_LIMIT);
    const char *env = getenv(name), *s = NULL;
    if (env) {
        int *flag = dev >= 0 && dev < GM_OPT_DEVICES_WARNED ? &warned[dev] : &spare;
        long long dv;
        if (parse_checked(&table[GM_OPT_DEVICE_LIMIT], name, env, "GMSHIM_DEVICE_LIMIT", flag, &dv, &s) == 0)
            v = dv;
    }
    if (v >= 0)
        return (size_t)v;
    if (!total) {
        diag_warn_once(&unknown_warned, "GMSHIM_DEVICE_LIMIT: a fraction of device %d, whose size the runtime "
                                        "did not give; no cap there", dev);
        return 0;
    }
    /* total × millionths / 10^6 without overflow, and never 0: a fraction is a cap. */
    unsigned long long m = (unsigned long long)-v, t = total;
    size_t cap = (size_t)(t / 1000000 * m + t % 1000000 * m / 1000000);
    return cap ? cap : 1;
}

long long options_get(gm_option_t opt)
{
    return row_loaded(opt)->value;
}

const char *options_get_str(gm_option_t opt)
{
    const char *s = row_loaded(opt)->str;
    return s ? s : "";
}

const char *options_name(gm_option_t opt) { return table[opt].name; }
gm_option_kind_t options_kind(gm_option_t opt) { return table[opt].kind; }
const char *options_doc(gm_option_t opt) { return table[opt].doc; }
long long options_max(gm_option_t opt) { return table[opt].kind == GM_KIND_STRING ? 0 : table[opt].max; }
const char *options_default_text(gm_option_t opt) { return table[opt].default_text; }

const char *options_format(gm_option_t opt, char *buf, size_t len)
{
    option_row_t *row = row_loaded(opt);
    switch (row->kind) {
    case GM_KIND_BOOL:
        snprintf(buf, len, "%s", row->value ? "on" : "off");
        break;
    case GM_KIND_INT:
        snprintf(buf, len, "%lld", row->value);
        break;
    case GM_KIND_LIMIT:
        if (row->value < 0) {
            snprintf(buf, len, "%g%% of the device", (double)-row->value / 10000.0);
            break;
        }
        /* fall through */
    case GM_KIND_SIZE:
        if (row->value && row->value % (1LL << 30) == 0)
            snprintf(buf, len, "%lld GiB", row->value >> 30);
        else if (row->value && row->value % (1LL << 20) == 0)
            snprintf(buf, len, "%lld MiB", row->value >> 20);
        else
            snprintf(buf, len, "%lld B", row->value);
        break;
    case GM_KIND_SECONDS:
        snprintf(buf, len, "%g s", (double)row->value / 1000.0);
        break;
    case GM_KIND_STRING:
        snprintf(buf, len, "%s", row->str ? row->str : "");
        break;
    }
    return buf;
}

/* ---- names that are no setting -------------------------------------------------------------- */

/* GMSHIM_* variables that are not in the table but are read by something else, so never a typo:
 * the CLI's (analyzer/), the tests' (Makefile, tests/unit/helpers.c; GMSHIM_TEST_* as a whole, one
 * of them read by shim/cupti.c), and GMSHIM_DEVICE_LIMIT_<n> (options_device_limit). */
static const char *const known_elsewhere[] = {
    "GMSHIM_LIBRARY",          /* the library `gmshim run` preloads */
    "GMSHIM_SYMBOL_PATH",      /* where the CLI looks for modules */
    "GMSHIM_ANALYZER_THREADS", /* the CLI's reader threads */
    "GMSHIM_BUILD",            /* the tests' build directory */
    "GMSHIM_FUZZ_BIN",         /* the fuzzer the tests run */
};

static int is_known_name(const char *name, size_t len)
{
    for (int i = 0; i < GM_OPT__COUNT; i++)
        if (strlen(table[i].name) == len && !memcmp(table[i].name, name, len))
            return 1;
    for (size_t i = 0; i < sizeof known_elsewhere / sizeof *known_elsewhere; i++)
        if (strlen(known_elsewhere[i]) == len && !memcmp(known_elsewhere[i], name, len))
            return 1;
    if (len > 12 && !memcmp(name, "GMSHIM_TEST_", 12))
        return 1;
    static const char dl[] = "GMSHIM_DEVICE_LIMIT_";
    size_t dlen = sizeof dl - 1;
    if (len > dlen && !memcmp(name, dl, dlen)) {
        size_t i = dlen;
        while (i < len && is_digit(name[i]))
            i++;
        return i == len;
    }
    return 0;
}

/* Edit distance (insertions, deletions, substitutions; letters compared without case). */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
    size_t row[72];
    if (lb >= sizeof row / sizeof *row)
        lb = sizeof row / sizeof *row - 1;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (lower(a[i - 1]) != lower(b[j - 1]));
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static const char *closest_name(const char *name, size_t len)
{
    const char *best = table[0].name;
    size_t best_d = (size_t)-1;
    if (len > 64)
        len = 64;
    for (size_t i = 0; i < GM_OPT__COUNT + sizeof known_elsewhere / sizeof *known_elsewhere; i++) {
        const char *c = i < GM_OPT__COUNT ? table[i].name : known_elsewhere[i - GM_OPT__COUNT];
        size_t d = edit_distance(name, len, c, strlen(c));
        if (d < best_d) {
            best_d = d;
            best = c;
        }
    }
    return best;
}

extern char **environ;

/* One warning per GMSHIM_* variable (any case) that nothing reads: most often a misspelt
 * setting, which would otherwise be silently ignored. */
static void warn_unknown_names(void)
{
    for (char **e = environ; e && *e; e++) {
        const char *name = *e;
        size_t len = strcspn(name, "=");
        if (len < 7 || strncasecmp(name, "GMSHIM_", 7) || is_known_name(name, len))
            continue;
        char shown[160];
        quote_text(name, len, shown, sizeof shown);
        diag_warn("%s is not a gmshim setting and is ignored; did you mean %s?", shown, closest_name(name, len));
    }
}

void options_load_all(void)
{
    for (int i = 0; i < GM_OPT__COUNT; i++)
        row_loaded((gm_option_t)i);
    warn_unknown_names();
    if (!options_get(GM_OPT_VERBOSE))
        return;
    diag_verbose("effective settings:");
    for (int i = 0; i < GM_OPT__COUNT; i++) {
        char buf[128];
        diag_verbose("  %-28s %-20s%s", table[i].name, options_format((gm_option_t)i, buf, sizeof buf),
                     getenv(table[i].name) ? "" : " (default)");
    }
}

void options_reset(void)
{
    for (int i = 0; i < GM_OPT__COUNT; i++) {
        table[i].initialized = 0;
        table[i].warned = 0;
        table[i].str = NULL;
    }
}
