/* The unwind tables read: a return address's object found (glibc's _dl_find_object where it
 * exists, else dl_iterate_phdr), its FDE by binary search in .eh_frame_hdr, the CIE's and FDE's
 * call frame programs run up to the address. Anything outside what it knows exactly is
 * CFA_FAIL, never a guess: the walker then leaves the site to backtrace(). */
#include "cfi.h"
#include "common.h"

#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__linux__)

#define REMEMBER_DEPTH 8

/* ---- reading the tables ---- */

typedef struct cursor {
    const uint8_t *p, *end;
    int bad;
} cursor_t;

static uint64_t rd_uleb(cursor_t *c)
{
    uint64_t v = 0;
    for (unsigned shift = 0; c->p < c->end; shift += 7) {
        uint8_t b = *c->p++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    c->bad = 1;
    return 0;
}

static int64_t rd_sleb(cursor_t *c)
{
    int64_t v = 0;
    unsigned shift = 0;
    while (c->p < c->end) {
        uint8_t b = *c->p++;
        if (shift < 64)
            v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
        shift += 7;
        if (!(b & 0x80)) {
            if (shift < 64 && (b & 0x40))
                v |= -((int64_t)1 << shift);
            return v;
        }
    }
    c->bad = 1;
    return 0;
}

static uint64_t rd_fixed(cursor_t *c, size_t n)
{
    if ((size_t)(c->end - c->p) < n) {
        c->bad = 1;
        return 0;
    }
    uint64_t v = 0;
    memcpy(&v, c->p, n); /* little-endian */
    c->p += n;
    return v;
}

#define PE_OMIT 0xff

/* A pointer in the DW_EH_PE encoding `enc`; `datarel` is the base of datarel values. */
static uintptr_t rd_encoded(cursor_t *c, uint8_t enc, uintptr_t datarel)
{
    if (enc == PE_OMIT)
        return 0;
    uintptr_t at = (uintptr_t)c->p;
    uint64_t v;
    switch (enc & 0x0f) {
    case 0x00: v = rd_fixed(c, 8); break;
    case 0x01: v = rd_uleb(c); break;
    case 0x02: v = rd_fixed(c, 2); break;
    case 0x03: v = rd_fixed(c, 4); break;
    case 0x04: v = rd_fixed(c, 8); break;
    case 0x09: v = (uint64_t)rd_sleb(c); break;
    case 0x0a: v = (uint64_t)(int64_t)(int16_t)rd_fixed(c, 2); break;
    case 0x0b: v = (uint64_t)(int64_t)(int32_t)rd_fixed(c, 4); break;
    case 0x0c: v = rd_fixed(c, 8); break;
    default: c->bad = 1; return 0;
    }
    switch (enc & 0x70) {
    case 0x00: break;
    case 0x10: v += at; break;
    case 0x30: v += datarel; break;
    default: c->bad = 1; return 0; /* textrel, funcrel, aligned: not emitted on x86-64 Linux */
    }
    if (enc & 0x80) /* indirect: the value is where the pointer is stored */
        c->bad = 1;  /* only personality routines use it, and they are skipped, not read */
    return (uintptr_t)v;
}

/* ---- the call frame program ---- */

typedef struct regrule {
    uint8_t how; /* 0 same value, 1 at CFA + off, 2 at BP + off, 3 undefined, 4 beyond us */
    int64_t off;
} regrule_t;

typedef struct frame_state {
    int cfa_reg; /* DW_REG_SP, DW_REG_BP, or -1 for *(BP + cfa_off) */
    int64_t cfa_off;
    regrule_t bp, ra;
} frame_state_t;

typedef struct cie {
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_reg;
    uint8_t fde_enc;
    int has_aug_data, signal;
    const uint8_t *insns, *end;
} cie_t;

static int expr_is_breg_bp(cursor_t *c, size_t len, int64_t *off, int deref)
{
    const uint8_t *end = c->p + len;
    if (len < 2 || end > c->end || *c->p != 0x76) /* DW_OP_breg6 */
        return 0;
    c->p++;
    cursor_t e = {c->p, end, 0};
    *off = rd_sleb(&e);
    int ok = !e.bad && (deref ? (e.p + 1 == end && *e.p == 0x06) : e.p == end); /* DW_OP_deref */
    c->p = end;
    return ok;
}

static void set_reg(frame_state_t *fs, uint64_t reg, uint8_t how, int64_t off)
{
    if (reg == DW_REG_BP) {
        fs->bp.how = how;
        fs->bp.off = off;
    } else if (reg == DW_REG_RA) {
        fs->ra.how = how;
        fs->ra.off = off;
    }
}

/* Runs a CFA program until the row that covers `target` (locations < target apply). Returns 0,
 * or -1 on anything this walker does not follow. */
static int run_program(const cie_t *cie, cursor_t c, uintptr_t loc, uintptr_t target, frame_state_t *fs,
                       const frame_state_t *initial)
{
    frame_state_t saved[REMEMBER_DEPTH];
    int nsaved = 0;
    while (c.p < c.end && !c.bad) {
        uint8_t op = *c.p++, low = op & 0x3f;
        uint64_t reg, delta = 0;
        int64_t off;
        switch (op >> 6) {
        case 1: delta = low; goto advance;
        case 2: set_reg(fs, low, 1, (int64_t)rd_uleb(&c) * cie->data_align); continue;
        case 3: set_reg(fs, low, low == DW_REG_BP ? initial->bp.how : initial->ra.how,
                        low == DW_REG_BP ? initial->bp.off : initial->ra.off); continue;
        }
        switch (op) {
        case 0x00: break; /* nop */
        case 0x01: loc = rd_encoded(&c, cie->fde_enc, 0); if (loc >= target) return 0; break;
        case 0x02: delta = rd_fixed(&c, 1); goto advance;
        case 0x03: delta = rd_fixed(&c, 2); goto advance;
        case 0x04: delta = rd_fixed(&c, 4); goto advance;
        case 0x05: reg = rd_uleb(&c); set_reg(fs, reg, 1, (int64_t)rd_uleb(&c) * cie->data_align); break;
        case 0x06: reg = rd_uleb(&c);
            if (reg == DW_REG_BP) fs->bp = initial->bp;
            else if (reg == DW_REG_RA) fs->ra = initial->ra;
            break;
        case 0x07: set_reg(fs, rd_uleb(&c), 3, 0); break;
        case 0x08: set_reg(fs, rd_uleb(&c), 0, 0); break;
        case 0x09: reg = rd_uleb(&c); rd_uleb(&c); set_reg(fs, reg, 4, 0); break;
        case 0x0a: if (nsaved == REMEMBER_DEPTH) return -1; saved[nsaved++] = *fs; break;
        case 0x0b: if (!nsaved) return -1; *fs = saved[--nsaved]; break; /* the CFA too, as libgcc */
        case 0x0c: fs->cfa_reg = (int)rd_uleb(&c); fs->cfa_off = (int64_t)rd_uleb(&c); break;
        case 0x0d: fs->cfa_reg = (int)rd_uleb(&c); break;
        case 0x0e: fs->cfa_off = (int64_t)rd_uleb(&c); break;
        case 0x0f: { size_t len = rd_uleb(&c);
            if (!expr_is_breg_bp(&c, len, &off, 1)) return -1;
            fs->cfa_reg = -1; fs->cfa_off = off; break; }
        case 0x10: { reg = rd_uleb(&c); size_t len = rd_uleb(&c);
            if (reg == DW_REG_BP) { if (!expr_is_breg_bp(&c, len, &off, 0)) return -1; set_reg(fs, reg, 2, off); }
            else if (reg == DW_REG_RA) return -1;
            else c.p += len;
            break; }
        case 0x11: reg = rd_uleb(&c); set_reg(fs, reg, 1, rd_sleb(&c) * cie->data_align); break;
        case 0x12: fs->cfa_reg = (int)rd_uleb(&c); fs->cfa_off = rd_sleb(&c) * cie->data_align; break;
        case 0x13: fs->cfa_off = rd_sleb(&c) * cie->data_align; break;
        case 0x14: reg = rd_uleb(&c); rd_uleb(&c); set_reg(fs, reg, 4, 0); break;
        case 0x15: reg = rd_uleb(&c); rd_sleb(&c); set_reg(fs, reg, 4, 0); break;
        case 0x16: { reg = rd_uleb(&c); size_t len = rd_uleb(&c); c.p += len; set_reg(fs, reg, 4, 0); break; }
        case 0x2e: rd_uleb(&c); break; /* GNU_args_size */
        case 0x2f: reg = rd_uleb(&c); set_reg(fs, reg, 1, -(int64_t)rd_uleb(&c) * cie->data_align); break;
        default: return -1;
        }
        continue;
    advance:
        loc += delta * cie->code_align;
        if (loc >= target)
            return 0;
    }
    return c.bad || c.p > c.end ? -1 : 0;
}

static int parse_cie(const uint8_t *p, const uint8_t *limit, cie_t *cie)
{
    cursor_t c = {p, limit, 0};
    uint64_t len = rd_fixed(&c, 4);
    if (len == 0xffffffffu || len == 0)
        return -1;
    if ((uint64_t)(limit - c.p) < len)
        return -1;
    c.end = c.p + len;
    if (rd_fixed(&c, 4) != 0) /* a CIE's id is 0 in .eh_frame */
        return -1;
    uint8_t version = (uint8_t)rd_fixed(&c, 1);
    const char *aug = (const char *)c.p;
    size_t alen = strnlen(aug, (size_t)(c.end - c.p));
    if (c.p + alen >= c.end || (version != 1 && version != 3))
        return -1;
    c.p += alen + 1;
    memset(cie, 0, sizeof *cie);
    cie->code_align = rd_uleb(&c);
    cie->data_align = rd_sleb(&c);
    cie->ra_reg = version == 1 ? rd_fixed(&c, 1) : rd_uleb(&c);
    cie->fde_enc = 0; /* absptr */
    if (aug[0] == 'z') {
        cie->has_aug_data = 1;
        uint64_t dlen = rd_uleb(&c);
        const uint8_t *dend = c.p + dlen;
        for (const char *a = aug + 1; *a; a++) {
            if (*a == 'L')
                rd_fixed(&c, 1);
            else if (*a == 'R')
                cie->fde_enc = (uint8_t)rd_fixed(&c, 1);
            else if (*a == 'P') {
                uint8_t penc = (uint8_t)rd_fixed(&c, 1);
                cursor_t skip = {c.p, c.end, 0};
                rd_encoded(&skip, penc & 0x7f, 0); /* only its length matters */
                if (skip.bad)
                    return -1;
                c.p = skip.p;
            } else if (*a == 'S')
                cie->signal = 1;
            else
                return -1;
        }
        if (c.bad || dend > c.end)
            return -1;
        c.p = dend;
    } else if (aug[0]) {
        return -1;
    }
    if (c.bad || cie->ra_reg != DW_REG_RA || cie->code_align == 0)
        return -1;
    cie->insns = c.p;
    cie->end = c.end;
    return 0;
}

/* ---- finding the FDE ---- */

typedef struct find {
    uintptr_t pc;
    const uint8_t *hdr; /* the object's .eh_frame_hdr */
    uintptr_t hdr_end;  /* the end of its segment */
} find_t;

static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    find_t *f = arg;
    const ElfW(Phdr) *eh = NULL;
    int hit = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && f->pc >= lo && f->pc < lo + ph->p_memsz)
            hit = 1;
        else if (ph->p_type == PT_GNU_EH_FRAME)
            eh = ph;
    }
    if (!hit)
        return 0;
    if (eh) {
        f->hdr = (const uint8_t *)(info->dlpi_addr + eh->p_vaddr);
        f->hdr_end = info->dlpi_addr + eh->p_vaddr + eh->p_memsz;
    }
    return 1;
}

/* The FDE covering `pc` through the object's sorted table; NULL when there is none. *fail is
 * set when backtrace() might know more: a table this walker cannot read, or a pc in no loaded
 * object (a JIT's code, which it may have registered with libgcc). */
/* glibc 2.35's lock-free lookup of the object holding an address, when the C library has it
 * (looked up at run time: the library must load on older ones too). */
#ifdef DLFO_STRUCT_HAS_EH_DBASE
typedef int (*find_object_fn)(void *, struct dl_find_object *);
static find_object_fn dl_find_object_fn;
static int dl_find_object_looked;

static int find_fast(find_t *f)
{
    if (!__atomic_load_n(&dl_find_object_looked, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&dl_find_object_fn, (find_object_fn)dlsym(RTLD_DEFAULT, "_dl_find_object"),
                         __ATOMIC_RELEASE);
        __atomic_store_n(&dl_find_object_looked, 1, __ATOMIC_RELEASE);
    }
    find_object_fn fn = __atomic_load_n(&dl_find_object_fn, __ATOMIC_ACQUIRE);
    struct dl_find_object o;
    if (!fn)
        return -1;
    if (fn((void *)f->pc, &o) != 0)
        return 0;
    f->hdr = o.dlfo_eh_frame;
    f->hdr_end = UINTPTR_MAX; /* the table's own count bounds the search */
    return 1;
}
#else
static int find_fast(find_t *f)
{
    (void)f;
    return -1;
}
#endif

static const uint8_t *find_fde(uintptr_t pc, int *fail)
{
    find_t f = {pc, NULL, 0};
    int fast = find_fast(&f);
    if (fast == 0 || (fast < 0 && !dl_iterate_phdr(find_object, &f))) {
        *fail = 1; /* no loaded object: code made at run time, whose frames only libgcc may know */
        return NULL;
    }
    if (!f.hdr)
        return NULL; /* an object without a table: the unwinder stops here too */
    const uint8_t *h = f.hdr;
    cursor_t c = {h + 4, (const uint8_t *)f.hdr_end, 0};
    if (h[0] != 1 || h[3] != 0x3b) { /* version 1, datarel sdata4 table */
        *fail = 1;
        return NULL;
    }
    rd_encoded(&c, h[1], (uintptr_t)h);
    uint64_t count = rd_encoded(&c, h[2], (uintptr_t)h);
    if (c.bad || (uint64_t)((const uint8_t *)f.hdr_end - c.p) / 8 < count) {
        *fail = 1;
        return NULL;
    }
    const int32_t *table = (const int32_t *)c.p;
    uint64_t lo = 0, hi = count;
    while (lo < hi) { /* the last entry whose start is <= pc */
        uint64_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)h + (intptr_t)table[2 * mid] <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo)
        return NULL;
    return h + table[2 * (lo - 1) + 1];
}

/* The rule of return address `ra` (the frame's pc is ra - 1, inside the call). */
rule_t cfi_rule_for(uintptr_t ra)
{
    rule_t r = {ra, 0, 0, CFA_FAIL, BP_SAME};
    uintptr_t pc = ra - 1;
    int fail = 0;
    const uint8_t *fde = find_fde(pc, &fail);
    if (!fde) {
        r.cfa_kind = fail ? CFA_FAIL : CFA_END;
        return r;
    }
    cursor_t c = {fde, fde + 8, 0};
    uint64_t len = rd_fixed(&c, 4);
    if (len == 0 || len == 0xffffffffu)
        return r;
    c.end = fde + 4 + len;
    const uint8_t *idp = c.p;
    uint32_t cie_off = (uint32_t)rd_fixed(&c, 4);
    cie_t cie;
    if (!cie_off || parse_cie(idp - cie_off, idp, &cie) != 0)
        return r;
    if (cie.signal)
        return r;
    uintptr_t begin = rd_encoded(&c, cie.fde_enc, 0);
    uintptr_t range = rd_encoded(&c, cie.fde_enc & 0x0f, 0);
    if (c.bad)
        return r;
    if (pc < begin || pc >= begin + range) {
        r.cfa_kind = CFA_END; /* a gap in the table: no rule, as the unwinder sees it */
        return r;
    }
    if (cie.has_aug_data) {
        uint64_t alen = rd_uleb(&c);
        c.p += alen;
    }
    if (c.bad || c.p > c.end)
        return r;
    frame_state_t fs = {DW_REG_SP, 8, {0, 0}, {0, 0}}, initial;
    cursor_t ci = {cie.insns, cie.end, 0};
    /* The CIE's initial rules (a target of 0 stops only at an advance, which a CIE does not hold). */
    if (run_program(&cie, ci, 0, 0, &fs, &fs) != 0)
        return r;
    initial = fs;
    if (run_program(&cie, c, begin, ra, &fs, &initial) != 0)
        return r;
    if (fs.ra.how == 3) {
        r.cfa_kind = CFA_END;
        return r;
    }
    if (fs.ra.how != 1 || fs.ra.off != -8 || fs.bp.how == 4 || fs.bp.off < INT16_MIN || fs.bp.off > INT16_MAX ||
        fs.cfa_off < INT32_MIN || fs.cfa_off > INT32_MAX)
        return r;
    r.cfa_off = (int32_t)fs.cfa_off;
    r.cfa_kind = fs.cfa_reg == DW_REG_SP ? CFA_SP : fs.cfa_reg == DW_REG_BP ? CFA_BP : fs.cfa_reg == -1 ? CFA_DEREF_BP : CFA_FAIL;
    r.bp_kind = fs.bp.how == 1 ? BP_AT_CFA : fs.bp.how == 2 ? BP_AT_BP : BP_SAME;
    r.bp_off = (int16_t)fs.bp.off;
    return r;
}

#else

rule_t cfi_rule_for(uintptr_t ra)
{
    rule_t r = {ra, 0, 0, CFA_FAIL, BP_SAME};
    return r;
}

#endif
