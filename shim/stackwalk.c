/* A stack walker that caches, per thread, the rule of each return address it met (cfi.c reads it
 * from the unwind tables: where the caller's frame starts, where its frame pointer was saved), so
 * that a frame costs a cache probe and two loads, and remembers its recent walks, so that a stack
 * met before costs a compare a word. It must never read outside the thread's own stack and never
 * guess: any frame whose rule it does not follow makes the whole walk -1, and the caller uses
 * backtrace(). */
#include "stackwalk.h"
#include "cfi.h"
#include "common.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__linux__)

/* Per thread: 4096 sets of two rules (128 KiB), for the distinct frames of a framework's calls;
 * the memory is touched only where used. */
#define RULE_SETS_LOG2 12
#define NRULES (2u << RULE_SETS_LOG2)

/* A walk remembered: where it started, every word it read and what it read there. The walk is a
 * function of its start and of those words alone, so when they all still hold, walking again
 * would give the same frames: the caller's value for them (a site id) stands. Words are kept by
 * their offset from the start, in 8-byte units. Sets of a few ways, since different sites often
 * start at the same stack pointer. */
#define MEMO_SETS_LOG2 6
#define MEMO_SETS (1u << MEMO_SETS_LOG2)
#define MEMO_WAYS 4
#define MEMO_LOADS 136 /* two words a frame (return address, saved frame pointer) for 64 frames */

typedef struct memo {
    uintptr_t sp, bp;
    uint64_t ctx;
    uint32_t value;
    int16_t max, nloads; /* nloads -1: nothing filed */
    uint16_t off[MEMO_LOADS];
    uintptr_t word[MEMO_LOADS];
} memo_t;

typedef struct memo_set {
    memo_t way[MEMO_WAYS];
    uint8_t mru, victim;
} memo_set_t;

typedef struct uw_thread {
    uintptr_t lo, hi; /* the thread's stack */
    int usable;       /* 1 bounds known, -1 unknown (every walk is -1) */
    int recording;    /* the walk under way notes its loads in `rec` */
    int pend;         /* a restored frame pointer not yet used by the walk: pend_at, pend_word */
    uintptr_t pend_at, pend_word;
    unsigned long long cached, computed, remembered, walks;
    memo_t rec;       /* the last walk, until stackwalk_remember files it */
    memo_set_t memo[MEMO_SETS];
    rule_t rules[NRULES];
} uw_thread_t;

static __thread uw_thread_t *self_uw __attribute__((tls_model("initial-exec")));
static pthread_key_t uw_key;
static pthread_once_t uw_once = PTHREAD_ONCE_INIT;
static int uw_key_ok;

/* At thread exit. A later destructor of another key may still call a hook on this thread: it
 * then starts afresh instead of reading freed memory. */
/* Every thread's state, for the totals at exit: the live ones listed, the ended ones summed. */
#define REGISTRY 256
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static uw_thread_t *registry[REGISTRY];
static unsigned long long ended[3]; /* walks, remembered, computed */

#define COUNT(t, field) __atomic_store_n(&(t)->field, (t)->field + 1, __ATOMIC_RELAXED) /* own thread only */

static void registry_add(uw_thread_t *t)
{
    pthread_mutex_lock(&registry_lock);
    for (int i = 0; i < REGISTRY; i++)
        if (!registry[i]) {
            registry[i] = t;
            break;
        }
    pthread_mutex_unlock(&registry_lock);
}

static void uw_free(void *p)
{
    uw_thread_t *t = p;
    pthread_mutex_lock(&registry_lock);
    for (int i = 0; i < REGISTRY; i++)
        if (registry[i] == t)
            registry[i] = NULL;
    ended[0] += t->walks;
    ended[1] += t->remembered;
    ended[2] += t->computed;
    pthread_mutex_unlock(&registry_lock);
    self_uw = NULL;
    free(p);
}

static void uw_key_create(void)
{
    uw_key_ok = pthread_key_create(&uw_key, uw_free) == 0;
}

static uw_thread_t *uw_thread(void)
{
    if (likely(self_uw != NULL))
        return self_uw;
    pthread_once(&uw_once, uw_key_create);
    if (!uw_key_ok)
        return NULL;
    uw_thread_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    pthread_attr_t attr;
    void *addr;
    size_t size;
    t->usable = -1;
    t->rec.nloads = -1;
    for (unsigned i = 0; i < MEMO_SETS; i++)
        for (int w = 0; w < MEMO_WAYS; w++)
            t->memo[i].way[w].nloads = -1;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        if (pthread_attr_getstack(&attr, &addr, &size) == 0 && size) {
            t->lo = (uintptr_t)addr;
            t->hi = (uintptr_t)addr + size;
            t->usable = 1;
        }
        pthread_attr_destroy(&attr);
    }
    pthread_setspecific(uw_key, t);
    registry_add(t);
    self_uw = t;
    return t;
}

/* ---- the walk ---- */

typedef struct regs {
    uintptr_t pc, sp, bp;
} regs_t;

/* The caller's return address, stack pointer after the return, and frame pointer. */
void gm_unwind_regs(regs_t *r);
__asm__(".pushsection .text\n"
        ".p2align 4\n"
        ".hidden gm_unwind_regs\n"
        ".type gm_unwind_regs,@function\n"
        "gm_unwind_regs:\n"
        "  movq (%rsp), %rax\n"
        "  movq %rax, 0(%rdi)\n"
        "  leaq 8(%rsp), %rax\n"
        "  movq %rax, 8(%rdi)\n"
        "  movq %rbp, 16(%rdi)\n"
        "  ret\n"
        ".size gm_unwind_regs, .-gm_unwind_regs\n"
        ".popsection\n");

static inline int in_stack(const uw_thread_t *t, uintptr_t sp, uintptr_t addr)
{
    return addr >= sp && addr <= t->hi - 8 && !(addr & 7);
}

/* A word the walk read, noted when the walk is being recorded. */
static inline void note(uw_thread_t *t, uintptr_t at, uintptr_t w)
{
    memo_t *m = &t->rec;
    uintptr_t off = (at - m->sp) / 8; /* at >= sp: in_stack checked it */
    if (m->nloads >= 0 && m->nloads < MEMO_LOADS && off <= UINT16_MAX) {
        m->off[m->nloads] = (uint16_t)off;
        m->word[m->nloads++] = w;
    } else {
        m->nloads = -1; /* too long or too far to remember */
    }
}

__attribute__((no_sanitize("address"))) static inline uintptr_t load(uw_thread_t *t, uintptr_t at)
{
    uintptr_t w = *(const uintptr_t *)at;
    if (t->recording)
        note(t, at, w);
    return w;
}

/* A caller's frame pointer restored. Code built without frame pointers keeps data in that
 * register, which differs from call to call; the walk depends on the word only if a later frame
 * uses it (use_bp), so only then is it noted, and a stack with other data there still matches. */
__attribute__((no_sanitize("address"))) static inline uintptr_t load_bp(uw_thread_t *t, uintptr_t at)
{
    uintptr_t w = *(const uintptr_t *)at;
    if (t->recording) {
        t->pend_at = at;
        t->pend_word = w;
        t->pend = 1;
    }
    return w;
}

static inline void use_bp(uw_thread_t *t)
{
    if (t->pend) {
        t->pend = 0;
        note(t, t->pend_at, t->pend_word);
    }
}

/* One frame up. 1: moved; 0: the stack ends here; -1: not followed. */
__attribute__((no_sanitize("address"))) static int step(uw_thread_t *t, regs_t *r)
{
    rule_t *set = &t->rules[2 * ((r->pc * 0x9E3779B97F4A7C15ull) >> (64 - RULE_SETS_LOG2))], *slot = set;
    if (likely(set[0].pc == r->pc)) {
        t->cached++;
    } else if (set[1].pc == r->pc) {
        t->cached++;
        slot = set + 1;
    } else {
        set[1] = set[0]; /* the newer of the two stays first */
        set[0] = cfi_rule_for(r->pc);
        COUNT(t, computed);
    }
    uintptr_t cfa;
    switch (slot->cfa_kind) {
    case CFA_SP: cfa = r->sp + (intptr_t)slot->cfa_off; break;
    case CFA_BP:
        use_bp(t);
        cfa = r->bp + (intptr_t)slot->cfa_off;
        break;
    case CFA_DEREF_BP: {
        use_bp(t);
        uintptr_t at = r->bp + (intptr_t)slot->cfa_off;
        if (!in_stack(t, r->sp, at))
            return -1;
        cfa = load(t, at);
        break;
    }
    case CFA_END: return 0;
    default: return -1;
    }
    if (cfa <= r->sp || !in_stack(t, r->sp, cfa - 8))
        return -1;
    uintptr_t bp = r->bp;
    if (slot->bp_kind != BP_SAME) {
        if (slot->bp_kind == BP_AT_BP)
            use_bp(t);
        uintptr_t at = (slot->bp_kind == BP_AT_CFA ? cfa : r->bp) + (intptr_t)slot->bp_off;
        if (!in_stack(t, r->sp, at))
            return -1;
        bp = load_bp(t, at);
    }
    r->pc = load(t, cfa - 8);
    r->sp = cfa;
    r->bp = bp;
    return 1;
}

/* From the state after our own frame: the frames, as backtrace() gives them. */
static int walk(uw_thread_t *t, regs_t *r, void **out, int max)
{
    int n = 0;
    while (n < max) {
        if (!r->pc)
            break;
        out[n++] = (void *)r->pc;
        int s = step(t, r);
        if (s < 0)
            return -1;
        if (s == 0)
            break;
    }
    return n;
}

static uw_thread_t *usable_thread(const regs_t *r, int max)
{
    uw_thread_t *t = uw_thread();
    if (!t || t->usable != 1 || max <= 0)
        return NULL;
    if (r->sp < t->lo || r->sp >= t->hi)
        return NULL; /* on another stack (a signal stack, a coroutine's): bounds unknown */
    return t;
}

__attribute__((noinline)) int stackwalk_backtrace(void **out, int max)
{
    regs_t r;
    gm_unwind_regs(&r);
    uw_thread_t *t = usable_thread(&r, max);
    /* Our own frame first: backtrace() starts at its caller's. */
    if (!t || step(t, &r) != 1)
        return -1;
    return walk(t, &r, out, max);
}

static memo_set_t *memo_set(uw_thread_t *t, uintptr_t sp, uint64_t ctx)
{
    return &t->memo[((sp ^ ctx) * 0x9E3779B97F4A7C15ull) >> (64 - MEMO_SETS_LOG2)];
}

/* Whether memo m holds for the stack from sp. */
__attribute__((no_sanitize("address"))) static int memo_holds(const memo_t *m, const regs_t *r, uint64_t ctx,
                                                            int max)
{
    if (m->nloads < 0 || m->sp != r->sp || m->bp != r->bp || m->ctx != ctx || m->max != max)
        return 0;
    const uintptr_t *base = (const uintptr_t *)r->sp;
    for (int i = 0; i < m->nloads; i++)
        if (base[m->off[i]] != m->word[i])
            return 0;
    return 1;
}

__attribute__((noinline)) int stackwalk_backtrace_memo(void **out, int max, uint64_t ctx, uint32_t *value)
{
    regs_t r;
    gm_unwind_regs(&r);
    uw_thread_t *t = usable_thread(&r, max);
    if (!t || max > INT16_MAX)
        return -1;
    memo_set_t *set = memo_set(t, r.sp, ctx);
    COUNT(t, walks);
    for (int k = 0; k < MEMO_WAYS; k++) {
        int w = (set->mru + k) % MEMO_WAYS; /* the way that answered last, first */
        if (memo_holds(&set->way[w], &r, ctx, max)) {
            set->mru = (uint8_t)w;
            COUNT(t, remembered);
            *value = set->way[w].value;
            return -2;
        }
    }
    t->rec.sp = r.sp;
    t->rec.bp = r.bp;
    t->rec.ctx = ctx;
    t->rec.max = (int16_t)max;
    t->rec.nloads = 0;
    t->pend = 0; /* the starting frame pointer is in the memo's key */
    t->recording = 1;
    int n = step(t, &r) == 1 ? walk(t, &r, out, max) : -1;
    t->recording = 0;
    if (n < 0)
        t->rec.nloads = -1;
    return n;
}

void stackwalk_remember(uint32_t value)
{
    uw_thread_t *t = self_uw;
    if (!t || t->rec.nloads < 0)
        return;
    memo_set_t *set = memo_set(t, t->rec.sp, t->rec.ctx);
    int w = set->victim;
    set->victim = (uint8_t)((w + 1) % MEMO_WAYS);
    set->mru = (uint8_t)w;
    memo_t *m = &set->way[w];
    size_t n = (size_t)t->rec.nloads;
    memcpy(m, &t->rec, offsetof(memo_t, off) + n * sizeof m->off[0]);
    memcpy(m->word, t->rec.word, n * sizeof m->word[0]);
    m->value = value;
    t->rec.nloads = -1;
}

void stackwalk_totals(unsigned long long *walks, unsigned long long *remembered, unsigned long long *computed)
{
    pthread_mutex_lock(&registry_lock);
    *walks = ended[0];
    *remembered = ended[1];
    *computed = ended[2];
    for (int i = 0; i < REGISTRY; i++) {
        const uw_thread_t *t = registry[i];
        if (!t)
            continue;
        *walks += __atomic_load_n(&t->walks, __ATOMIC_RELAXED);
        *remembered += __atomic_load_n(&t->remembered, __ATOMIC_RELAXED);
        *computed += __atomic_load_n(&t->computed, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&registry_lock);
}

void stackwalk_counts(unsigned long long *cached, unsigned long long *computed, unsigned long long *remembered)
{
    uw_thread_t *t = self_uw;
    *cached = t ? t->cached : 0;
    *computed = t ? t->computed : 0;
    *remembered = t ? t->remembered : 0;
}

#else /* not x86-64 Linux: backtrace() does it all */

int stackwalk_backtrace(void **out, int max)
{
    (void)out;
    (void)max;
    return -1;
}

int stackwalk_backtrace_memo(void **out, int max, uint64_t ctx, uint32_t *value)
{
    (void)out;
    (void)max;
    (void)ctx;
    (void)value;
    return -1;
}

void stackwalk_remember(uint32_t value)
{
    (void)value;
}

void stackwalk_counts(unsigned long long *cached, unsigned long long *computed, unsigned long long *remembered)
{
    *cached = *computed = *remembered = 0;
}

void stackwalk_totals(unsigned long long *walks, unsigned long long *remembered, unsigned long long *computed)
{
    *walks = *remembered = *computed = 0;
}

#endif
