/* The background trimmer: GMSHIM_EMPTY_CACHE_INTERVAL / GMSHIM_IDLE_RELEASE. Started at the first
 * CUDA call only if asked for; never touches a device while a capture is under way there. */
#ifndef GM_TRIM_H
#define GM_TRIM_H

void trim_start(void);
/* Stops and joins the thread (exit path). */
void trim_stop(void);
/* A fork child has no trimmer: forget the parent's. */
void trim_forget(void);

#endif
