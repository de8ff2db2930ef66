/* Preloaded into the golden runs (tests/golden/golden.sh): opening an absolute path outside the
 * directories listed in $CONFINE_ROOTS (colon-separated; /dev/ is always allowed) fails with
 * ENOENT, so a run sees what a fresh clone on a new machine has. A test tool: never linked into
 * gmshim; without CONFINE_ROOTS it lets everything through. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

static int confine_allows(const char *path)
{
    const char *roots = getenv("CONFINE_ROOTS");
    if (!roots || !path || path[0] != '/' || !strncmp(path, "/dev/", 5))
        return 1;
    for (const char *r = roots; *r;) {
        size_t n = strcspn(r, ":");
        while (n > 1 && r[n - 1] == '/')
            n--;
        if (n && !strncmp(path, r, n) && (path[n] == '/' || path[n] == '\0'))
            return 1;
        r += strcspn(r, ":");
        if (*r == ':')
            r++;
    }
    return 0;
}

static void *confine_next(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

/* The mode argument is read only when the flags can create a file, as open(2) does. */
#define CONFINE_MODE(flags, mode)                                                                  \
    do {                                                                                           \
        if ((flags) & (O_CREAT | O_TMPFILE)) {                                                     \
            va_list ap;                                                                            \
            va_start(ap, flags);                                                                   \
            mode = (mode_t)va_arg(ap, int);                                                        \
            va_end(ap);                                                                            \
        }                                                                                          \
    } while (0)

#define CONFINE_OPEN(name)                                                                         \
    int name(const char *path, int flags, ...)                                                     \
    {                                                                                              \
        mode_t mode = 0;                                                                           \
        CONFINE_MODE(flags, mode);                                                                 \
        if (!confine_allows(path)) {                                                               \
            errno = ENOENT;                                                                        \
            return -1;                                                                             \
        }                                                                                          \
        int (*next)(const char *, int, ...) = (int (*)(const char *, int, ...))confine_next(#name); \
        return next ? next(path, flags, mode) : (errno = ENOSYS, -1);                              \
    }

#define CONFINE_OPENAT(name)                                                                       \
    int name(int dirfd, const char *path, int flags, ...)                                          \
    {                                                                                              \
        mode_t mode = 0;                                                                           \
        CONFINE_MODE(flags, mode);                                                                 \
        if (!confine_allows(path)) {                                                               \
            errno = ENOENT;                                                                        \
            return -1;                                                                             \
        }                                                                                          \
        int (*next)(int, const char *, int, ...) =                                                 \
            (int (*)(int, const char *, int, ...))confine_next(#name);                            \
        return next ? next(dirfd, path, flags, mode) : (errno = ENOSYS, -1);                       \
    }

#define CONFINE_FOPEN(name)                                                                        \
    FILE *name(const char *path, const char *how)                                                  \
    {                                                                                              \
        if (!confine_allows(path)) {                                                               \
            errno = ENOENT;                                                                        \
            return NULL;                                                                           \
        }                                                                                          \
        FILE *(*next)(const char *, const char *) =                                                \
            (FILE * (*)(const char *, const char *)) confine_next(#name);                          \
        return next ? next(path, how) : (errno = ENOSYS, NULL);                                    \
    }

/* The fortified entry points (_FORTIFY_SOURCE) take the flags only. */
#define CONFINE_OPEN2(name)                                                                        \
    int name(const char *path, int flags)                                                          \
    {                                                                                              \
        if (!confine_allows(path)) {                                                               \
            errno = ENOENT;                                                                        \
            return -1;                                                                             \
        }                                                                                          \
        int (*next)(const char *, int) = (int (*)(const char *, int))confine_next(#name);         \
        return next ? next(path, flags) : (errno = ENOSYS, -1);                                    \
    }

int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);

CONFINE_OPEN(open)
CONFINE_OPEN(open64)
CONFINE_OPENAT(openat)
CONFINE_OPENAT(openat64)
CONFINE_FOPEN(fopen)
CONFINE_FOPEN(fopen64)
CONFINE_OPEN2(__open_2)
CONFINE_OPEN2(__open64_2)
