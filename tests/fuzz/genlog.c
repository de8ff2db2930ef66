/* Writes a large, valid version-1 gmshim log for measuring the analyzer: N alloc/free events
 * spread over T threads whose 64 KiB chunks interleave in the file as a real writer's would,
 * a steady live set per thread, segments, sites and a mark every 100,000 events. It writes only
 * what common/gmlog.h describes; it is a test tool, never linked into gmshim.
 *
 *   genlog OUT.gmlog [EVENTS (default 100000000)] [THREADS (default 4)] [steps|random|loop] [ledger]
 *
 * "steps" (the default) is a training loop: each thread in bursts of ~64 events, allocating a
 * step's activations then freeing them in reverse. "random" is the worst case for the reader
 * and the model: every event on a random thread, alloc or free by a coin flip. "loop" is the
 * steps without marks, each step's sizes the same (the period the analyzer finds, or, with
 * threads interleaving, the search's worst case). "ledger" adds the card's LEDGER samples, as the
 * shim writes them: at the device's first use and after every mark (another process holding
 * 1 GiB, a 300 MiB context). */
#include "gmlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIVE 1024                 /* live blocks per thread */
#define NSITES 64

typedef struct thr {
    uint8_t chunk[GMLOG_CHUNK_SIZE];
    uint32_t used, nchunks;
    uint64_t base;
    uint64_t ring[LIVE];
    uint32_t head, count;
    uint64_t next_ptr;
} thr_t;

static FILE *out;
static uint64_t chunks_written;

static void flush_chunk(thr_t *t, uint32_t tid)
{
    if (!t->used)
        return;
    memset(t->chunk + t->used, 0, GMLOG_CHUNK_SIZE - t->used);
    gmlog_chunk_header_t h = {GMLOG_CHUNK_MAGIC, tid, chunks_written, t->base, t->nchunks++, 0};
    memcpy(t->chunk, &h, sizeof h);
    if (fwrite(t->chunk, 1, GMLOG_CHUNK_SIZE, out) != GMLOG_CHUNK_SIZE) {
        perror("genlog: write");
        exit(1);
    }
    chunks_written++;
    t->used = 0;
}

static void put(thr_t *t, uint32_t tid, void *rec, size_t len, uint64_t now)
{
    if (!t->used || t->used + len + 16 > GMLOG_CHUNK_SIZE || now - t->base > 0xffffffffull) {
        flush_chunk(t, tid);
        t->used = sizeof(gmlog_chunk_header_t);
        t->base = now;
    }
    gmlog_rec_t *h = rec;
    h->len8 = (uint8_t)(len / 8);
    h->dt = (uint32_t)(now - t->base);
    memcpy(t->chunk + t->used, rec, len);
    t->used += (uint32_t)len;
}

/* A LEDGER sample of device 0 (80 GiB): another process holding 1 GiB, a 300 MiB context. */
static void put_ledger(thr_t *t, uint32_t tid, unsigned why, uint64_t now)
{
    uint8_t rec[sizeof(gmlog_ledger_t) + sizeof(gmlog_ledger_proc_t)] = {0};
    gmlog_ledger_t l = {{GMLOG_LEDGER, 0, 0, (uint8_t)why, 0}, 80ull << 30, 70ull << 30, 300ull << 20,
                        GMLOG_UNKNOWN, 1ull << 30, 1, GMLOG_LEDGER_NVML | GMLOG_LEDGER_CTX_CREATED};
    gmlog_ledger_proc_t p = {4343, 0, 1ull << 30};
    memcpy(rec, &l, sizeof l);
    memcpy(rec + sizeof l, &p, sizeof p);
    put(t, tid, rec, sizeof rec, now);
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: genlog OUT.gmlog [EVENTS] [THREADS] [steps|random|loop] [ledger]\n");
        return 2;
    }
    uint64_t events = argc > 2 ? strtoull(argv[2], NULL, 10) : 100000000ull;
    int nthr = argc > 3 ? atoi(argv[3]) : 4;
    int random_mode = argc > 4 && !strcmp(argv[4], "random");
    int loop_mode = argc > 4 && !strcmp(argv[4], "loop");
    int ledger = argc > 5 && !strcmp(argv[5], "ledger");
    if (nthr < 1 || nthr > 64)
        nthr = 4;
    out = fopen(argv[1], "wb");
    if (!out) {
        perror(argv[1]);
        return 1;
    }
    static uint8_t header[4096];
    gmlog_file_header_t h = {.version = GMLOG_VERSION, .byte_order = GMLOG_BYTE_ORDER, .header_size = 4096,
                             .chunk_size = GMLOG_CHUNK_SIZE, .pid = 4242, .flags = GMLOG_F_CLOSED,
                             .close_reason = GMLOG_CLOSE_EXIT};
    memcpy(h.magic, GMLOG_MAGIC, 8);
    const char prog[] = "genlog-synthetic";
    gmlog_meta_t m = {GMLOG_META_PROGRAM, 0, sizeof prog - 1};
    memcpy(header + sizeof h, &m, sizeof m);
    memcpy(header + sizeof h + sizeof m, prog, sizeof prog - 1);
    h.meta_size = (uint32_t)(sizeof m + 16 + sizeof m);
    memcpy(header, &h, sizeof h);
    fwrite(header, 1, sizeof header, out);
    thr_t *thr = calloc((size_t)nthr, sizeof *thr);
    if (!thr)
        return 1;
    uint64_t now = 1000;
    /* device, sites and segments first, from thread 0 */
    uint8_t dev[48] = {0};
    gmlog_device_t d = {{GMLOG_DEVICE, 0, 0, 0, 0}, 80ull << 30, 80ull << 30, 8, 0};
    memcpy(dev, &d, sizeof d);
    memcpy(dev + sizeof d, "genlog 0", 8);
    put(&thr[0], 100, dev, 40, now);
    if (ledger)
        put_ledger(&thr[0], 100, GMLOG_LEDGER_START, now);
    for (uint32_t s = 1; s <= NSITES; s++) {
        uint8_t rec[24] = {0};
        gmlog_site_t st = {{GMLOG_SITE, 0, GMLOG_NO_DEVICE, 0, 0}, s, 1, 0};
        uint64_t f = (uint64_t)GMLOG_FRAME_UNKNOWN_MODULE << 48 | (0x400000 + s * 64);
        memcpy(rec, &st, sizeof st);
        memcpy(rec + sizeof st, &f, 8);
        put(&thr[0], 100, rec, 24, now);
    }
    const uint64_t seg_size = 1ull << 30;
    for (int i = 0; i < nthr; i++) {
        gmlog_segment_t sg = {{GMLOG_SEGMENT_ALLOC, 0, 0, 0, 0}, 0x7f0000000000ull + (uint64_t)i * seg_size, seg_size, 50000, 0};
        put(&thr[0], 100, &sg, sizeof sg, now);
        thr[i].next_ptr = sg.base;
    }
    uint64_t done = 0, marks = 0;
    int ti = 0;
    uint64_t burst = 0;
    while (done < events) {
        if (random_mode) {
            ti = (int)(rnd() % (uint64_t)nthr);
        } else if (!burst) {
            ti = (int)(rnd() % (uint64_t)nthr);
            burst = 1 + rnd() % 128;
        }
        if (burst)
            burst--;
        thr_t *t = &thr[ti];
        uint32_t tid = 100 + (uint32_t)ti;
        now += 20 + rnd() % 60;
        int do_free;
        if (random_mode)
            do_free = t->count == LIVE || (t->count > LIVE / 2 && (rnd() & 1));
        else /* a step: fill the ring with activations, then free them newest first */
            do_free = t->count == LIVE || (t->count && t->head == UINT32_MAX - 1);
        if (!random_mode && t->count == LIVE)
            t->head = UINT32_MAX - 1; /* now freeing */
        if (!random_mode && do_free) {
            uint32_t slot = t->count - 1;
            uint64_t p = t->ring[slot];
            t->count--;
            if (!t->count)
                t->head = 0; /* the step is over */
            gmlog_free_t f = {{GMLOG_FREE, 0, 0, GMLOG_F_DEFERRED, 0}, p, 0, 0};
            put(t, tid, &f, sizeof f, now);
        } else if (do_free) {
            uint64_t p = t->ring[t->head];
            t->head = (t->head + 1) % LIVE;
            t->count--;
            gmlog_free_t f = {{GMLOG_FREE, 0, 0, GMLOG_F_DEFERRED, 0}, p, 0, 0};
            put(t, tid, &f, sizeof f, now);
        } else {
            uint32_t slot = random_mode ? (t->head + t->count) % LIVE : t->count;
            uint64_t req = 512 + (loop_mode ? slot % 61 : rnd() % 64) * 512;
            uint64_t p = 0x7f0000000000ull + (uint64_t)ti * seg_size + (uint64_t)slot * (64u << 10);
            t->ring[slot] = p;
            t->count++;
            gmlog_alloc_t a = {{GMLOG_ALLOC, 0, 0, 0, 0}, p, req, (uint32_t)(1 + slot % NSITES), 300, 0};
            put(t, tid, &a, 32, now);
        }
        done++;
        if (done % 100000 == 0 && !loop_mode) {
            uint8_t rec[32] = {0};
            char label[16];
            int n = snprintf(label, sizeof label, "step %llu", (unsigned long long)++marks);
            gmlog_mark_t mk = {{GMLOG_MARK, 0, GMLOG_NO_DEVICE, 0, 0}, (uint32_t)marks, (uint32_t)n};
            memcpy(rec, &mk, sizeof mk);
            memcpy(rec + sizeof mk, label, (size_t)n);
            put(t, tid, rec, sizeof mk + ((size_t)n + 7) / 8 * 8, now);
            if (ledger)
                put_ledger(t, tid, GMLOG_LEDGER_MARK, now);
        }
    }
    gmlog_end_t e = {{GMLOG_END, 0, GMLOG_NO_DEVICE, 0, 0}, GMLOG_CLOSE_EXIT, 0};
    put(&thr[0], 100, &e, sizeof e, now);
    for (int i = 0; i < nthr; i++)
        flush_chunk(&thr[i], 100 + (uint32_t)i);
    free(thr);
    h.chunks_at_close = chunks_written; /* as the shim's clean close records it */
    if (fseek(out, 0, SEEK_SET) != 0 || fwrite(&h, 1, sizeof h, out) != sizeof h) {
        perror("genlog: header");
        return 1;
    }
    if (fclose(out) != 0) {
        perror("genlog: close");
        return 1;
    }
    fprintf(stderr, "genlog: %llu events, %llu marks, %d threads, %llu chunks\n", (unsigned long long)done,
            (unsigned long long)marks, nthr, (unsigned long long)chunks_written);
    return 0;
}
