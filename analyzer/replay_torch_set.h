/* The ordered sets of PyTorch's allocator model (replay_torch.c): its blocks, and free blocks by
 * (size, address) in chunks of at most RT_CHUNK, so that a search is two binary searches and an
 * insert or erase moves one chunk: a log with millions of free blocks costs per event what a few
 * hundred would. Below the model; knows nothing of PyTorch's rules. */
#ifndef GM_REPLAY_TORCH_SET_H
#define GM_REPLAY_TORCH_SET_H

#include <stddef.h>
#include <stdint.h>

/* A block of the model: a piece of a segment, allocated, free or (expandable) unmapped. */
typedef struct rt_blk {
    uint64_t addr, size;
    uint64_t seg;            /* expandable: its segment's base, for page alignment */
    struct rt_blk *prev, *next;
    uint64_t gc_base;        /* the pool kind's get_free_block count when it became free */
    uint64_t born;           /* allocated: when */
    uint32_t pool;
    uint8_t allocated, mapped, exp;
} rt_blk_t;

#define RT_CHUNK 128
typedef struct rt_chunk {
    size_t n;
    struct rt_blk *b[RT_CHUNK];
} rt_chunk_t;

typedef struct rt_set {
    rt_chunk_t **c;
    size_t nc, capc;
    size_t n;                /* blocks in all */
} rt_set_t;

typedef struct rt_pos {      /* a place in a set: chunk and index; c == nc at the end */
    size_t c, i;
} rt_pos_t;

/* The first block not below (size, addr): its place, or the end. */
rt_pos_t rt_set_lower(const rt_set_t *s, uint64_t size, uint64_t addr);
/* The block at p, NULL at the end. */
rt_blk_t *rt_set_get(const rt_set_t *s, rt_pos_t p);
void rt_set_next(const rt_set_t *s, rt_pos_t *p);
/* The largest block, NULL when empty. */
rt_blk_t *rt_set_last(const rt_set_t *s);
/* 0, or -1 when out of memory (the set as it was). */
int rt_set_insert(rt_set_t *s, rt_blk_t *b);
/* Removes b when it is there (found by its size and address). */
void rt_set_erase(rt_set_t *s, const rt_blk_t *b);
/* The blocks in order, copied (NULL with *n 0 when empty or out of memory). */
rt_blk_t **rt_set_list(const rt_set_t *s, size_t *n);
/* The set's own storage (not the blocks). */
void rt_set_free(rt_set_t *s);

#endif
