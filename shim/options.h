/* The one table of GMSHIM_* settings: each read lazily from the environment on first use,
 * validated, and printed by GMSHIM_VERBOSE=1. A bad value warns once and keeps the default. */
#ifndef GM_OPTIONS_H
#define GM_OPTIONS_H

#include <stddef.h>

typedef enum gm_option {
    GM_OPT_POOL,
    GM_OPT_VERBOSE,
    GM_OPT_PENDING_WAIT,
    GM_OPT_FENCE_BYTES,
    GM_OPT_FENCE_FREES,
    GM_OPT_FENCE_SHARE,
    GM_OPT_TRUST_STREAM_ORDER,
    GM_OPT_GPU_ORDER,
    GM_OPT_LOG,
    GM_OPT_STACK_DEPTH,
    GM_OPT_PYTHON_DEPTH,
    GM_OPT_UNWIND,
    GM_OPT_DEVICE_LIMIT,
    GM_OPT_CACHE_LIMIT,
    GM_OPT_MAX_SPLIT,
    GM_OPT_EMPTY_CACHE_INTERVAL,
    GM_OPT_IDLE_RELEASE,
    GM_OPT_TORCH,
    GM_OPT_CUPTI,
    GM_OPT_LOG_LIMIT,
    GM_OPT_SEGMENTS,
    GM_OPT_CLOCK,
    GM_OPT_THREAD_CACHE,
    GM_OPT_WARN,
    GM_OPT_LEDGER,
    GM_OPT_LEDGER_INTERVAL,
    GM_OPT_PLAN,
    GM_OPT__COUNT
} gm_option_t;

typedef enum gm_option_kind {
    GM_KIND_BOOL,
    GM_KIND_INT,
    GM_KIND_SIZE,
    GM_KIND_SECONDS,
    GM_KIND_STRING,
    GM_KIND_LIMIT,  /* a size, or a fraction of the device ("0.5", "50%"): fractions are stored
                     * as -(millionths) */
} gm_option_kind_t;

/* The most frames GMSHIM_STACK_DEPTH and GMSHIM_PYTHON_DEPTH accept (what shim/stacks.c holds). */
#define GM_OPT_DEPTH_MAX 64

/* Integer value of a BOOL, INT or SIZE option (SECONDS: milliseconds). */
long long options_get(gm_option_t opt);
/* String value of a STRING option (never NULL). */
const char *options_get_str(gm_option_t opt);
const char *options_name(gm_option_t opt);
gm_option_kind_t options_kind(gm_option_t opt);
const char *options_doc(gm_option_t opt);
/* The largest value the option accepts (BOOL 1; SECONDS in milliseconds; LIMIT: as a size, a
 * fraction being at most the whole device); 0 for STRING. */
long long options_max(gm_option_t opt);
/* The effective value as text, e.g. "512 MiB" or "on", into buf. */
const char *options_format(gm_option_t opt, char *buf, size_t len);
/* The default as written in the docs, e.g. "1" or "gmshim-%n-%p.gmlog". */
const char *options_default_text(gm_option_t opt);
/* Reads every option now (so that warnings appear at start), warns once about each GMSHIM_*
 * variable in the environment that is no setting (naming the closest one), and prints the
 * table if verbose. */
void options_load_all(void);
/* Forget every value read (tests change the environment between cases). */
void options_reset(void);

/* Parsers, exposed for the tests and for the per-device settings. Numbers are plain ASCII
 * decimal (digits, and where a fraction makes sense one '.' between digits): no sign, space,
 * hex, exponent, inf or nan. Return 0 on success, else one of these. */
#define GM_PARSE_BAD (-1)   /* not of the kind */
#define GM_PARSE_HUGE (-2)  /* a number past what the parser holds (about 2^62) */
#define GM_PARSE_TINY (-3)  /* not 0, but it would round to 0 (which means something else) */
int options_parse_bool(const char *s, long long *out);
int options_parse_size(const char *s, long long *out);
int options_parse_int(const char *s, long long *out);
int options_parse_seconds(const char *s, long long *out_ms);
int options_parse_limit(const char *s, long long *out);

/* The cap on device `dev` with `total` bytes: GMSHIM_DEVICE_LIMIT_<dev> if set, else
 * GMSHIM_DEVICE_LIMIT; 0 = none. */
size_t options_device_limit(int dev, size_t total);

#endif
