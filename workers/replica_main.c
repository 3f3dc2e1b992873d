/* gantry-replica: one inference replica of one job, the process a worker starts inside its
 * sandbox (workers/replica_proc.h says what the sandbox is).
 *
 *   gantry-replica NAME THREADS RESOLVED_JSON
 *
 * RESOLVED_JSON is the job's spec.resolved with "artifact" naming the model file as the sandbox
 * shows it (replica_proc binds it read-only at RP_MODEL_PATH).  The replica loads the model (a
 * TorchScript model's __setstate__ and load-time code run here, in the sandbox), runs its warm-up,
 * then installs a seccomp filter (below) and says RW_READY on stdout; from then on it answers
 * RW_BATCH frames from stdin with RW_REPLIES frames (workers/serve/replica_wire.h) until stdin
 * closes.  A model that does not load is reported with RW_FAILED and exit status 2.
 *
 * It holds no credential, opens no file after loading and has no network: everything it gets is
 * a batch of request bodies, everything it gives is their replies.  The worker kills it
 * (SIGKILL) when it misses a deadline; it never needs to stop cleanly. */
#include "common/alloc.h"
#include "workers/serve/replica_model.h"
#include "workers/serve/replica_wire.h"
#include "workers/serve/spec.h"

#include <errno.h>
#include <jansson.h>
#include <seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* The system calls a replica may make once its model is loaded: memory, threads (clone only with
 * CLONE_THREAD: no new process), time, its three pipes, signals to itself (abort).  Everything else
 * fails with EPERM: open/openat (no new file), execve, socket/connect (no network, and no Unix
 * socket either), ptrace, kill of another process, mount, bpf ...  clone3 fails with ENOSYS so
 * that glibc's pthread_create falls back to clone, whose flags the filter can see. */
static const int allowed[] = {
    SCMP_SYS(read),
    SCMP_SYS(write),
    SCMP_SYS(readv),
    SCMP_SYS(writev),
    SCMP_SYS(close),
    SCMP_SYS(fstat),
    SCMP_SYS(newfstatat),
    SCMP_SYS(lseek),
    SCMP_SYS(fcntl),
    SCMP_SYS(poll),
    SCMP_SYS(ppoll),
    SCMP_SYS(mmap),
    SCMP_SYS(munmap),
    SCMP_SYS(mremap),
    SCMP_SYS(mprotect),
    SCMP_SYS(madvise),
    SCMP_SYS(brk),
    SCMP_SYS(futex),
    SCMP_SYS(set_robust_list),
    SCMP_SYS(get_robust_list),
    SCMP_SYS(rseq),
    SCMP_SYS(set_tid_address),
    SCMP_SYS(exit),
    SCMP_SYS(exit_group),
    SCMP_SYS(rt_sigaction),
    SCMP_SYS(rt_sigprocmask),
    SCMP_SYS(rt_sigreturn),
    SCMP_SYS(sigaltstack),
    SCMP_SYS(restart_syscall),
    SCMP_SYS(sched_yield),
    SCMP_SYS(sched_getaffinity),
    SCMP_SYS(sched_setaffinity),
    SCMP_SYS(getpid),
    SCMP_SYS(gettid),
    SCMP_SYS(getuid),
    SCMP_SYS(geteuid),
    SCMP_SYS(getgid),
    SCMP_SYS(getegid),
    SCMP_SYS(clock_gettime),
    SCMP_SYS(clock_getres),
    SCMP_SYS(gettimeofday),
    SCMP_SYS(nanosleep),
    SCMP_SYS(clock_nanosleep),
    SCMP_SYS(getrandom),
    SCMP_SYS(getcpu),
    SCMP_SYS(sysinfo),
    SCMP_SYS(getrusage),
    SCMP_SYS(prlimit64),
    SCMP_SYS(membarrier),
    SCMP_SYS(mincore),
};

static int lock_down(void)
{
    scmp_filter_ctx f = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (!f) return -1;
    int rc = 0;
    for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]) && rc == 0; i++)
        rc = seccomp_rule_add(f, SCMP_ACT_ALLOW, allowed[i], 0);
    if (rc == 0)
        rc = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
    if (rc == 0) rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    /* signals to itself only (abort(), a thread's cancel) */
    if (rc == 0) rc = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)getpid()));
    if (rc == 0) rc = seccomp_load(f);
    seccomp_release(f);
    return rc;
}

static void say(uint32_t type, const char *text)
{
    const void *p[1] = {text};
    size_t l[1] = {strlen(text)};
    rw_write(1, type, p, l, 1, 0);
}

/* answers one batch */
static int serve(replica_model *m, const char *name, char *payload, size_t len, serve_request *reqs)
{
    int n = rw_parse_batch(payload, len, reqs, SERVE_MAX_SAMPLES);
    if (n <= 0) return -1;
    replica_model_batch(m, name, reqs, n);
    const void **pieces = xcalloc(2 * (size_t)n + 1, sizeof(*pieces));
    size_t *lens = xcalloc(2 * (size_t)n + 1, sizeof(*lens));
    char *heads = xmalloc(4 + 12 * (size_t)n);
    uint32_t count = (uint32_t)n;
    memcpy(heads, &count, 4);
    int k = 0;
    pieces[k] = heads, lens[k++] = 4;
    for (int i = 0; i < n; i++) {
        if (!reqs[i].reply) {
            reqs[i].reply = serve_error_body(reqs[i].err);
            reqs[i].status = 400;
        }
        uint32_t status = reqs[i].status == 200 ? 200 : 400;
        uint64_t blen = strlen(reqs[i].reply);
        char *h = heads + 4 + 12 * (size_t)i;
        memcpy(h, &status, 4);
        memcpy(h + 4, &blen, 8);
        pieces[k] = h, lens[k++] = 12;
        pieces[k] = reqs[i].reply, lens[k++] = blen;
    }
    int rc = rw_write(1, RW_REPLIES, pieces, lens, k, 0);
    for (int i = 0; i < n; i++)
        free(reqs[i].reply);
    free(heads);
    free(pieces);
    free(lens);
    return rc;
}

int main(int argc, char **argv)
{
    json_set_alloc_funcs(xmalloc, free);
    if (argc != 4) {
        fprintf(stderr, "usage: gantry-replica NAME THREADS RESOLVED_JSON (started by gantry-worker)\n");
        return 64;
    }
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    json_t *resolved = json_loads(argv[3], 0, NULL);
    char err[600];
    replica_model *m = resolved ? replica_model_load(resolved, atoi(argv[2]), err, sizeof(err)) : NULL;
    if (!resolved) snprintf(err, sizeof(err), "the replica's arguments are not valid JSON");
    json_decref(resolved);
    if (!m) {
        say(RW_FAILED, err);
        return 2;
    }
    if (lock_down() != 0) {
        say(RW_FAILED, "cannot install the replica's seccomp filter");
        return 2;
    }
    char version[32];
    snprintf(version, sizeof(version), "%d", replica_model_version(m));
    say(RW_READY, version);
    serve_request *reqs = xcalloc(SERVE_MAX_SAMPLES, sizeof(*reqs));
    for (;;) {
        rw_header h;
        if (rw_read_header(0, &h, 0) != 0) return errno == EPIPE ? 0 : 3; /* the worker closed the pipe: done */
        if (h.type != RW_BATCH) return 3;
        char *payload = xmalloc((size_t)h.len + 1);
        if (rw_read_exact(0, payload, (size_t)h.len, 0) != 0) return 3;
        int rc = serve(m, argv[1], payload, (size_t)h.len, reqs);
        free(payload);
        if (rc != 0) return 3;
    }
}
