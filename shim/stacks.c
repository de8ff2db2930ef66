/* Call-site capture and interning. The hit path: the native frames (stackwalk.c's cached walk, else
 * backtrace()), Python frames, one hash, and a per-thread cache lookup. A miss takes the global lock, resolves names (modules, code objects),
 * and writes the site (and any new string or module) to the log once. */
#include "stacks.h"
#include "common.h"
#include "diag.h"
#include "evlog.h"
#include "modules.h"
#include "options.h"
#include "pyframes.h"
#include "stackwalk.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NATIVE 64
#define MAX_PY 64
#define SITECACHE_SIZE 256

typedef struct slot {
    uint64_t key;
    uint32_t id;
} slot_t;

/* Open-addressing map from a 64-bit key to an id; key 0 is empty. */
typedef struct idmap {
    slot_t *slots;
    size_t cap, count;
} idmap_t;

static int native_depth, py_depth, enabled, use_tables, keep_labels;

/* GMSHIM_WARN names the site growing most (stacks_describe): what it needs of each site is kept
 * when the site is first seen, since its code objects may be gone by then. */
#define LABEL_PCS 4
typedef struct site_label {
    uintptr_t pc[LABEL_PCS];  /* the first native frames (gmshim's own left out) */
    uint32_t line;            /* the innermost Python frame's line; 0: no Python frame */
    char file[96], func[64];
} site_label_t;
static site_label_t *labels;  /* by site id, under `lock` */
static size_t labels_cap;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static idmap_t sites, strings;
static uint32_t next_site = 1, next_string = 1;

/* A thread's cache of site ids by stack hash ("tcache" is tcache.c's freed blocks only). */
typedef struct sitecache {
    slot_t slot[SITECACHE_SIZE];
} sitecache_t;
static __thread sitecache_t *sitecache __attribute__((tls_model("initial-exec")));
static pthread_key_t sitecache_key;

/* At thread exit; a later key's destructor that allocates on this thread starts afresh. */
static void sitecache_free(void *p)
{
    sitecache = NULL;
    free(p);
}

static inline uint64_t mix(uint64_t h, uint64_t w)
{
    h ^= w + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 32);
}

static uint32_t *idmap_find(idmap_t *m, uint64_t key)
{
    if (!m->cap)
        return NULL;
    for (size_t i = key & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->slots[i].key == key)
            return &m->slots[i].id;
        if (!m->slots[i].key)
            return NULL;
    }
}

static int idmap_put(idmap_t *m, uint64_t key, uint32_t id)
{
    if ((m->count + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 1024;
        slot_t *n = calloc(ncap, sizeof *n);
        if (!n)
            return -1;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->slots[i].key)
                continue;
            size_t j = m->slots[i].key & (ncap - 1);
            while (n[j].key)
                j = (j + 1) & (ncap - 1);
            n[j] = m->slots[i];
        }
        free(m->slots);
        m->slots = n;
        m->cap = ncap;
    }
    size_t i = key & (m->cap - 1);
    while (m->slots[i].key)
        i = (i + 1) & (m->cap - 1);
    m->slots[i].key = key;
    m->slots[i].id = id;
    m->count++;
    return 0;
}

void stacks_init(void)
{
    /* The table bounds both depths; clamped again here, before the narrowing to int (2^31 once
     * became a negative depth and a crash). */
    _Static_assert(GM_OPT_DEPTH_MAX <= MAX_NATIVE && GM_OPT_DEPTH_MAX <= MAX_PY,
                   "the options table accepts deeper stacks than are held here");
    long long nd = options_get(GM_OPT_STACK_DEPTH), pd = options_get(GM_OPT_PYTHON_DEPTH);
    native_depth = nd < 0 ? 0 : nd > MAX_NATIVE ? MAX_NATIVE : (int)nd;
    py_depth = pd < 0 ? 0 : pd > MAX_PY ? MAX_PY : (int)pd;
    use_tables = strcmp(options_get_str(GM_OPT_UNWIND), "backtrace") != 0;
    enabled = evlog_enabled() && (native_depth > 0 || py_depth > 0);
    keep_labels = enabled && options_get(GM_OPT_WARN);
    if (!enabled)
        return;
    if (pthread_key_create(&sitecache_key, sitecache_free) != 0) {
        enabled = 0;
        return;
    }
    pthread_mutex_lock(&lock);
    modules_init();
    pthread_mutex_unlock(&lock);
    /* The first backtrace() loads libgcc_s; do it now, not inside some later hook. */
    void *pcs[2];
    backtrace(pcs, 2);
}

/* A string's id, written to the log the first time. Lock held. */
static uint32_t string_id(const char *s)
{
    size_t len = strlen(s);
    uint64_t key = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        key = (key ^ (uint8_t)s[i]) * 0x100000001b3ull;
    key |= 1;
    uint32_t *found = idmap_find(&strings, key);
    if (found)
        return *found;
    uint32_t id = next_string++;
    if (idmap_put(&strings, key, id))
        return 0;
    gmlog_string_t rec;
    memset(&rec, 0, sizeof rec);
    evlog_hdr(&rec.h, GMLOG_STRING, sizeof rec, GMLOG_NO_DEVICE, 0);
    rec.id = id;
    rec.len = (uint32_t)len;
    evlog_append2(&rec, sizeof rec, s, len, gm_now_ns());
    return id;
}

/* Names of a code object, read now (the site key uses names, not addresses, since a freed
 * code object's address can be reused). Lock held. */
static void code_names(uintptr_t code, uint32_t *file, uint32_t *func, site_label_t *label)
{
    char fname[1024], qname[512];
    pyframes_describe(code, fname, sizeof fname, qname, sizeof qname);
    *file = string_id(fname);
    *func = string_id(qname);
    if (label) {
        const char *base = strrchr(fname, '/');
        snprintf(label->file, sizeof label->file, "%.95s", base ? base + 1 : fname);
        snprintf(label->func, sizeof label->func, "%.63s", qname);
    }
}

/* What stacks_describe needs of a new site, when GMSHIM_WARN asks for it. Lock held. */
static site_label_t *label_slot(uint32_t id)
{
    if (!keep_labels)
        return NULL;
    if (id >= labels_cap) {
        size_t cap = labels_cap ? labels_cap * 2 : 256;
        while (cap <= id)
            cap *= 2;
        site_label_t *v = realloc(labels, cap * sizeof *v);
        if (!v)
            return NULL;
        memset(v + labels_cap, 0, (cap - labels_cap) * sizeof *v);
        labels = v;
        labels_cap = cap;
    }
    return &labels[id];
}

static uint32_t intern(void *const *pcs, int n, const gm_pyframe_raw_t *py, int npy)
{
    pthread_mutex_lock(&lock);
    gmlog_pyframe_t pyf[MAX_PY];
    site_label_t label;
    memset(&label, 0, sizeof label);
    uint64_t key = 0x51ed270b27d4d1c3ull;
    for (int i = 0; i < npy; i++) {
        code_names(py[i].code, &pyf[i].file, &pyf[i].function, keep_labels && !i ? &label : NULL);
        pyf[i].line = (uint32_t)pyframes_line(&py[i]);
        pyf[i].reserved = 0;
        key = mix(key, ((uint64_t)pyf[i].file << 32) | pyf[i].function);
        key = mix(key, pyf[i].line);
    }
    uint64_t frames[MAX_NATIVE];
    for (int i = 0; i < n; i++) {
        uint32_t mod;
        uint64_t off;
        uintptr_t pc = (uintptr_t)pcs[i];
        if (modules_lookup(pc, &mod, &off) == 0 && off < (1ull << 48))
            frames[i] = (uint64_t)mod << 48 | off;
        else
            frames[i] = (uint64_t)GMLOG_FRAME_UNKNOWN_MODULE << 48 | (pc & ((1ull << 48) - 1));
        key = mix(key, frames[i]);
    }
    key = mix(key, (uint64_t)n << 32 | (uint32_t)npy) | 1;
    uint32_t *found = idmap_find(&sites, key);
    uint32_t id = found ? *found : 0;
    if (!id) {
        id = next_site++;
        site_label_t *slot = label_slot(id);
        if (slot) {
            label.line = npy ? pyf[0].line : 0;
            for (int i = 0; i < n && i < LABEL_PCS; i++)
                label.pc[i] = (uintptr_t)pcs[i];
            *slot = label;
        }
        if (idmap_put(&sites, key, id) == 0) {
            uint8_t tail[MAX_NATIVE * 8 + MAX_PY * sizeof(gmlog_pyframe_t)];
            memcpy(tail, frames, (size_t)n * 8);
            memcpy(tail + (size_t)n * 8, pyf, (size_t)npy * sizeof *pyf);
            gmlog_site_t rec;
            memset(&rec, 0, sizeof rec);
            evlog_hdr(&rec.h, GMLOG_SITE, sizeof rec, GMLOG_NO_DEVICE, 0);
            rec.id = id;
            rec.native = (uint16_t)n;
            rec.python = (uint16_t)npy;
            evlog_append2(&rec, sizeof rec, tail, (size_t)n * 8 + (size_t)npy * sizeof *pyf, gm_now_ns());
        } else {
            id = 0;
        }
    }
    pthread_mutex_unlock(&lock);
    return id;
}

uint32_t stacks_intern_string(const char *s)
{
    if (!evlog_enabled())
        return 0;
    pthread_mutex_lock(&lock);
    uint32_t id = string_id(s);
    pthread_mutex_unlock(&lock);
    return id;
}

static slot_t *sitecache_slot(uint64_t key)
{
    if (!sitecache) {
        sitecache = calloc(1, sizeof *sitecache);
        pthread_setspecific(sitecache_key, sitecache);
    }
    return sitecache ? &sitecache->slot[key & (SITECACHE_SIZE - 1)] : NULL;
}

#define MAX_SKIPPED 40

static uint32_t site_capture(const void *caller, int (*skip_fn)(uintptr_t pc));

uint32_t stacks_site_from(const void *caller)
{
    return site_capture(caller, NULL);
}

uint32_t stacks_site_skip(int (*skip)(uintptr_t pc))
{
    return site_capture(NULL, skip);
}

uint32_t stacks_site_from_skip(const void *caller, int (*skip)(uintptr_t pc))
{
    return site_capture(caller, skip);
}

static uint32_t site_capture(const void *caller, int (*skip_fn)(uintptr_t pc))
{
    if (!enabled)
        return 0;
    gm_pyframe_raw_t py[MAX_PY];
    int npy = pyframes_capture(py, py_depth);
    /* Python thread with a known caller: the cheap key. */
    uint64_t quick = 0;
    slot_t *qs = NULL;
    if (caller && npy) {
        quick = mix(0x6a09e667f3bcc909ull, (uintptr_t)caller);
        for (int i = 0; i < npy; i++)
            quick = mix(quick, py[i].code ^ ((uint64_t)(uint32_t)py[i].addr << 40));
        quick = mix(quick, (uint64_t)npy) | 1;
        qs = sitecache_slot(quick);
        if (qs && qs->key == quick)
            return qs->id;
    }
    void *raw[MAX_NATIVE + 8 + MAX_SKIPPED];
    int want = native_depth + 8 + (skip_fn ? MAX_SKIPPED : 0), got = 0, memo = 0;
    uint64_t pykey = 0x3c6ef372fe94f82bull;
    for (int i = 0; i < npy; i++)
        pykey = mix(pykey, py[i].code ^ ((uint64_t)(uint32_t)py[i].addr << 40));
    if (native_depth) {
        /* The table walk gives backtrace()'s frames, or declines. Remembered: a stack walked
         * before with the same Python frames and skip gives that walk's site at once. */
        if (use_tables) {
            uint32_t known;
            got = stackwalk_backtrace_memo(raw, want, mix(pykey, (uintptr_t)skip_fn) | 1, &known);
            if (got == -2) {
                if (qs && known) {
                    qs->key = quick;
                    qs->id = known;
                }
                return known;
            }
            memo = got >= 0;
        } else {
            got = -1;
        }
        if (got < 0)
            got = backtrace(raw, want);
    }
    /* Drop gmshim's own frames (the hook and what it called), and the machinery's. */
    int skip = 0;
    while (skip < got && modules_is_self((uintptr_t)raw[skip]))
        skip++;
    while (skip_fn && skip < got && skip_fn((uintptr_t)raw[skip]))
        skip++;
    int n = got - skip;
    if (n > native_depth)
        n = native_depth;
    uint64_t key = 0x2545F4914F6CDD1Dull;
    for (int i = 0; i < n; i++)
        key = mix(key, (uintptr_t)raw[skip + i]);
    key = mix(key, pykey);
    key = mix(key, (uint64_t)n << 32 | (uint32_t)npy) | 1;
    slot_t *s = sitecache_slot(key);
    uint32_t id;
    if (s && s->key == key) {
        id = s->id;
    } else {
        id = intern(raw + skip, n, py, npy);
        if (s && id) {
            s->key = key;
            s->id = id;
        }
    }
    if (qs && id) {
        qs->key = quick;
        qs->id = id;
    }
    if (memo && id)
        stackwalk_remember(id);
    return id;
}

/* Libraries between the program and the allocation (the framework, the CUDA stack): a native
 * site is named by the first frame outside them. */
static int framework_object(const char *path)
{
    static const char *const prefixes[] = {"libtorch", "libc10", "libcuda", "libcudart", "libcublas", "libcudnn",
                                           "libnccl", "libgmshim"};
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(b, prefixes[i], strlen(prefixes[i])))
            return 1;
    return 0;
}

const char *stacks_describe(uint32_t site, char *buf, size_t len)
{
    site_label_t l;
    int have = 0;
    pthread_mutex_lock(&lock);
    if (site && site < labels_cap) {
        l = labels[site];
        have = 1;
    }
    pthread_mutex_unlock(&lock);
    buf[0] = 0;
    if (!have)
        return buf;
    if (l.line) {
        snprintf(buf, len, "%s (%s:%u)", l.func, l.file, l.line);
        return buf;
    }
    /* Named now, not when first seen: dladdr takes the loader's lock, never inside a hook. */
    for (int i = 0; i < LABEL_PCS && l.pc[i]; i++) {
        Dl_info info;
        if (!dladdr((void *)(l.pc[i] - 1), &info) || !info.dli_fname)
            continue;
        if (framework_object(info.dli_fname) && i + 1 < LABEL_PCS && l.pc[i + 1])
            continue;
        const char *obj = strrchr(info.dli_fname, '/');
        obj = obj ? obj + 1 : info.dli_fname;
        if (info.dli_sname)
            snprintf(buf, len, "%s (%s)", info.dli_sname, obj);
        else
            snprintf(buf, len, "%s+0x%lx", obj, (unsigned long)(l.pc[i] - (uintptr_t)info.dli_fbase));
        return buf;
    }
    return buf;
}

void stacks_note_totals(void)
{
    if (!enabled || !native_depth || !use_tables)
        return;
    unsigned long long walks, remembered, computed;
    stackwalk_totals(&walks, &remembered, &computed);
    if (walks)
        diag_verbose("native call sites: %llu stacks walked, %llu of them (%.1f %%) answered from memory; %llu "
                     "unwind rules computed",
                     walks, remembered, 100.0 * (double)remembered / (double)walks, computed);
}

uint32_t stacks_site(void)
{
    return stacks_site_from(NULL);
}
