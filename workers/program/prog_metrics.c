/* prog_metrics.c - the incremental JSON-lines reader (prog_metrics.h). */
#include "workers/program/prog_metrics.h"

#include "common/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct prog_metrics {
    char *path;
    size_t max_line, max_read;
    off_t off;  /* read up to here */
    char *line; /* the partial last line */
    size_t len; /* its bytes */
    bool skip;  /* inside a line longer than max_line: drop up to its '\n' */
    size_t bad;
};

prog_metrics *prog_metrics_new(const char *path, size_t max_line, size_t max_read)
{
    prog_metrics *m = xcalloc(1, sizeof(*m));
    m->path = xstrdup(path);
    m->max_line = max_line ? max_line : PROG_METRICS_DEFAULT_MAX_LINE;
    m->max_read = max_read ? max_read : PROG_METRICS_DEFAULT_MAX_READ;
    m->line = xmalloc(m->max_line);
    return m;
}

void prog_metrics_free(prog_metrics *m)
{
    if (!m) return;
    free(m->path);
    free(m->line);
    free(m);
}

size_t prog_metrics_bad_lines(const prog_metrics *m)
{
    return m->bad;
}

static int take_line(prog_metrics *m, json_t *points)
{
    size_t len = m->len;
    m->len = 0;
    if (len > 0 && m->line[len - 1] == '\r') len--;
    size_t i = 0;
    while (i < len && (m->line[i] == ' ' || m->line[i] == '\t'))
        i++;
    if (i == len) return 0; /* blank */
    json_t *v = json_loadb(m->line + i, len - i, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(v)) {
        json_decref(v);
        m->bad++;
        return 0;
    }
    json_array_append_new(points, v);
    return 1;
}

static int feed(prog_metrics *m, const char *buf, size_t n, json_t *points)
{
    int got = 0;
    for (size_t i = 0; i < n; i++) {
        char c = buf[i];
        if (c == '\n') {
            if (m->skip) {
                m->skip = false;
                m->len = 0;
            } else {
                got += take_line(m, points);
            }
            continue;
        }
        if (m->skip) continue;
        if (m->len == m->max_line) { /* too long: the whole line goes */
            m->skip = true;
            m->bad++;
            m->len = 0;
            continue;
        }
        m->line[m->len++] = c;
    }
    return got;
}

int prog_metrics_read(prog_metrics *m, json_t *points, char *err, size_t errlen)
{
    int fd = open(m->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        snprintf(err, errlen, "the metrics file cannot be opened: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
        close(fd);
        snprintf(err, errlen, "the metrics file is not a regular file of its own");
        return -1;
    }
    if (st.st_size < m->off) { /* rewritten: start again */
        m->off = 0;
        m->len = 0;
        m->skip = false;
    }
    char buf[65536];
    size_t left = m->max_read;
    int got = 0;
    while (left > 0) {
        size_t want = left < sizeof(buf) ? left : sizeof(buf);
        ssize_t r = pread(fd, buf, want, m->off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        m->off += r;
        left -= (size_t)r;
        got += feed(m, buf, (size_t)r, points);
    }
    close(fd);
    return got;
}
