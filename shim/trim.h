/* The background trimmer: GMSHIM_EMPTY_CACHE_INTERVAL / GMSHIM_IDLE_RELEASE, and the polling that
 * makes GMSHIM_CACHE_LIMIT hold once frees stop. Started at the first CUDA call only if one of
 * them is set; never touches a device while a capture is under way there. */
#ifndef GM_TRIM_H
#define GM_TRIM_H

/* How often the trimmer polls fences while freed memory over the cache cap waits for them. */
#define GM_CACHE_POLL_MS 10

typedef struct gm_device gm_device_t;

void trim_start(void);
/* Stops and joins the thread (exit path). */
void trim_stop(void);
/* A fork child has no trimmer: forget the parent's. */
void trim_forget(void);
/* A free left more cached and pending bytes than GMSHIM_CACHE_LIMIT: the trimmer records a
 * fence over them and polls it every GM_CACHE_POLL_MS until they are in and the cap holds. Cheap
 * when already asked (one atomic load); never blocks on the GPU. */
void trim_cache_kick(void);

/* The trimmer's pass for GMSHIM_CACHE_LIMIT (device.c, where the pool's locks are): fences the
 * device's uncovered frees, takes in what completed fences released (non-blocking queries), and
 * returns the oldest whole free segments of all its arenas beyond the cap. Nothing while a capture
 * is under way there. Sets *waiting when freed memory over the cap still waits for the GPU (or a
 * capture), so that the trimmer polls again. Returns the bytes released. */
unsigned long long device_cache_trim(gm_device_t *d, int *waiting);

#endif
