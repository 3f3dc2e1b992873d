/* test_mesh.c - tree and star all-reduce over a real TCP mesh on loopback
 * (threads as ranks): exact sums for every world and size, bit-identical
 * results, a closed peer failing the others fast, no fd leaks. */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "workers/comm/mesh.h"
#include "workers/comm/ring.h"

#define MAXW 6

typedef struct {
    int rank, world, listen_fd, fanout, die;
    const char *const *addrs;
    pthread_barrier_t *ready;
    float *buf;
    size_t n;
    int rc;
    double elapsed;
    char err[512];
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

static void *run(void *arg)
{
    rank_t *t = arg;
    pthread_barrier_wait(t->ready);
    mesh *m = mesh_connect(t->listen_fd, t->rank, t->world, t->addrs, "job:1", 5000, t->err, sizeof t->err);
    if (!m) {
        t->rc = -9;
        return NULL;
    }
    if (t->die) { /* gone instead of taking part */
        mesh_close(m);
        t->rc = 0;
        return NULL;
    }
    double t0 = now();
    t->rc = mesh_allreduce(m, t->buf, t->n, t->fanout, 20000, t->err, sizeof t->err);
    t->elapsed = now() - t0;
    mesh_close(m);
    return NULL;
}

static void run_mesh(rank_t *ranks, int world)
{
    static char addr[MAXW][32];
    const char *addrs[MAXW];
    pthread_barrier_t ready;
    pthread_barrier_init(&ready, NULL, (unsigned)world);
    pthread_t th[MAXW];
    for (int r = 0; r < world; r++) {
        char err[256];
        int port = 0;
        ranks[r].listen_fd = ring_listen("127.0.0.1", &port, err, sizeof err);
        assert_true(ranks[r].listen_fd >= 0);
        snprintf(addr[r], sizeof addr[r], "127.0.0.1:%d", port);
        addrs[r] = addr[r];
        ranks[r].rank = r, ranks[r].world = world, ranks[r].addrs = addrs, ranks[r].ready = &ready;
    }
    for (int r = 0; r < world; r++)
        pthread_create(&th[r], NULL, run, &ranks[r]);
    for (int r = 0; r < world; r++)
        pthread_join(th[r], NULL);
    pthread_barrier_destroy(&ready);
}

static void test_tree_and_star_sums(void **state)
{
    (void)state;
    int fds = count_fds();
    size_t sizes[] = {0, 1, 5, 1000, 300001};
    for (int w = 1; w <= MAXW; w++)
        for (int fan = 0; fan < 2; fan++)
            for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
                size_t n = sizes[si];
                rank_t ranks[MAXW] = {0};
                for (int r = 0; r < w; r++) {
                    ranks[r].n = n, ranks[r].fanout = fan ? w - 1 : 2;
                    ranks[r].buf = malloc(sizeof(float) * (n ? n : 1));
                    for (size_t i = 0; i < n; i++)
                        ranks[r].buf[i] = (float)((i * 5 + (size_t)r * 11) % 97);
                }
                run_mesh(ranks, w);
                for (int r = 0; r < w; r++) {
                    if (ranks[r].rc != 0) fail_msg("world %d fanout %d n %zu rank %d: %s", w, ranks[r].fanout, n, r, ranks[r].err);
                    for (size_t i = 0; i < n; i++) {
                        float want = 0;
                        for (int q = 0; q < w; q++)
                            want += (float)((i * 5 + (size_t)q * 11) % 97);
                        if (ranks[r].buf[i] != want)
                            fail_msg("world %d n %zu rank %d [%zu] = %g, want %g", w, n, r, i, ranks[r].buf[i], want);
                    }
                }
                for (int r = 0; r < w; r++)
                    free(ranks[r].buf);
            }
    assert_int_equal(count_fds(), fds);
}

static void test_bit_identical(void **state)
{
    (void)state;
    rank_t ranks[MAXW] = {0};
    for (int r = 0; r < 5; r++) {
        ranks[r].n = 4097, ranks[r].fanout = 2, ranks[r].buf = malloc(sizeof(float) * 4097);
        for (size_t i = 0; i < 4097; i++)
            ranks[r].buf[i] = 1.0f / (float)(i + 1 + (size_t)r * 3) + 1e-7f * (float)r;
    }
    run_mesh(ranks, 5);
    for (int r = 0; r < 5; r++) {
        assert_int_equal(ranks[r].rc, 0);
        assert_memory_equal(ranks[r].buf, ranks[0].buf, 4097 * sizeof(float));
    }
    for (int r = 0; r < 5; r++)
        free(ranks[r].buf);
}

static void test_closed_peer_fails_fast(void **state)
{
    (void)state;
    int fds = count_fds();
    for (int fan = 0; fan < 2; fan++) {
        rank_t ranks[MAXW] = {0};
        for (int r = 0; r < 5; r++) {
            ranks[r].n = 1000000, ranks[r].fanout = fan ? 4 : 2, ranks[r].buf = calloc(1000000, sizeof(float));
            ranks[r].die = r == 3;
        }
        run_mesh(ranks, 5);
        for (int r = 0; r < 5; r++) {
            if (r != 3 && (ranks[r].rc != -1 || ranks[r].elapsed > 5.0))
                fail_msg("fanout %d rank %d: rc %d after %.2f s: %s", ranks[r].fanout, r, ranks[r].rc, ranks[r].elapsed,
                         ranks[r].err);
            free(ranks[r].buf);
        }
    }
    assert_int_equal(count_fds(), fds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tree_and_star_sums),
        cmocka_unit_test(test_bit_identical),
        cmocka_unit_test(test_closed_peer_fails_fast),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
