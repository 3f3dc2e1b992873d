/* prog_logcap.c - rotated, size-capped rank logs (prog_logcap.h). */
#include "workers/program/prog_logcap.h"

#include "common/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct prog_logcap {
    char path[4096], old[4096];
    int fd;
    long long size, cap;
};

void prog_logcap_path(const char *dir, int rank, const char *suffix, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/rank-%d.log%s", dir, rank, suffix);
}

static int open_log(const char *path)
{
    return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
}

prog_logcap *prog_logcap_open(const char *dir, int rank, long long cap)
{
    prog_logcap *l = xcalloc(1, sizeof(*l));
    prog_logcap_path(dir, rank, "", l->path, sizeof(l->path));
    prog_logcap_path(dir, rank, ".1", l->old, sizeof(l->old));
    l->cap = cap > 0 ? cap : PROG_LOGCAP_DEFAULT_CAP;
    unlink(l->old);
    l->fd = open_log(l->path);
    if (l->fd < 0) {
        int e = errno;
        free(l);
        errno = e;
        return NULL;
    }
    return l;
}

static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

static int rotate(prog_logcap *l)
{
    if (rename(l->path, l->old) != 0) return -1;
    int fd = open_log(l->path);
    if (fd < 0) return -1;
    close(l->fd);
    l->fd = fd;
    l->size = 0;
    return 0;
}

int prog_logcap_write(prog_logcap *l, const char *buf, size_t len)
{
    while (len > 0) {
        if (l->size >= l->cap && rotate(l) != 0) return -1;
        size_t room = (size_t)(l->cap - l->size);
        size_t n = len < room ? len : room;
        if (write_all(l->fd, buf, n) != 0) return -1;
        l->size += (long long)n;
        buf += n;
        len -= n;
    }
    return 0;
}

void prog_logcap_close(prog_logcap *l)
{
    if (!l) return;
    close(l->fd);
    free(l);
}

/* appends the last max bytes of path to buf (holding *len of cap) */
static void read_end(const char *path, char *buf, size_t *len, size_t max)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        off_t from = st.st_size > (off_t)max ? st.st_size - (off_t)max : 0;
        size_t want = (size_t)(st.st_size - from);
        ssize_t r = pread(fd, buf + *len, want, from);
        if (r > 0) *len += (size_t)r;
    }
    close(fd);
}

char *prog_logcap_tail(const char *dir, int rank, int n, size_t max_bytes)
{
    if (max_bytes == 0) max_bytes = 1;
    char *buf = xmalloc(2 * max_bytes + 1);
    char path[4096];
    size_t len = 0;
    prog_logcap_path(dir, rank, ".1", path, sizeof(path));
    read_end(path, buf, &len, max_bytes);
    prog_logcap_path(dir, rank, "", path, sizeof(path));
    read_end(path, buf, &len, max_bytes);
    /* the last n lines: a final line without '\n' counts as one */
    size_t start = len;
    int lines = 0;
    if (start > 0 && buf[start - 1] == '\n') start--;
    while (start > 0 && n > 0) {
        if (buf[start - 1] == '\n') {
            if (++lines == n) break;
        }
        start--;
    }
    if (n <= 0) start = len;
    if (len - start > max_bytes) start = len - max_bytes;
    memmove(buf, buf + start, len - start);
    buf[len - start] = '\0';
    return buf;
}

void prog_logcap_follow_init(prog_logcap_follow *f, const char *dir, int rank)
{
    memset(f, 0, sizeof(*f));
    prog_logcap_path(dir, rank, "", f->path, sizeof(f->path));
}

static ssize_t read_from(int fd, off_t *off, char *buf, size_t cap)
{
    ssize_t r = pread(fd, buf, cap, *off);
    if (r > 0) *off += r;
    return r;
}

ssize_t prog_logcap_follow_read(prog_logcap_follow *f, char *buf, size_t cap)
{
    int fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return errno == ENOENT ? 0 : -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return -1;
    }
    if (f->ino != 0 && (st.st_ino != f->ino || st.st_dev != f->dev)) {
        /* rotated: finish the file we were reading, now .1 */
        char old[4112];
        snprintf(old, sizeof(old), "%s.1", f->path);
        int ofd = open(old, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct stat ost;
        if (ofd >= 0 && fstat(ofd, &ost) == 0 && ost.st_ino == f->ino && ost.st_dev == f->dev) {
            ssize_t r = read_from(ofd, &f->off, buf, cap);
            if (r != 0) {
                close(ofd);
                close(fd);
                return r;
            }
        }
        if (ofd >= 0) close(ofd);
        f->ino = 0;
    }
    if (f->ino == 0) {
        f->ino = st.st_ino;
        f->dev = st.st_dev;
        f->off = 0;
    }
    if (st.st_size < f->off) f->off = 0; /* truncated: a new run of the rank */
    ssize_t r = read_from(fd, &f->off, buf, cap);
    close(fd);
    return r;
}
