/* The driver's stream functions and dlsym, exported so that streams made below the runtime join
 * the fences (drvhooks.c). CUresult is an int; streams and contexts are pointers. */
#ifndef GM_DRVHOOKS_H
#define GM_DRVHOOKS_H

int cuStreamCreate(void **ph, unsigned flags);
int cuStreamCreateWithPriority(void **ph, unsigned flags, int prio);
int cuStreamDestroy(void *s);
int cuStreamDestroy_v2(void *s);
int cuGreenCtxStreamCreate(void **ph, void *green, unsigned flags, int prio);
int cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags);
int cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status);
/* The exported dlsym's first step: a wrapper for a watched name, else NULL (glibc's answers). */
void *drvhooks_dlsym_filter(void *handle, const char *name);

#endif
