/* Walking the loader's objects and searching sorted span tables (see objects.h). */
#include "objects.h"

#include <stdlib.h>

static int counters_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    unsigned long long *c = data;
    c[0] = info->dlpi_adds;
    c[1] = info->dlpi_subs;
    return 1;
}

int objects_changed(unsigned long long stamp[2])
{
    unsigned long long c[2] = {0, 0};
    dl_iterate_phdr(counters_cb, c);
    if (c[0] == stamp[0] && c[1] == stamp[1])
        return 0;
    stamp[0] = c[0];
    stamp[1] = c[1];
    return 1;
}

int objects_exec_span(const struct dl_phdr_info *info, gm_span_t *out)
{
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            uintptr_t s = info->dlpi_addr + ph->p_vaddr;
            lo = s < lo ? s : lo;
            hi = s + ph->p_memsz > hi ? s + ph->p_memsz : hi;
        }
    }
    if (hi <= lo)
        return -1;
    out->lo = lo;
    out->hi = hi;
    return 0;
}

static int by_lo(const void *a, const void *b)
{
    const gm_span_t *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

void objects_sort(void *entries, size_t n, size_t stride)
{
    if (n) /* none (a table that could not be allocated is NULL) */
        qsort(entries, n, stride, by_lo);
}

void *objects_find(const void *entries, size_t n, size_t stride, uintptr_t pc)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const gm_span_t *s = (const gm_span_t *)((const char *)entries + mid * stride);
        if (pc < s->lo)
            hi = mid;
        else if (pc >= s->hi)
            lo = mid + 1;
        else
            return (void *)s;
    }
    return NULL;
}
