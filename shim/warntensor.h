/* GMSHIM_WARN's figures of PyTorch's tensors, when the bridge forwards them (torchev.c): per
 * device the live bytes of tensors and their low-water mark, which is all an event touches; near
 * a warning only (warn.c arms a device) each new tensor's site is also kept, so that the site
 * whose tensors outlive the steps can be named. Never a failure that reaches PyTorch. */
#ifndef GM_WARNTENSOR_H
#define GM_WARNTENSOR_H

#include "common.h"
#include "device.h"

typedef struct warntensor_dev {
    int64_t live;                 /* bytes of live tensors (requested), freed at FREE_REQUESTED */
    leakwarn_tap_t tap;           /* live's troughs, fed under PyTorch's allocator lock */
    uint8_t seen;                 /* a tensor event came for this device */
} __attribute__((aligned(64))) warntensor_dev_t;

extern warntensor_dev_t warntensor_devs[GM_MAX_DEVICES];
extern int warntensor_on;         /* GMSHIM_WARN is on: the events are counted */
extern uint64_t warntensor_armed; /* bit d: device d's new tensors are kept by site */

void warntensor_keep(int dev, uint64_t addr, uint64_t bytes, uint32_t site);
void warntensor_drop(int dev, uint64_t addr);

/* A tensor of `bytes` allocated on dev at addr, from `site` (the bridge's event). */
static inline void warntensor_alloc(int dev, uint64_t addr, uint64_t bytes, uint32_t site)
{
    if (likely(!__atomic_load_n(&warntensor_on, __ATOMIC_RELAXED)) || (unsigned)dev >= GM_MAX_DEVICES)
        return;
    warntensor_dev_t *d = &warntensor_devs[dev];
    int64_t v = __atomic_add_fetch(&d->live, (int64_t)bytes, __ATOMIC_RELAXED);
    leakwarn_tap_feed(&d->tap, v > 0 ? (uint64_t)v : 0);
    if (unlikely(!d->seen))
        __atomic_store_n(&d->seen, 1, __ATOMIC_RELEASE);
    if (unlikely(__atomic_load_n(&warntensor_armed, __ATOMIC_RELAXED) >> dev & 1))
        warntensor_keep(dev, addr, bytes, site);
}

/* Its free requested: no longer the program's, whenever PyTorch reuses the block. */
static inline void warntensor_free(int dev, uint64_t addr, uint64_t bytes)
{
    if (likely(!__atomic_load_n(&warntensor_on, __ATOMIC_RELAXED)) || (unsigned)dev >= GM_MAX_DEVICES)
        return;
    warntensor_dev_t *d = &warntensor_devs[dev];
    int64_t v = __atomic_sub_fetch(&d->live, (int64_t)bytes, __ATOMIC_RELAXED);
    leakwarn_tap_feed(&d->tap, v > 0 ? (uint64_t)v : 0);
    if (unlikely(__atomic_load_n(&warntensor_armed, __ATOMIC_RELAXED) >> dev & 1))
        warntensor_drop(dev, addr);
}

/* GMSHIM_WARN's thread is starting: count from now on. */
void warntensor_enable(void);
/* Whether tensor events came for dev: then its steps are the tensors', not the pool's. */
int warntensor_seen(int dev);
/* The least live bytes since the last call (or the figure now, if less) and the figure now. */
void warntensor_take_low(int dev, uint64_t *low, uint64_t *now);
/* dev's troughs of live bytes, found as tensors come and go (read without a lock). */
leakwarn_tap_t *warntensor_tap(int dev);
/* One step of dev ended (the system its warning follows): tensors made before the step before
 * this one and still live have outlived a step's low. */
void warntensor_step(int dev);
/* Starts keeping dev's new tensors by site, from nothing; disarm forgets them and stops. */
void warntensor_arm(int dev);
void warntensor_disarm(int dev);
/* Live bytes per site, in site order, of the tensors kept since arming that outlived a step's
 * low (*out malloc'd, NULL with 0 when none or out of memory). */
size_t warntensor_site_bytes(int dev, gm_site_bytes_t **out);
/* A fork child: nothing is counted or kept. */
void warntensor_forget(void);

#endif
