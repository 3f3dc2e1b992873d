/* fed_progfile.c - the files of a federated site's exchange with its program (fed_progfile.h). */
#include "workers/fed_progfile.h"
#include "common/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fed_progfile_write(const char *dir, const char *name, const tensorfile_header *layout, const json_t *meta, const double *v,
                       char *err, size_t errlen)
{
    size_t len;
    unsigned char *bytes = tensorfile_write(layout, meta, v, &len);
    int rc = fed_progfile_put(dir, name, bytes, len, false, err, errlen);
    free(bytes);
    return rc;
}

int fed_progfile_put(const char *dir, const char *name, const unsigned char *bytes, size_t len, bool durable, char *err,
                     size_t errlen)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", dir, strerror(errno));
        return -1;
    }
    char tmp[300];
    snprintf(tmp, sizeof tmp, ".%s.tmp", name);
    unlinkat(dfd, tmp, 0); /* whatever is there (a link the program made): the entry goes, not its target */
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create %s/%s: %s", dir, tmp, strerror(errno));
        close(dfd);
        return -1;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, bytes + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += (size_t)w;
    }
    int rc = done == len && fchmod(fd, 0644) == 0 ? 0 : -1; /* readable by the program whatever the worker's umask */
    if (rc == 0 && durable && fsync(fd) != 0) rc = -1;
    if (rc) snprintf(err, errlen, "cannot write %s/%s: %s", dir, tmp, strerror(errno));
    if (close(fd) != 0 && rc == 0) {
        snprintf(err, errlen, "cannot write %s/%s: %s", dir, tmp, strerror(errno));
        rc = -1;
    }
    if (rc == 0 && renameat(dfd, tmp, dfd, name) != 0) {
        snprintf(err, errlen, "cannot rename %s/%s to %s: %s", dir, tmp, name, strerror(errno));
        rc = -1;
    }
    if (rc) unlinkat(dfd, tmp, 0);
    if (rc == 0 && durable && fsync(dfd) != 0) { /* the rename itself on disk */
        snprintf(err, errlen, "cannot sync %s: %s", dir, strerror(errno));
        rc = -1;
    }
    close(dfd);
    return rc;
}

int fed_progfile_read(const char *dir, const char *name, size_t max_bytes, tensorfile_header *h, double **v, char *err,
                      size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) return 0;
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot be opened (%s): it must be a regular file", name,
                 errno == ELOOP ? "a symbolic link" : strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", name);
        close(fd);
        return -1;
    }
    if ((unsigned long long)st.st_size > max_bytes) {
        snprintf(err, errlen, "%s: %lld bytes, more than the model's %zu", name, (long long)st.st_size, max_bytes);
        close(fd);
        return -1;
    }
    size_t len = (size_t)st.st_size, got = 0;
    unsigned char *buf = xmalloc(len ? len : 1);
    while (got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    const unsigned char *data;
    char why[400];
    if (got != len || tensorfile_parse(buf, got, 0, h, &data, why, sizeof why) != 0) {
        snprintf(err, errlen, "%s: %s", name, got != len ? "shorter than its size (written while read?)" : why);
        free(buf);
        return -1;
    }
    *v = xmalloc(sizeof(double) * (h->total ? h->total : 1));
    tensorfile_values(h, data, *v);
    free(buf);
    return 1;
}
