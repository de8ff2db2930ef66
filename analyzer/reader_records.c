/* A record's byte order (a log written on a machine of the other endianness is read in place,
 * each record swapped field by field) and the counted tails of SITE, STRING, MODULE and MARK
 * records, checked against the record's length before anything reads them. */
#include "reader.h"
#include "reader_int.h"

#include <inttypes.h>




static void sw16(uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    v = __builtin_bswap16(v);
    memcpy(p, &v, 2);
}

static void sw32(uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    v = __builtin_bswap32(v);
    memcpy(p, &v, 4);
}

static void sw64(uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    v = __builtin_bswap64(v);
    memcpy(p, &v, 8);
}

/* Swaps the fields of a record copied into buf (len bytes, at least its minimum length). */
void rd_swap_record(uint8_t *buf, unsigned len)
{
    unsigned type = buf[0];
    sw32(buf + 4);
    switch (type) {
    case GMLOG_ALLOC:
        sw64(buf + 8), sw64(buf + 16), sw32(buf + 24), sw32(buf + 28);
        if (len >= 40)
            sw64(buf + 32);
        break;
    case GMLOG_FREE:
    case GMLOG_WARNING:
        sw64(buf + 8), sw32(buf + 16), sw32(buf + 20);
        break;
    case GMLOG_SEGMENT_ALLOC:
    case GMLOG_SEGMENT_FREE:
    case GMLOG_FENCE:
    case GMLOG_CAPTURE:
        sw64(buf + 8), sw64(buf + 16), sw32(buf + 24), sw32(buf + 28);
        break;
    case GMLOG_FENCE_WAIT:
    case GMLOG_FENCE_REUSABLE:
    case GMLOG_EMPTY_CACHE:
        sw64(buf + 8), sw32(buf + 16), sw32(buf + 20);
        break;
    case GMLOG_OOM:
        for (unsigned o = 8; o < 88; o += 8)
            sw64(buf + o);
        sw32(buf + 88), sw32(buf + 92);
        break;
    case GMLOG_STATS:
        for (unsigned o = 8; o < 64; o += 8)
            sw64(buf + o);
        break;
    case GMLOG_MARK:
    case GMLOG_STRING:
    case GMLOG_END:
        sw32(buf + 8), sw32(buf + 12);
        break;
    case GMLOG_MODULE:
        sw64(buf + 8), sw64(buf + 16), sw64(buf + 24), sw32(buf + 32), sw16(buf + 36);
        break;
    case GMLOG_SITE: {
        sw32(buf + 8), sw16(buf + 12), sw16(buf + 14);
        unsigned nn, np;
        uint16_t v;
        memcpy(&v, buf + 12, 2), nn = v;
        memcpy(&v, buf + 14, 2), np = v;
        unsigned o = 16;
        for (unsigned i = 0; i < nn && o + 8 <= len; i++, o += 8)
            sw64(buf + o);
        for (unsigned i = 0; i < np * 4 && o + 4 <= len; i++, o += 4)
            sw32(buf + o);
        break;
    }
    case GMLOG_DEVICE:
        sw64(buf + 8), sw64(buf + 16), sw32(buf + 24), sw32(buf + 28);
        break;
    case GMLOG_CLOCK:
    case GMLOG_LIMIT:
        sw64(buf + 8);
        break;
    case GMLOG_RESET:
        sw64(buf + 8), sw64(buf + 16);
        break;
    case GMLOG_CHECKPOINT:
        sw64(buf + 8), sw64(buf + 16), sw64(buf + 24), sw64(buf + 32);
        break;
    case GMLOG_CUT:
        for (unsigned o = 8; o < 120; o += 8)
            sw64(buf + o);
        sw32(buf + 120), sw32(buf + 124);
        break;
    case GMLOG_AT:
        sw64(buf + 8);
        break;
    case GMLOG_T_ALLOC: case GMLOG_T_FREE_REQUESTED: case GMLOG_T_FREE_COMPLETED:
    case GMLOG_T_SEGMENT_ALLOC: case GMLOG_T_SEGMENT_FREE: case GMLOG_T_SEGMENT_MAP:
    case GMLOG_T_SEGMENT_UNMAP: case GMLOG_T_OOM:
        sw64(buf + 8), sw64(buf + 16), sw64(buf + 24), sw32(buf + 32), sw32(buf + 36);
        break;
    case GMLOG_LEDGER:
        for (unsigned o = 8; o < 48; o += 8)
            sw64(buf + o);
        sw32(buf + 48), sw32(buf + 52);
        for (unsigned o = 56; o + 16 <= len; o += 16)
            sw32(buf + o), sw32(buf + o + 4), sw64(buf + o + 8);
        break;
    default:
        break;
    }
}


unsigned rd_ledger_procs(const rd_rec_t *rec, const gmlog_ledger_proc_t **procs)
{
    const gmlog_ledger_t *l = (const gmlog_ledger_t *)rec->p;
    unsigned room = rec->len > sizeof *l ? (unsigned)((rec->len - sizeof *l) / sizeof **procs) : 0;
    *procs = (const gmlog_ledger_proc_t *)(rec->p + sizeof *l);
    return l->nprocs < room ? l->nprocs : room;
}

int rd_site_frames(const rd_rec_t *rec, const uint64_t **native, unsigned *nnative,
                   const gmlog_pyframe_t **py, unsigned *npy)
{
    const gmlog_site_t *s = (const gmlog_site_t *)rec->p;
    uint64_t need = sizeof *s + (uint64_t)s->native * 8 + (uint64_t)s->python * sizeof(gmlog_pyframe_t);
    if (need > rec->len)
        return -1;
    *native = (const uint64_t *)(rec->p + sizeof *s);
    *nnative = s->native;
    *py = (const gmlog_pyframe_t *)(rec->p + sizeof *s + (size_t)s->native * 8);
    *npy = s->python;
    return 0;
}

int rd_tail_bytes(const rd_rec_t *rec, size_t fixed, size_t want, const char **bytes)
{
    if (fixed > rec->len || want > rec->len - fixed)
        return -1;
    *bytes = (const char *)rec->p + fixed;
    return 0;
}

int rd_check_tail(rd_log_t *lf, const rd_rec_t *rec)
{
    const char *bytes;
    switch (rec->type) {
    case GMLOG_SITE: {
        const gmlog_site_t *x = (const gmlog_site_t *)rec->p;
        const uint64_t *native;
        const gmlog_pyframe_t *py;
        unsigned nn, np;
        if (rd_site_frames(rec, &native, &nn, &py, &np) == 0)
            return 0;
        rd_diag(lf, rec->off, 1, "a site record's %u native and %u Python frames do not fit in its %u bytes",
                x->native, x->python, rec->len);
        return -1;
    }
    case GMLOG_STRING: {
        const gmlog_string_t *x = (const gmlog_string_t *)rec->p;
        if (rd_tail_bytes(rec, sizeof *x, x->len, &bytes) == 0)
            return 0;
        rd_diag(lf, rec->off, 1, "a string record of %u bytes does not fit in its %u bytes", x->len, rec->len);
        return -1;
    }
    case GMLOG_MODULE: {
        const gmlog_module_t *x = (const gmlog_module_t *)rec->p;
        if (rd_tail_bytes(rec, sizeof *x, (size_t)x->build_id_len + x->path_len, &bytes) == 0)
            return 0;
        rd_diag(lf, rec->off, 1, "a module record's build id and path do not fit in its %u bytes", rec->len);
        return -1;
    }
    case GMLOG_MARK: {
        const gmlog_mark_t *x = (const gmlog_mark_t *)rec->p;
        if (rd_tail_bytes(rec, sizeof *x, x->len, &bytes) == 0)
            return 0;
        rd_diag(lf, rec->off, 1, "a mark's label of %u bytes does not fit in its %u bytes", x->len, rec->len);
        return -1;
    }
    default:
        return 0;
    }
}

