/* The native stack walked from its unwind tables with a per-thread cache of each return
 * address's rule, so that a frame costs a table lookup and two loads instead of the unwinder's
 * search, and a memory of whole walks, so that a stack met before costs a compare a word. x86-64 only; elsewhere, and for any frame whose rule is beyond it,
 * the caller falls back to backtrace(). */
#ifndef GM_STACKWALK_H
#define GM_STACKWALK_H

#include <stdint.h>

/* The calling function's return addresses, innermost first, exactly as backtrace() called at the
 * same place would give them (its caller first; at most `max`). Returns the count, or -1 when the
 * walk cannot be trusted (a frame with a rule this walker does not follow, a stack it does not
 * know the bounds of, another architecture): then call backtrace(). Never reads outside the
 * calling thread's stack. */
int stackwalk_backtrace(void **out, int max);
/* stackwalk_backtrace with a memory of whole walks: when the calling thread's stack is one it walked
 * here before with the same `ctx` and `max` — the same stack and frame pointers, and every stack
 * word that walk read still holding what it read, so that walking again must give the same frames
 * — returns -2 and sets *value to what stackwalk_remember filed for it (out is not written).
 * Otherwise walks as stackwalk_backtrace and keeps the walk until stackwalk_remember files it. */
int stackwalk_backtrace_memo(void **out, int max, uint64_t ctx, uint32_t *value);
/* Files the calling thread's last stackwalk_backtrace_memo walk with `value`. */
void stackwalk_remember(uint32_t value);
/* Per-thread counts since the thread's first walk, for tests: frames walked from the cache, rules
 * computed from the tables, walks answered from memory. */
void stackwalk_counts(unsigned long long *cached, unsigned long long *computed, unsigned long long *remembered);
/* Over every thread, live or ended (GMSHIM_VERBOSE's note at exit): walks asked for, answered
 * from memory, rules computed. */
void stackwalk_totals(unsigned long long *walks, unsigned long long *remembered, unsigned long long *computed);

#endif
