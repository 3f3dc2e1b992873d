/* replica_probe.c - stands in for gantry-replica in tests/unit/test_replica_proc.c: started by
 * rp_start in the real sandbox, it does what a hostile model could do while it loads and reports
 * what worked, as its RW_READY message (or misbehaves on purpose).
 *
 *   gantry-replica MODE THREADS RESOLVED_JSON [SHM_FD]     (rp_start's argv; MODE is rp_spec.name)
 *
 * MODE probe: RESOLVED_JSON's "secret" names a file and "port" a TCP port on 127.0.0.1 outside;
 *   the report is "uid=U env=N secret=E proc=E connect=E rootwrite=E tmpwrite=E model=BYTES
 *   after: open=E socket=E fork=E" where E is 0 for success or an errno, and "after" is after
 *   replica_lock_down() (the real replica's seccomp filter).
 * MODE echo: ready, then answers every batch with each body as a 200 reply (through the request
 *   region, replica_shm.h, when the batch came that way: SHM_FD, rp_start's fifth argument).
 * MODE liar: as echo, but a reply in the region claims more bytes than its room.
 * MODE hang: ready, then reads batches and never answers.
 * MODE segv: crashes while "loading".  MODE garbage: ready, then answers with a malformed frame. */
#include "workers/replica_seccomp.h"
#include "workers/serve/replica_shm.h"
#include "workers/serve/replica_wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void say(uint32_t type, const char *text)
{
    const void *p[1] = {text};
    size_t l[1] = {strlen(text)};
    rw_write(1, type, p, l, 1, 0);
}

static int try_open(const char *path, int flags)
{
    int fd = open(path, flags, 0600);
    if (fd < 0) return errno;
    close(fd);
    return 0;
}

/* a number after "key": in the JSON text (enough for the test's own argument) */
static long num(const char *json, const char *key)
{
    const char *at = strstr(json, key);
    return at ? strtol(at + strlen(key) + 2, NULL, 10) : -1;
}

static void str(const char *json, const char *key, char *out, size_t outlen)
{
    const char *at = strstr(json, key);
    out[0] = '\0';
    if (!at) return;
    at += strlen(key) + 3; /* key": " */
    size_t n = strcspn(at, "\"");
    snprintf(out, outlen, "%.*s", (int)(n < outlen ? n : outlen - 1), at);
}

static int try_connect(int port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return errno;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc = connect(s, (struct sockaddr *)&a, sizeof(a)) == 0 ? 0 : errno;
    close(s);
    return rc;
}

static int try_fork(void)
{
    pid_t p = fork();
    if (p < 0) return errno;
    if (p == 0) _exit(0);
    waitpid(p, NULL, 0);
    return 0;
}

static void probe(const char *json)
{
    char secret[512], report[1024], model[64] = "";
    str(json, "secret", secret, sizeof(secret));
    int env = 0;
    for (char **e = environ; e && *e; e++) /* bwrap's own PWD=/ aside */
        env += strcmp(*e, "PWD=/") != 0;
    int fd = open("/model", O_RDONLY);
    if (fd >= 0) {
        ssize_t n = read(fd, model, sizeof(model) - 1);
        model[n > 0 ? n : 0] = '\0';
        model[strcspn(model, " \n")] = '\0';
        close(fd);
    }
    int fds = 0; /* descriptors it holds beyond 0, 1, 2: the request region's alone, if any */
    for (int f = 3; f < 64; f++)
        fds += fcntl(f, F_GETFD) >= 0;
    int before[6] = {try_open(secret, O_RDONLY),
                     try_open("/proc/1/cmdline", O_RDONLY),
                     try_connect((int)num(json, "port")),
                     try_open("/planted", O_WRONLY | O_CREAT),
                     try_open("/tmp/scratch", O_WRONLY | O_CREAT),
                     0};
    if (replica_lock_down() != 0) {
        say(RW_FAILED, "lock_down failed");
        exit(2);
    }
    int after[3] = {try_open("/model", O_RDONLY), 0, try_fork()};
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    after[1] = s < 0 ? errno : 0;
    snprintf(report, sizeof(report),
             "uid=%d env=%d fds=%d secret=%d proc=%d connect=%d rootwrite=%d tmpwrite=%d model=%s after: open=%d socket=%d "
             "fork=%d",
             (int)getuid(), env, fds, before[0], before[1], before[2], before[3], before[4], model, after[0], after[1], after[2]);
    say(RW_READY, report);
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) return 64;
    const char *mode = argv[1];
    char *shm = NULL; /* the worker's request region, as gantry-replica maps it */
    size_t shm_size = 0;
    if (argc == 5 && rs_attach(atoi(argv[4]), &shm, &shm_size) != 0) {
        say(RW_FAILED, "cannot map the request region");
        return 2;
    }
    if (!strcmp(mode, "segv")) raise(SIGSEGV);
    if (!strcmp(mode, "probe")) {
        probe(argv[3]);
        return 0;
    }
    say(RW_READY, "1");
    for (;;) {
        rw_header h;
        if (rw_read_header(0, &h, 0) != 0) return 0;
        char *payload = malloc((size_t)h.len + 1);
        if (!payload || rw_read_exact(0, payload, (size_t)h.len, 0) != 0) return 3;
        if (!strcmp(mode, "hang")) {
            for (;;)
                pause();
        }
        if (!strcmp(mode, "garbage")) {
            say(RW_REPLIES, "not a reply");
            continue;
        }
        serve_request reqs[64];
        size_t room_off = 0, room = 0;
        int n = h.type == RW_BATCH_SHM ? rw_parse_shm_batch(payload, (size_t)h.len, shm, shm_size, reqs, 64, &room_off, &room)
                                       : rw_parse_batch(payload, (size_t)h.len, reqs, 64);
        if (n <= 0) return 3;
        const void *pieces[129];
        size_t lens[129];
        char heads[4 + 12 * 64];
        uint32_t count = (uint32_t)n;
        memcpy(heads, &count, 4);
        int k = 0;
        pieces[k] = heads, lens[k++] = 4;
        for (int i = 0; i < n; i++) {
            uint32_t status = 200;
            uint64_t blen = reqs[i].len;
            memcpy(heads + 4 + 12 * i, &status, 4);
            memcpy(heads + 8 + 12 * i, &blen, 8);
            pieces[k] = heads + 4 + 12 * i, lens[k++] = 12;
            pieces[k] = reqs[i].body, lens[k++] = reqs[i].len;
        }
        if (h.type == RW_BATCH_SHM) { /* the replies in the region: the payload, then its length */
            uint64_t at = 0;
            for (int i = 0; i < k; at += lens[i], i++)
                memcpy(shm + room_off + at, pieces[i], lens[i]);
            if (!strcmp(mode, "liar")) at = room + 1; /* says more than its room */
            const void *p[1] = {&at};
            size_t l[1] = {8};
            rw_write(1, RW_REPLIES_SHM, p, l, 1, 0);
            free(payload);
            continue;
        }
        rw_write(1, RW_REPLIES, pieces, lens, k, 0);
        free(payload);
    }
}
