/* ring.c - the CPU collectives of a gang: the TCP ring's connect, all-reduce and broadcast (ring.h). */
#include "workers/comm/ring.h"
#include "common/alloc.h"
#include "workers/comm/sock.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RING_SEGMENT (1 << 20) /* the most bytes per send/recv call (fewer calls beat finer overlap on loopback) */

struct ring {
    int rank, world;
    int next, prev; /* sockets; -1 when world == 1 */
    unsigned long long sent;
    bool broken;
    float *tmp; /* receive buffer of the reduce-scatter: one segment, and the part of a float left over */
    size_t tmp_n;
};

int ring_listen(const char *bind_host, int *port, char *err, size_t errlen)
{
    return sock_listen(bind_host, port, err, errlen);
}

ring *ring_connect(int listen_fd, int rank, int world, const char *next_addr, const char *token, int timeout_ms, char *err,
                   size_t errlen)
{
    ring *r = xcalloc(1, sizeof(*r));
    r->rank = rank, r->world = world, r->next = r->prev = -1;
    if (world <= 1) {
        close(listen_fd);
        return r;
    }
    if (strlen(token) > SOCK_TOKEN_MAX) {
        close(listen_fd);
        free(r);
        snprintf(err, errlen, "ring: token longer than %d bytes", SOCK_TOKEN_MAX);
        return NULL;
    }
    int64_t deadline = sock_now_ms() + timeout_ms;
    int prev_rank = (rank + world - 1) % world;
    /* connecting first cannot deadlock: the kernel completes the handshake from the backlog */
    r->next = sock_dial(next_addr, deadline, err, errlen);
    if (r->next >= 0 && sock_send_hello(r->next, rank, world, token, deadline) != 0) {
        snprintf(err, errlen, "ring: the next rank at %s closed the connection during setup", next_addr);
        close(r->next);
        r->next = -1;
    }
    while (r->next >= 0 && r->prev < 0) {
        if (sock_wait_fd(listen_fd, POLLIN, sock_left_ms(deadline)) <= 0) {
            snprintf(err, errlen, "ring: rank %d (previous) did not connect within %d ms", prev_rank, timeout_ms);
            break;
        }
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) continue;
        /* a rank says hello as soon as it is connected: a silent stray must not hold up the real one behind it */
        int64_t hello_by = sock_now_ms() + SOCK_HELLO_MS;
        if (sock_check_hello(fd, prev_rank, world, token, hello_by < deadline ? hello_by : deadline) == 0)
            r->prev = fd;
        else
            close(fd); /* a stray or stale connection: keep waiting for ours */
    }
    close(listen_fd);
    if (r->next < 0 || r->prev < 0) {
        ring_close(r);
        return NULL;
    }
    sock_tune(r->prev);
    return r;
}

/* The next rank never sends anything: a readable socket to it means it closed
 * (EOF) or reset.  Watched while this rank still owes it bytes, so a rank that
 * waits for data to forward still notices at once that the next one is gone
 * (not once it has finished: then the next rank may close first, rightly). */
static int next_gone(const ring *r, short revents, char *err, size_t errlen)
{
    if (!(revents & (POLLIN | POLLRDHUP | POLLERR | POLLHUP))) return 0;
    char c;
    ssize_t k = recv(r->next, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    int next = (r->rank + 1) % r->world;
    if (k > 0)
        snprintf(err, errlen, "rank %d (next) sent unexpected data", next);
    else
        snprintf(err, errlen, "rank %d (next) closed the connection%s%s", next, k < 0 ? ": " : "", k < 0 ? strerror(errno) : "");
    return -1;
}

/* The broadcast's loop: sends sn bytes to the next rank while receiving rn
 * bytes from the previous one into rp.  forward: the bytes to send are the ones
 * received so far (sp == rp, a relay). */
static int pump(ring *r, const char *sp, size_t sn, char *rp, size_t rn, bool forward, int timeout_ms, char *err, size_t errlen)
{
    size_t sent = 0, got = 0;
    while (sent < sn || got < rn) {
        struct pollfd p[2];
        int np = 0, is = -1, ir = -1;
        size_t can_send = forward ? got : sn;
        if (sent < sn) is = np, p[np++] = (struct pollfd){r->next, (short)((sent < can_send ? POLLOUT : 0) | POLLRDHUP), 0};
        if (got < rn) ir = np, p[np++] = (struct pollfd){r->prev, POLLIN, 0};
        int rc = poll(p, (nfds_t)np, timeout_ms);
        if (rc < 0 && errno == EINTR) continue;
        if (rc <= 0) {
            snprintf(err, errlen, "no progress for %d ms (rank %d %s)", timeout_ms,
                     got < rn ? (r->rank + r->world - 1) % r->world : (r->rank + 1) % r->world,
                     got < rn ? "(previous) sent nothing" : "(next) took nothing");
            return -1;
        }
        if (is >= 0 && (p[is].revents & POLLOUT) && sent < can_send) {
            size_t n = can_send - sent < RING_SEGMENT ? can_send - sent : RING_SEGMENT;
            ssize_t k = send(r->next, sp + sent, n, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (k < 0 && errno != EAGAIN && errno != EINTR) {
                snprintf(err, errlen, "rank %d (next) is gone: %s", (r->rank + 1) % r->world, strerror(errno));
                return -1;
            }
            if (k > 0) sent += (size_t)k, r->sent += (unsigned long long)k;
        }
        if (is >= 0 && next_gone(r, p[is].revents, err, errlen)) return -1;
        if (ir >= 0 && p[ir].revents) {
            size_t n = rn - got < RING_SEGMENT ? rn - got : RING_SEGMENT;
            ssize_t k = recv(r->prev, rp + got, n, MSG_DONTWAIT);
            if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
                snprintf(err, errlen, "rank %d (previous) closed the connection%s%s", (r->rank + r->world - 1) % r->world,
                         k < 0 ? ": " : "", k < 0 ? strerror(errno) : "");
                return -1;
            }
            if (k > 0) got += (size_t)k;
        }
    }
    return 0;
}

static int fail(ring *r, const char *what, char *err, size_t errlen)
{
    char why[400];
    snprintf(why, sizeof(why), "%s", err);
    snprintf(err, errlen, "%s: %s", what, why);
    r->broken = true;
    /* the neighbours see the connections end and fail at once instead of
     * waiting out their timeouts (the fds stay ours until ring_close) */
    if (r->next >= 0) shutdown(r->next, SHUT_RDWR);
    if (r->prev >= 0) shutdown(r->prev, SHUT_RDWR);
    return -1;
}

static void add(float *restrict acc, const float *restrict x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        acc[i] += x[i];
}

/* chunk c of n floats over w: sizes differ by at most one */
static void chunk(size_t n, int w, int c, size_t *off, size_t *len)
{
    size_t q = n / (size_t)w, rem = n % (size_t)w, cc = (size_t)c;
    *off = cc * q + (cc < rem ? cc : rem);
    *len = q + (cc < rem ? 1 : 0);
}

/* The fused schedule.  Rank r sends chunks S_k = (r - k) mod w and receives
 * R_k = (r - 1 - k) mod w, k = 0 .. 2w-3: the first w-1 chunks received are
 * added into buf (reduce-scatter), the others overwrite it (all-gather).  Every
 * chunk sent after the first is the one received just before it, so sending
 * waits only for what has been received and reduced, segment by segment: the
 * steps and the two phases overlap instead of waiting for each other.  A chunk
 * is overwritten only at offsets this rank has already sent (what arrives there
 * was built from what it sent), so nothing is overwritten before it leaves. */
int ring_allreduce(ring *r, float *buf, size_t n, int timeout_ms, char *err, size_t errlen)
{
    if (r->broken) {
        snprintf(err, errlen, "all-reduce: the ring is broken by an earlier error");
        return -1;
    }
    int w = r->world, steps = 2 * (w - 1);
    if (w == 1 || n == 0) return 0;
    size_t maxc = RING_SEGMENT / sizeof(float) + 1;
    if (r->tmp_n < maxc) {
        r->tmp = xreallocarray(r->tmp, maxc, sizeof(float)), r->tmp_n = maxc;
    }
    int prev = (r->rank + w - 1) % w, next = (r->rank + 1) % w;
    size_t first_off, first_len;
    chunk(n, w, r->rank, &first_off, &first_len);
    int ks = 0, kr = 0;                       /* chunks of the sequences in progress */
    size_t off_s = 0, off_r = 0, red_r = 0;   /* bytes: sent, received, processed in them */
    size_t sent = 0, processed = 0;           /* bytes in total */
    size_t limit = first_len * sizeof(float); /* what may be sent: the first chunk, then what was processed */
    while (ks < steps || kr < steps) {
        size_t so, sl, ro, rl;
        chunk(n, w, ((r->rank - ks) % w + w) % w, &so, &sl);
        chunk(n, w, ((r->rank - 1 - kr) % w + w) % w, &ro, &rl);
        if (ks < steps && off_s == sl * sizeof(float)) { /* next chunk to send (also skips empty ones) */
            ks++, off_s = 0;
            continue;
        }
        if (kr < steps && off_r == rl * sizeof(float)) {
            kr++, off_r = red_r = 0;
            continue;
        }
        struct pollfd p[2];
        int np = 0, is = -1, ir = -1;
        if (ks < steps) is = np, p[np++] = (struct pollfd){r->next, (short)((sent < limit ? POLLOUT : 0) | POLLRDHUP), 0};
        if (kr < steps) ir = np, p[np++] = (struct pollfd){r->prev, POLLIN, 0};
        int rc = poll(p, (nfds_t)np, timeout_ms);
        if (rc < 0 && errno == EINTR) continue;
        if (rc <= 0) {
            snprintf(err, errlen, "no progress for %d ms (rank %d %s)", timeout_ms, kr < steps ? prev : next,
                     kr < steps ? "(previous) sent nothing" : "(next) took nothing");
            return fail(r, "all-reduce", err, errlen);
        }
        if (is >= 0 && (p[is].revents & POLLOUT) && sent < limit) {
            size_t want = sl * sizeof(float) - off_s;
            if (want > limit - sent) want = limit - sent;
            if (want > RING_SEGMENT) want = RING_SEGMENT;
            ssize_t k = send(r->next, (const char *)(buf + so) + off_s, want, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (k < 0 && errno != EAGAIN && errno != EINTR) {
                snprintf(err, errlen, "rank %d (next) is gone: %s", next, strerror(errno));
                return fail(r, "all-reduce", err, errlen);
            }
            if (k > 0) off_s += (size_t)k, sent += (size_t)k, r->sent += (unsigned long long)k;
        }
        if (is >= 0 && next_gone(r, p[is].revents, err, errlen)) return fail(r, "all-reduce", err, errlen);
        if (ir >= 0 && p[ir].revents) {
            int reduce = kr < w - 1;
            size_t want = rl * sizeof(float) - off_r;
            if (want > RING_SEGMENT) want = RING_SEGMENT;
            size_t part = off_r - red_r; /* reduce: bytes of a float left over from the last segment */
            char *dst = reduce ? (char *)r->tmp + part : (char *)(buf + ro) + off_r;
            ssize_t k = recv(r->prev, dst, want, MSG_DONTWAIT);
            if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
                snprintf(err, errlen, "rank %d (previous) closed the connection%s%s", prev, k < 0 ? ": " : "",
                         k < 0 ? strerror(errno) : "");
                return fail(r, "all-reduce", err, errlen);
            }
            if (k > 0) {
                off_r += (size_t)k;
                size_t upto = off_r;
                if (reduce) { /* add the whole floats that arrived (still in cache), keep the part of one */
                    size_t whole = (part + (size_t)k) / sizeof(float);
                    add(buf + ro + red_r / sizeof(float), r->tmp, whole);
                    upto = red_r + whole * sizeof(float);
                    if (off_r > upto) memmove(r->tmp, r->tmp + whole, off_r - upto);
                }
                processed += upto - red_r, red_r = upto;
                limit = first_len * sizeof(float) + processed;
            }
        }
    }
    return 0;
}

int ring_broadcast(ring *r, void *buf, size_t bytes, int root, int timeout_ms, char *err, size_t errlen)
{
    if (r->broken) {
        snprintf(err, errlen, "broadcast: the ring is broken by an earlier error");
        return -1;
    }
    int w = r->world;
    if (w == 1 || bytes == 0) return 0;
    bool is_root = r->rank == root, is_last = (r->rank + 1) % w == root;
    int rc = is_root   ? pump(r, buf, bytes, NULL, 0, false, timeout_ms, err, errlen)
             : is_last ? pump(r, NULL, 0, buf, bytes, false, timeout_ms, err, errlen)
                       : pump(r, buf, bytes, buf, bytes, true, timeout_ms, err, errlen);
    return rc ? fail(r, "broadcast", err, errlen) : 0;
}

int ring_shift(ring *r, const void *send, size_t send_len, void **recv, size_t *recv_len, int timeout_ms, char *err, size_t errlen)
{
    *recv = NULL, *recv_len = 0;
    if (r->broken) {
        snprintf(err, errlen, "shift: the ring is broken by an earlier error");
        return -1;
    }
    if (r->world == 1) { /* to itself */
        if (send_len && !(*recv = xmalloc(send_len))) {
            snprintf(err, errlen, "shift: out of memory");
            return -1;
        }
        if (send_len) memcpy(*recv, send, send_len);
        *recv_len = send_len;
        return 0;
    }
    uint64_t out = send_len, in = 0;
    if (pump(r, (const char *)&out, sizeof out, (char *)&in, sizeof in, false, timeout_ms, err, errlen))
        return fail(r, "shift", err, errlen);
    if (in > RING_SHIFT_MAX) {
        snprintf(err, errlen, "rank %d (previous) announced %llu bytes", (r->rank + r->world - 1) % r->world,
                 (unsigned long long)in);
        return fail(r, "shift", err, errlen);
    }
    char *buf = in ? xmalloc(in) : NULL;
    if (in && !buf) {
        snprintf(err, errlen, "out of memory for %llu bytes", (unsigned long long)in);
        return fail(r, "shift", err, errlen);
    }
    if (pump(r, send, send_len, buf, in, false, timeout_ms, err, errlen)) {
        free(buf);
        return fail(r, "shift", err, errlen);
    }
    *recv = buf, *recv_len = in;
    return 0;
}

int ring_world(const ring *r)
{
    return r->world;
}

void ring_close(ring *r)
{
    if (!r) return;
    if (r->next >= 0) close(r->next);
    if (r->prev >= 0) close(r->prev);
    free(r->tmp);
    free(r);
}
