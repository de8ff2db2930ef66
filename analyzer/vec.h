/* Growable arrays: every array of the analyzer that grows does it here, so that a capacity
 * changes only with its block and a size never wraps. No other analyzer file calls realloc to
 * grow an array. */
#ifndef GMSHIM_VEC_H
#define GMSHIM_VEC_H

#include <stddef.h>

/* ARR (of *CAP elements of ELEM bytes) with room for at least NEED elements: the same block when
 * it has room, else a larger one (at least MIN elements, doubling), its new part zeroed and *CAP
 * updated. NULL when out of memory or when the size would overflow: ARR and *CAP then stay as
 * they were (the caller still owns ARR). */
void *vec_grow(void *arr, size_t *cap, size_t need, size_t elem, size_t min);
/* The same, the new part left as realloc gives it: for a buffer written before it is read (bytes
 * packed or read in), where zeroing would make every page of a doubled capacity resident. */
void *vec_grow_raw(void *arr, size_t *cap, size_t need, size_t elem, size_t min);

#endif
