/* The background trimmer: GMSHIM_EMPTY_CACHE_INTERVAL / GMSHIM_IDLE_RELEASE, and the polling that
 * makes GMSHIM_CACHE_LIMIT hold once frees stop. Started at the first CUDA call only if one of
 * them is set; never touches a device while a capture is under way there. */
#ifndef GM_TRIM_H
#define GM_TRIM_H

/* How often the trimmer polls fences while freed memory over the cache cap waits for them. */
#define GM_CACHE_POLL_MS 10

void trim_start(void);
/* Stops and joins the thread (exit path). */
void trim_stop(void);
/* A fork child has no trimmer: forget the parent's. */
void trim_forget(void);
/* A free left more cached and pending bytes than GMSHIM_CACHE_LIMIT: the trimmer records a
 * fence over them and polls it every GM_CACHE_POLL_MS until they are in and the cap holds. Cheap
 * when already asked (one atomic load); never blocks on the GPU. */
void trim_cache_kick(void);
/* The cache above gmshim's pool (PyTorch's, through the bridge): emptied at each periodic pass,
 * before gmshim's own segments go back. `idle_ns` is GMSHIM_IDLE_RELEASE (0: unconditional); the
 * function decides whether its allocator has been idle that long. Called from the trimmer thread
 * with no gmshim lock held and the hooks live. */
typedef void (*trim_upstream_fn)(unsigned long long idle_ns);
void trim_set_upstream(trim_upstream_fn fn);


#endif
