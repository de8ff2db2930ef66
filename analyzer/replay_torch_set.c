/* replay_torch_set.h: the chunked ordered set of the allocator model's free blocks. */
#include "replay_torch_set.h"
#include "vec.h"

#include <stdlib.h>
#include <string.h>

static int blk_less(const rt_blk_t *b, uint64_t size, uint64_t addr)
{
    return b->size < size || (b->size == size && b->addr < addr);
}

rt_pos_t rt_set_lower(const rt_set_t *s, uint64_t size, uint64_t addr)
{
    size_t lo = 0, hi = s->nc;
    while (lo < hi) { /* the first chunk whose last block is not below */
        size_t mid = (lo + hi) / 2;
        const rt_chunk_t *c = s->c[mid];
        if (blk_less(c->b[c->n - 1], size, addr))
            lo = mid + 1;
        else
            hi = mid;
    }
    rt_pos_t p = {lo, 0};
    if (lo == s->nc)
        return p;
    const rt_chunk_t *c = s->c[lo];
    size_t a = 0, z = c->n;
    while (a < z) {
        size_t mid = (a + z) / 2;
        if (blk_less(c->b[mid], size, addr))
            a = mid + 1;
        else
            z = mid;
    }
    p.i = a;
    return p;
}

rt_blk_t *rt_set_get(const rt_set_t *s, rt_pos_t p)
{
    return p.c < s->nc ? s->c[p.c]->b[p.i] : NULL;
}

void rt_set_next(const rt_set_t *s, rt_pos_t *p)
{
    if (p->c < s->nc && ++p->i >= s->c[p->c]->n)
        p->c++, p->i = 0;
}

rt_blk_t *rt_set_last(const rt_set_t *s)
{
    return s->nc ? s->c[s->nc - 1]->b[s->c[s->nc - 1]->n - 1] : NULL;
}

/* A new empty chunk at index at; 0, or -1 when out of memory. */
static int chunk_add(rt_set_t *s, size_t at)
{
    rt_chunk_t **n = vec_grow(s->c, &s->capc, s->nc + 1, sizeof *n, 4);
    rt_chunk_t *c = n ? malloc(sizeof *c) : NULL;
    if (n)
        s->c = n;
    if (!c)
        return -1;
    c->n = 0;
    memmove(s->c + at + 1, s->c + at, (s->nc - at) * sizeof *s->c);
    s->c[at] = c;
    s->nc++;
    return 0;
}

int rt_set_insert(rt_set_t *s, rt_blk_t *b)
{
    rt_pos_t p = {0, 0};
    if (!s->nc) { /* the first block: a chunk for it (a chunk is never left empty) */
        if (chunk_add(s, 0))
            return -1;
    } else {
        p = rt_set_lower(s, b->size, b->addr);
    }
    if (p.c == s->nc) /* after every block: the last chunk's end */
        p.c = s->nc - 1, p.i = s->c[p.c]->n;
    rt_chunk_t *c = s->c[p.c];
    if (c->n == RT_CHUNK) { /* full: its upper half to a new chunk after it */
        if (chunk_add(s, p.c + 1))
            return -1;
        rt_chunk_t *d = s->c[p.c + 1];
        d->n = RT_CHUNK / 2;
        memcpy(d->b, c->b + RT_CHUNK / 2, d->n * sizeof *d->b);
        c->n = RT_CHUNK / 2;
        if (p.i > c->n)
            p.i -= c->n, c = d;
    }
    memmove(c->b + p.i + 1, c->b + p.i, (c->n - p.i) * sizeof *c->b);
    c->b[p.i] = b;
    c->n++;
    s->n++;
    return 0;
}

void rt_set_erase(rt_set_t *s, const rt_blk_t *b)
{
    rt_pos_t p = rt_set_lower(s, b->size, b->addr);
    if (rt_set_get(s, p) != b)
        return;
    rt_chunk_t *c = s->c[p.c];
    memmove(c->b + p.i, c->b + p.i + 1, (c->n - p.i - 1) * sizeof *c->b);
    c->n--;
    s->n--;
    if (!c->n) {
        free(c);
        memmove(s->c + p.c, s->c + p.c + 1, (s->nc - p.c - 1) * sizeof *s->c);
        s->nc--;
    }
}

rt_blk_t **rt_set_list(const rt_set_t *s, size_t *n)
{
    *n = 0;
    rt_blk_t **out = s->n ? malloc(s->n * sizeof *out) : NULL;
    for (size_t k = 0; out && k < s->nc; k++)
        for (size_t i = 0; i < s->c[k]->n; i++)
            out[(*n)++] = s->c[k]->b[i];
    return out;
}

void rt_set_free(rt_set_t *s)
{
    for (size_t k = 0; k < s->nc; k++)
        free(s->c[k]);
    free(s->c);
    memset(s, 0, sizeof *s);
}
