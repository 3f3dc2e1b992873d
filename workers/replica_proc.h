/* replica_proc.h - one inference replica as a sandboxed child process of the worker.
 *
 * A tenant's model is code (a TorchScript file runs its __setstate__ while it loads, and its
 * forward may loop, crash or allocate without bound), so it never runs inside the worker.  Each
 * replica of a job (and each model version, when an alias moves) is its own process, started
 * by rp_start and spoken to over two pipes (workers/serve/replica_wire.h):
 *
 *   worker -> fork: joins a cgroup of its own (memory from the job's limit, pids, CPU when the
 *   controller is there), RLIMIT_AS (the memory limit + RP_AS_HEADROOM), RLIMIT_NOFILE 64, no core,
 *   a CFS quota of `threads` cores, an empty environment, fds 0-4 only (and 5, the job's request
 *   region, replica_shm.h) -> bwrap: new pid, ipc, uts, cgroup and network
 *   namespaces (loopback only, nothing listens: no network at all), no /proc, /usr and the
 *   loader's files read-only, the model file read-only at RP_MODEL_PATH, gantry-replica at
 *   RP_BIN_PATH, a 16 MiB /tmp, cwd "/", --die-with-parent -> gantry-rank-init: drops to the
 *   slot's uid (never 0), no capabilities, no_new_privs, reports the exact end on fd 3 ->
 *   gantry-replica: loads the model, warms it up, installs its seccomp filter (no open, exec,
 *   socket...) and says ready.
 *
 * So the model sees no state directory, no token, no Redis, no other tenant's heap (a new process
 * per job and version) and no host path.  Deadlines are enforced from outside: a batch that is
 * not answered by its deadline, a replica that breaks the wire format, a stop: SIGKILL to bwrap,
 * whose namespace dies with it.  Nothing here blocks longer than the deadline it is given.
 * Single-threaded, like the replica loop that drives it (workers/exec_infer.c). */
#ifndef GANTRY_REPLICA_PROC_H
#define GANTRY_REPLICA_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "workers/serve/replica_shm.h"
#include "workers/serve/serve.h"

#define RP_MODEL_PATH "/model"
#define RP_BIN_PATH "/.gantry-replica"
#define RP_AS_HEADROOM (4LL << 30) /* address space beyond the memory limit: libtorch and glibc reserve more than they touch */
#define RP_DEFAULT_MEMORY (8LL << 30)

typedef struct {
    const char *name;       /* the served model's name (replies carry it) */
    const char *resolved;   /* the job's spec.resolved as JSON (its "artifact" is the model file outside) */
    int threads;            /* libtorch intra-op threads; also the CPU limit (cores) */
    long long memory_bytes; /* cgroup memory limit; 0: RP_DEFAULT_MEMORY */
    unsigned uid, gid;      /* the worker slot's sandbox user; 0: 65534 */
    const char *bin_dir;    /* where gantry-replica and gantry-rank-init are (the worker's own directory) */
    const char *bwrap;      /* NULL: /usr/bin/bwrap */
    /* mount /proc after all: only for the sanitizer build's gantry-replica (exec_infer.c), whose ASan
     * needs /proc/self/maps to know its stack (without it every C++ exception inside libtorch is reported
     * as a stack-use-after-scope); the production build never sets it */
    bool proc;
    /* the job's request region (workers/serve/replica_shm.h), which the process maps: batches and
     * their replies go through it when they fit; NULL: through the pipes only */
    replica_shm *shm;
} rp_spec;

typedef struct replica_proc replica_proc;

/* Starts the process; it loads meanwhile (rp_ready).  NULL with err when it could not start. */
replica_proc *rp_start(const rp_spec *s, char *err, size_t errlen);

/* Waits up to timeout_ms for the model to be loaded: 1 ready, 0 still loading, -1 it will never
 * be (why: "the model crashed while loading: signal 11 (Segmentation fault)", the loader's
 * message, ...; the process is gone). */
int rp_ready(replica_proc *p, int timeout_ms, char *why, size_t whylen);

/* what the replica said when it became ready (the version it loaded), "" before */
const char *rp_hello(const replica_proc *p);

typedef enum {
    RP_OK,      /* every request answered (status 200 or 400, reply set) */
    RP_TIMEOUT, /* not answered by the deadline: killed */
    RP_STOPPED, /* stop() said so while waiting: killed */
    RP_DIED,    /* it died, or broke the wire format (then killed): why says how */
} rp_result;

/* Sends n requests and waits for their replies until deadline_us (clock_mono_us); every
 * poll_ms, stop(arg) may end the wait (a cancelled job).  On RP_OK each reqs[i] has status and
 * reply; otherwise no reply is set and the process is dead (rp_free it). */
rp_result rp_batch(replica_proc *p, serve_request *reqs, int n, int64_t deadline_us, int poll_ms, bool (*stop)(void *), void *arg,
                   char *why, size_t whylen);

/* false once the process has died (a thread of the model crashed between batches); why says how */
bool rp_alive(replica_proc *p, char *why, size_t whylen);

/* SIGKILL (if still running), reaps, removes its cgroup, frees */
void rp_free(replica_proc *p);

#endif
