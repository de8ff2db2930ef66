/* What gmshim may load or write into: a directory or file is trusted when it is owned by the
 * effective uid (or root) and writable by neither group nor others, decided on an open
 * descriptor, never on a path that could change between the check and the use (shim/trust.c;
 * docs/limits.md, "What gmshim trusts"). */
#ifndef GM_TRUST_H
#define GM_TRUST_H

#include <stddef.h>

/* Whether the open descriptor fd may be trusted: 0, or -1 with the reason in why ("owned by uid
 * N", "writable by group or others"). */
int trust_check_fd(int fd, char *why, size_t why_len);
/* Opens the directory path and checks it and every directory above it: each owned by root or
 * this user, the last writable by neither group nor others, those above it either that or sticky
 * (/tmp). The descriptor (O_CLOEXEC), or -1 with the reason in why; errno ENOENT when it does
 * not exist, EPERM when it is not trusted. */
int trust_open_dir(const char *path, char *why, size_t why_len);
/* Opens the regular file `name` in the directory dirfd, not following a symlink, with `flags`
 * (O_RDONLY, or O_RDWR | O_CREAT ...; 0600 when created), and checks it. The descriptor, or -1
 * with the reason in why; errno ENOENT when it does not exist, EPERM when it is not trusted. */
int trust_open_at(int dirfd, const char *name, int flags, char *why, size_t why_len);
/* The file path leads to (symlinks resolved), opened by trust_open_dir on its directory and
 * trust_open_at on its name. */
int trust_open_path(const char *path, int flags, char *why, size_t why_len);
/* The name under which the loader opens exactly the file fd holds: "/proc/self/fd/N". */
void trust_fd_path(int fd, char *out, size_t len);
/* The directory this library was loaded from, made absolute once, at load (a relative
 * LD_PRELOAD is resolved against the directory the process started in, not a later one); NULL
 * when it is not known. */
const char *trust_own_dir(void);

#endif
