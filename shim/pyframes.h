/* Python frames of the calling thread, read without the GIL: PyTorch releases the GIL around
 * every op, so the allocating thread rarely holds it, and taking it inside cudaMalloc could
 * wait milliseconds or deadlock. The thread's own frame chain cannot change while it is inside
 * this call, so gmshim reads it directly, with the layouts of CPython 3.11, 3.12 and 3.13 and
 * type checks on every object; any other version gets no Python frames. */
#ifndef GM_PYFRAMES_H
#define GM_PYFRAMES_H

#include <stddef.h>
#include <stdint.h>

typedef struct gm_pyframe_raw {
    uintptr_t code;   /* the code object */
    int addr;         /* byte offset of the current instruction in its bytecode */
} gm_pyframe_raw_t;

/* Innermost first; returns how many (0 outside Python threads or without a supported CPython).
 * Cheap: pointer reads only; the line is computed by pyframes_line, once per new site. */
int pyframes_capture(gm_pyframe_raw_t *out, int max);
/* The source line of a captured frame (the code object must still be alive: call it before
 * returning to the program). */
int pyframes_line(const gm_pyframe_raw_t *f);
/* File name and qualified function name of a code object captured above. */
void pyframes_describe(uintptr_t code, char *file, size_t file_len, char *func, size_t func_len);
/* "3.12" when Python frames are available, or NULL. */
const char *pyframes_version(void);

#endif
