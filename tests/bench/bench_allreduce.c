/* bench_allreduce.c - bus bandwidth of the CPU ring all-reduce (workers/comm/ring.c)
 * against raw TCP on the same ring, in one run, on loopback.
 *
 *   gantry-bench-allreduce [--world 2,3,4] [--mib 64] [--reps 5]
 *
 * Each rank is a process (as the training workers are).  For every world size:
 *   raw ring TCP: every rank streams to the next rank, at the same time, the
 *     bytes an all-reduce moves per link (2(n-1)/n x size), from one buffer of
 *     that size into another, with plain send/recv over nonblocking sockets (calls
 *     of up to RAW_CALL bytes, its best here) and no reduction: the ceiling of any
 *     ring algorithm on this machine;
 *   all-reduce: ring_allreduce on `size` bytes of floats; bus bandwidth =
 *     2(n-1)/n x size / time (the NCCL-tests definition).
 * The two alternate rep by rep (this VM's loopback throughput swings between
 * runs).  Times are the slowest rank's, median of the reps.  Prints a markdown table,
 * after one line for context: a single stream between two processes on loopback. */
#include "workers/comm/ring.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXW 16
#define MAXREPS 64
#define RAW_CALL ((size_t)4 << 20) /* bytes per raw send/recv: the socket buffer (256 KiB calls ran ~15% slower) */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* the raw baseline: send `bytes` to next while receiving as many from prev */
static void raw_exchange(int next, int prev, char *sbuf, char *rbuf, size_t bytes)
{
    size_t sent = 0, got = 0;
    while (sent < bytes || got < bytes) {
        struct pollfd p[2] = {{next, sent < bytes ? POLLOUT : 0, 0}, {prev, got < bytes ? POLLIN : 0, 0}};
        if (poll(p, 2, 10000) <= 0) {
            fprintf(stderr, "raw exchange stalled\n");
            exit(1);
        }
        if (p[0].revents & POLLOUT) {
            ssize_t k = send(next, sbuf + sent, bytes - sent < RAW_CALL ? bytes - sent : RAW_CALL, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (k > 0) sent += (size_t)k;
        }
        if (p[1].revents & POLLIN) {
            ssize_t k = recv(prev, rbuf + got, bytes - got < RAW_CALL ? bytes - got : RAW_CALL, MSG_DONTWAIT);
            if (k == 0) exit(1);
            if (k > 0) got += (size_t)k;
        }
    }
}

static int tcp_listen(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1, buf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 8) || getsockname(fd, (struct sockaddr *)&a, &len)) exit(1);
    *port = ntohs(a.sin_port);
    return fd;
}

static int tcp_dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1, buf = 4 << 20;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof(a))) exit(1);
    return fd;
}

/* one process streams `bytes` to another, a go byte before each rep; GB/s, median of reps */
static double single_stream(size_t bytes, int reps)
{
    int port, lfd = tcp_listen(&port);
    char *data = malloc(bytes);
    memset(data, 3, bytes);
    pid_t pid = fork();
    if (pid == 0) { /* the sender */
        close(lfd);
        int fd = tcp_dial(port);
        char go;
        for (int k = 0; k < reps; k++) {
            if (recv(fd, &go, 1, MSG_WAITALL) != 1) exit(1);
            for (size_t sent = 0; sent < bytes;) {
                ssize_t n = send(fd, data + sent, bytes - sent < RAW_CALL ? bytes - sent : RAW_CALL, MSG_NOSIGNAL);
                if (n <= 0) exit(1);
                sent += (size_t)n;
            }
        }
        exit(0);
    }
    int fd = accept(lfd, NULL, NULL);
    close(lfd);
    double t[MAXREPS];
    for (int k = 0; k < reps; k++) {
        double t0 = now();
        if (fd < 0 || send(fd, "g", 1, MSG_NOSIGNAL) != 1) exit(1);
        for (size_t got = 0; got < bytes;) {
            ssize_t n = recv(fd, data + got, bytes - got < RAW_CALL ? bytes - got : RAW_CALL, 0);
            if (n <= 0) exit(1);
            got += (size_t)n;
        }
        t[k] = now() - t0;
    }
    close(fd);
    waitpid(pid, NULL, 0);
    free(data);
    qsort(t, (size_t)reps, sizeof(double), cmp);
    return (double)bytes / t[reps / 2] / 1e9;
}

/* rank r's work; writes reps raw times then reps all-reduce times to `out` */
static void rank_main(int r, int w, int lfd_ring, const int *ring_ports, int lfd_raw, const int *raw_ports, size_t bytes, int reps,
                      int out)
{
    char err[512], next[64];
    snprintf(next, sizeof(next), "127.0.0.1:%d", ring_ports[(r + 1) % w]);
    ring *rg = ring_connect(lfd_ring, r, w, next, "bench:0", 10000, err, sizeof(err));
    if (!rg) {
        fprintf(stderr, "rank %d: %s\n", r, err);
        exit(1);
    }
    int nxt = tcp_dial(raw_ports[(r + 1) % w]), prv = accept(lfd_raw, NULL, NULL);
    size_t n = bytes / sizeof(float), link = (size_t)(2.0 * (w - 1) / w * (double)bytes);
    float *buf = malloc(n * sizeof(float));
    /* the raw stream moves the same amount of memory as the all-reduce: from and into
     * buffers as large as the link's bytes, not a small cache-hot one */
    char *rbuf = malloc(link), *sbuf = malloc(link);
    memset(rbuf, 1, link), memset(sbuf, 2, link);
    double times[2 * MAXREPS];
    for (size_t i = 0; i < n; i++)
        buf[i] = 1.0f;
    /* warm-up, then barrier-like all-reduce of one float before each timed rep */
    ring_allreduce(rg, buf, n, 10000, err, sizeof(err));
    float one = 1;
    /* raw and all-reduce alternate, so that both meet the same conditions on a noisy machine */
    for (int k = 0; k < reps; k++) {
        ring_allreduce(rg, &one, 1, 10000, err, sizeof(err));
        double t0 = now();
        raw_exchange(nxt, prv, sbuf, rbuf, link);
        times[k] = now() - t0;
        ring_allreduce(rg, &one, 1, 10000, err, sizeof(err));
        t0 = now();
        if (ring_allreduce(rg, buf, n, 10000, err, sizeof(err))) {
            fprintf(stderr, "rank %d: %s\n", r, err);
            exit(1);
        }
        times[reps + k] = now() - t0;
    }
    if (write(out, times, sizeof(double) * 2 * (size_t)reps) < 0) exit(1);
    ring_close(rg);
    exit(0);
}

int main(int argc, char **argv)
{
    char worlds[64] = "2,3,4";
    double mib = 64;
    int reps = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--world")) snprintf(worlds, sizeof(worlds), "%s", argv[i + 1]);
        if (!strcmp(argv[i], "--mib")) mib = atof(argv[i + 1]);
        if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    if (reps < 1 || reps > MAXREPS || mib <= 0) {
        fprintf(stderr, "usage: gantry-bench-allreduce [--world 2,3,4] [--mib 64] [--reps 1..64]\n");
        return 2;
    }
    size_t bytes = (size_t)(mib * 1024 * 1024) / sizeof(float) * sizeof(float);
    fflush(stdout); /* before fork: the children must not print again what is buffered */
    printf("Single-stream loopback TCP (one process to another, %.0f MiB): %.2f GB/s\n\n", mib, single_stream(bytes, reps));
    printf("| ranks | size | raw ring TCP per link | all-reduce bus bandwidth | ratio |\n|---|---|---|---|---|\n");
    fflush(stdout);
    for (char *tok = strtok(worlds, ","); tok; tok = strtok(NULL, ",")) {
        int w = atoi(tok);
        if (w < 2 || w > MAXW) continue;
        int lring[MAXW], pring[MAXW], lraw[MAXW], praw[MAXW], pipes[MAXW][2];
        char err[256];
        for (int r = 0; r < w; r++) {
            lring[r] = ring_listen("127.0.0.1", &pring[r], err, sizeof(err));
            lraw[r] = tcp_listen(&praw[r]);
            if (lring[r] < 0 || pipe(pipes[r])) return 1;
        }
        for (int r = 0; r < w; r++)
            if (fork() == 0) rank_main(r, w, lring[r], pring, lraw[r], praw, bytes, reps, pipes[r][1]);
        double worst[2 * MAXREPS] = {0};
        for (int r = 0; r < w; r++) {
            double t[2 * MAXREPS];
            close(lring[r]), close(lraw[r]), close(pipes[r][1]);
            if (read(pipes[r][0], t, sizeof(double) * 2 * (size_t)reps) != (ssize_t)(sizeof(double) * 2 * (size_t)reps)) {
                fprintf(stderr, "rank %d failed\n", r);
                return 1;
            }
            for (int k = 0; k < 2 * reps; k++)
                if (t[k] > worst[k]) worst[k] = t[k];
        }
        while (wait(NULL) > 0)
            ;
        qsort(worst, (size_t)reps, sizeof(double), cmp);
        qsort(worst + reps, (size_t)reps, sizeof(double), cmp);
        double link = 2.0 * (w - 1) / w * (double)bytes;
        double raw = link / worst[reps / 2] / 1e9, bus = link / worst[reps + reps / 2] / 1e9;
        printf("| %d | %.0f MiB | %.2f GB/s | %.2f GB/s | %.2f |\n", w, mib, raw, bus, bus / raw);
        fflush(stdout);
    }
    return 0;
}
