/* The replay's events, packed: a device's pool events as the loader (replay_load.c) decodes them
 * from a log, each a type byte and LEB128 varints (times, records and pointers as differences from
 * the event before), about 8 bytes where the decoded form takes 40, so that `whatif` on a log
 * of 100 M events holds them in memory; replays read them in order through cursors. The one
 * place the packing is written and read. */
#ifndef GM_REPLAY_EVENTS_H
#define GM_REPLAY_EVENTS_H

#include <stddef.h>
#include <stdint.h>

enum rp_type {
    RP_ALLOC = 1,      /* x: bytes requested, id: block id */
    RP_FREE,           /* id: reusable at once */
    RP_FREE_DEFERRED,  /* id: waits for the next fence */
    RP_SEG_ALLOC,      /* x: base, id: size / 512 */
    RP_SEG_FREE,       /* x: base */
    RP_FENCE,          /* id: seq recorded, x: bytes then pending */
    RP_DONE,           /* x: a fence the recording proves completed here */
    RP_EMPTY,          /* x: GMLOG_EMPTY_* reason */
    RP_OOM,            /* id: index in rp_log.ooms */
    RP_LIMIT,          /* x: the cap now in force (0: none) */
    RP_MARK,           /* id: the mark's id */
    RP_RESET,          /* cudaDeviceReset: every block and segment is gone */
    RP_EXACT_ALLOC,    /* a caching allocator's exact segment (GMLOG_A_EXACT): x: bytes, id: block id */
    RP_EXACT_FREE,     /* id: its free, the segment back to the driver at once */
    RP_FREE_CACHED,    /* id: freed into its thread's cache (GMLOG_F_CACHED), held out of the pool;
                          x: 1 when it waits for the next fence */
    RP_ALLOC_CACHED,   /* id: the held block handed out again (GMLOG_A_CACHED); x: bytes requested */
    RP_RETURN,         /* id: a held block back to the pool (GMLOG_F_RETURNED) */
};

/* An event decoded: time (56 bits) and type (8 bits) share a word. */
typedef struct rp_ev {
    uint64_t tt;
    uint64_t x;
    uint32_t id;
    uint32_t site;
    uint64_t ptr;            /* RP_ALLOC, RP_ALLOC_CACHED, RP_EXACT_ALLOC: the recorded pointer */
    uint64_t rec;            /* the record it came from (its number in the log's order) */
} rp_ev_t;
#define RP_T_MASK ((1ull << 56) - 1)
static inline uint64_t rp_ev_t_ns(const rp_ev_t *e) { return e->tt & RP_T_MASK; }
static inline unsigned rp_ev_type(const rp_ev_t *e) { return (unsigned)(e->tt >> 56); }

/* A place in the packed events and what the events before it left (the differences' bases). */
typedef struct rp_cursor {
    size_t off;
    uint64_t t, rec, ptr;
} rp_cursor_t;

#define RP_PACKED_MAX 64    /* bytes one event takes at most */

static inline int rp_ev_has_ptr(unsigned type)
{
    return type == RP_ALLOC || type == RP_ALLOC_CACHED || type == RP_EXACT_ALLOC;
}

static inline uint8_t *rp_put(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline const uint8_t *rp_get(const uint8_t *p, uint64_t *v)
{
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        uint8_t b = *p++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            break;
    }
    *v = r;
    return p;
}

static inline uint64_t rp_zig(uint64_t d) { return (d << 1) ^ (uint64_t)((int64_t)d >> 63); }
static inline uint64_t rp_unzig(uint64_t z) { return (z >> 1) ^ (uint64_t)-(int64_t)(z & 1); }

/* Packs e at c (at most RP_PACKED_MAX bytes at out + c->off); moves c past it. */
static inline void rp_pack(uint8_t *out, rp_cursor_t *c, const rp_ev_t *e)
{
    uint8_t *p = out + c->off;
    unsigned type = (unsigned)(e->tt >> 56);
    uint64_t t = e->tt & RP_T_MASK;
    *p++ = (uint8_t)type;
    p = rp_put(p, rp_zig(t - c->t));
    p = rp_put(p, e->x);
    p = rp_put(p, e->id);
    p = rp_put(p, e->site);
    p = rp_put(p, rp_zig(e->rec - c->rec));
    if (rp_ev_has_ptr(type)) {
        p = rp_put(p, rp_zig(e->ptr - c->ptr));
        c->ptr = e->ptr;
    }
    c->t = t, c->rec = e->rec;
    c->off = (size_t)(p - out);
}

/* The event at c into *e; moves c past it. */
static inline void rp_unpack(const uint8_t *in, rp_cursor_t *c, rp_ev_t *e)
{
    const uint8_t *p = in + c->off;
    unsigned type = *p++;
    uint64_t v;
    p = rp_get(p, &v);
    c->t += rp_unzig(v);
    e->tt = (c->t & RP_T_MASK) | (uint64_t)type << 56;
    p = rp_get(p, &e->x);
    p = rp_get(p, &v);
    e->id = (uint32_t)v;
    p = rp_get(p, &v);
    e->site = (uint32_t)v;
    p = rp_get(p, &v);
    c->rec += rp_unzig(v);
    e->rec = c->rec;
    e->ptr = 0;
    if (rp_ev_has_ptr(type)) {
        p = rp_get(p, &v);
        c->ptr += rp_unzig(v);
        e->ptr = c->ptr;
    }
    c->off = (size_t)(p - in);
}

#endif
