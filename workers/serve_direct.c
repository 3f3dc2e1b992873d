/* serve_direct.c - the direct side of an inference replica's worker: the listener, the servers'
 * connections and their frames (serve_direct.h). */
#include "workers/serve_direct.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/ids.h"
#include "common/log.h"
#include "wire/infer_frame.h"
#include "workers/comm/ring.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define STAGE 65536         /* bytes read at once while between frames */
#define HELLO_MAX 256       /* a hello's body: the token */
#define REPLY_WRITE_MS 5000 /* a server that takes no reply for this long is cut off */
#define TOKEN_BYTES 24
#define HELLO_MS 2000 /* a connection says hello within this, or is closed */

typedef struct {
    int fd; /* -1: a free slot */
    unsigned gen;
    int authed;
    int64_t opened_ms;
    char *stage; /* STAGE bytes; stage[at..have) not yet parsed */
    size_t at, have;
    int in_frame; /* the head is read: h, and body[0..got) of its h.len */
    if_head h;
    char *body;
    size_t got;
} conn;

struct serve_direct {
    int lfd;
    char token[2 * TOKEN_BYTES + 8];
    char endpoint[320];
    conn conns[SD_MAX_CONNS];
    serve_msg *ready; /* read, not yet taken: a FIFO in ready[0..nready) */
    int nready, cap;
    replica_shm *shm; /* where request bodies are read to, when it has room */
};

serve_direct *sd_open(const char *host, char *err, size_t errlen)
{
    serve_direct *sd = xcalloc(1, sizeof(*sd));
    int port = 0;
    sd->lfd = ring_listen(host, &port, err, errlen);
    if (sd->lfd < 0 || id_random("d", TOKEN_BYTES, sd->token, sizeof(sd->token)) != 0) {
        if (sd->lfd >= 0) snprintf(err, errlen, "no random token for the replica's endpoint");
        if (sd->lfd >= 0) close(sd->lfd);
        free(sd);
        return NULL;
    }
    snprintf(sd->endpoint, sizeof(sd->endpoint), "%s %d %s", host, port, sd->token);
    for (int i = 0; i < SD_MAX_CONNS; i++)
        sd->conns[i].fd = -1;
    return sd;
}

void sd_use_region(serve_direct *sd, replica_shm *shm)
{
    sd->shm = shm;
}

const char *sd_endpoint(const serve_direct *sd)
{
    return sd->endpoint;
}

static void drop(serve_direct *sd, conn *c)
{
    close(c->fd);
    free(c->stage);
    rs_release(sd->shm, c->body);
    unsigned gen = c->gen + 1;
    *c = (conn){.fd = -1, .gen = gen};
}

/* the token, compared in constant time */
static int token_ok(const serve_direct *sd, const char *p, size_t n)
{
    size_t want = strlen(sd->token);
    unsigned char diff = n != want;
    for (size_t i = 0; i < want; i++)
        diff |= (unsigned char)(sd->token[i] ^ (i < n ? p[i] : 0));
    return diff == 0;
}

static void push(serve_direct *sd, conn *c, int slot)
{
    if (sd->nready == sd->cap) {
        sd->cap = sd->cap ? 2 * sd->cap : 16;
        sd->ready = xrealloc(sd->ready, sizeof(*sd->ready) * (size_t)sd->cap);
    }
    serve_msg *m = &sd->ready[sd->nready++];
    memset(m, 0, sizeof(*m));
    m->raw = c->body; /* owned by the message from now on */
    m->req.body = c->body, m->req.len = c->h.len, m->req.json_len = c->h.arg;
    m->conn = slot, m->conn_gen = c->gen, m->seq = c->h.id;
    c->body = NULL;
}

/* a whole frame was read: 0 to go on, -1 to close the connection */
static int frame(serve_direct *sd, conn *c, int slot)
{
    c->in_frame = 0;
    if (!c->authed) {
        int ok = c->h.kind == IF_HELLO && token_ok(sd, c->body, c->h.len);
        free(c->body);
        c->body = NULL;
        if (!ok) return -1;
        c->authed = 1;
        return 0;
    }
    if (c->h.kind != IF_REQUEST) return -1;
    push(sd, c, slot);
    return 0;
}

/* reads what the connection has: every whole frame becomes a request (or its hello); 0 when it
 * would block, -1 to close it (the peer closed, an error, a malformed frame) */
static int pump(serve_direct *sd, int slot)
{
    conn *c = &sd->conns[slot];
    for (;;) {
        while (c->at < c->have) { /* the staged bytes: heads, and the bodies' first bytes */
            if (!c->in_frame) {
                if (c->have - c->at < IF_HEAD) break;
                if (if_head_decode((const unsigned char *)c->stage + c->at, &c->h) != 0) return -1;
                if (!c->authed && (c->h.kind != IF_HELLO || c->h.len > HELLO_MAX)) return -1;
                c->at += IF_HEAD;
                /* a request's body straight into the region the replica reads (its binary tensors
                 * aligned after the JSON head's h.arg bytes); the heap when it has no room */
                c->body = c->authed ? rs_alloc(sd->shm, (size_t)c->h.len + 1, c->h.arg) : NULL;
                if (!c->body) c->body = xmalloc((size_t)c->h.len + 1);
                c->body[c->h.len] = '\0';
                c->got = 0;
                c->in_frame = 1;
            }
            size_t take = c->have - c->at, want = (size_t)c->h.len - c->got;
            if (take > want) take = want;
            memcpy(c->body + c->got, c->stage + c->at, take);
            c->got += take, c->at += take;
            if (c->got == c->h.len && frame(sd, c, slot) != 0) return -1;
        }
        ssize_t n;
        if (c->in_frame) { /* the rest of a body: straight into it, no staging copy */
            n = read(c->fd, c->body + c->got, (size_t)c->h.len - c->got);
            if (n > 0) {
                c->got += (size_t)n;
                if (c->got == c->h.len && frame(sd, c, slot) != 0) return -1;
                continue;
            }
        } else {
            if (c->at > 0) { /* a partial head moves to the front */
                memmove(c->stage, c->stage + c->at, c->have - c->at);
                c->have -= c->at, c->at = 0;
            }
            n = read(c->fd, c->stage + c->have, STAGE - c->have);
            if (n > 0) {
                c->have += (size_t)n;
                continue;
            }
        }
        if (n == 0) return -1;
        if (errno == EINTR) continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    }
}

static void accept_all(serve_direct *sd)
{
    for (;;) {
        int fd = accept4(sd->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        int slot = -1;
        for (int i = 0; i < SD_MAX_CONNS && slot < 0; i++)
            if (sd->conns[i].fd < 0) slot = i;
        if (slot < 0) {
            log_warn("a replica's endpoint has %d connections already: one more refused", SD_MAX_CONNS);
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        conn *c = &sd->conns[slot];
        c->fd = fd;
        c->stage = xmalloc(STAGE);
        c->opened_ms = clock_mono_us() / 1000;
    }
}

/* waits up to ms for anything (a connection, bytes) and reads everything there is */
static void poll_once(serve_direct *sd, int ms)
{
    struct pollfd pf[SD_MAX_CONNS + 1];
    int slot[SD_MAX_CONNS + 1], n = 0;
    int64_t now = clock_mono_us() / 1000;
    pf[n] = (struct pollfd){.fd = sd->lfd, .events = POLLIN}, slot[n++] = -1;
    for (int i = 0; i < SD_MAX_CONNS; i++) {
        conn *c = &sd->conns[i];
        if (c->fd < 0) continue;
        if (!c->authed && now - c->opened_ms > HELLO_MS) { /* no hello in time: a stray connection */
            drop(sd, c);
            continue;
        }
        pf[n] = (struct pollfd){.fd = c->fd, .events = POLLIN}, slot[n++] = i;
    }
    if (poll(pf, (nfds_t)n, ms) <= 0) return;
    for (int k = 0; k < n; k++) {
        if (!pf[k].revents) continue;
        if (slot[k] < 0)
            accept_all(sd);
        else if (pump(sd, slot[k]) != 0)
            drop(sd, &sd->conns[slot[k]]);
    }
}

/* up to max of the requests read, oldest first */
static int take(serve_direct *sd, serve_msg *out, int max)
{
    int n = sd->nready < max ? sd->nready : max;
    if (n <= 0) return 0;
    memcpy(out, sd->ready, sizeof(*out) * (size_t)n);
    memmove(sd->ready, sd->ready + n, sizeof(*out) * (size_t)(sd->nready - n));
    sd->nready -= n;
    return n;
}

int sd_pop(serve_direct *sd, int max, int wait_ms, int delay_ms, serve_msg *out)
{
    if (sd->nready == 0) poll_once(sd, wait_ms);
    int n = take(sd, out, max);
    if (n == 0 || n == max) return n;
    poll_once(sd, 0); /* what else is there now */
    n += take(sd, out + n, max - n);
    if (n == 1 || delay_ms <= 0) return n; /* only under load is it worth waiting for the batch to fill */
    int64_t end = clock_mono_us() / 1000 + delay_ms;
    for (int64_t left; n < max && (left = end - clock_mono_us() / 1000) > 0;) {
        poll_once(sd, (int)left);
        n += take(sd, out + n, max - n);
    }
    return n;
}

/* all of iov on a nonblocking socket within REPLY_WRITE_MS: 0, or -1 */
static int write_all(int fd, struct iovec *iov, int cnt)
{
    int64_t end = clock_mono_us() / 1000 + REPLY_WRITE_MS;
    while (cnt > 0) {
        ssize_t w = writev(fd, iov, cnt);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
            int64_t left = end - clock_mono_us() / 1000;
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            if (left <= 0 || poll(&pf, 1, (int)left) <= 0) return -1;
            continue;
        }
        while (cnt > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++, cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

void sd_reply(serve_direct *sd, serve_msg *msgs, int n)
{
    replica_shm *shm = sd->shm;
    for (int i = 0; i < n; i++) {
        serve_msg *m = &msgs[i];
        if (m->reply_to) continue;
        int status;
        char *body = serve_msg_answer(m, &status);
        conn *c = m->conn >= 0 && m->conn < SD_MAX_CONNS ? &sd->conns[m->conn] : NULL;
        if (c && c->fd >= 0 && c->gen == m->conn_gen) { /* else the connection closed: its server gave up */
            size_t blen = body ? strlen(body) : 0;
            unsigned char head[IF_HEAD];
            if_head_encode(head, &(if_head){.kind = IF_REPLY, .arg = (uint32_t)status, .id = m->seq, .len = blen});
            struct iovec iov[2] = {{head, IF_HEAD}, {body, blen}};
            if (write_all(c->fd, iov, blen ? 2 : 1) != 0) drop(sd, c);
        }
        free(body);
        rs_release(shm, m->raw);
        m->raw = NULL;
    }
}

void sd_close(serve_direct *sd)
{
    if (!sd) return;
    for (int i = 0; i < SD_MAX_CONNS; i++)
        if (sd->conns[i].fd >= 0) drop(sd, &sd->conns[i]);
    for (int i = 0; i < sd->nready; i++)
        rs_release(sd->shm, sd->ready[i].raw);
    free(sd->ready);
    close(sd->lfd);
    free(sd);
}
