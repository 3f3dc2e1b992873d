/* sock.c - the socket helpers of the gang collectives (sock.h). */
#include "workers/comm/sock.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SOCK_MAGIC 0x474e5452u /* "GNTR" */
#define SOCK_VERSION 1u
#define SOCK_BUF (4 << 20)

int64_t sock_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int sock_left_ms(int64_t deadline)
{
    int64_t l = deadline - sock_now_ms();
    return l < 0 ? 0 : l > 1000000 ? 1000000 : (int)l;
}

void sock_tune(int fd)
{
    int one = 1, buf = SOCK_BUF;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
}

int sock_nonblocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int sock_listen(const char *bind_host, int *port, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res = NULL;
    int rc = getaddrinfo(bind_host, "0", &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "cannot resolve %s: %s", bind_host, gai_strerror(rc));
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        sock_tune(fd); /* accepted sockets inherit the buffer sizes (window scaling is set at the handshake) */
    }
    struct sockaddr_storage sa;
    socklen_t len = sizeof(sa);
    if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 64) != 0 || sock_nonblocking(fd) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", bind_host, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    /* getsockname wrote sa; glibc passes it as a transparent union (__SOCKADDR_ARG, under _GNU_SOURCE), which
     * clang 14's analyser does not see written: hence the NOLINT */
    bool v6 = sa.ss_family == AF_INET6; /* NOLINT(clang-analyzer-core.UndefinedBinaryOperatorResult): see above */
    *port = v6 ? ntohs(((struct sockaddr_in6 *)&sa)->sin6_port) : ntohs(((struct sockaddr_in *)&sa)->sin_port);
    return fd;
}

/* waits for fd to be ready for `events`; 1 ready, 0 timed out, -1 error */
int sock_wait_fd(int fd, short events, int ms)
{
    struct pollfd p = {fd, events, 0};
    for (;;) {
        int rc = poll(&p, 1, ms);
        if (rc < 0 && errno == EINTR) continue;
        return rc < 0 ? -1 : rc;
    }
}

/* blocking-style I/O on a nonblocking socket, bounded by the deadline; 0 or -1 */
int sock_write_all(int fd, const void *p, size_t n, int64_t deadline)
{
    const char *c = p;
    while (n > 0) {
        ssize_t k = send(fd, c, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) {
            c += k, n -= (size_t)k;
        } else if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (sock_wait_fd(fd, POLLOUT, sock_left_ms(deadline)) <= 0) return -1;
        } else {
            return -1;
        }
    }
    return 0;
}

int sock_read_all(int fd, void *p, size_t n, int64_t deadline)
{
    char *c = p;
    while (n > 0) {
        ssize_t k = recv(fd, c, n, MSG_DONTWAIT);
        if (k > 0) {
            c += k, n -= (size_t)k;
        } else if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (sock_wait_fd(fd, POLLIN, sock_left_ms(deadline)) <= 0) return -1;
        } else {
            return -1;
        }
    }
    return 0;
}

typedef struct {
    uint32_t magic, version, rank, world, toklen;
} hello;

int sock_send_hello(int fd, int rank, int world, const char *token, int64_t deadline)
{
    hello h = {SOCK_MAGIC, SOCK_VERSION, (uint32_t)rank, (uint32_t)world, (uint32_t)strlen(token)};
    return sock_write_all(fd, &h, sizeof(h), deadline) == 0 && sock_write_all(fd, token, h.toklen, deadline) == 0 ? 0 : -1;
}

int sock_read_hello(int fd, int world, const char *token, int64_t deadline)
{
    hello h;
    char tok[SOCK_TOKEN_MAX + 1];
    if (sock_read_all(fd, &h, sizeof(h), deadline) != 0 || h.magic != SOCK_MAGIC || h.version != SOCK_VERSION ||
        h.toklen > SOCK_TOKEN_MAX || sock_read_all(fd, tok, h.toklen, deadline) != 0)
        return -1;
    tok[h.toklen] = '\0';
    return strcmp(tok, token) == 0 && (int)h.world == world && h.rank < (uint32_t)world ? (int)h.rank : -1;
}

int sock_check_hello(int fd, int want_rank, int world, const char *token, int64_t deadline)
{
    return sock_read_hello(fd, world, token, deadline) == want_rank ? 0 : -1;
}

int sock_dial(const char *addr, int64_t deadline, char *err, size_t errlen)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof(host)) {
        snprintf(err, errlen, "bad peer address '%s' (want host:port)", addr);
        return -1;
    }
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, colon + 1, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "cannot resolve %s: %s", addr, gai_strerror(rc));
        return -1;
    }
    int last = 0;
    while (sock_left_ms(deadline) > 0) {
        int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) break;
        sock_tune(fd);
        sock_nonblocking(fd);
        if (connect(fd, res->ai_addr, res->ai_addrlen) == 0 ||
            (errno == EINPROGRESS && sock_wait_fd(fd, POLLOUT, sock_left_ms(deadline)) > 0)) {
            int soerr = 0;
            socklen_t sl = sizeof(soerr);
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
            if (soerr == 0) {
                freeaddrinfo(res);
                return fd;
            }
            last = soerr;
        } else {
            last = errno;
        }
        close(fd);
        struct timespec ts = {0, 20 * 1000000}; /* refused: the peer may not listen yet */
        nanosleep(&ts, NULL);
    }
    freeaddrinfo(res);
    snprintf(err, errlen, "cannot connect to %s: %s", addr, last ? strerror(last) : "timed out");
    return -1;
}
