/* What the symbolizer's files share (symbolize.c: ELF files, symbols, the cache;
 * symbolize_dwarf.c: the DWARF line tables): a module's parsed state. Nothing else includes this. */
#ifndef GM_SYMBOLIZE_INT_H
#define GM_SYMBOLIZE_INT_H

#include "cursor.h"

#include <stddef.h>
#include <stdint.h>

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

/* symbolize_dwarf.c: the module's line table, read once (from the file, else its debug file); the
 * row for an address (NULL: none, or outside every sequence). */
void sym_load_lines(sym_mod_t *mod);
const line_row_t *sym_find_row(const sym_mod_t *mod, uint64_t addr);

#endif
