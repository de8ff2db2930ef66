/* Module map: dl_iterate_phdr gives every object's load base, executable segments and build-id
 * note. Lookups are binary searches over executable ranges; the table is rebuilt only when the
 * loader's add/remove counters moved. Not thread-safe: the stacks lock serializes callers. */
#include "modules.h"
#include "common.h"
#include "evlog.h"
#include "objects.h"

#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct range {
    gm_span_t span;             /* first: objects.c sorts and searches by it */
    uintptr_t base;
    uint32_t id;
} range_t;

typedef struct known {
    uintptr_t base;
    char *path;
    uint32_t id;
} known_t;

static range_t *ranges;
static size_t nranges, ranges_cap;
static known_t *knowns;
static size_t nknown, known_cap;
static unsigned long long seen[2] = {~0ull, ~0ull};
static uintptr_t self_start, self_end;

static size_t build_id(const struct dl_phdr_info *info, uint8_t *out, size_t cap)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
        const uint8_t *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
            const uint8_t *name = p + sizeof *n;
            const uint8_t *desc = name + gm_round_up(n->n_namesz, 4);
            if (desc + n->n_descsz > end)
                break;
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(name, "GNU", 4)) {
                size_t len = n->n_descsz < cap ? n->n_descsz : cap;
                memcpy(out, desc, len);
                return len;
            }
            p = desc + gm_round_up(n->n_descsz, 4);
        }
    }
    return 0;
}

static void log_module(const known_t *k, uintptr_t start, uintptr_t end, const uint8_t *bid, size_t bid_len)
{
    if (!evlog_enabled())
        return;
    gmlog_module_t rec;
    memset(&rec, 0, sizeof rec);
    /* A record is at most 2040 bytes: a path longer than fits keeps its last 1900 bytes. */
    size_t plen = strlen(k->path);
    const char *path = k->path;
    if (plen > 1900) {
        path += plen - 1900;
        plen = 1900;
    }
    uint8_t tail[4096 + 64];
    memcpy(tail, bid, bid_len);
    memcpy(tail + bid_len, path, plen);
    evlog_hdr(&rec.h, GMLOG_MODULE, sizeof rec, GMLOG_NO_DEVICE, 0);
    rec.base = k->base;
    rec.start = start;
    rec.end = end;
    rec.id = k->id;
    rec.path_len = (uint16_t)plen;
    rec.build_id_len = (uint8_t)bid_len;
    evlog_append2(&rec, sizeof rec, tail, bid_len + plen, gm_now_ns());
}

static uint32_t known_id(const struct dl_phdr_info *info, uintptr_t start, uintptr_t end)
{
    char exe[4096];
    const char *path = info->dlpi_name;
    if (!path || !*path || !strncmp(path, "/proc/self/fd/", 14)) {
        /* the executable, or an object loaded by descriptor (the bridge: trust.h): its file's name */
        ssize_t n = readlink(path && *path ? path : "/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = 0;
        path = exe;
    }
    for (size_t i = 0; i < nknown; i++)
        if (knowns[i].base == info->dlpi_addr && !strcmp(knowns[i].path, path))
            return knowns[i].id;
    if (nknown == known_cap) {
        size_t ncap = known_cap ? known_cap * 2 : 64;
        known_t *n = realloc(knowns, ncap * sizeof *n);
        if (!n)
            return GMLOG_FRAME_UNKNOWN_MODULE;
        knowns = n;
        known_cap = ncap;
    }
    if (nknown >= GMLOG_FRAME_UNKNOWN_MODULE)
        return GMLOG_FRAME_UNKNOWN_MODULE;
    known_t *k = &knowns[nknown];
    k->base = info->dlpi_addr;
    k->path = strdup(path);
    if (!k->path)
        return GMLOG_FRAME_UNKNOWN_MODULE;
    k->id = (uint32_t)nknown++;
    uint8_t bid[64];
    size_t bid_len = build_id(info, bid, sizeof bid);
    log_module(k, start, end, bid, bid_len);
    return k->id;
}

static int collect_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    gm_span_t span;
    if (objects_exec_span(info, &span))
        return 0;
    uintptr_t lo = span.lo, hi = span.hi;
    if (nranges == ranges_cap) {
        size_t ncap = ranges_cap ? ranges_cap * 2 : 64;
        range_t *n = realloc(ranges, ncap * sizeof *n);
        if (!n)
            return 1;
        ranges = n;
        ranges_cap = ncap;
    }
    range_t *r = &ranges[nranges++];
    r->span = span;
    r->base = info->dlpi_addr;
    r->id = known_id(info, lo, hi);
    if ((uintptr_t)modules_init >= lo && (uintptr_t)modules_init < hi &&
        !__atomic_load_n(&self_end, __ATOMIC_ACQUIRE)) {
        /* Set once: other threads read it without the stacks lock (gmshim does not move). */
        __atomic_store_n(&self_start, lo, __ATOMIC_RELAXED);
        __atomic_store_n(&self_end, hi, __ATOMIC_RELEASE);
    }
    return 0;
}

static void refresh_if_changed(void)
{
    if (!objects_changed(seen))
        return;
    nranges = 0;
    dl_iterate_phdr(collect_cb, NULL);
    objects_sort(ranges, nranges, sizeof *ranges);
}

void modules_init(void)
{
    refresh_if_changed();
}

static range_t *find(uintptr_t addr)
{
    return objects_find(ranges, nranges, sizeof *ranges, addr);
}

int modules_lookup(uintptr_t addr, uint32_t *id, uint64_t *offset)
{
    range_t *r = find(addr);
    if (!r) {
        refresh_if_changed();
        r = find(addr);
    }
    if (!r)
        return -1;
    *id = r->id;
    *offset = addr - r->base;
    return 0;
}

int modules_is_self(uintptr_t addr)
{
    uintptr_t end = __atomic_load_n(&self_end, __ATOMIC_ACQUIRE);
    return addr < end && addr >= __atomic_load_n(&self_start, __ATOMIC_RELAXED);
}
