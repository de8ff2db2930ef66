/* Where the log's chunks go in the file. Extents of 16 MiB are reserved (posix_fallocate: a
 * full disk is found then, not as a SIGBUS) and mapped as needed; the thread that opens one maps
 * the next and faults its pages in; an extent is unmapped once every chunk of it was claimed and
 * given up, so only the extents being written stay mapped. A bounded log (GMSHIM_LOG_LIMIT) is
 * a ring of slots: at the limit, a new extent takes the slot of one whose records are all older
 * than the newest complete checkpoint, each chunk zeroed as it is claimed. Everything here runs
 * under gm_log.lock, but the page work, which the log's helper thread does (logstate.c). */
#include "logring.h"
#include "diag.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static off_t slot_offset(uint32_t slot)
{
    return (off_t)gm_log.header_size + (off_t)slot * (off_t)EXTENT_BYTES;
}

/* A file slot for a new extent: the next one at the end of the file while under the limit; at
 * the limit, a slot whose extent's chunks were all claimed and all of whose given-up chunks hold
 * records older than the newest complete checkpoint (the oldest first); chunks still held there
 * (by a thread that has gone idle) are kept and skipped. When no slot qualifies (the checkpoint is
 * still being written), one more at the end: the file outgrows its limit by that extent.
 * gm_log.lock held. */
static uint32_t pick_slot_locked(int *reused)
{
    *reused = 0;
    if (gm_log.max_slots && gm_log.nslots >= gm_log.max_slots && gm_log.ckpt_done_at) {
        for (uint32_t k = 0; k < gm_log.nslots; k++) {
            uint32_t s = (gm_log.ring_cursor + k) % gm_log.nslots;
            uint32_t owner = gm_log.slot_owner[s];
            const extent_t *x = &gm_log.extents[owner];
            if (gm_log.next_chunk >= (uint64_t)(owner + 1) * EXTENT_CHUNKS &&
                x->last_release < gm_log.ckpt_done_at) {
                gm_log.ring_cursor = (s + 1) % gm_log.nslots;
                *reused = 1;
                return s;
            }
        }
    }
    if (gm_log.nslots == gm_log.slots_cap) {
        uint32_t ncap = gm_log.slots_cap ? gm_log.slots_cap * 2 : 64;
        uint32_t *n = realloc(gm_log.slot_owner, ncap * sizeof *n);
        if (!n)
            return NO_SLOT;
        gm_log.slot_owner = n;
        void *h = realloc(gm_log.slot_held, ncap * sizeof *gm_log.slot_held);
        if (!h)
            return NO_SLOT;
        gm_log.slot_held = h;
        gm_log.slots_cap = ncap;
    }
    memset(gm_log.slot_held[gm_log.nslots], 0, sizeof *gm_log.slot_held);
    return gm_log.nslots++;
}

/* Maps extent e (reserving its blocks first). gm_log.lock held. 0, or -1: the log stopped, or, for
 * an extent mapped ahead, nothing happened (it is tried again when it is needed). With less room
 * than a whole extent, an extent needed now takes the chunks that fit. */
static int map_extent_locked(size_t e, int ahead)
{
    if (e >= gm_log.extents_cap) {
        size_t ncap = gm_log.extents_cap ? gm_log.extents_cap * 2 : 64;
        while (ncap <= e)
            ncap *= 2;
        extent_t *n = realloc(gm_log.extents, ncap * sizeof *n);
        if (!n) {
            if (!ahead)
                logstate_stop_writing("out of host memory", ENOMEM);
            return -1;
        }
        gm_log.extents = n;
        gm_log.extents_cap = ncap;
    }
    int reused;
    uint32_t slot = pick_slot_locked(&reused);
    if (slot == NO_SLOT) {
        if (!ahead)
            logstate_stop_writing("out of host memory", ENOMEM);
        return -1;
    }
    off_t off = slot_offset(slot);
    uint32_t usable = EXTENT_CHUNKS;
    /* A reused slot's blocks are the file's already (cheap to reserve again); a copy-on-write
     * file system may still need new ones, found here rather than as a SIGBUS. */
    int err = logstate_reserve(gm_log.fd, off, (off_t)EXTENT_BYTES), short_err = err;
    while (err && !ahead && !reused && usable > 1) {
        usable /= 2;
        err = logstate_reserve(gm_log.fd, off, (off_t)usable * GMLOG_CHUNK_SIZE);
    }
    void *addr = err ? MAP_FAILED : mmap(NULL, EXTENT_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, gm_log.fd, off);
    if (addr == MAP_FAILED) {
        if (!reused)
            gm_log.nslots--;
        if (!ahead)
            logstate_stop_writing(err ? "cannot extend the file" : "cannot map the file", err ? err : errno);
        return -1;
    }
    if (reused && !gm_log.wrapped) {
        gm_log.wrapped = 1;
        __atomic_or_fetch(&gm_log.hdr->flags, GMLOG_F_WRAPPED, __ATOMIC_RELEASE);
    }
    gm_log.slot_owner[slot] = (uint32_t)e;
    extent_t *x = &gm_log.extents[e];
    memset(x, 0, sizeof *x);
    x->addr = addr;
    x->slot = slot;
    x->usable = usable;
    x->short_err = usable < EXTENT_CHUNKS ? short_err : 0;
    x->reused = reused;
    if (reused)
        memcpy(x->skip, gm_log.slot_held[slot], sizeof x->skip);
    gm_log.nextents = e + 1;
    return 0;
}

/* The mapping being faulted in outside gm_log.lock: not unmapped meanwhile (its address could be
 * handed to another mapping, whose pages the fault-in would then touch). gm_log.lock held. */
static uint8_t *populating;

#define POPULATE_PIECE ((size_t)2 << 20) /* bytes faulted in by one call (EXTENT_BYTES a multiple) */
_Static_assert(EXTENT_BYTES % POPULATE_PIECE == 0, "an extent is whole pieces");

/* Extent e, once all its chunks were claimed and given up, is unmapped: only the extents being
 * written stay mapped. Its pages stay in the page cache, the kernel's to write back and reclaim
 * (pushing them out early, or dropping them, slowed the writer: docs/performance.md, "The bounded
 * log"). It leaves the table here and is unmapped after the unlock (`after`): munmap waits for the
 * process's mappings, which a fault-in holds, and every writer would wait with it for the lock.
 * gm_log.lock held. */
static void maybe_unmap_locked(size_t e, after_unlock_t *after)
{
    extent_t *x = &gm_log.extents[e];
    if (!x->addr || x->open || gm_log.next_chunk < (uint64_t)(e + 1) * EXTENT_CHUNKS || x->addr == populating)
        return;
    if (after->nunmap < (int)GM_ARRAY_LEN(after->unmap))
        after->unmap[after->nunmap++] = x->addr;
    else
        munmap(x->addr, EXTENT_BYTES);
    x->addr = NULL;
}

/* This thread gives its chunk up (it claims another, or ends). Its release is timed now, or at
 * `rel` if later: never before a record the chunk holds (a caller may log records timed after
 * the one it is about to write). gm_log.lock held. */
void logring_release_chunk_locked(uint64_t rel, after_unlock_t *after)
{
    if (!gm_log_tls.chunk || gm_log_tls.gen != __atomic_load_n(&gm_log.gen, __ATOMIC_RELAXED))
        return;
    size_t e = (size_t)(gm_log_tls.chunk_index / EXTENT_CHUNKS);
    unsigned pos = (unsigned)(gm_log_tls.chunk_index % EXTENT_CHUNKS);
    gm_log_tls.chunk = NULL;
    if (e >= gm_log.nextents)
        return;
    uint64_t now = gm_now_ns() - gm_log.start_mono;
    if (now > rel)
        rel = now;
    extent_t *x = &gm_log.extents[e];
    if (x->open)
        x->open--;
    if (rel > x->last_release)
        x->last_release = rel;
    gm_log.slot_held[x->slot][pos / 64] &= ~(1ull << (pos % 64));
    maybe_unmap_locked(e, after);
}

/* Claims a fresh chunk for this thread. gm_log.lock held. The first chunk of an extent also maps the
 * next one, whose pages the helper thread then faults in: the writers find them present instead
 * of each faulting its own, one page at a time, and none of them waits for the 16 MiB. */
static uint8_t *claim_chunk_locked(uint64_t rel, after_unlock_t *after)
{
    if (gm_log.closed || !gm_log.enabled)
        return NULL;
    uint64_t idx;
    size_t e;
    extent_t *x;
    unsigned pos;
    for (;;) {
        idx = gm_log.next_chunk;
        e = (size_t)(idx / EXTENT_CHUNKS);
        pos = (unsigned)(idx % EXTENT_CHUNKS);
        if (e >= gm_log.nextents && map_extent_locked(e, 0))
            return NULL;
        x = &gm_log.extents[e];
        if (pos >= x->usable) {
            logstate_stop_writing("cannot extend the file", x->short_err ? x->short_err : ENOSPC);
            return NULL;
        }
        if (pos == 0) {
            if (x->usable == EXTENT_CHUNKS && e + 1 >= gm_log.nextents && map_extent_locked(e + 1, 1) == 0) {
                after->populate = e + 2;
                after->populate_gen = gm_log.gen;
            }
            if (e > 0)
                maybe_unmap_locked(e - 1, after);
            uint64_t every = gm_log.max_slots > 4 ? gm_log.max_slots / 2 - 1 : 1;
            if (gm_log.max_slots && !gm_log.ckpt_busy && e >= gm_log.ckpt_extent + every) {
                gm_log.ckpt_busy = 1;
                gm_log.ckpt_extent = e;
                after->checkpoint = 1;
            }
            x = &gm_log.extents[e]; /* mapping ahead may have moved the table */
        }
        gm_log.next_chunk++;
        if (!(x->skip[pos / 64] >> (pos % 64) & 1))
            break;
        /* an idle thread's chunk of an older extent: its records stay */
    }
    x->open++;
    gm_log.slot_held[x->slot][pos / 64] |= 1ull << (pos % 64);
    uint8_t *chunk = x->addr + (size_t)pos * GMLOG_CHUNK_SIZE;
    gmlog_chunk_header_t *ch = (gmlog_chunk_header_t *)chunk;
    if (x->reused) {
        /* An older chunk's records: gone before this one is used (its magic first). */
        __atomic_store_n(&ch->magic, 0, __ATOMIC_RELEASE);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        memset(chunk + sizeof ch->magic, 0, GMLOG_CHUNK_SIZE - sizeof ch->magic);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
    }
    if (!gm_log_tls.tid)
        gm_log_tls.tid = (uint32_t)syscall(SYS_gettid);
    ch->tid = gm_log_tls.tid;
    ch->index = idx;
    ch->base_ns = rel;
    ch->thread_chunk = gm_log_tls.nchunks++;
    __atomic_store_n(&ch->magic, GMLOG_CHUNK_MAGIC, __ATOMIC_RELEASE);
    gm_log_tls.chunk_index = idx;
    return chunk;
}

GM_NOINLINE int logring_switch_chunk(uint64_t rel)
{
    after_unlock_t after = {0};
    pthread_mutex_lock(&gm_log.lock);
    logring_release_chunk_locked(rel, &after);
    uint8_t *chunk = claim_chunk_locked(rel, &after);
    pthread_mutex_unlock(&gm_log.lock);
    logring_after_unlock(&after);
    if (!chunk) {
        gm_log_tls.chunk = NULL;
        return -1;
    }
    if (gm_log.exit_key_made && (!gm_log_tls.exit_hooked || !pthread_getspecific(evlog_exit_key))) {
        gm_log_tls.exit_hooked = 1;
        pthread_setspecific(evlog_exit_key, (void *)1);
    }
    gm_log_tls.chunk = chunk;
    gm_log_tls.used = sizeof(gmlog_chunk_header_t);
    gm_log_tls.base = rel;
    gm_log_tls.gen = __atomic_load_n(&gm_log.gen, __ATOMIC_RELAXED);
    return 0;
}

/* A thread that ends gives up its chunk, so that its extent can be unmapped (and reused). */
void logring_thread_exit(void *unused)
{
    (void)unused;
    if (!gm_log_tls.chunk)
        return;
    after_unlock_t after = {0};
    pthread_mutex_lock(&gm_log.lock);
    logring_release_chunk_locked(gm_now_ns() - gm_log.start_mono, &after);
    pthread_mutex_unlock(&gm_log.lock);
    logring_after_unlock(&after);
}

/* Faults in the pages of extent e, if it is still this log's and mapped: the helper thread's
 * work (or the caller's, where that thread cannot run). Best effort: an old kernel refuses it, the
 * log closed meanwhile makes it fail (past the file's end it reports EFAULT, no SIGBUS); nothing
 * depends on it. */
static void populate_extent(size_t e, unsigned gen)
{
    pthread_mutex_lock(&gm_log.lock);
    uint8_t *addr = NULL;
    if (gen == gm_log.gen && e < gm_log.nextents && !gm_log.closed && !populating)
        addr = populating = gm_log.extents[e].addr;
    pthread_mutex_unlock(&gm_log.lock);
    if (!addr)
        return;
#ifdef MADV_POPULATE_WRITE
    /* In pieces: each call holds the process's mappings (read) while it faults its pages in, and
     * a writer's mmap or munmap waits for the piece, not the whole extent. */
    for (size_t off = 0; off < EXTENT_BYTES; off += POPULATE_PIECE)
        if (madvise(addr + off, POPULATE_PIECE, MADV_POPULATE_WRITE) != 0)
            break;
#endif
    after_unlock_t after = {0};
    pthread_mutex_lock(&gm_log.lock);
    populating = NULL;
    if (gen == gm_log.gen && e < gm_log.nextents && gm_log.extents[e].addr == addr)
        maybe_unmap_locked(e, &after); /* its writers may all have moved on meanwhile */
    pthread_mutex_unlock(&gm_log.lock);
    logring_after_unlock(&after);
}

void logring_after_unlock(const after_unlock_t *after)
{
    for (int i = 0; i < after->nunmap; i++)
        munmap(after->unmap[i], EXTENT_BYTES);
    if (after->populate &&
        logstate_request_populate(populate_extent, after->populate - 1, after->populate_gen) != 0)
        populate_extent(after->populate - 1, after->populate_gen);
    if (after->checkpoint)
        logstate_checkpoint_request();
}

/* In a fork child, the one thread left: no fault-in is under way. */
void logring_forget(void)
{
    populating = NULL;
    for (size_t i = 0; i < gm_log.nextents; i++)
        if (gm_log.extents[i].addr)
            munmap(gm_log.extents[i].addr, EXTENT_BYTES);
    free(gm_log.extents);
    free(gm_log.slot_owner);
    free(gm_log.slot_held);
    gm_log.extents = NULL;
    gm_log.slot_owner = NULL;
    gm_log.slot_held = NULL;
    gm_log.nextents = gm_log.extents_cap = 0;
    gm_log.nslots = gm_log.slots_cap = 0;
}
