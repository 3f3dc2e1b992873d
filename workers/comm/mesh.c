/* mesh.c - tree and star all-reduce over a full mesh (mesh.h). */
#include "workers/comm/mesh.h"
#include "common/alloc.h"
#include "workers/comm/sock.h"

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MESH_SEGMENT (1 << 18) /* floats per read of a child's buffer */

struct mesh {
    int rank, world;
    int *fd; /* fd[r]: the connection to rank r (-1 for ourselves) */
    bool broken;
    float *tmp;
};

void mesh_close(mesh *m)
{
    if (!m) return;
    for (int r = 0; r < m->world; r++)
        if (m->fd[r] >= 0) close(m->fd[r]);
    free(m->fd);
    free(m->tmp);
    free(m);
}

mesh *mesh_connect(int listen_fd, int rank, int world, const char *const *addrs, const char *token, int timeout_ms, char *err,
                   size_t errlen)
{
    if (strlen(token) > SOCK_TOKEN_MAX) {
        snprintf(err, errlen, "mesh: a token longer than %d bytes", SOCK_TOKEN_MAX);
        close(listen_fd);
        return NULL;
    }
    mesh *m = xcalloc(1, sizeof *m);
    int *fd = xcalloc((size_t)(world > 0 ? world : 1), sizeof(int));
    float *tmp = xmalloc(sizeof(float) * MESH_SEGMENT);
    m->rank = rank, m->world = world, m->fd = fd, m->tmp = tmp;
    for (int r = 0; r < world; r++)
        fd[r] = -1;
    int64_t deadline = sock_now_ms() + timeout_ms;
    int missing = 0;
    /* dial the lower ranks (the kernel completes handshakes from the backlog: no deadlock) */
    for (int r = 0; r < rank && missing == 0; r++) {
        fd[r] = sock_dial(addrs[r], deadline, err, errlen);
        if (fd[r] < 0 || sock_send_hello(fd[r], rank, world, token, deadline) != 0) {
            if (fd[r] >= 0) snprintf(err, errlen, "mesh: rank %d closed the connection during setup", r);
            missing = 1;
        }
    }
    /* accept the higher ones, identified by their hello */
    int want = world - 1 - rank;
    while (missing == 0 && want > 0) {
        if (sock_wait_fd(listen_fd, POLLIN, sock_left_ms(deadline)) <= 0) {
            snprintf(err, errlen, "mesh: %d higher rank%s did not connect within %d ms", want, want == 1 ? "" : "s", timeout_ms);
            missing = 1;
            break;
        }
        int c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0) continue;
        int64_t hello_by = sock_now_ms() + SOCK_HELLO_MS;
        int from = sock_read_hello(c, world, token, hello_by < deadline ? hello_by : deadline);
        if (from <= rank || fd[from] >= 0) from = -1;
        if (from < 0) {
            close(c); /* a stray, stale or duplicate connection */
            continue;
        }
        sock_tune(c);
        fd[from] = c, want--;
    }
    close(listen_fd);
    if (missing) {
        mesh_close(m);
        return NULL;
    }
    return m;
}

static int fail(mesh *m, const char *what, int peer, char *err, size_t errlen)
{
    snprintf(err, errlen, "mesh all-reduce: %s rank %d failed (closed, or no progress in time)", what, peer);
    m->broken = true;
    for (int r = 0; r < m->world; r++)
        if (m->fd[r] >= 0) shutdown(m->fd[r], SHUT_RDWR);
    return -1;
}

int mesh_allreduce(mesh *m, float *buf, size_t n, int fanout, int timeout_ms, char *err, size_t errlen)
{
    if (m->broken) {
        snprintf(err, errlen, "mesh all-reduce: the mesh is broken by an earlier error");
        return -1;
    }
    int w = m->world, r = m->rank, k = fanout < 1 ? 1 : fanout;
    if (w == 1 || n == 0) return 0;
    int first = r * k + 1, last = r * k + k < w - 1 ? r * k + k : w - 1, parent = r ? (r - 1) / k : -1;
    /* up: the children's sums, added in child order */
    for (int c = first; c <= last; c++)
        for (size_t off = 0; off < n; off += MESH_SEGMENT) {
            size_t len = n - off < MESH_SEGMENT ? n - off : MESH_SEGMENT;
            if (sock_read_all(m->fd[c], m->tmp, sizeof(float) * len, sock_now_ms() + timeout_ms) != 0)
                return fail(m, "from child", c, err, errlen);
            for (size_t i = 0; i < len; i++)
                buf[off + i] += m->tmp[i];
        }
    if (parent >= 0) {
        if (sock_write_all(m->fd[parent], buf, sizeof(float) * n, sock_now_ms() + timeout_ms) != 0)
            return fail(m, "to parent", parent, err, errlen);
        /* down: the root's total */
        if (sock_read_all(m->fd[parent], buf, sizeof(float) * n, sock_now_ms() + timeout_ms) != 0)
            return fail(m, "from parent", parent, err, errlen);
    }
    for (int c = first; c <= last; c++)
        if (sock_write_all(m->fd[c], buf, sizeof(float) * n, sock_now_ms() + timeout_ms) != 0)
            return fail(m, "to child", c, err, errlen);
    return 0;
}
