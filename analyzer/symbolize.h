/* Offline symbolization: function names from ELF .symtab/.dynsym (C++ names demangled), file:line from DWARF
 * .debug_line (versions 2 to 5), parsed by hand and cached per module. A missing, changed or
 * malformed file gives "unknown" (and says when a build id differs), never a crash. */
#ifndef GM_SYMBOLIZE_H
#define GM_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

typedef struct sym_frame {
    const char *function;     /* NULL when unknown; C++ names demangled */
    const char *symbol;       /* the name as the ELF file has it (mangled for C++) */
    uint64_t function_offset; /* address - the function's start */
    const char *file;         /* NULL when there is no line information */
    unsigned line;
    int build_id_differs;     /* the file on disk is not the one that ran */
    int no_file;              /* the module's file could not be opened or is not ELF */
} sym_frame_t;

/* Resolves a return address: `offset` is relative to the module's load bias (an ELF virtual
 * address), and offset - 1 is looked up so that the call itself is named. The strings stay
 * valid until sym_reset(). */
void sym_resolve(const char *path, const uint8_t *build_id, size_t build_id_len, uint64_t offset,
                 sym_frame_t *out);
/* The build id of the file at path (0 when none); for tests. */
size_t sym_file_build_id(const char *path, uint8_t *out, size_t cap);
/* A C++ symbol's readable name (malloc'd), or NULL if `name` is not a mangled C++ name or no
 * demangler is at hand. */
char *sym_demangle(const char *name);
/* Forgets every cached module. */
void sym_reset(void);
/* Turns symbolization off (frames then come out as module+offset). */
void sym_set_enabled(int on);
/* Directories (colon-separated) searched for a module by its file name when the recorded path
 * is missing or holds another build: logs analysed on another machine, test fixtures. */
void sym_set_search_path(const char *dirs);

#endif
