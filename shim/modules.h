/* The loaded objects (executable and shared libraries) with their build ids, so that native
 * frames can be logged as module + offset and symbolized offline. Refreshed when the dynamic
 * linker reports objects added or removed; each new object is written to the log once. */
#ifndef GM_MODULES_H
#define GM_MODULES_H

#include <stdint.h>

/* Maps an absolute address to (module id, offset from the module's load base). Returns 0, or
 * -1 if no loaded object contains it. Caller holds the stacks lock. */
int modules_lookup(uintptr_t addr, uint32_t *id, uint64_t *offset);
/* Whether addr lies in gmshim itself (frames to skip). */
int modules_is_self(uintptr_t addr);
void modules_init(void);

#endif
