/* test_ring.c - the TCP ring (workers/comm/ring.c): ranks as threads on 127.0.0.1. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "workers/comm/ring.h"

#define MAXW 5

typedef struct {
    int rank, world, listen_fd, port;
    const char *token;
    int (*body)(void *self);
    ring *r;
    float *buf;
    size_t n;
    int rc, timeout_ms, die_at; /* die_at: close the sockets instead of the all-reduce */
    double elapsed;
    char err[512];
    pthread_barrier_t *ready;
    int *ports;
} rank_t;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    while (d && readdir(d))
        n++;
    if (d) closedir(d);
    return n;
}

static void *run_rank(void *arg)
{
    rank_t *t = arg;
    pthread_barrier_wait(t->ready); /* every port is known */
    char next[64];
    snprintf(next, sizeof next, "127.0.0.1:%d", t->ports[(t->rank + 1) % t->world]);
    t->r = ring_connect(t->listen_fd, t->rank, t->world, next, t->token, t->timeout_ms, t->err, sizeof t->err);
    if (!t->r) {
        t->rc = -9;
        return NULL;
    }
    t->rc = t->body(t);
    return NULL;
}

static int do_allreduce(void *self)
{
    rank_t *t = self;
    double t0 = now();
    int rc = ring_allreduce(t->r, t->buf, t->n, t->timeout_ms, t->err, sizeof t->err);
    t->elapsed = now() - t0;
    return rc;
}

/* starts `world` ranks running body; tokens[r] may differ to test rejection */
static void run_ring(rank_t *ranks, int world, int (*body)(void *), const char **tokens)
{
    pthread_barrier_t ready;
    pthread_barrier_init(&ready, NULL, (unsigned)world);
    int ports[MAXW];
    pthread_t th[MAXW];
    for (int r = 0; r < world; r++) {
        char err[256];
        if (!ranks[r].port) /* else the test made the listener already */
            ranks[r].listen_fd = ring_listen("127.0.0.1", &ranks[r].port, err, sizeof err);
        assert_true(ranks[r].listen_fd >= 0);
        ports[r] = ranks[r].port;
        ranks[r].rank = r, ranks[r].world = world, ranks[r].body = body, ranks[r].ready = &ready, ranks[r].ports = ports;
        ranks[r].token = tokens ? tokens[r] : "job:0";
        if (!ranks[r].timeout_ms) ranks[r].timeout_ms = 5000;
    }
    for (int r = 0; r < world; r++)
        pthread_create(&th[r], NULL, run_rank, &ranks[r]);
    for (int r = 0; r < world; r++)
        pthread_join(th[r], NULL);
    pthread_barrier_destroy(&ready);
}

static void test_allreduce_sums(void **state)
{
    (void)state;
    int fds = count_fds();
    size_t sizes[] = {0, 1, 3, 0 /* world - 1 */, 7, 1000, 1000003};
    for (int w = 1; w <= MAXW; w++)
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            size_t n = si == 3 ? (size_t)w - 1 : sizes[si];
            rank_t ranks[MAXW] = {0};
            for (int r = 0; r < w; r++) {
                ranks[r].n = n;
                ranks[r].buf = malloc(sizeof(float) * (n ? n : 1));
                for (size_t i = 0; i < n; i++) /* integers: the sums are exact */
                    ranks[r].buf[i] = (float)((i * 7 + (size_t)r * 13) % 101);
            }
            run_ring(ranks, w, do_allreduce, NULL);
            for (int r = 0; r < w; r++) {
                if (ranks[r].rc != 0) fail_msg("world %d n %zu rank %d: %s", w, n, r, ranks[r].err);
                for (size_t i = 0; i < n; i++) {
                    float want = 0;
                    for (int q = 0; q < w; q++)
                        want += (float)((i * 7 + (size_t)q * 13) % 101);
                    if (ranks[r].buf[i] != want)
                        fail_msg("world %d n %zu rank %d [%zu] = %g, want %g", w, n, r, i, ranks[r].buf[i], want);
                }
                if (n) assert_memory_equal(ranks[r].buf, ranks[0].buf, n * sizeof(float));
            }
            for (int r = 0; r < w; r++) {
                ring_close(ranks[r].r);
                free(ranks[r].buf);
            }
        }
    assert_int_equal(count_fds(), fds); /* nothing leaked */
}

static void test_allreduce_bit_identical(void **state)
{
    (void)state;
    /* non-integer values: each chunk is summed in one order, so all ranks agree bit for bit */
    rank_t ranks[3] = {0};
    for (int r = 0; r < 3; r++) {
        ranks[r].n = 100001;
        ranks[r].buf = malloc(sizeof(float) * ranks[r].n);
        for (size_t i = 0; i < ranks[r].n; i++)
            ranks[r].buf[i] = 1.0f / (float)(i + (size_t)r + 3);
    }
    run_ring(ranks, 3, do_allreduce, NULL);
    for (int r = 0; r < 3; r++) {
        assert_int_equal(ranks[r].rc, 0);
        assert_memory_equal(ranks[r].buf, ranks[0].buf, ranks[0].n * sizeof(float));
    }
    for (int r = 0; r < 3; r++) {
        ring_close(ranks[r].r);
        free(ranks[r].buf);
    }
}

static int do_broadcast(void *self)
{
    rank_t *t = self;
    return ring_broadcast(t->r, t->buf, t->n * sizeof(float), t->die_at, t->timeout_ms, t->err, sizeof t->err);
}

static void test_broadcast(void **state)
{
    (void)state;
    for (int w = 1; w <= 4; w++)
        for (int root = 0; root < w; root++) {
            rank_t ranks[MAXW] = {0};
            for (int r = 0; r < w; r++) {
                ranks[r].n = 300001;
                ranks[r].die_at = root; /* (the root, for do_broadcast) */
                ranks[r].buf = calloc(ranks[r].n, sizeof(float));
                if (r == root)
                    for (size_t i = 0; i < ranks[r].n; i++)
                        ranks[r].buf[i] = (float)i;
            }
            run_ring(ranks, w, do_broadcast, NULL);
            for (int r = 0; r < w; r++) {
                if (ranks[r].rc != 0) fail_msg("world %d root %d rank %d: %s", w, root, r, ranks[r].err);
                assert_memory_equal(ranks[r].buf, ranks[root].buf, ranks[r].n * sizeof(float));
            }
            for (int r = 0; r < w; r++) {
                ring_close(ranks[r].r);
                free(ranks[r].buf);
            }
        }
}

static void test_wrong_token_rejected(void **state)
{
    (void)state;
    int fds = count_fds();
    const char *tokens[] = {"job:1", "job:2"}; /* another generation */
    rank_t ranks[2] = {0};
    for (int r = 0; r < 2; r++)
        ranks[r].n = 1, ranks[r].buf = calloc(1, sizeof(float)), ranks[r].timeout_ms = 500;
    double t0 = now();
    run_ring(ranks, 2, do_allreduce, tokens);
    for (int r = 0; r < 2; r++) {
        assert_int_equal(ranks[r].rc, -9);
        assert_non_null(strstr(ranks[r].err, "did not connect"));
        free(ranks[r].buf);
    }
    assert_true(now() - t0 < 3.0);
    assert_int_equal(count_fds(), fds);
}

static int connect_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* rank 0's backlog holds, before its real peer: a rank of an earlier generation
 * (another token), a stranger sending garbage and one sending nothing; rank 0
 * drops each and the ring still forms */
static void test_stray_then_peer_connects(void **state)
{
    (void)state;
    int fds = count_fds();
    rank_t ranks[2] = {0};
    char err[256], addr[64];
    ranks[0].listen_fd = ring_listen("127.0.0.1", &ranks[0].port, err, sizeof err);
    assert_true(ranks[0].listen_fd >= 0);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ranks[0].port);
    int port, stale = ring_listen("127.0.0.1", &port, err, sizeof err);
    /* the stale rank says hello to rank 0, then gives up: nobody connects to it */
    assert_null(ring_connect(stale, 1, 2, addr, "job:old", 300, err, sizeof err));
    assert_non_null(strstr(err, "did not connect"));
    int garbage = connect_port(ranks[0].port), silent = connect_port(ranks[0].port);
    char junk[64];
    memset(junk, 'x', sizeof junk);
    assert_int_equal(write(garbage, junk, sizeof junk), (ssize_t)sizeof junk);
    for (int r = 0; r < 2; r++) {
        ranks[r].n = 1000, ranks[r].buf = malloc(sizeof(float) * 1000);
        for (size_t i = 0; i < 1000; i++)
            ranks[r].buf[i] = (float)(i + (size_t)r);
    }
    double t0 = now();
    run_ring(ranks, 2, do_allreduce, NULL);
    assert_true(now() - t0 < 4.0); /* the silent one is dropped after a second, not at the deadline */
    for (int r = 0; r < 2; r++) {
        if (ranks[r].rc != 0) fail_msg("rank %d: %s", r, ranks[r].err);
        for (size_t i = 0; i < 1000; i++)
            assert_true(ranks[r].buf[i] == (float)(2 * i + 1));
        ring_close(ranks[r].r);
        free(ranks[r].buf);
    }
    close(garbage), close(silent);
    assert_int_equal(count_fds(), fds);
}

/* each rank sends r * 1000 bytes of the value r (rank 0: nothing) and gets its previous rank's */
static int do_shift(void *self)
{
    rank_t *t = self;
    size_t len = (size_t)t->rank * 1000;
    unsigned char *out = malloc(len + 1);
    memset(out, t->rank, len + 1);
    void *in = NULL;
    size_t in_len = 0;
    int rc = ring_shift(t->r, out, len, &in, &in_len, t->timeout_ms, t->err, sizeof t->err);
    free(out);
    int prev = (t->rank + t->world - 1) % t->world;
    if (rc == 0 && in_len != (size_t)prev * 1000) rc = -2;
    for (size_t i = 0; rc == 0 && i < in_len; i++)
        if (((unsigned char *)in)[i] != prev) rc = -3;
    if (rc == 0 && in_len == 0 && in) rc = -4;
    free(in);
    return rc;
}

static void test_shift(void **state)
{
    (void)state;
    int fds = count_fds();
    for (int w = 1; w <= MAXW; w++) {
        rank_t ranks[MAXW] = {0};
        run_ring(ranks, w, do_shift, NULL);
        for (int r = 0; r < w; r++) {
            if (ranks[r].rc != 0) fail_msg("world %d rank %d: rc %d %s", w, r, ranks[r].rc, ranks[r].err);
            ring_close(ranks[r].r);
        }
    }
    assert_int_equal(count_fds(), fds);
}

/* rank 1 closes its sockets instead of taking part */
static int die_or_reduce(void *self)
{
    rank_t *t = self;
    if (t->rank == t->die_at) {
        ring_close(t->r);
        t->r = NULL;
        return 0;
    }
    return do_allreduce(self);
}

static void test_peer_closed_fails_fast(void **state)
{
    (void)state;
    int fds = count_fds();
    /* world 3: both others are neighbours of rank 1; world 5: ranks 3 and 4 are
     * not, and learn it from the ranks that gave up before them */
    for (int w = 3; w <= 5; w += 2) {
        rank_t ranks[MAXW] = {0};
        for (int r = 0; r < w; r++) {
            ranks[r].n = 1000000, ranks[r].buf = calloc(ranks[r].n, sizeof(float));
            ranks[r].die_at = 1, ranks[r].timeout_ms = 20000;
        }
        run_ring(ranks, w, die_or_reduce, NULL);
        for (int r = 0; r < w; r++) {
            if (r != 1) {
                /* far below the 20 s timeout: a closed socket is noticed at once */
                if (ranks[r].rc != -1 || ranks[r].elapsed > 5.0)
                    fail_msg("world %d rank %d: rc %d after %.2f s: %s", w, r, ranks[r].rc, ranks[r].elapsed, ranks[r].err);
                assert_non_null(strstr(ranks[r].err, "all-reduce: rank "));
                /* the ring is unusable afterwards */
                char err[256];
                assert_int_equal(ring_allreduce(ranks[r].r, ranks[r].buf, 4, 100, err, sizeof err), -1);
                ring_close(ranks[r].r);
            }
            free(ranks[r].buf);
        }
    }
    assert_int_equal(count_fds(), fds);
}

/* rank 1 stays connected but never sends: a hung peer */
static pthread_barrier_t hang_done;
static int hang_or_reduce(void *self)
{
    rank_t *t = self;
    if (t->rank == 1) {
        pthread_barrier_wait(&hang_done); /* until the others gave up */
        ring_close(t->r);
        t->r = NULL;
        return 0;
    }
    int rc = do_allreduce(self);
    pthread_barrier_wait(&hang_done);
    return rc;
}

static void test_hung_peer_times_out(void **state)
{
    (void)state;
    int fds = count_fds();
    rank_t ranks[4] = {0};
    pthread_barrier_init(&hang_done, NULL, 4);
    for (int r = 0; r < 4; r++)
        ranks[r].n = 1000, ranks[r].buf = calloc(ranks[r].n, sizeof(float)), ranks[r].timeout_ms = 300;
    run_ring(ranks, 4, hang_or_reduce, NULL);
    /* the first to time out gives up its connections, so the others may fail on that instead */
    int timed_out = 0;
    for (int r = 0; r < 4; r++) {
        if (r != 1) {
            if (ranks[r].rc != -1 || ranks[r].elapsed < 0.25 || ranks[r].elapsed > 2.0)
                fail_msg("rank %d: rc %d after %.2f s: %s", r, ranks[r].rc, ranks[r].elapsed, ranks[r].err);
            timed_out += strstr(ranks[r].err, "all-reduce: no progress for 300 ms") != NULL;
            if (!strstr(ranks[r].err, "no progress") && !strstr(ranks[r].err, "closed the connection"))
                fail_msg("rank %d: %s", r, ranks[r].err);
            ring_close(ranks[r].r);
        }
        free(ranks[r].buf);
    }
    assert_true(timed_out >= 1);
    pthread_barrier_destroy(&hang_done);
    assert_int_equal(count_fds(), fds);
}

static void test_setup_errors(void **state)
{
    (void)state;
    char err[256];
    int port;
    assert_int_equal(ring_listen("no-such-host.invalid", &port, err, sizeof err), -1);
    assert_non_null(strstr(err, "no-such-host.invalid"));
    int fd = ring_listen("127.0.0.1", &port, err, sizeof err);
    assert_true(fd >= 0 && port > 0);
    assert_null(ring_connect(fd, 0, 2, "127.0.0.1", "t", 200, err, sizeof err));
    assert_non_null(strstr(err, "host:port"));
    fd = ring_listen("127.0.0.1", &port, err, sizeof err);
    /* nobody listens on the next port, and nobody connects to us */
    int fd2 = ring_listen("127.0.0.1", &port, err, sizeof err);
    close(fd2);
    char next[64];
    snprintf(next, sizeof next, "127.0.0.1:%d", port);
    double t0 = now();
    assert_null(ring_connect(fd, 0, 2, next, "t", 300, err, sizeof err));
    assert_true(now() - t0 < 2.0);
    assert_non_null(strstr(err, "cannot connect"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_sums),
        cmocka_unit_test(test_allreduce_bit_identical),
        cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_shift),
        cmocka_unit_test(test_wrong_token_rejected),
        cmocka_unit_test(test_stray_then_peer_connects),
        cmocka_unit_test(test_peer_closed_fails_fast),
        cmocka_unit_test(test_hung_peer_times_out),
        cmocka_unit_test(test_setup_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
