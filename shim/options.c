/* The options table (one row per GMSHIM_* variable) and its parsers. Values are read from the
 * environment the first time they are asked for, never at load time. */
#include "options.h"
#include "diag.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
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
    long long min_nonzero;   /* a non-zero value must be at least this */
    const char *choices;     /* STRING: the accepted words, space-separated (NULL: any) */
} option_row_t;

static option_row_t table[GM_OPT__COUNT] = {
    [GM_OPT_POOL] = {.name = "GMSHIM_POOL", .kind = GM_KIND_BOOL, .default_text = "1",
        .doc = "serve cudaMalloc/cudaFree from gmshim's caching pool; 0 = forward every call, keep counting"},
    [GM_OPT_VERBOSE] = {.name = "GMSHIM_VERBOSE", .kind = GM_KIND_BOOL, .default_text = "0",
        .doc = "print the effective settings at the first CUDA call, and notes on what gmshim does"},
    [GM_OPT_PENDING_WAIT] = {.name = "GMSHIM_PENDING_WAIT", .kind = GM_KIND_BOOL, .default_text = "1",
        .doc = "on a cache miss, wait for freed blocks still in use by the GPU rather than grow the pool "
        "when they could serve the request"},
    [GM_OPT_FENCE_BYTES] = {.name = "GMSHIM_FENCE_BYTES", .kind = GM_KIND_SIZE, .default_text = "0",
        .doc = "freed bytes after which gmshim records a fence (CUDA events) without waiting for a miss; "
        "0 = a 64th of what the pool reserves, at least 2 MiB"},
    [GM_OPT_FENCE_FREES] = {.name = "GMSHIM_FENCE_FREES", .kind = GM_KIND_INT, .default_text = "64",
        .doc = "frees after which gmshim records a fence without waiting for a miss (whichever of "
        "this and GMSHIM_FENCE_BYTES comes first); 0 = by bytes only"},
    [GM_OPT_TRUST_STREAM_ORDER] = {.name = "GMSHIM_TRUST_STREAM_ORDER", .kind = GM_KIND_BOOL, .default_text = "0",
        .doc = "UNSAFE unless all device work is on one stream: reuse freed blocks at once, without "
        "waiting for the GPU (cudaFree's guarantee is dropped)"},
    [GM_OPT_GPU_ORDER] = {.name = "GMSHIM_GPU_ORDER", .kind = GM_KIND_BOOL, .default_text = "0",
        .doc = "reuse a freed block once a fence covers its free, with every stream made to wait for "
        "that fence on the GPU, instead of the CPU waiting for it; needs every stream that touches "
        "pooled memory created through the runtime (not cuStreamCreate); holds while the process "
        "uses one device (a torchrun rank seeing every GPU does)"},
    [GM_OPT_LOG] = {.name = "GMSHIM_LOG", .kind = GM_KIND_STRING, .default_text = "gmshim-%n-%p.gmlog",
        .doc = "event log path template (%p pid, %h host, %n program, %r rank, %t start time); off = no log"},
    [GM_OPT_STACK_DEPTH] = {.name = "GMSHIM_STACK_DEPTH", .kind = GM_KIND_INT, .default_text = "16",
        .doc = "native frames recorded per allocation call site; 0 = none"},
    [GM_OPT_PYTHON_DEPTH] = {.name = "GMSHIM_PYTHON_DEPTH", .kind = GM_KIND_INT, .default_text = "16",
        .doc = "Python frames (file:line, function) recorded per allocation from a Python thread; 0 = none"},
    [GM_OPT_DEVICE_LIMIT] = {.name = "GMSHIM_DEVICE_LIMIT", .kind = GM_KIND_LIMIT, .default_text = "0",
        .doc = "never reserve more than this on a device (size, or fraction like 0.5 or 50%); 0 = no cap; "
        "GMSHIM_DEVICE_LIMIT_<n> sets device n"},
    [GM_OPT_CACHE_LIMIT] = {.name = "GMSHIM_CACHE_LIMIT", .kind = GM_KIND_SIZE, .default_text = "0",
        .doc = "most bytes of wholly free segments kept per device; beyond it the oldest go back; 0 = no cap"},
    [GM_OPT_MAX_SPLIT] = {.name = "GMSHIM_MAX_SPLIT", .kind = GM_KIND_SIZE, .default_text = "0",
        .doc = "blocks of this size or more are never split (against fragmentation); 0 = no limit; "
        "else more than 20 MiB", .min_nonzero = (20LL << 20) + 1},
    [GM_OPT_EMPTY_CACHE_INTERVAL] = {.name = "GMSHIM_EMPTY_CACHE_INTERVAL", .kind = GM_KIND_SECONDS,
        .default_text = "0",
        .doc = "every this many seconds a background thread returns whole free segments to the "
        "driver (with GMSHIM_IDLE_RELEASE: only those idle that long); 0 = never"},
    [GM_OPT_IDLE_RELEASE] = {.name = "GMSHIM_IDLE_RELEASE", .kind = GM_KIND_SECONDS, .default_text = "0",
        .doc = "return segments that have been wholly free for this many seconds; 0 = off"},
    [GM_OPT_TORCH] = {.name = "GMSHIM_TORCH", .kind = GM_KIND_STRING, .default_text = "keep",
        .doc = "own = set PYTORCH_NO_CUDA_MEMORY_CACHING=1 (unless set) so that gmshim is PyTorch's "
        "allocator; keep = leave PyTorch's own cache alone", .choices = "own keep"},
    [GM_OPT_CUPTI] = {.name = "GMSHIM_CUPTI", .kind = GM_KIND_BOOL, .default_text = "0",
        .doc = "also observe, through CUPTI, the device allocations that bypass the hooks (cuBLAS, "
        "cuDNN, NCCL, the driver API) and log them as foreign with the requesting library"},
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
    return -1;
}

int options_parse_int(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < 0)
        return -1;
    *out = v;
    return 0;
}

/* Sizes: plain bytes, or a number (decimals allowed) with K/M/G/T, optionally followed by "i"
 * and/or "B"; every multiple is binary (1M = 1 MiB), as GPU memory is counted. */
int options_parse_size(const char *s, long long *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0 || !isfinite(v))
        return -1;
    double mult = 1;
    if (*end) {
        switch (toupper((unsigned char)*end)) {
        case 'B': mult = 1; end--; break;
        case 'K': mult = 1024.0; break;
        case 'M': mult = 1024.0 * 1024; break;
        case 'G': mult = 1024.0 * 1024 * 1024; break;
        case 'T': mult = 1024.0 * 1024 * 1024 * 1024; break;
        default: return -1;
        }
        end++;
        if (*end == 'i' || *end == 'I')
            end++;
        if (*end == 'b' || *end == 'B')
            end++;
        if (*end)
            return -1;
    }
    double bytes = v * mult;
    if (bytes > 9.0e18 || (mult == 1 && v != floor(v)))
        return -1;
    *out = (long long)bytes;
    return 0;
}

/* Seconds, decimals allowed, optional "s" suffix; stored as milliseconds. */
int options_parse_seconds(const char *s, long long *out_ms)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0 || !isfinite(v) || v > 1e12)
        return -1;
    if (*end == 's')
        end++;
    if (*end)
        return -1;
    *out_ms = (long long)(v * 1000.0 + 0.5);
    return 0;
}

int options_parse_limit(const char *s, long long *out)
{
    size_t len = strlen(s);
    char *end;
    if (len && s[len - 1] == '%') {
        errno = 0;
        double v = strtod(s, &end);
        if (errno || end != s + len - 1 || !(v > 0) || v > 100)
            return -1;
        *out = -(long long)(v * 10000.0 + 0.5);
        return 0;
    }
    if (strchr(s, '.') && !strpbrk(s, "kKmMgGtTbB")) {
        errno = 0;
        double v = strtod(s, &end);
        if (errno || *end || !(v > 0))
            return -1;
        if (v <= 1.0) {
            *out = -(long long)(v * 1000000.0 + 0.5);
            return 0;
        }
    }
    return options_parse_size(s, out);
}

size_t options_device_limit(int dev, size_t total)
{
    static int warned[64];
    char name[64];
    snprintf(name, sizeof name, "GMSHIM_DEVICE_LIMIT_%d", dev);
    long long v = options_get(GM_OPT_DEVICE_LIMIT);
    const char *env = getenv(name);
    if (env) {
        long long dv;
        if (options_parse_limit(env, &dv) == 0)
            v = dv;
        else if (dev >= 0 && dev < 64 && !__atomic_exchange_n(&warned[dev], 1, __ATOMIC_RELAXED))
            diag_warn("%s='%s' is not a size or a fraction; using GMSHIM_DEVICE_LIMIT", name, env);
    }
    if (v >= 0)
        return (size_t)v;
    return (size_t)((double)total * (double)-v / 1000000.0);
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
        if (!*text)
            return -1;
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
                return -1;
        }
        *s = text;
        return 0;
    }
    return -1;
}

static const char *kind_word(gm_option_kind_t k)
{
    switch (k) {
    case GM_KIND_BOOL: return "not a boolean (1/0, on/off, yes/no, true/false)";
    case GM_KIND_INT: return "not a non-negative integer";
    case GM_KIND_SIZE: return "not a size (e.g. 512M, 8G, 8GiB, or bytes)";
    case GM_KIND_SECONDS: return "not a number of seconds";
    case GM_KIND_STRING: return "not one of the accepted words";
    case GM_KIND_LIMIT: return "not a size (e.g. 24G) or a fraction (0.5, 50%)";
    }
    return "invalid";
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
        long long ev = 0;
        const char *es = NULL;
        int bad = parse_into(row, env, &ev, &es) != 0;
        if (!bad && ev > 0 && ev < row->min_nonzero) {
            bad = 1;
            if (!__atomic_exchange_n(&row->warned, 1, __ATOMIC_RELAXED))
                diag_warn("%s='%s' must be 0 or at least %lld; using the default %s", row->name, env,
                          row->min_nonzero, row->default_text);
        } else if (bad && !__atomic_exchange_n(&row->warned, 1, __ATOMIC_RELAXED)) {
            diag_warn("%s='%s' is %s; using the default %s", row->name, env, kind_word(row->kind),
                      row->default_text);
        }
        if (!bad) {
            v = ev;
            s = es;
        }
    }
    row->value = v;
    row->str = s;
    __atomic_store_n(&row->initialized, 1, __ATOMIC_RELEASE);
    return row;
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

void options_load_all(void)
{
    for (int i = 0; i < GM_OPT__COUNT; i++)
        row_loaded((gm_option_t)i);
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
