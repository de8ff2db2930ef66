/* ELF and DWARF line-table parsing for the symbolizer. Every offset, size and count read from a
 * file is checked against the mapping before use; a file that is not a regular 64-bit
 * little-endian ELF object, or a section that does not parse, just gives no names. */
#include "symbolize.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ROWS (16u << 20)
#define MAX_FILE_NAME 4096

typedef struct sym_entry {
    uint64_t addr, size;
    const char *name;
    char *pretty;               /* the demangled name, made when first asked for (NULL: none) */
    int global;
    int pretty_tried;
} sym_entry_t;

typedef struct line_row {
    uint64_t addr;
    uint32_t file;            /* index into files, UINT32_MAX: end of a sequence */
    uint32_t line;
} line_row_t;

typedef struct elf_img {
    const uint8_t *map;
    size_t size;
    const uint8_t *symtab, *strtab;
    size_t symtab_size, strtab_size;
    int sym_is_dynamic;
    const uint8_t *debug_line, *debug_line_str, *debug_str;
    size_t debug_line_size, debug_line_str_size, debug_str_size;
    uint8_t build_id[64];
    size_t build_id_len;
} elf_img_t;

typedef struct sym_mod {
    char *path;
    uint8_t id[64];            /* the build id asked for */
    size_t id_len;
    int ok;                    /* the file is ELF */
    elf_img_t img, dbg;        /* the file and its separate debug file (dbg.map may be NULL) */
    sym_entry_t *syms;
    size_t nsyms;
    int lines_loaded;
    line_row_t *rows;
    size_t nrows;
    char **files;
    size_t nfiles, capfiles;
    struct sym_mod *next;
} sym_mod_t;

static sym_mod_t *mods;
static int enabled = 1;

void sym_set_enabled(int on)
{
    enabled = on;
}

/* ---- bounds-checked cursor ------------------------------------------------------------------- */

typedef struct cur {
    const uint8_t *p, *end;
    int err;
} cur_t;

static uint64_t rd_n(cur_t *c, unsigned n)
{
    if (c->err || (size_t)(c->end - c->p) < n) {
        c->err = 1;
        return 0;
    }
    uint64_t v = 0;
    for (unsigned i = 0; i < n && i < 8; i++) /* wider values (a bad address size) keep 8 bytes */
        v |= (uint64_t)c->p[i] << (8 * i);
    c->p += n;
    return v;
}

static uint64_t uleb(cur_t *c)
{
    uint64_t v = 0;
    unsigned shift = 0;
    for (;;) {
        if (c->err || c->p >= c->end) {
            c->err = 1;
            return 0;
        }
        uint8_t b = *c->p++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80))
            return v;
    }
}

static int64_t sleb(cur_t *c)
{
    int64_t v = 0;
    unsigned shift = 0;
    uint8_t b;
    do {
        if (c->err || c->p >= c->end) {
            c->err = 1;
            return 0;
        }
        b = *c->p++;
        if (shift < 64)
            v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
        shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40))
        v |= (int64_t)(~0ull << shift);
    return v;
}

static const char *cstr(cur_t *c)
{
    if (c->err)
        return NULL;
    const uint8_t *z = memchr(c->p, 0, (size_t)(c->end - c->p));
    if (!z) {
        c->err = 1;
        return NULL;
    }
    const char *s = (const char *)c->p;
    c->p = z + 1;
    return s;
}

static void skip(cur_t *c, uint64_t n)
{
    if (c->err || (uint64_t)(c->end - c->p) < n) {
        c->err = 1;
        return;
    }
    c->p += n;
}

/* A NUL-terminated string at `off` of a section, or NULL. */
static const char *sec_str(const uint8_t *sec, size_t size, uint64_t off)
{
    if (!sec || off >= size || !memchr(sec + off, 0, size - off))
        return NULL;
    return (const char *)sec + off;
}

/* ---- ELF ------------------------------------------------------------------------------------- */

static void read_build_id(elf_img_t *img, const uint8_t *p, size_t size)
{
    cur_t c = {p, p + size, 0};
    while (!c.err && (size_t)(c.end - c.p) >= 12) {
        uint32_t namesz = (uint32_t)rd_n(&c, 4), descsz = (uint32_t)rd_n(&c, 4), type = (uint32_t)rd_n(&c, 4);
        const uint8_t *name = c.p;
        skip(&c, ((uint64_t)namesz + 3) & ~3ull);
        const uint8_t *desc = c.p;
        skip(&c, ((uint64_t)descsz + 3) & ~3ull);
        if (c.err)
            return;
        if (type == NT_GNU_BUILD_ID && namesz == 4 && !memcmp(name, "GNU", 4)) {
            img->build_id_len = descsz < sizeof img->build_id ? descsz : sizeof img->build_id;
            memcpy(img->build_id, desc, img->build_id_len);
            return;
        }
    }
}

static int map_file(const char *path, const uint8_t **map, size_t *size)
{
    /* Paths come from logs: never map pseudo-files, whose reads can have effects. */
    if (!strncmp(path, "/proc/", 6) || !strncmp(path, "/sys/", 5) || !strncmp(path, "/dev/", 5))
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        close(fd);
        return -1;
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return -1;
    *map = m;
    *size = (size_t)st.st_size;
    return 0;
}

static int elf_load(elf_img_t *img, const char *path)
{
    memset(img, 0, sizeof *img);
    if (map_file(path, &img->map, &img->size))
        return -1;
    const uint8_t *m = img->map;
    Elf64_Ehdr eh;
    memcpy(&eh, m, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_shentsize < sizeof(Elf64_Shdr) || !eh.e_shoff ||
        eh.e_shoff >= img->size)
        return -1;
    uint64_t shnum = eh.e_shnum, shstrndx = eh.e_shstrndx;
    Elf64_Shdr sh0;
    if (eh.e_shoff + sizeof sh0 > img->size)
        return -1;
    memcpy(&sh0, m + eh.e_shoff, sizeof sh0);
    if (shnum == 0)
        shnum = sh0.sh_size;
    if (shstrndx == SHN_XINDEX)
        shstrndx = sh0.sh_link;
    if (shnum > (img->size - eh.e_shoff) / eh.e_shentsize || shstrndx >= shnum)
        return -1;
    Elf64_Shdr strsh;
    memcpy(&strsh, m + eh.e_shoff + shstrndx * eh.e_shentsize, sizeof strsh);
    const uint8_t *shstr = NULL;
    size_t shstr_size = 0;
    if (strsh.sh_offset < img->size && strsh.sh_size <= img->size - strsh.sh_offset) {
        shstr = m + strsh.sh_offset;
        shstr_size = strsh.sh_size;
    }
    const uint8_t *dynsym = NULL, *dynstr = NULL;
    size_t dynsym_size = 0, dynstr_size = 0;
    for (uint64_t i = 0; i < shnum; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, m + eh.e_shoff + i * eh.e_shentsize, sizeof sh);
        if (sh.sh_type == SHT_NOBITS || sh.sh_offset >= img->size || sh.sh_size > img->size - sh.sh_offset)
            continue;
        const uint8_t *data = m + sh.sh_offset;
        const char *name = sec_str(shstr, shstr_size, sh.sh_name);
        if (sh.sh_type == SHT_NOTE) {
            if (!img->build_id_len)
                read_build_id(img, data, sh.sh_size);
            continue;
        }
        if (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM) {
            if (sh.sh_link >= shnum)
                continue;
            Elf64_Shdr ls;
            memcpy(&ls, m + eh.e_shoff + (uint64_t)sh.sh_link * eh.e_shentsize, sizeof ls);
            if (ls.sh_offset >= img->size || ls.sh_size > img->size - ls.sh_offset)
                continue;
            if (sh.sh_type == SHT_SYMTAB) {
                img->symtab = data, img->symtab_size = sh.sh_size;
                img->strtab = m + ls.sh_offset, img->strtab_size = ls.sh_size;
            } else {
                dynsym = data, dynsym_size = sh.sh_size;
                dynstr = m + ls.sh_offset, dynstr_size = ls.sh_size;
            }
            continue;
        }
        if (!name || (sh.sh_flags & SHF_COMPRESSED))
            continue; /* compressed debug sections would need zlib: not read */
        if (!strcmp(name, ".debug_line"))
            img->debug_line = data, img->debug_line_size = sh.sh_size;
        else if (!strcmp(name, ".debug_line_str"))
            img->debug_line_str = data, img->debug_line_str_size = sh.sh_size;
        else if (!strcmp(name, ".debug_str"))
            img->debug_str = data, img->debug_str_size = sh.sh_size;
    }
    if (!img->symtab && dynsym) {
        img->symtab = dynsym, img->symtab_size = dynsym_size;
        img->strtab = dynstr, img->strtab_size = dynstr_size;
        img->sym_is_dynamic = 1;
    }
    return 0;
}

static void elf_unload(elf_img_t *img)
{
    if (img->map)
        munmap((void *)img->map, img->size);
    memset(img, 0, sizeof *img);
}

size_t sym_file_build_id(const char *path, uint8_t *out, size_t cap)
{
    elf_img_t img;
    size_t n = 0;
    if (elf_load(&img, path) == 0) {
        n = img.build_id_len < cap ? img.build_id_len : cap;
        memcpy(out, img.build_id, n);
    }
    elf_unload(&img);
    return n;
}

static int sym_order(const void *a, const void *b)
{
    const sym_entry_t *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    if (x->global != y->global) /* at one address, the global name last: it wins the lookup */
        return x->global - y->global;
    return (x->size > y->size) - (x->size < y->size);
}

static void load_symbols(sym_mod_t *mod, const elf_img_t *img)
{
    if (!img->symtab)
        return;
    size_t n = img->symtab_size / sizeof(Elf64_Sym);
    mod->syms = calloc(n ? n : 1, sizeof *mod->syms);
    if (!mod->syms)
        return;
    for (size_t i = 0; i < n; i++) {
        Elf64_Sym s;
        memcpy(&s, img->symtab + i * sizeof s, sizeof s);
        unsigned type = ELF64_ST_TYPE(s.st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF || !s.st_value)
            continue;
        const char *name = sec_str(img->strtab, img->strtab_size, s.st_name);
        if (!name || !*name)
            continue;
        mod->syms[mod->nsyms++] = (sym_entry_t){.addr = s.st_value, .size = s.st_size, .name = name,
                                                .global = ELF64_ST_BIND(s.st_info) != STB_LOCAL};
    }
    qsort(mod->syms, mod->nsyms, sizeof *mod->syms, sym_order);
}

/* C++ names: the C++ runtime's own demangler, looked up at run time (the analyzer links no C++
 * library; without libstdc++ names stay mangled). */
typedef char *(*demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

static demangle_fn demangler(void)
{
    static int looked;
    static demangle_fn fn;
    if (!looked) {
        looked = 1;
        void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
        fn = h ? (demangle_fn)dlsym(h, "__cxa_demangle") : NULL;
    }
    return fn;
}

char *sym_demangle(const char *name)
{
    /* Very long names are left alone: the demangler recurses over the name's structure. */
    demangle_fn fn = name && !strncmp(name, "_Z", 2) && strlen(name) < 8192 ? demangler() : NULL;
    int status = -1;
    char *out = fn ? fn(name, NULL, NULL, &status) : NULL;
    if (status != 0) {
        free(out);
        return NULL;
    }
    return out;
}

static const char *pretty_name(sym_entry_t *s)
{
    if (!s->pretty_tried) {
        s->pretty_tried = 1;
        s->pretty = sym_demangle(s->name);
    }
    return s->pretty ? s->pretty : s->name;
}

static sym_entry_t *find_symbol(const sym_mod_t *mod, uint64_t addr)
{
    size_t lo = 0, hi = mod->nsyms;
    while (lo < hi) { /* first symbol above addr */
        size_t mid = (lo + hi) / 2;
        if (mod->syms[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* Walk back over aliases and zero-sized labels to a symbol that covers addr. */
    sym_entry_t *sized_miss = NULL;
    for (size_t i = lo, steps = 0; i > 0 && steps < 64; i--, steps++) {
        sym_entry_t *s = &mod->syms[i - 1];
        if (s->size && addr - s->addr < s->size)
            return s;
        if (!s->size && !sized_miss)
            sized_miss = s;
        if (s->size && i == lo)
            break; /* the nearest sized symbol ends before addr: addr is in a gap */
    }
    return sized_miss;
}

/* ---- DWARF line programs -------------------------------------------------------------------- */

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
    if (mod->nfiles == mod->capfiles) {
        size_t ncap = mod->capfiles ? mod->capfiles * 2 : 64;
        char **n = realloc(mod->files, ncap * sizeof *n);
        if (!n)
            return UINT32_MAX - 1;
        mod->files = n;
        mod->capfiles = ncap;
    }
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
    if (r->n == r->cap) {
        size_t ncap = r->cap ? r->cap * 2 : 1024;
        line_row_t *n = realloc(r->v, ncap * sizeof *n);
        if (!n)
            return;
        r->v = n;
        r->cap = ncap;
    }
    r->v[r->n++] = (line_row_t){addr, file, line};
}

/* One unit of .debug_line; returns the offset of the next unit, or 0 to stop. */
static size_t parse_unit(sym_mod_t *mod, const elf_img_t *img, size_t at, rows_t *rows)
{
    const uint8_t *sec = img->debug_line;
    cur_t c = {sec + at, sec + img->debug_line_size, 0};
    int offset_size = 4;
    uint64_t unit_len = rd_n(&c, 4);
    if (unit_len == 0xffffffffu) {
        offset_size = 8;
        unit_len = rd_n(&c, 8);
    } else if (unit_len >= 0xfffffff0u) {
        return 0;
    }
    if (c.err || unit_len > (uint64_t)(c.end - c.p))
        return 0;
    const uint8_t *unit_end = c.p + unit_len;
    size_t next = (size_t)(unit_end - sec);
    c.end = unit_end;
    unsigned version = (unsigned)rd_n(&c, 2);
    if (version < 2 || version > 5)
        return next;
    unsigned addr_size = 8;
    if (version >= 5) {
        addr_size = (unsigned)rd_n(&c, 1);
        rd_n(&c, 1); /* segment selector size */
    }
    uint64_t header_len = rd_n(&c, (unsigned)offset_size);
    if (c.err || header_len > (uint64_t)(unit_end - c.p))
        return next;
    const uint8_t *prog = c.p + header_len;
    unsigned min_inst = (unsigned)rd_n(&c, 1);
    if (version >= 4)
        rd_n(&c, 1); /* maximum operations per instruction: VLIW only */
    unsigned default_is_stmt = (unsigned)rd_n(&c, 1);
    (void)default_is_stmt;
    int line_base = (int8_t)rd_n(&c, 1);
    unsigned line_range = (unsigned)rd_n(&c, 1);
    unsigned opcode_base = (unsigned)rd_n(&c, 1);
    if (c.err || line_range == 0 || opcode_base == 0)
        return next;
    uint8_t std_len[256] = {0};
    for (unsigned i = 1; i < opcode_base; i++)
        std_len[i] = (uint8_t)rd_n(&c, 1);
    /* Directories and files: this unit's file indices map to mod->files ids. */
    const char *dirs[256];
    size_t ndirs = 0;
    uint32_t *fmap = NULL;
    size_t nf = 0, capf = 0;
    if (version >= 5) {
        for (int pass = 0; pass < 2 && !c.err; pass++) {
            unsigned nfmt = (unsigned)rd_n(&c, 1);
            uint64_t fmt[32][2];
            if (nfmt > 32)
                break;
            for (unsigned i = 0; i < nfmt; i++)
                fmt[i][0] = uleb(&c), fmt[i][1] = uleb(&c);
            uint64_t count = uleb(&c);
            for (uint64_t k = 0; k < count && !c.err; k++) {
                const char *path = NULL;
                uint64_t dir = 0;
                for (unsigned i = 0; i < nfmt; i++) {
                    form_val_t v;
                    if (read_form(&c, fmt[i][1], offset_size, img, &v)) {
                        c.err = 1;
                        break;
                    }
                    if (fmt[i][0] == LNCT_path)
                        path = v.s;
                    else if (fmt[i][0] == LNCT_directory_index)
                        dir = v.u;
                }
                if (c.err)
                    break;
                if (pass == 0) {
                    if (ndirs < 256)
                        dirs[ndirs++] = path;
                } else {
                    if (nf == capf) {
                        capf = capf ? capf * 2 : 32;
                        uint32_t *n = realloc(fmap, capf * sizeof *n);
                        if (!n) {
                            c.err = 1;
                            break;
                        }
                        fmap = n;
                    }
                    fmap[nf++] = add_file(mod, dir < ndirs ? dirs[dir] : NULL, path);
                }
            }
        }
    } else {
        dirs[ndirs++] = NULL; /* 0: the compilation directory, which is not here */
        for (;;) {
            const char *d = cstr(&c);
            if (!d || !*d)
                break;
            if (ndirs < 256)
                dirs[ndirs++] = d;
        }
        if (nf == capf) {
            capf = 32;
            fmap = malloc(capf * sizeof *fmap);
        }
        if (fmap)
            fmap[nf++] = UINT32_MAX - 1; /* files count from 1 before DWARF 5 */
        while (fmap && !c.err) {
            const char *name = cstr(&c);
            if (!name || !*name)
                break;
            uint64_t dir = uleb(&c);
            uleb(&c), uleb(&c);
            if (nf == capf) {
                capf *= 2;
                uint32_t *n = realloc(fmap, capf * sizeof *n);
                if (!n)
                    break;
                fmap = n;
            }
            fmap[nf++] = add_file(mod, dir < ndirs ? dirs[dir] : NULL, name);
        }
    }
    if (c.err || !fmap) {
        free(fmap);
        return next;
    }
    /* The state machine. */
    cur_t p = {prog, unit_end, 0};
    uint64_t addr = 0, file = 1;
    int64_t line = 1;
    while (!p.err && p.p < p.end) {
        unsigned op = (unsigned)rd_n(&p, 1);
        if (op >= opcode_base) {
            unsigned adj = op - opcode_base;
            addr += (uint64_t)(adj / line_range) * min_inst;
            line += line_base + (int)(adj % line_range);
            add_row(rows, addr, file < nf ? fmap[file] : UINT32_MAX - 1, (uint32_t)line);
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
                addr = rd_n(&p, n <= 8 ? n : addr_size);
            }
            p.p = ext_end;
            break;
        }
        case 1: add_row(rows, addr, file < nf ? fmap[file] : UINT32_MAX - 1, (uint32_t)line); break;
        case 2: addr += uleb(&p) * min_inst; break;
        case 3: line += sleb(&p); break;
        case 4: file = uleb(&p); break;
        case 5: uleb(&p); break;
        case 6: case 7: case 10: case 11: break;
        case 8: addr += (uint64_t)((255 - opcode_base) / line_range) * min_inst; break;
        case 9: addr += rd_n(&p, 2); break;
        case 12: uleb(&p); break;
        default:
            for (unsigned i = 0; i < std_len[op]; i++)
                uleb(&p);
            break;
        }
    }
    free(fmap);
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

static void load_lines(sym_mod_t *mod)
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

static const line_row_t *find_row(const sym_mod_t *mod, uint64_t addr)
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

/* ---- the cache -------------------------------------------------------------------------------- */

static char *search_path;

void sym_set_search_path(const char *dirs)
{
    free(search_path);
    search_path = dirs && *dirs ? strdup(dirs) : NULL;
}

static int same_id(const elf_img_t *img, const uint8_t *id, size_t len)
{
    return len && img->build_id_len == len && !memcmp(img->build_id, id, len);
}

/* Loads the module's file: the recorded path when it holds the same build, else a file of the
 * same name in the search path that does, else whatever was found (the caller flags it). */
static int load_best(sym_mod_t *m, const char *path, const uint8_t *id, size_t id_len)
{
    int have = elf_load(&m->img, path) == 0;
    if (!have)
        elf_unload(&m->img);
    if ((have && (!id_len || !m->img.build_id_len || same_id(&m->img, id, id_len))) || !search_path)
        return have;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char *dirs = strdup(search_path);
    for (char *save = NULL, *d = dirs ? strtok_r(dirs, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save)) {
        char cand[4096];
        snprintf(cand, sizeof cand, "%s/%s", d, base);
        elf_img_t img;
        if (elf_load(&img, cand) != 0) {
            elf_unload(&img);
            continue;
        }
        if (!have || (id_len && same_id(&img, id, id_len))) {
            elf_unload(&m->img);
            m->img = img;
            have = 1;
            if (!id_len || same_id(&img, id, id_len))
                break;
        } else {
            elf_unload(&img);
        }
    }
    free(dirs);
    return have;
}

static sym_mod_t *get_module(const char *path, const uint8_t *id, size_t id_len)
{
    if (!id)
        id_len = 0;
    for (sym_mod_t *m = mods; m; m = m->next)
        if (!strcmp(m->path, path) && m->id_len == id_len && (!id_len || !memcmp(m->id, id, id_len)))
            return m;
    sym_mod_t *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->path = strdup(path);
    if (!m->path) {
        free(m);
        return NULL;
    }
    m->id_len = id && id_len < sizeof m->id ? id_len : id ? sizeof m->id : 0;
    if (m->id_len)
        memcpy(m->id, id, m->id_len);
    m->next = mods;
    mods = m;
    if (!load_best(m, path, id, m->id_len))
        return m;
    m->ok = 1;
    /* Symbols or lines missing here may be in the separate debug file. */
    if ((!m->img.debug_line || m->img.sym_is_dynamic || !m->img.symtab) && m->img.build_id_len > 1) {
        char dbg[512];
        int n = snprintf(dbg, sizeof dbg, "/usr/lib/debug/.build-id/%02x/", m->img.build_id[0]);
        for (size_t i = 1; i < m->img.build_id_len && n < (int)sizeof dbg - 8; i++)
            n += snprintf(dbg + n, sizeof dbg - (size_t)n, "%02x", m->img.build_id[i]);
        snprintf(dbg + n, sizeof dbg - (size_t)n, ".debug");
        if (elf_load(&m->dbg, dbg) != 0)
            elf_unload(&m->dbg);
    }
    const elf_img_t *symsrc = &m->img;
    if (m->dbg.symtab && !m->dbg.sym_is_dynamic && (!m->img.symtab || m->img.sym_is_dynamic))
        symsrc = &m->dbg;
    load_symbols(m, symsrc);
    return m;
}

void sym_resolve(const char *path, const uint8_t *build_id, size_t build_id_len, uint64_t offset,
                 sym_frame_t *out)
{
    memset(out, 0, sizeof *out);
    if (!enabled || !path || !*path) {
        out->no_file = 1;
        return;
    }
    sym_mod_t *m = get_module(path, build_id, build_id_len);
    if (!m || !m->ok) {
        out->no_file = 1;
        return;
    }
    if (build_id_len && m->img.build_id_len && !same_id(&m->img, build_id, build_id_len))
        out->build_id_differs = 1;
    uint64_t addr = offset ? offset - 1 : 0;
    sym_entry_t *s = find_symbol(m, addr);
    if (s) {
        out->function = pretty_name(s);
        out->symbol = s->name;
        out->function_offset = addr - s->addr;
    }
    if (!m->lines_loaded)
        load_lines(m);
    const line_row_t *r = find_row(m, addr);
    if (r) {
        out->file = m->files[r->file];
        out->line = r->line;
    }
}

void sym_reset(void)
{
    while (mods) {
        sym_mod_t *m = mods;
        mods = m->next;
        elf_unload(&m->img);
        elf_unload(&m->dbg);
        for (size_t i = 0; i < m->nsyms; i++)
            free(m->syms[i].pretty);
        free(m->syms);
        free(m->rows);
        for (size_t i = 0; i < m->nfiles; i++)
            free(m->files[i]);
        free(m->files);
        free(m->path);
        free(m);
    }
}
