/* What gmshim may load or write into (trust.h). Every decision is made on an open descriptor,
 * so that what was checked is what is used; a symlink is never followed to something unchecked.
 * It never prints: the caller says why, once. */
#include "trust.h"
#include "common.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char own_dir[PATH_MAX];

int trust_check_fd(int fd, char *why, size_t why_len)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(why, why_len, "cannot be examined: %s", strerror(errno));
        return -1;
    }
    if (st.st_uid != geteuid() && st.st_uid != 0) {
        snprintf(why, why_len, "owned by uid %u, neither this process's (%u) nor root", (unsigned)st.st_uid,
                 (unsigned)geteuid());
        return -1;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, why_len, "writable by %s (mode %03o)", st.st_mode & S_IWOTH ? "others" : "its group",
                 (unsigned)(st.st_mode & 0777));
        return -1;
    }
    return 0;
}

/* Whether a directory on the way to a trusted one may be passed through: trusted itself, or
 * sticky and owned by root or this user (like /tmp: others may add entries, never move or
 * replace this user's). */
static int passable(int fd, char *why, size_t why_len)
{
    struct stat st;
    if (fstat(fd, &st) == 0 && (st.st_mode & S_ISVTX) && (st.st_uid == 0 || st.st_uid == geteuid()))
        return 0;
    return trust_check_fd(fd, why, why_len);
}

/* The path is made canonical first (its symlinks followed: what they lead to is what is
 * checked), then walked from / one component at a time, each opened without following a symlink
 * relative to its checked parent's descriptor: a component swapped after realpath makes the walk
 * fail, never leads it elsewhere. Every directory on the way is passable, the last one trusted,
 * so no other user can rename or replace any of them while gmshim works in it, by descriptor or
 * by path. */
int trust_open_dir(const char *path, char *why, size_t why_len)
{
    char real[PATH_MAX], reason[160];
    if (!realpath(path, real)) {
        int err = errno;
        snprintf(why, why_len, "%s: %s", path, strerror(err));
        errno = err;
        return -1;
    }
    int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (size_t at = 1; fd >= 0 && real[at];) {
        size_t n = strcspn(real + at, "/");
        char name[NAME_MAX + 1];
        snprintf(name, sizeof name, "%.*s", (int)n, real + at);
        if (passable(fd, reason, sizeof reason) != 0) {
            snprintf(why, why_len, "%.*s, on the way to %s, is %s", (int)(at > 1 ? at - 1 : 1), real, path, reason);
            close(fd);
            errno = EPERM;
            return -1;
        }
        int next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int err = errno;
        close(fd);
        if (next < 0) {
            snprintf(why, why_len, "%s: %s", path, err == ELOOP ? "changed while it was examined" : strerror(err));
            errno = err;
            return -1;
        }
        fd = next;
        at += n + (real[at + n] == '/');
    }
    if (fd < 0) {
        snprintf(why, why_len, "/: %s", strerror(errno));
        return -1;
    }
    if (trust_check_fd(fd, reason, sizeof reason) != 0) {
        snprintf(why, why_len, "%s is %s", path, reason);
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

int trust_open_at(int dirfd, const char *name, int flags, char *why, size_t why_len)
{
    /* O_NONBLOCK: a FIFO planted under the name must not block the open. */
    int fd = openat(dirfd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    if (fd < 0) {
        int err = errno;
        snprintf(why, why_len, "%s: %s", name, err == ELOOP ? "a symbolic link" : strerror(err));
        errno = err;
        return -1;
    }
    struct stat st;
    char reason[160] = "not a regular file";
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || trust_check_fd(fd, reason, sizeof reason) != 0) {
        snprintf(why, why_len, "%s is %s", name, reason);
        close(fd);
        errno = EPERM;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int trust_open_path(const char *path, int flags, char *why, size_t why_len)
{
    char dir[PATH_MAX], reason[PATH_MAX + 160], real[PATH_MAX];
    /* Symlinks (libcupti.so.13 -> libcupti.so.13.0.1) are resolved first; what they lead to is
     * then walked and opened without following any, and checked. */
    if (!realpath(path, real)) {
        int err = errno;
        snprintf(why, why_len, "%s: %s", path, strerror(err));
        errno = err;
        return -1;
    }
    path = real;
    const char *slash = strrchr(path, '/');
    if (!slash || snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path) >= (int)sizeof dir) {
        snprintf(why, why_len, "%s: not a full path", path);
        errno = EINVAL;
        return -1;
    }
    int dfd = trust_open_dir(dir[0] ? dir : "/", reason, sizeof reason);
    int fd = dfd < 0 ? -1 : trust_open_at(dfd, slash + 1, flags, reason, sizeof reason);
    int err = errno;
    if (dfd >= 0)
        close(dfd);
    if (fd < 0) {
        snprintf(why, why_len, "%s", reason);
        errno = err;
    }
    return fd;
}

void trust_fd_path(int fd, char *out, size_t len)
{
    snprintf(out, len, "/proc/self/fd/%d", fd);
}

const char *trust_own_dir(void)
{
    return own_dir[0] ? own_dir : NULL;
}

/* At load, before the program can chdir: the loader keeps the name LD_PRELOAD gave, relative or
 * not, and a relative one would later be read against whatever directory the program is in. */
__attribute__((constructor)) static void trust_note_own_dir(void)
{
    Dl_info info;
    char path[PATH_MAX];
    if (!dladdr((void *)trust_note_own_dir, &info) || !info.dli_fname || !strchr(info.dli_fname, '/'))
        return;
    if (info.dli_fname[0] == '/') {
        if (snprintf(path, sizeof path, "%s", info.dli_fname) >= (int)sizeof path)
            return;
    } else if (!realpath(info.dli_fname, path)) {
        return;
    }
    char *slash = strrchr(path, '/');
    if (!slash)
        return;
    *slash = 0;
    snprintf(own_dir, sizeof own_dir, "%s", path[0] ? path : "/");
}
