/* test_replica_proc.c - a replica's process and its boundary (workers/replica_proc.h), for real:
 * bubblewrap, gantry-rank-init and the seccomp filter of gantry-replica, with a probe standing in
 * for the model (tests/unit/replica_probe.c).  Needs root and bwrap (the worker runs as root);
 * skipped otherwise.  Checks what a hostile model can reach while it loads (no secret file, no
 * network, no /proc, not root, no environment, nothing writable but a small /tmp), what the
 * filter stops once loaded (open, socket, fork), and the deadlines enforced from outside (a hung
 * batch, a crash while loading, a replica that breaks the wire format). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "workers/replica_proc.h"

static char dir[256], bin[300], model[300], secret[300];

static bool usable(void)
{
    return geteuid() == 0 && access("/usr/bin/bwrap", X_OK) == 0 && getenv("GANTRY_PROBE") && getenv("GANTRY_RANK_INIT");
}

static int setup(void **state)
{
    (void)state;
    if (!usable()) return 0;
    snprintf(dir, sizeof(dir), "/tmp/gantry-rp-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    snprintf(bin, sizeof(bin), "%s/bin", dir);
    snprintf(model, sizeof(model), "%s/model.pt", dir);
    snprintf(secret, sizeof(secret), "%s/admin.token", dir);
    mkdir(bin, 0755);
    char p[400];
    snprintf(p, sizeof(p), "%s/gantry-replica", bin);
    if (symlink(getenv("GANTRY_PROBE"), p) != 0) return -1;
    snprintf(p, sizeof(p), "%s/gantry-rank-init", bin);
    if (symlink(getenv("GANTRY_RANK_INIT"), p) != 0) return -1;
    FILE *f = fopen(model, "w");
    fputs("MODELBYTES\n", f);
    fclose(f);
    chmod(model, 0600); /* as the model store keeps it: the sandbox gets a copy */
    f = fopen(secret, "w");
    fputs("gty_secret\n", f);
    fclose(f);
    chmod(dir, 0755); /* even readable paths outside stay invisible */
    chmod(secret, 0644);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (!dir[0]) return 0;
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static replica_proc *start_with(const char *mode, const char *extra, replica_shm *shm)
{
    char resolved[1024];
    snprintf(resolved, sizeof(resolved), "{\"version\":1,\"artifact\":\"%s\"%s}", model, extra ? extra : "");
    rp_spec s = {.name = mode, .resolved = resolved, .threads = 1, .memory_bytes = 256LL << 20, .bin_dir = bin, .shm = shm};
    char err[512];
    replica_proc *p = rp_start(&s, err, sizeof(err));
    assert_non_null(p);
    return p;
}

static replica_proc *start(const char *mode, const char *extra)
{
    return start_with(mode, extra, NULL);
}

#define NEED_SANDBOX()                                                                                                             \
    do {                                                                                                                           \
        if (!usable()) {                                                                                                           \
            fprintf(stderr, "skipped: needs root, /usr/bin/bwrap and the probe\n");                                                \
            skip();                                                                                                                \
        }                                                                                                                          \
    } while (0)

static int wait_ready(replica_proc *p, char *why, size_t whylen)
{
    int rc;
    int64_t until = clock_mono_us() + 20000000;
    while ((rc = rp_ready(p, 100, why, whylen)) == 0 && clock_mono_us() < until) {
    }
    return rc;
}

static int field(const char *report, const char *name)
{
    const char *at = strstr(report, name);
    assert_non_null(at);
    return atoi(at + strlen(name));
}

static serve_request req(const char *body)
{
    return (serve_request){.body = body, .len = strlen(body), .json_len = strlen(body)};
}

/* while it loads, a model reaches nothing of the host; once loaded, it cannot open, connect or fork */
static void test_boundary(void **state)
{
    (void)state;
    NEED_SANDBOX();
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(l, 4), 0);
    socklen_t al = sizeof(a);
    getsockname(l, (struct sockaddr *)&a, &al);
    char extra[600], why[600];
    snprintf(extra, sizeof(extra), ",\"secret\": \"%s\",\"port\": %d", secret, ntohs(a.sin_port));
    char err[200];
    replica_shm *shm = rs_create(1 << 20, err, sizeof(err));
    assert_non_null(shm);
    replica_proc *p = start_with("probe", extra, shm);
    assert_int_equal(wait_ready(p, why, sizeof(why)), 1);
    const char *r = rp_hello(p);
    fprintf(stderr, "probe: %s\n", r);
    assert_true(field(r, "uid=") != 0);
    assert_int_equal(field(r, "env="), 0);         /* an empty environment */
    assert_int_equal(field(r, "fds="), 0);         /* no descriptor of the worker's (the region's closed once mapped) */
    assert_int_equal(field(r, "secret="), ENOENT); /* no host path exists inside */
    assert_int_equal(field(r, "proc="), ENOENT);   /* no /proc */
    assert_true(field(r, "connect=") != 0);        /* its own network namespace */
    assert_true(field(r, "rootwrite=") != 0);      /* nothing outside /tmp is writable */
    assert_int_equal(field(r, "tmpwrite="), 0);
    assert_non_null(strstr(r, "model=MODELBYTES "));   /* its copy of the model, though the file is 0600 root's */
    assert_int_equal(field(r, "after: open="), EPERM); /* the seccomp filter */
    assert_int_equal(field(r, "socket="), EPERM);
    assert_int_equal(field(r, "fork="), EPERM);
    assert_int_equal(accept(l, NULL, NULL), -1); /* nothing reached the listener */
    assert_int_equal(errno, EAGAIN);
    rp_free(p);
    rs_free(shm);
    close(l);
}

/* batches through the shared request region: bodies read into it are not copied, others are copied
 * in; replies come back through it; everything the batch placed there is given back; a replica
 * whose reply claims more than its room is ended */
static void test_shared_region(void **state)
{
    (void)state;
    NEED_SANDBOX();
    char why[600], err[200];
    replica_shm *shm = rs_create(4 << 20, err, sizeof(err));
    assert_non_null(shm);
    replica_proc *p = start_with("echo", NULL, shm);
    assert_int_equal(wait_ready(p, why, sizeof(why)), 1);
    const char *text = "{\"in\":\"the region\"}";
    char *there = rs_alloc(shm, strlen(text) + 1, 0); /* as serve_direct.c reads a body */
    assert_non_null(there);
    strcpy(there, text);
    size_t before = sa_used(&shm->arena);
    for (int round = 0; round < 3; round++) {
        serve_request reqs[3] = {req(there), req("{\"a\":1}"), req("second")};
        assert_int_equal(rp_batch(p, reqs, 3, clock_mono_us() + 5000000, 100, NULL, NULL, why, sizeof(why)), RP_OK);
        assert_string_equal(reqs[0].reply, text);
        assert_string_equal(reqs[1].reply, "{\"a\":1}");
        assert_string_equal(reqs[2].reply, "second");
        for (int i = 0; i < 3; i++)
            free(reqs[i].reply);
        assert_int_equal(sa_used(&shm->arena), before); /* the copies and the replies' room given back */
    }
    rp_free(p);
    rs_release(shm, there);
    assert_int_equal(sa_used(&shm->arena), 0);

    p = start_with("liar", NULL, shm);
    assert_int_equal(wait_ready(p, why, sizeof(why)), 1);
    serve_request one = req("x");
    assert_int_equal(rp_batch(p, &one, 1, clock_mono_us() + 5000000, 100, NULL, NULL, why, sizeof(why)), RP_DIED);
    assert_non_null(strstr(why, "wire format"));
    assert_null(one.reply);
    assert_int_equal(sa_used(&shm->arena), 0);
    rp_free(p);
    rs_free(shm);
}

/* the wire format both ways, and a batch that is never answered: killed at its deadline */
static void test_echo_and_deadline(void **state)
{
    (void)state;
    NEED_SANDBOX();
    char why[600];
    replica_proc *p = start("echo", NULL);
    assert_int_equal(wait_ready(p, why, sizeof(why)), 1);
    serve_request reqs[2] = {req("{\"a\":1}"), req("second")};
    assert_int_equal(rp_batch(p, reqs, 2, clock_mono_us() + 5000000, 100, NULL, NULL, why, sizeof(why)), RP_OK);
    assert_string_equal(reqs[0].reply, "{\"a\":1}");
    assert_string_equal(reqs[1].reply, "second");
    assert_int_equal(reqs[1].status, 200);
    free(reqs[0].reply), free(reqs[1].reply);
    assert_true(rp_alive(p, why, sizeof(why)));
    rp_free(p);

    p = start("hang", NULL);
    assert_int_equal(wait_ready(p, why, sizeof(why)), 1);
    serve_request one = req("x");
    int64_t t0 = clock_mono_us();
    assert_int_equal(rp_batch(p, &one, 1, t0 + 300000, 50, NULL, NULL, why, sizeof(why)), RP_TIMEOUT);
    int64_t took = clock_mono_us() - t0;
    assert_true(took >= 300000 && took < 2000000);
    assert_null(one.reply);
    assert_false(rp_alive(p, why, sizeof(why)));
    rp_free(p);
}

/* the region's pages: allocated as written, given back once it empties after a burst */
static void test_region_trim(void **state)
{
    (void)state;
    char err[200];
    replica_shm *shm = rs_create(64 << 20, err, sizeof(err));
    assert_non_null(shm);
    struct stat st;
    char *big = rs_alloc(shm, RS_TRIM + (1 << 20), 0), *small = rs_alloc(shm, 100, 0);
    assert_non_null(big);
    memset(big, 1, RS_TRIM + (1 << 20));
    assert_int_equal(fstat(shm->fd, &st), 0);
    assert_true((size_t)st.st_blocks * 512 >= RS_TRIM);
    rs_release(shm, big);
    assert_int_equal(fstat(shm->fd, &st), 0);
    assert_true((size_t)st.st_blocks * 512 >= RS_TRIM); /* not yet empty */
    rs_release(shm, small);
    assert_int_equal(fstat(shm->fd, &st), 0);
    assert_true((size_t)st.st_blocks * 512 < (1 << 20));
    rs_free(shm);
}

/* a crash while loading says so; a replica that lies on the wire is ended */
static void test_crash_and_garbage(void **state)
{
    (void)state;
    NEED_SANDBOX();
    char why[600];
    replica_proc *p = start("segv", NULL);
    assert_int_equal(wait_ready(p, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "the model crashed while loading: ")); /* signal 11; ASan turns it into exit status 1 */
    rp_free(p);

    p = start("garbage", NULL);
    assert_int_equal(wait_ready(p, why, sizeof(why)), 1);
    serve_request one = req("x");
    assert_int_equal(rp_batch(p, &one, 1, clock_mono_us() + 5000000, 100, NULL, NULL, why, sizeof(why)), RP_DIED);
    assert_non_null(strstr(why, "wire format"));
    assert_null(one.reply);
    rp_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boundary),    cmocka_unit_test(test_echo_and_deadline), cmocka_unit_test(test_shared_region),
        cmocka_unit_test(test_region_trim), cmocka_unit_test(test_crash_and_garbage),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
