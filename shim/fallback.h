/* Degrading to pass-through after an internal failure: the host program goes on without the
 * pool. */
#ifndef GM_FALLBACK_H
#define GM_FALLBACK_H

/* One warning, one WARNING record, then pass-through for good. */
void fallback_engage(const char *why);

#endif
