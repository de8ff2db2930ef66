/* A pickle writer (protocol 4, the opcodes PyTorch's own memory snapshots use and MemoryViz.js
 * reads), streaming to a FILE: ints, strings, dicts and lists batched as Python's pickler does,
 * a memo for what repeats, and the memory snapshot's vocabulary interned once (pickle_key). */
#ifndef GM_PICKLE_H
#define GM_PICKLE_H

#include <stdint.h>
#include <stdio.h>

/* The snapshot's keys and values, each written once and then fetched from the memo. */
enum {
    K_ACTION, K_ADDR, K_SIZE, K_STREAM, K_TIME_US, K_FRAMES, K_FILENAME, K_LINE, K_NAME, K_COMPILE_CONTEXT,
    K_USER_METADATA, K_CATEGORY, K_DEVICE_FREE, K_DEVICE, K_ADDRESS, K_TOTAL_SIZE, K_ALLOCATED_SIZE,
    K_ACTIVE_SIZE, K_REQUESTED_SIZE, K_SEGMENT_TYPE, K_SEGMENT_POOL_ID, K_IS_EXPANDABLE, K_BLOCKS, K_STATE,
    K_STAGE, V_ALLOC, V_FREE_REQUESTED, V_FREE_COMPLETED, V_SEGMENT_ALLOC, V_SEGMENT_FREE, V_OOM, V_SNAPSHOT,
    V_ACTIVE_ALLOCATED, V_ACTIVE_PENDING_FREE, V_INACTIVE, V_LARGE, V_SMALL, V_NA, V_EMPTY, V_START, V_END, V_POOL, V_UNKNOWN, V_SEGMENT_MAP,
    V_SEGMENT_UNMAP, NKEYS
};

#define PK_BATCH 1000   /* items per APPENDS / SETITEMS, as Python's pickler (and JS spread limits) */
#define PK_DEPTH 16

typedef struct pickle {
    FILE *f;
    uint32_t memo;                /* next memo index */
    uint32_t key[NKEYS];          /* memo index + 1 of each interned string */
    uint32_t count[PK_DEPTH];     /* items of each open list since its last APPENDS */
    int depth;
} pickle_t;

void pickle_byte(pickle_t *p, int c);
void pickle_u32(pickle_t *p, uint32_t v);
uint32_t pickle_memoize(pickle_t *p);
void pickle_get(pickle_t *p, uint32_t idx);
void pickle_int(pickle_t *p, uint64_t v);
/* A str: the log's bytes as valid UTF-8 (a bad byte becomes U+FFFD), whatever they were. */
void pickle_str(pickle_t *p, const char *s);
/* One of the strings every event repeats: written once, then fetched from the memo. */
void pickle_key(pickle_t *p, int k);
void pickle_dict(pickle_t *p);
void pickle_dict_end(pickle_t *p);
/* A list; with `memo`, its memo index (memoized before the MARK, where the unpickler's stack
 * top is the list) is stored there. */
void pickle_list_memo(pickle_t *p, uint32_t *memo);
/* Before each item of the innermost open list. */
void pickle_item(pickle_t *p);
void pickle_list(pickle_t *p);
void pickle_list_end(pickle_t *p);

#endif
