/* Call sites: the native stack (GMSHIM_STACK_DEPTH frames) and, for a Python thread, its Python
 * frames, interned so that each distinct site is written to the log once. */
#ifndef GM_STACKS_H
#define GM_STACKS_H

#include <stddef.h>
#include <stdint.h>

void stacks_init(void);
/* The call site of the current allocation (0 when stacks are off or capture failed). Call it
 * outside every pool lock: it may take a while. */
uint32_t stacks_site(void);
/* The same, given the return address into the program (the hook's caller): when the thread is
 * in Python, a site seen before with the same caller and Python frames is reused without
 * unwinding the native stack (the costly part), so its native frames are those of the first
 * time. */
uint32_t stacks_site_from(const void *caller);
/* The call site below the frames `skip` says belong to the machinery between the program and
 * gmshim (CUPTI, the driver, a static cudart): those are dropped too, and enough frames are
 * unwound that GMSHIM_STACK_DEPTH of the program's remain. */
uint32_t stacks_site_skip(int (*skip)(uintptr_t pc));
/* Both: the cheap key of stacks_site_from, and on a miss the frames `skip` names dropped. */
uint32_t stacks_site_from_skip(const void *caller, int (*skip)(uintptr_t pc));
/* GMSHIM_VERBOSE: how many native walks were answered from memory (at exit). */
void stacks_note_totals(void);
/* A site named as the reports name it: "func (file.py:42)" from its innermost Python frame, else
 * "symbol (object)" or "object+0xoffset" of its first frame outside the framework's and CUDA's
 * libraries; "" when unknown (kept only under GMSHIM_WARN). Not for the hooks: it may take the
 * loader's lock. */
const char *stacks_describe(uint32_t site, char *buf, size_t len);
/* The id of an interned string (written to the log once as a GMLOG_STRING); 0 on failure. */
uint32_t stacks_intern_string(const char *s);

#endif
