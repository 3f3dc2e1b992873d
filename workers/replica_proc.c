/* replica_proc.c - a replica's sandboxed process, started and spoken to by the worker (replica_proc.h) */
#include "workers/replica_proc.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "workers/program/prog_cgroup.h"
#include "workers/program/prog_hostpaths.h"
#include "workers/program/prog_sandbox.h"
#include "workers/program/prog_spawn.h"
#include "workers/serve/replica_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define STR_(x) #x
#define STR(x) STR_(x)
#define STATUS_FD 3
#define MODEL_FD 4 /* the model file, which bwrap copies in (prog_sandbox.h prog_sandbox_data) */
#define SHM_FD 5   /* the job's request region (workers/serve/replica_shm.h), which the replica maps */
#define REPLY_ROOM(n) ((size_t)(64 << 10) + (size_t)(n) * (256 << 10)) /* bigger replies take the pipe */
#define NOFILE 64
#define TMP_BYTES (16LL << 20)
#define RP_PIPE_BYTES (1 << 20) /* the request and reply pipes, as large as Linux allows by default */
#define REPLY_LIMIT_S 30        /* a reply's payload once its header came: at most this long */

/* what a replica's loader and libtorch need of the host, read-only: the loader's files and BLAS's
 * alternatives; not /etc whole, no users, no resolver (it has no network) */
static const char *const replica_system[] = {
    "/usr", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", NULL,
};

struct replica_proc {
    pid_t bwrap;
    int to, from, err, status; /* its stdin, stdout, stderr and the rank init's report */
    prog_cgroup *cg;
    bool ready, dead;
    int prog_exit, prog_signal; /* from the report; -1 until known */
    char last_err[512];         /* the last line it wrote on stderr */
    size_t err_len;
    char errbuf[512];
    char why[1200]; /* once dead */
    char hello[1024];
    replica_shm *shm; /* the job's request region (the executor's), or NULL */
};

static void drain_stderr(replica_proc *p)
{
    char buf[4096];
    ssize_t n;
    while ((n = read(p->err, buf, sizeof(buf))) > 0)
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] == '\n') {
                if (p->err_len) {
                    p->errbuf[p->err_len] = '\0';
                    snprintf(p->last_err, sizeof(p->last_err), "%s", p->errbuf);
                    log_debug("replica %d: %s", (int)p->bwrap, p->errbuf);
                }
                p->err_len = 0;
            } else if (p->err_len + 1 < sizeof(p->errbuf)) {
                p->errbuf[p->err_len++] = (unsigned char)buf[i] < 0x20 ? '?' : buf[i];
            }
        }
}

static void drain_status(replica_proc *p)
{
    char buf[256];
    ssize_t n = read(p->status, buf, sizeof(buf) - 1);
    if (n <= 0) return;
    buf[n] = '\0';
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        int v;
        if (sscanf(line, "exit %d", &v) == 1) p->prog_exit = v;
        if (sscanf(line, "signal %d", &v) == 1) p->prog_signal = v;
    }
}

/* SIGKILL to bwrap (its namespace dies with it), then reaps it and reads its last words */
static void kill_and_reap(replica_proc *p)
{
    if (p->bwrap > 0) {
        kill(p->bwrap, SIGKILL);
        while (waitpid(p->bwrap, NULL, 0) < 0 && errno == EINTR) {
        }
        p->bwrap = -1;
    }
}

/* the process ended on its own (its stdout closed): waits for the report, says how */
static void ended(replica_proc *p, const char *when)
{
    int64_t until = clock_mono_us() + 2000000;
    int st = 0;
    pid_t w = 0;
    while (p->bwrap > 0 && (w = waitpid(p->bwrap, &st, WNOHANG)) == 0 && clock_mono_us() < until) {
        struct pollfd f = {p->status, POLLIN, 0};
        poll(&f, 1, 20);
        drain_status(p);
    }
    if (w == p->bwrap) p->bwrap = -1;
    kill_and_reap(p);
    drain_status(p);
    drain_stderr(p);
    char how[160];
    if (p->prog_signal > 0)
        snprintf(how, sizeof(how), "signal %d (%s)", p->prog_signal, strsignal(p->prog_signal));
    else if (p->prog_exit >= 0)
        snprintf(how, sizeof(how), "exit status %d", p->prog_exit);
    else
        snprintf(how, sizeof(how), "its sandbox ended (status %d)", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    if (prog_cgroup_oom_kills(p->cg) > 0) snprintf(how, sizeof(how), "its memory limit (the kernel's OOM killer)");
    if (p->last_err[0])
        snprintf(p->why, sizeof(p->why), "the model crashed while %s: %s; its last message: %.300s", when, how, p->last_err);
    else
        snprintf(p->why, sizeof(p->why), "the model crashed while %s: %s", when, how);
    p->dead = true;
}

static void die(replica_proc *p, const char *fmt, const char *what)
{
    kill_and_reap(p);
    snprintf(p->why, sizeof(p->why), fmt, what);
    p->dead = true;
}

static void child(const replica_proc *p, const rp_spec *s, char **argv, int in, int out, int err, int status, int model,
                  pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    setsid();
    if (p->cg && prog_cgroup_join(p->cg) != 0) _exit(127);
    struct rlimit nofile = {NOFILE, NOFILE}, core = {0, 0};
    setrlimit(RLIMIT_NOFILE, &nofile);
    setrlimit(RLIMIT_CORE, &core);
#ifndef __SANITIZE_ADDRESS__ /* ASan reserves terabytes of shadow address space: CI's sanitized build goes without */
    long long mem = s->memory_bytes > 0 ? s->memory_bytes : RP_DEFAULT_MEMORY;
    struct rlimit as = {(rlim_t)(mem + RP_AS_HEADROOM), (rlim_t)(mem + RP_AS_HEADROOM)};
    setrlimit(RLIMIT_AS, &as);
#else
    (void)s;
#endif
    const int fds[] = {in, out, err, status, model, p->shm ? p->shm->fd : -1}; /* 0 1 2, STATUS_FD, MODEL_FD, SHM_FD */
    char *env[] = {NULL};                                                      /* nothing of the worker's environment */
    prog_spawn_exec(fds, p->shm ? SHM_FD + 1 : MODEL_FD + 1, argv[0], argv, env);
    _exit(127);
}

/* spec.resolved with the artifact as the sandbox shows it; the outside path in *artifact */
static char *inside_resolved(const char *resolved, char *artifact, size_t alen, char *err, size_t errlen)
{
    json_t *r = json_loads(resolved, 0, NULL);
    const char *a = json_string_value(json_object_get(r, "artifact"));
    if (!a || a[0] != '/') {
        snprintf(err, errlen, "the job has no resolved model artifact (submit it through the API)");
        json_decref(r);
        return NULL;
    }
    snprintf(artifact, alen, "%s", a);
    json_object_set_new(r, "artifact", json_string(RP_MODEL_PATH));
    char *s = json_dumps(r, JSON_COMPACT);
    json_decref(r);
    return s;
}

replica_proc *rp_start(const rp_spec *s, char *err, size_t errlen)
{
    char artifact[4096], init[4096], bin[4096];
    char *resolved = inside_resolved(s->resolved, artifact, sizeof(artifact), err, errlen);
    if (!resolved) return NULL;
    snprintf(init, sizeof(init), "%s/gantry-rank-init", s->bin_dir);
    snprintf(bin, sizeof(bin), "%s/gantry-replica", s->bin_dir);
    if (access(init, X_OK) != 0 || access(bin, X_OK) != 0) {
        snprintf(err, errlen, "this worker cannot run replicas: gantry-replica or gantry-rank-init is missing beside it");
        free(resolved);
        return NULL;
    }
    int model = open(artifact, O_RDONLY | O_CLOEXEC);
    if (model < 0) {
        snprintf(err, errlen, "the model file is missing on this worker: %s", strerror(errno));
        free(resolved);
        return NULL;
    }
    prog_hostpaths host;
    prog_hostpaths_get(&host, replica_system);
    prog_sandbox_bind ro[1] = {{bin, RP_BIN_PATH}};
    prog_sandbox_data data[1] = {{MODEL_FD, RP_MODEL_PATH}};
    char threads[16];
    snprintf(threads, sizeof(threads), "%d", s->threads > 0 ? s->threads : 1);
    const char *argv[] = {RP_BIN_PATH, s->name, threads, resolved, s->shm ? STR(SHM_FD) : NULL, NULL};
    prog_sandbox_desc d = {
        .bwrap = s->bwrap ? s->bwrap : "/usr/bin/bwrap",
        .system = host.system,
        .links = host.links,
        .n_links = host.n_links,
        .ro = ro,
        .n_ro = 1,
        .data = data,
        .n_data = 1,
        .init = init,
        .cwd = "/",
        .tmp_bytes = TMP_BYTES,
        .uid = s->uid ? s->uid : 65534,
        .gid = s->gid ? s->gid : 65534,
        .status_fd = STATUS_FD,
        .keep_fd = s->shm ? SHM_FD : 0,
        .argv = argv,
        .no_network = true,
        .no_proc = !s->proc,
    };
    char **bargv = prog_sandbox_argv(&d, err, errlen);
    free(resolved);
    if (!bargv) {
        close(model);
        return NULL;
    }

    replica_proc *p = xcalloc(1, sizeof(*p));
    p->shm = s->shm;
    p->bwrap = -1;
    p->prog_exit = p->prog_signal = -1;
    p->to = p->from = p->err = p->status = -1;
    static unsigned seq;
    char name[96], why[256];
    snprintf(name, sizeof(name), "gantry-replica-%d-%u", (int)getpid(), ++seq);
    long long mem = s->memory_bytes > 0 ? s->memory_bytes : RP_DEFAULT_MEMORY;
    p->cg = prog_cgroup_create(name, mem, 256, why, sizeof(why));
    if (!prog_cgroup_has_memory(p->cg)) log_warn("replica %s: no memory cgroup (%s): RLIMIT_AS alone limits it", name, why);
    if (prog_cgroup_set_cpu(p->cg, s->threads > 0 ? s->threads : 1, why, sizeof(why)) != 0)
        log_warn("replica %s: no CPU limit (%s)", name, why);
    int in[2] = {-1, -1}, out[2] = {-1, -1}, er[2] = {-1, -1}, st[2] = {-1, -1};
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(er, O_CLOEXEC) != 0 || pipe2(st, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "cannot make the replica's pipes: %s", strerror(errno));
        goto fail;
    }
    /* requests and replies in as few wake-ups as the system allows (a 4.8 MB batch through the default
     * 64 KiB pipe takes some 75 turns between the two processes); best effort, up to fs.pipe-max-size */
    fcntl(in[1], F_SETPIPE_SZ, RP_PIPE_BYTES);
    fcntl(out[1], F_SETPIPE_SZ, RP_PIPE_BYTES);
    pid_t parent = getpid();
    p->bwrap = fork();
    if (p->bwrap < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        goto fail;
    }
    if (p->bwrap == 0) child(p, s, bargv, in[0], out[1], er[1], st[1], model, parent);
    close(in[0]), close(out[1]), close(er[1]), close(st[1]), close(model);
    p->to = in[1], p->from = out[0], p->err = er[0], p->status = st[0];
    int fds[] = {p->to, p->from, p->err, p->status};
    for (int i = 0; i < 4; i++)
        fcntl(fds[i], F_SETFL, O_NONBLOCK);
    prog_sandbox_argv_free(bargv);
    return p;
fail:
    for (int i = 0; i < 2; i++) {
        int *pp[] = {in, out, er, st};
        for (int j = 0; j < 4; j++)
            if (pp[j][i] >= 0) close(pp[j][i]);
    }
    close(model);
    prog_sandbox_argv_free(bargv);
    prog_cgroup_destroy(p->cg);
    free(p);
    return NULL;
}

int rp_ready(replica_proc *p, int timeout_ms, char *why, size_t whylen)
{
    if (p->ready) return 1;
    if (p->dead) {
        snprintf(why, whylen, "%s", p->why);
        return -1;
    }
    struct pollfd f[2] = {{p->from, POLLIN, 0}, {p->err, POLLIN, 0}};
    poll(f, 2, timeout_ms);
    drain_stderr(p);
    if (!(f[0].revents & (POLLIN | POLLHUP | POLLERR))) return 0;
    rw_header h;
    int64_t until = clock_mono_us() + 1000000; /* the hello is 16 bytes and a line: it comes whole */
    if (rw_read_header(p->from, &h, until) != 0) {
        if (errno == EPIPE)
            ended(p, "loading");
        else
            die(p, "the replica broke the wire format while %s", "loading");
        snprintf(why, whylen, "%s", p->why);
        return -1;
    }
    char msg[1024];
    size_t len = h.len < sizeof(msg) - 1 ? (size_t)h.len : sizeof(msg) - 1;
    if ((h.type != RW_READY && h.type != RW_FAILED) || h.len >= sizeof(msg) || rw_read_exact(p->from, msg, len, until) != 0) {
        die(p, "the replica broke the wire format while %s", "loading");
        snprintf(why, whylen, "%s", p->why);
        return -1;
    }
    msg[len] = '\0';
    for (char *c = msg; *c; c++)
        if ((unsigned char)*c < 0x20) *c = ' ';
    if (h.type == RW_FAILED) {
        kill_and_reap(p);
        snprintf(p->why, sizeof(p->why), "%.500s", msg);
        p->dead = true;
        snprintf(why, whylen, "%s", p->why);
        return -1;
    }
    snprintf(p->hello, sizeof(p->hello), "%s", msg);
    p->ready = true;
    return 1;
}

const char *rp_hello(const replica_proc *p)
{
    return p->hello;
}

bool rp_alive(replica_proc *p, char *why, size_t whylen)
{
    if (!p->dead) {
        struct pollfd f = {p->from, POLLIN, 0};
        drain_stderr(p);
        if (poll(&f, 1, 0) > 0 && (f.revents & (POLLHUP | POLLERR)) && !(f.revents & POLLIN))
            ended(p, "serving");
        else if (f.revents & POLLIN)
            die(p, "the replica wrote without being asked (%s): killed", "it broke the wire format");
    }
    if (p->dead) snprintf(why, whylen, "%s", p->why);
    return !p->dead;
}

/* The batch through the shared region: each body where it is (serve_direct.c read it there) or
 * copied in, and room for the replies; the frame on the pipe says where.  0 sent, -1 the write
 * failed (errno), 1 not sent: no region or no room in it (copies[] holds what it placed, which the
 * caller gives back after the reply, NULL-terminated). */
static int send_shm(replica_proc *p, serve_request *reqs, int n, char **copies, size_t *reply_off, size_t *room,
                    int64_t deadline_us)
{
    if (!p->shm) return 1;
    size_t *offs = xcalloc((size_t)n, sizeof(*offs));
    int k = 0, rc = 1;
    for (int i = 0; i < n; i++) {
        const char *b = reqs[i].body;
        if (!rs_owns(p->shm, b) || reqs[i].len > p->shm->size - (size_t)(b - p->shm->base)) {
            char *c = rs_alloc(p->shm, reqs[i].len, reqs[i].json_len);
            if (!c) goto done;
            memcpy(c, b, reqs[i].len);
            copies[k++] = c, b = c;
        }
        offs[i] = (size_t)(b - p->shm->base);
    }
    char *r = rs_alloc(p->shm, REPLY_ROOM(n), 0);
    if (!r) goto done;
    copies[k++] = r;
    *reply_off = (size_t)(r - p->shm->base), *room = REPLY_ROOM(n);
    size_t len;
    char *frame = rw_shm_batch(reqs, offs, n, *reply_off, *room, &len);
    const void *pieces[1] = {frame};
    rc = rw_write(p->to, RW_BATCH_SHM, pieces, &len, 1, deadline_us);
    free(frame);
done:
    free(offs);
    if (rc == 1) *room = 0;
    return rc;
}

rp_result rp_batch(replica_proc *p, serve_request *reqs, int n, int64_t deadline_us, int poll_ms, bool (*stop)(void *), void *arg,
                   char *why, size_t whylen)
{
    if (p->dead || !p->ready) {
        snprintf(why, whylen, "%s", p->dead ? p->why : "the replica is not ready");
        return RP_DIED;
    }
    char **copies = xcalloc((size_t)n + 2, sizeof(*copies)); /* what this call placed in the region */
    size_t reply_off = 0, room = 0;
    int rc = send_shm(p, reqs, n, copies, &reply_off, &room, deadline_us);
    if (rc == 1) { /* no region, or no room in it: the pipe */
        const void **pieces = xcalloc(2 * (size_t)n + 1, sizeof(*pieces));
        size_t *lens = xcalloc(2 * (size_t)n + 1, sizeof(*lens));
        char *scratch = NULL;
        int k = rw_batch_pieces(reqs, n, pieces, lens, &scratch);
        /* a deadline for the write too: a replica that stops reading is as late as one that stops answering */
        rc = rw_write(p->to, RW_BATCH, pieces, lens, k, deadline_us);
        free(scratch);
        free(pieces);
        free(lens);
    }
    int e = errno;
    rp_result res = RP_OK;
    char *payload = NULL;
    if (rc != 0) {
        res = e == ETIMEDOUT ? RP_TIMEOUT : RP_DIED;
        goto out;
    }
    for (;;) { /* the reply's header, in slices of poll_ms so that a stop is seen */
        int64_t now = clock_mono_us(), left = deadline_us - now;
        if (left <= 0) {
            res = RP_TIMEOUT;
            goto out;
        }
        int ms = left / 1000 + 1 < poll_ms ? (int)(left / 1000 + 1) : poll_ms;
        struct pollfd f[2] = {{p->from, POLLIN, 0}, {p->err, POLLIN, 0}};
        poll(f, 2, ms);
        drain_stderr(p);
        if (f[0].revents & (POLLIN | POLLHUP | POLLERR)) break;
        if (stop && stop(arg)) {
            res = RP_STOPPED;
            goto out;
        }
    }
    rw_header h;
    int64_t limit = clock_mono_us() + (int64_t)REPLY_LIMIT_S * 1000000;
    if (rw_read_header(p->from, &h, deadline_us > limit ? deadline_us : limit) != 0) {
        res = errno == ETIMEDOUT ? RP_TIMEOUT : RP_DIED;
        e = errno;
        goto out;
    }
    if (h.type != RW_REPLIES && !(h.type == RW_REPLIES_SHM && room && h.len == 8)) {
        res = RP_DIED, e = EPROTO;
        goto out;
    }
    payload = xmalloc((size_t)h.len + 1);
    if (rw_read_exact(p->from, payload, (size_t)h.len, limit) != 0) {
        res = errno == ETIMEDOUT ? RP_TIMEOUT : RP_DIED;
        e = errno;
        goto out;
    }
    size_t len = (size_t)h.len;
    if (h.type == RW_REPLIES_SHM) { /* copied out of the region first: the replica may still write there */
        uint64_t at;
        memcpy(&at, payload, 8);
        if (at > room) {
            res = RP_DIED, e = EPROTO;
            goto out;
        }
        len = (size_t)at;
        free(payload);
        payload = xmalloc(len + 1);
        memcpy(payload, p->shm->base + reply_off, len);
    }
    if (rw_parse_replies(payload, len, reqs, n) != 0) res = RP_DIED, e = EPROTO;
out:
    free(payload);
    for (int i = 0; copies[i]; i++)
        rs_release(p->shm, copies[i]);
    free(copies);
    if (res == RP_TIMEOUT || res == RP_STOPPED) {
        kill_and_reap(p);
        p->dead = true;
        snprintf(p->why, sizeof(p->why), "%s", res == RP_TIMEOUT ? "the model did not answer by the deadline: killed" : "stopped");
    } else if (res == RP_DIED) {
        if (e == EPROTO)
            die(p, "the replica broke the wire format while %s: killed", "serving");
        else
            ended(p, "serving");
    }
    if (res != RP_OK) snprintf(why, whylen, "%s", p->why);
    return res;
}

void rp_free(replica_proc *p)
{
    if (!p) return;
    kill_and_reap(p);
    int fds[] = {p->to, p->from, p->err, p->status};
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0) close(fds[i]);
    prog_cgroup_destroy(p->cg);
    free(p);
}
