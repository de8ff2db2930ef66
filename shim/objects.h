/* The loaded objects' executable address spans: what the call-site module map (modules.c) and
 * CUPTI's caller classification (requester.c) both need. Each keeps its own table of entries that
 * begin with a gm_span_t; this file walks the loader's list and searches such tables. */
#ifndef GM_OBJECTS_H
#define GM_OBJECTS_H

#include <link.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gm_span {
    uintptr_t lo, hi; /* [lo, hi): the object's executable segments */
} gm_span_t;

/* 1 when the dynamic linker added or removed objects since `stamp` was taken (and takes it
 * anew); a stamp of {~0, ~0} always reads as changed. */
int objects_changed(unsigned long long stamp[2]);
/* The span of an object's executable PT_LOAD segments; 0, or -1 if it has none. */
int objects_exec_span(const struct dl_phdr_info *info, gm_span_t *out);
/* Sorts `n` entries of `stride` bytes, each beginning with a gm_span_t, by address. */
void objects_sort(void *entries, size_t n, size_t stride);
/* The entry whose span holds `pc` in a sorted table, or NULL. */
void *objects_find(const void *entries, size_t n, size_t stride, uintptr_t pc);

#endif
