/* GMSHIM_WARN: the early warning of a leak, printed once to stderr by the shim itself. Each step's
 * low-water mark of allocated bytes (at marks, else at troughs seen by a thread that reads the
 * figures every few milliseconds: PyTorch's tensors' when the bridge forwards them, else the
 * pool's, pass-through included) goes through common/leakwarn.c's rule; nothing runs on the hot
 * path but a low-water compare (the pool's, or a tensor event's beside its counter). Off by
 * default; a failure skips the warning. */
#ifndef GM_WARN_H
#define GM_WARN_H

/* How often the thread reads each device's low-water mark and allocated bytes. */
#define GM_WARN_PERIOD_MS 10

/* At the first CUDA call, gm_state set: starts the thread when GMSHIM_WARN is on. It reads while
 * gm_state stays as it was (pooled, or GMSHIM_POOL=0): a fall back to pass-through ends it. */
void warn_start(void);
/* gmshim_mark: one step ended on every device. */
void warn_mark(void);
/* Stops and joins the thread (exit path). */
void warn_stop(void);
/* A fork child has no thread and forgets the parent's steps. */
void warn_forget(void);

#endif
