/* The native stack walked from its unwind tables with a per-thread cache of each return
 * address's rule, so that a stack seen before costs a table lookup and two loads a frame instead
 * of the unwinder's search. x86-64 only; elsewhere, and for any frame whose rule is beyond it,
 * the caller falls back to backtrace(). */
#ifndef GM_UNWIND_H
#define GM_UNWIND_H

/* The calling function's return addresses, innermost first, exactly as backtrace() called at the
 * same place would give them (its caller first; at most `max`). Returns the count, or -1 when the
 * walk cannot be trusted (a frame with a rule this walker does not follow, a stack it does not
 * know the bounds of, another architecture): then call backtrace(). Never reads outside the
 * calling thread's stack. */
int unwind_backtrace(void **out, int max);
/* Per-thread counts since the thread's first walk, for tests: frames walked from the cache and
 * rules computed from the tables. */
void unwind_counts(unsigned long long *cached, unsigned long long *computed);

#endif
