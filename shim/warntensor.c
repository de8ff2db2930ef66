/* GMSHIM_WARN's figures of PyTorch's tensors (warntensor.h). An event adds or subtracts a counter
 * and compares a low-water mark; the table of tensors by site exists only while warn.c has a
 * device armed (a run of rising steps), under a lock of its own that no other lock is taken under
 * and that is never held while calling out. A failure (no memory) leaves the site unnamed. */
#include "warntensor.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

warntensor_dev_t warntensor_devs[GM_MAX_DEVICES];
int warntensor_on;
uint64_t warntensor_armed;

typedef struct kept {
    uint64_t addr, bytes;
    uint32_t site, epoch;
    uint8_t dev, used;
} kept_t;

static struct {
    pthread_mutex_t lock;
    kept_t *e;
    size_t n, cap;                /* cap: 0 or a power of two */
    uint32_t epoch[GM_MAX_DEVICES];
} K = {.lock = PTHREAD_MUTEX_INITIALIZER};

static size_t slot_of(uint64_t addr, size_t cap)
{
    return (size_t)((addr >> 9) * 0x9E3779B97F4A7C15ull >> 17) & (cap - 1);
}

static kept_t *find(uint64_t addr)
{
    for (size_t i = K.cap ? slot_of(addr, K.cap) : 0; K.cap; i = (i + 1) & (K.cap - 1)) {
        if (!K.e[i].used)
            return NULL;
        if (K.e[i].addr == addr)
            return &K.e[i];
    }
    return NULL;
}

static int grow(void)
{
    size_t ncap = K.cap ? K.cap * 2 : 256;
    kept_t *n = calloc(ncap, sizeof *n);
    if (!n)
        return -1;
    for (size_t i = 0; i < K.cap; i++) {
        if (!K.e[i].used)
            continue;
        size_t j = slot_of(K.e[i].addr, ncap);
        while (n[j].used)
            j = (j + 1) & (ncap - 1);
        n[j] = K.e[i];
    }
    free(K.e);
    K.e = n;
    K.cap = ncap;
    return 0;
}

/* Removes entry i, shifting the run after it back (no tombstones). */
static void remove_at(size_t i)
{
    size_t cap = K.cap;
    K.e[i].used = 0;
    K.n--;
    for (size_t j = (i + 1) & (cap - 1); K.e[j].used; j = (j + 1) & (cap - 1)) {
        size_t home = slot_of(K.e[j].addr, cap);
        if (i <= j ? (home > i && home <= j) : (home > i || home <= j))
            continue;
        K.e[i] = K.e[j];
        K.e[j].used = 0;
        i = j;
    }
}

void warntensor_keep(int dev, uint64_t addr, uint64_t bytes, uint32_t site)
{
    pthread_mutex_lock(&K.lock);
    kept_t *e = find(addr);
    if (e)
        remove_at((size_t)(e - K.e)); /* its free was never seen: the address is the new tensor's */
    /* armed may have been cleared meanwhile: a stray entry of a disarmed device is dropped at the
     * next arm, and never counted (site_bytes reads armed devices only). */
    if ((K.n + 1) * 4 <= K.cap * 3 || grow() == 0) {
        size_t i = slot_of(addr, K.cap);
        while (K.e[i].used)
            i = (i + 1) & (K.cap - 1);
        K.e[i] = (kept_t){addr, bytes, site, K.epoch[dev], (uint8_t)dev, 1};
        K.n++;
    }
    pthread_mutex_unlock(&K.lock);
}

void warntensor_drop(int dev, uint64_t addr)
{
    (void)dev;
    pthread_mutex_lock(&K.lock);
    kept_t *e = find(addr);
    if (e)
        remove_at((size_t)(e - K.e));
    pthread_mutex_unlock(&K.lock);
}

void warntensor_enable(void)
{
    for (int i = 0; i < GM_MAX_DEVICES; i++)
        leakwarn_tap_init(&warntensor_devs[i].tap);
    __atomic_store_n(&warntensor_on, 1, __ATOMIC_RELEASE);
}

int warntensor_seen(int dev)
{
    return (unsigned)dev < GM_MAX_DEVICES && __atomic_load_n(&warntensor_devs[dev].seen, __ATOMIC_ACQUIRE);
}

void warntensor_take_low(int dev, uint64_t *low, uint64_t *now)
{
    warntensor_dev_t *d = &warntensor_devs[dev];
    int64_t c = __atomic_load_n(&d->live, __ATOMIC_RELAXED);
    /* Below 0 only if tensors made before the count began were freed: none are the program's. */
    *now = c > 0 ? (uint64_t)c : 0;
    *low = leakwarn_tap_take_low(&d->tap, *now);
}

leakwarn_tap_t *warntensor_tap(int dev)
{
    return &warntensor_devs[dev].tap;
}

void warntensor_step(int dev)
{
    pthread_mutex_lock(&K.lock);
    K.epoch[dev]++;
    pthread_mutex_unlock(&K.lock);
}

/* Forgets dev's entries. Lock held. */
static void clear_dev(int dev)
{
    for (size_t i = 0; i < K.cap;) {
        if (K.e[i].used && K.e[i].dev == dev)
            remove_at(i); /* an entry shifted into i is looked at next */
        else
            i++;
    }
}

void warntensor_arm(int dev)
{
    pthread_mutex_lock(&K.lock);
    clear_dev(dev);
    __atomic_or_fetch(&warntensor_armed, 1ull << dev, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&K.lock);
}

void warntensor_disarm(int dev)
{
    pthread_mutex_lock(&K.lock);
    __atomic_and_fetch(&warntensor_armed, ~(1ull << dev), __ATOMIC_RELAXED);
    clear_dev(dev);
    if (!K.n) {
        free(K.e);
        K.e = NULL;
        K.cap = 0;
    }
    pthread_mutex_unlock(&K.lock);
}

size_t warntensor_site_bytes(int dev, gm_site_bytes_t **out)
{
    size_t n = 0;
    *out = NULL;
    pthread_mutex_lock(&K.lock);
    size_t want = K.n;
    /* Made before the step before this one began: alive through a whole step and its low. */
    uint32_t before = K.epoch[dev] - 1;
    gm_site_bytes_t *v = want && (warntensor_armed >> dev & 1) ? malloc(want * sizeof *v) : NULL;
    for (size_t i = 0; v && i < K.cap; i++) {
        const kept_t *e = &K.e[i];
        if (e->used && e->dev == dev && e->site && (int32_t)(before - e->epoch) > 0)
            v[n++] = (gm_site_bytes_t){e->site, e->bytes};
    }
    pthread_mutex_unlock(&K.lock);
    if (!v || !n) {
        free(v);
        return 0;
    }
    *out = v;
    return device_site_bytes_merge(v, n);
}

void warntensor_forget(void)
{
    __atomic_store_n(&warntensor_on, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&warntensor_armed, 0, __ATOMIC_RELAXED);
    /* The lock may have been copied held by a thread the child does not have. */
    pthread_mutex_init(&K.lock, NULL);
}
