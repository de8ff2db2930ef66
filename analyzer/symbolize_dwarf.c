/* DWARF line tables (.debug_line, versions 2 to 5, 32- and 64-bit): each unit's header, its
 * directories and files, and its line program run into rows sorted by address. Every length and
 * count is checked against the section; a unit that does not parse is skipped, never trusted. */
#include "symbolize_int.h"
#include "vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROWS (16u << 20)
#define MAX_FILE_NAME 4096


enum {
    FORM_block = 0x09, FORM_block1 = 0x0a, FORM_block2 = 0x03, FORM_block4 = 0x04,
    FORM_data1 = 0x0b, FORM_data2 = 0x05, FORM_data4 = 0x06, FORM_data8 = 0x07, FORM_data16 = 0x1e,
    FORM_string = 0x08, FORM_strp = 0x0e, FORM_udata = 0x0f, FORM_sdata = 0x0d, FORM_line_strp = 0x1f,
    FORM_strx = 0x1a, FORM_strx1 = 0x25, FORM_strx2 = 0x26, FORM_strx3 = 0x27, FORM_strx4 = 0x28,
    FORM_strp_sup = 0x1d, FORM_GNU_strp_alt = 0x1f21,
};
enum { LNCT_path = 1, LNCT_directory_index = 2 };

typedef struct form_val {
    uint64_t u;
    const char *s;
} form_val_t;

/* Reads one attribute value of the forms a line-table header may use; -1 for others. */
static int read_form(cur_t *c, uint64_t form, int offset_size, const elf_img_t *img, form_val_t *v)
{
    v->u = 0;
    v->s = NULL;
    switch (form) {
    case FORM_string: v->s = cstr(c); break;
    case FORM_line_strp: v->s = sec_str(img->debug_line_str, img->debug_line_str_size, rd_n(c, (unsigned)offset_size)); break;
    case FORM_strp: v->s = sec_str(img->debug_str, img->debug_str_size, rd_n(c, (unsigned)offset_size)); break;
    case FORM_strp_sup:
    case FORM_GNU_strp_alt: rd_n(c, (unsigned)offset_size); break;
    case FORM_udata: v->u = uleb(c); break;
    case FORM_sdata: v->u = (uint64_t)sleb(c); break;
    case FORM_data1: v->u = rd_n(c, 1); break;
    case FORM_data2: v->u = rd_n(c, 2); break;
    case FORM_data4: v->u = rd_n(c, 4); break;
    case FORM_data8: v->u = rd_n(c, 8); break;
    case FORM_data16: skip(c, 16); break;
    case FORM_block: skip(c, uleb(c)); break;
    case FORM_block1: skip(c, rd_n(c, 1)); break;
    case FORM_block2: skip(c, rd_n(c, 2)); break;
    case FORM_block4: skip(c, rd_n(c, 4)); break;
    case FORM_strx: uleb(c); break;
    case FORM_strx1: rd_n(c, 1); break;
    case FORM_strx2: rd_n(c, 2); break;
    case FORM_strx3: rd_n(c, 3); break;
    case FORM_strx4: rd_n(c, 4); break;
    default: return -1;
    }
    return c->err ? -1 : 0;
}

static uint32_t add_file(sym_mod_t *mod, const char *dir, const char *name)
{
    char buf[MAX_FILE_NAME];
    if (!name)
        name = "?";
    if (name[0] == '/' || !dir || !*dir)
        snprintf(buf, sizeof buf, "%s", name);
    else
        snprintf(buf, sizeof buf, "%s/%s", dir, name);
    char **n = vec_grow(mod->files, &mod->capfiles, mod->nfiles + 1, sizeof *n, 64);
    if (!n)
        return UINT32_MAX - 1;
    mod->files = n;
    char *s = strdup(buf);
    if (!s)
        return UINT32_MAX - 1;
    mod->files[mod->nfiles] = s;
    return (uint32_t)mod->nfiles++;
}

typedef struct rows {
    line_row_t *v;
    size_t n, cap;
} rows_t;

static void add_row(rows_t *r, uint64_t addr, uint32_t file, uint32_t line)
{
    if (r->n >= MAX_ROWS)
        return;
    line_row_t *n = vec_grow(r->v, &r->cap, r->n + 1, sizeof *n, 1024);
    if (!n)
        return;
    r->v = n;
    r->v[r->n++] = (line_row_t){addr, file, line};
}

/* A unit being read: its header's fields, its file table (the unit's file numbers to the
 * module's file ids) and the directories the files name. */
typedef struct unit {
    const uint8_t *prog, *end;     /* the line program */
    int offset_size;
    unsigned version, addr_size, min_inst, line_range, opcode_base;
    int line_base;
    uint8_t std_len[256];          /* operands of each standard opcode */
    const char *dirs[256];
    size_t ndirs;
    uint32_t *fmap;
    size_t nf, capf;
} unit_t;

enum { UNIT_STOP, UNIT_SKIP, UNIT_READ };

/* The unit's length and header up to its directories; *c is left at them and *next at the
 * following unit. UNIT_STOP when the section cannot be walked further, UNIT_SKIP for a unit
 * of another version or a damaged header. */
static int unit_header(const elf_img_t *img, size_t at, cur_t *c, unit_t *u, size_t *next)
{
    const uint8_t *sec = img->debug_line;
    *c = (cur_t){sec + at, sec + img->debug_line_size, 0};
    u->offset_size = 4;
    uint64_t unit_len = rd_n(c, 4);
    if (unit_len == 0xffffffffu) {
        u->offset_size = 8;
        unit_len = rd_n(c, 8);
    } else if (unit_len >= 0xfffffff0u) {
        return UNIT_STOP;
    }
    if (c->err || unit_len > (uint64_t)(c->end - c->p))
        return UNIT_STOP;
    u->end = c->p + unit_len;
    *next = (size_t)(u->end - sec);
    c->end = u->end;
    u->version = (unsigned)rd_n(c, 2);
    if (u->version < 2 || u->version > 5)
        return UNIT_SKIP;
    u->addr_size = 8;
    if (u->version >= 5) {
        u->addr_size = (unsigned)rd_n(c, 1);
        rd_n(c, 1); /* segment selector size */
    }
    uint64_t header_len = rd_n(c, (unsigned)u->offset_size);
    if (c->err || header_len > (uint64_t)(u->end - c->p))
        return UNIT_SKIP;
    u->prog = c->p + header_len;
    u->min_inst = (unsigned)rd_n(c, 1);
    if (u->version >= 4)
        rd_n(c, 1); /* maximum operations per instruction: VLIW only */
    rd_n(c, 1);     /* default_is_stmt */
    u->line_base = (int8_t)rd_n(c, 1);
    u->line_range = (unsigned)rd_n(c, 1);
    u->opcode_base = (unsigned)rd_n(c, 1);
    if (c->err || u->line_range == 0 || u->opcode_base == 0)
        return UNIT_SKIP;
    memset(u->std_len, 0, sizeof u->std_len);
    for (unsigned i = 1; i < u->opcode_base; i++)
        u->std_len[i] = (uint8_t)rd_n(c, 1);
    return UNIT_READ;
}

/* One more entry of the unit's file map; -1 when out of memory. */
static int fmap_push(unit_t *u, uint32_t id)
{
    uint32_t *n = vec_grow(u->fmap, &u->capf, u->nf + 1, sizeof *n, 32);
    if (!n)
        return -1;
    u->fmap = n;
    u->fmap[u->nf++] = id;
    return 0;
}

/* DWARF 5: the directory and file tables, each entry described by its format's (content, form)
 * pairs. */
static void unit_files_v5(sym_mod_t *mod, const elf_img_t *img, cur_t *c, unit_t *u)
{
    for (int pass = 0; pass < 2 && !c->err; pass++) {
        unsigned nfmt = (unsigned)rd_n(c, 1);
        uint64_t fmt[32][2];
        if (nfmt > 32)
            break;
        for (unsigned i = 0; i < nfmt; i++)
            fmt[i][0] = uleb(c), fmt[i][1] = uleb(c);
        uint64_t count = uleb(c);
        for (uint64_t k = 0; k < count && !c->err; k++) {
            const char *path = NULL;
            uint64_t dir = 0;
            for (unsigned i = 0; i < nfmt; i++) {
                form_val_t v;
                if (read_form(c, fmt[i][1], u->offset_size, img, &v)) {
                    c->err = 1;
                    break;
                }
                if (fmt[i][0] == LNCT_path)
                    path = v.s;
                else if (fmt[i][0] == LNCT_directory_index)
                    dir = v.u;
            }
            if (c->err)
                break;
            if (pass == 0) {
                if (u->ndirs < 256)
                    u->dirs[u->ndirs++] = path;
            } else if (fmap_push(u, add_file(mod, dir < u->ndirs ? u->dirs[dir] : NULL, path))) {
                c->err = 1;
                break;
            }
        }
    }
}

/* DWARF 2 to 4: NUL-ended lists of directories, then of files (name, directory, time, size). */
static void unit_files_v2(sym_mod_t *mod, cur_t *c, unit_t *u)
{
    u->dirs[u->ndirs++] = NULL; /* 0: the compilation directory, which is not here */
    for (;;) {
        const char *d = cstr(c);
        if (!d || !*d)
            break;
        if (u->ndirs < 256)
            u->dirs[u->ndirs++] = d;
    }
    if (fmap_push(u, UINT32_MAX - 1)) /* files count from 1 before DWARF 5 */
        return;
    while (!c->err) {
        const char *name = cstr(c);
        if (!name || !*name)
            break;
        uint64_t dir = uleb(c);
        uleb(c), uleb(c);
        if (fmap_push(u, add_file(mod, dir < u->ndirs ? u->dirs[dir] : NULL, name)))
            break;
    }
}

/* The line program's state machine: a row for each line it emits, an end for each sequence. */
static void unit_program(const unit_t *u, rows_t *rows)
{
    cur_t p = {u->prog, u->end, 0};
    uint64_t addr = 0, file = 1;
    int64_t line = 1;
    while (!p.err && p.p < p.end) {
        unsigned op = (unsigned)rd_n(&p, 1);
        if (op >= u->opcode_base) {
            unsigned adj = op - u->opcode_base;
            addr += (uint64_t)(adj / u->line_range) * u->min_inst;
            line += u->line_base + (int)(adj % u->line_range);
            add_row(rows, addr, file < u->nf ? u->fmap[file] : UINT32_MAX - 1, (uint32_t)line);
            continue;
        }
        switch (op) {
        case 0: {
            uint64_t len = uleb(&p);
            if (p.err || len == 0 || len > (uint64_t)(p.end - p.p)) {
                p.err = 1;
                break;
            }
            const uint8_t *ext_end = p.p + len;
            unsigned sub = (unsigned)rd_n(&p, 1);
            if (sub == 1) { /* end_sequence */
                add_row(rows, addr, UINT32_MAX, 0);
                addr = 0, file = 1, line = 1;
            } else if (sub == 2) { /* set_address */
                unsigned n = (unsigned)(len - 1);
                addr = rd_n(&p, n <= 8 ? n : u->addr_size);
            }
            p.p = ext_end;
            break;
        }
        case 1: add_row(rows, addr, file < u->nf ? u->fmap[file] : UINT32_MAX - 1, (uint32_t)line); break;
        case 2: addr += uleb(&p) * u->min_inst; break;
        case 3: line += sleb(&p); break;
        case 4: file = uleb(&p); break;
        case 5: uleb(&p); break;
        case 6: case 7: case 10: case 11: break;
        case 8: addr += (uint64_t)((255 - u->opcode_base) / u->line_range) * u->min_inst; break;
        case 9: addr += rd_n(&p, 2); break;
        case 12: uleb(&p); break;
        default:
            for (unsigned i = 0; i < u->std_len[op]; i++)
                uleb(&p);
            break;
        }
    }
}

/* One unit of .debug_line; returns the offset of the next unit, or 0 to stop. */
static size_t parse_unit(sym_mod_t *mod, const elf_img_t *img, size_t at, rows_t *rows)
{
    unit_t u;
    cur_t c;
    size_t next = 0;
    u.ndirs = 0;
    u.fmap = NULL;
    u.nf = u.capf = 0;
    int h = unit_header(img, at, &c, &u, &next);
    if (h != UNIT_READ)
        return h == UNIT_STOP ? 0 : next;
    if (u.version >= 5)
        unit_files_v5(mod, img, &c, &u);
    else
        unit_files_v2(mod, &c, &u);
    if (!c.err && u.fmap)
        unit_program(&u, rows);
    free(u.fmap);
    return next;
}

static int row_order(const void *a, const void *b)
{
    const line_row_t *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    /* At one address an end of sequence sorts first: the row that starts there wins. */
    int xe = x->file == UINT32_MAX, ye = y->file == UINT32_MAX;
    return ye - xe;
}

void sym_load_lines(sym_mod_t *mod)
{
    mod->lines_loaded = 1;
    const elf_img_t *img = mod->img.debug_line ? &mod->img : mod->dbg.debug_line ? &mod->dbg : NULL;
    if (!img)
        return;
    rows_t rows = {0};
    for (size_t at = 0; at < img->debug_line_size;) {
        size_t next = parse_unit(mod, img, at, &rows);
        if (next <= at)
            break;
        at = next;
    }
    if (rows.n > 1)
        qsort(rows.v, rows.n, sizeof *rows.v, row_order);
    mod->rows = rows.v;
    mod->nrows = rows.n;
}

const line_row_t *sym_find_row(const sym_mod_t *mod, uint64_t addr)
{
    size_t lo = 0, hi = mod->nrows;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (mod->rows[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo)
        return NULL;
    const line_row_t *r = &mod->rows[lo - 1];
    return r->file >= mod->nfiles ? NULL : r; /* an end of sequence: addr is outside any */
}

