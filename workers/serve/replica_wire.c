/* replica_wire.c - frames between a worker and its replica process (replica_wire.h) */
#include "workers/serve/replica_wire.h"
#include "common/alloc.h"
#include "common/clock.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* waits until fd is ready for events or the deadline; 0, or -1 with errno */
static int wait_fd(int fd, short events, int64_t deadline_us)
{
    for (;;) {
        int ms = -1;
        if (deadline_us) {
            int64_t left = deadline_us - clock_mono_us();
            if (left <= 0) {
                errno = ETIMEDOUT;
                return -1;
            }
            ms = (int)((left + 999) / 1000);
        }
        struct pollfd p = {fd, events, 0};
        int r = poll(&p, 1, ms);
        if (r > 0) return 0; /* ready, or hung up: the read or write says which */
        if (r < 0 && errno != EINTR) return -1;
    }
}

int rw_write(int fd, uint32_t type, const void *const *pieces, const size_t *lens, int n, int64_t deadline_us)
{
    uint64_t total = 0;
    for (int i = 0; i < n; i++)
        total += lens[i];
    uint32_t head[4] = {RW_MAGIC, type, (uint32_t)total, (uint32_t)(total >> 32)};
    struct iovec iov[64];
    int at = -1; /* the piece being written; -1: the header */
    size_t off = 0;
    while (at < n) {
        int k = 0;
        if (at < 0) iov[k++] = (struct iovec){(char *)head + off, RW_HEADER - off};
        for (int i = at < 0 ? 0 : at; i < n && k < 64; i++) {
            size_t skip = i == at ? off : 0;
            iov[k++] = (struct iovec){(char *)pieces[i] + skip, lens[i] - skip};
        }
        ssize_t w = writev(fd, iov, k);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN || wait_fd(fd, POLLOUT, deadline_us) != 0) return -1;
            continue;
        }
        size_t left = (size_t)w; /* advance (at, off) by what went out */
        while (at < n) {
            size_t room = (at < 0 ? RW_HEADER : lens[at]) - off;
            if (left < room) {
                off += left;
                break;
            }
            left -= room;
            at++, off = 0;
        }
    }
    return 0;
}

int rw_read_exact(int fd, void *buf, size_t len, int64_t deadline_us)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, (char *)buf + got, len - got);
        if (r > 0) {
            got += (size_t)r;
            continue;
        }
        if (r == 0) {
            errno = EPIPE;
            return -1;
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN || wait_fd(fd, POLLIN, deadline_us) != 0) return -1;
    }
    return 0;
}

int rw_read_header(int fd, rw_header *h, int64_t deadline_us)
{
    uint32_t head[4];
    if (rw_read_exact(fd, head, RW_HEADER, deadline_us) != 0) return -1;
    h->type = head[1];
    h->len = (uint64_t)head[2] | (uint64_t)head[3] << 32;
    if (head[0] != RW_MAGIC || h->len > RW_MAX_PAYLOAD) {
        errno = EPROTO;
        return -1;
    }
    return 0;
}

int rw_batch_pieces(const serve_request *reqs, int n, const void **pieces, size_t *lens, char **scratch)
{
    size_t hsize = 4 + 16 * (size_t)n;
    char *h = xmalloc(hsize);
    uint32_t count = (uint32_t)n;
    memcpy(h, &count, 4);
    int k = 0;
    pieces[k] = h, lens[k++] = 4;
    for (int i = 0; i < n; i++) {
        uint64_t l[2] = {reqs[i].json_len, reqs[i].len};
        char *at = h + 4 + 16 * (size_t)i;
        memcpy(at, l, 16);
        pieces[k] = at, lens[k++] = 16;
        pieces[k] = reqs[i].body, lens[k++] = reqs[i].len;
    }
    *scratch = h;
    return k;
}

/* the next n bytes of a payload, or NULL when it is shorter */
static const char *take(const char *p, size_t len, size_t *at, size_t n)
{
    if (len - *at < n) return NULL;
    const char *r = p + *at;
    *at += n;
    return r;
}

int rw_parse_batch(char *payload, size_t len, serve_request *reqs, int max)
{
    size_t at = 0;
    const char *c = take(payload, len, &at, 4);
    uint32_t n;
    if (!c) return -1;
    memcpy(&n, c, 4);
    if (n == 0 || n > (uint32_t)max) return -1;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t l[2];
        const char *h = take(payload, len, &at, 16);
        if (!h) return -1;
        memcpy(l, h, 16);
        const char *body = l[1] <= len ? take(payload, len, &at, (size_t)l[1]) : NULL;
        if (!body || l[0] > l[1]) return -1;
        reqs[i] = (serve_request){.body = body, .len = (size_t)l[1], .json_len = (size_t)l[0]};
    }
    return at == len ? (int)n : -1;
}

char *rw_shm_batch(const serve_request *reqs, const size_t *offs, int n, size_t reply_off, size_t reply_room, size_t *len)
{
    *len = 4 + 24 * (size_t)n + 16;
    char *p = xmalloc(*len), *at = p;
    uint32_t count = (uint32_t)n;
    memcpy(at, &count, 4), at += 4;
    for (int i = 0; i < n; i++) {
        uint64_t l[3] = {offs[i], reqs[i].json_len, reqs[i].len};
        memcpy(at, l, 24), at += 24;
    }
    uint64_t r[2] = {reply_off, reply_room};
    memcpy(at, r, 16);
    return p;
}

int rw_parse_shm_batch(const char *payload, size_t len, char *base, size_t size, serve_request *reqs, int max, size_t *reply_off,
                       size_t *reply_room)
{
    uint32_t n;
    if (len < 4) return -1;
    memcpy(&n, payload, 4);
    if (n == 0 || n > (uint32_t)max || len != 4 + 24 * (size_t)n + 16) return -1;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t l[3]; /* offset, json_len, len */
        memcpy(l, payload + 4 + 24 * (size_t)i, 24);
        if (l[0] > size || l[2] > size - l[0] || l[1] > l[2]) return -1;
        reqs[i] = (serve_request){.body = base + l[0], .len = (size_t)l[2], .json_len = (size_t)l[1]};
    }
    uint64_t r[2];
    memcpy(r, payload + 4 + 24 * (size_t)n, 16);
    if (r[0] > size || r[1] > size - r[0]) return -1;
    *reply_off = (size_t)r[0], *reply_room = (size_t)r[1];
    return (int)n;
}

int rw_parse_replies(const char *payload, size_t len, serve_request *reqs, int n)
{
    size_t at = 0;
    const char *c = take(payload, len, &at, 4);
    uint32_t count;
    if (!c) return -1;
    memcpy(&count, c, 4);
    if (count != (uint32_t)n) return -1;
    int i = 0;
    for (; i < n; i++) {
        uint32_t status;
        uint64_t blen;
        const char *h = take(payload, len, &at, 12);
        if (!h) break;
        memcpy(&status, h, 4);
        memcpy(&blen, h + 4, 8);
        const char *body = blen <= len ? take(payload, len, &at, (size_t)blen) : NULL;
        if (!body || (status != 200 && status != 400)) break;
        reqs[i].status = (int)status;
        reqs[i].reply = xstrndup(body, (size_t)blen); /* text: a NUL inside ends it */
        reqs[i].err[0] = '\0';
    }
    if (i == n && at == len) return 0;
    for (int j = 0; j < i; j++) {
        free(reqs[j].reply);
        reqs[j].reply = NULL;
    }
    return -1;
}
