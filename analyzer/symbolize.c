/* The symbolizer's ELF side — the file mapped, its symbols (demangled), build ids, separate
 * debug files — and the cache of modules (the line tables: symbolize_dwarf.c). Every offset, size
 * and count read from a file is checked against the mapping before use; a file that is not a regular 64-bit
 * little-endian ELF object, or a section that does not parse, just gives no names. */
#include "symbolize.h"
#include "symbolize_int.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static sym_mod_t *mods;
static int enabled = 1;

void sym_set_enabled(int on)
{
    enabled = on;
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

/* The loaded modules are shared by every thread that names frames (the parallel readers of
 * many logs, the cross-rank verdict, the OOM causes): one lock around loading and looking up.
 * What sym_resolve hands out stays valid until sym_reset. */
static pthread_mutex_t sym_lock = PTHREAD_MUTEX_INITIALIZER;

static void resolve_locked(const char *path, const uint8_t *build_id, size_t build_id_len, uint64_t offset,
                           sym_frame_t *out)
{
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
        sym_load_lines(m);
    const line_row_t *r = sym_find_row(m, addr);
    if (r) {
        out->file = m->files[r->file];
        out->line = r->line;
    }
}

void sym_resolve(const char *path, const uint8_t *build_id, size_t build_id_len, uint64_t offset,
                 sym_frame_t *out)
{
    memset(out, 0, sizeof *out);
    if (!enabled || !path || !*path) {
        out->no_file = 1;
        return;
    }
    pthread_mutex_lock(&sym_lock);
    resolve_locked(path, build_id, build_id_len, offset, out);
    pthread_mutex_unlock(&sym_lock);
}

void sym_reset(void)
{
    pthread_mutex_lock(&sym_lock);
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
    pthread_mutex_unlock(&sym_lock);
}

