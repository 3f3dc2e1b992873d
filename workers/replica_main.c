/* gantry-replica: one inference replica of one job, the process a worker starts inside its
 * sandbox (workers/replica_proc.h says what the sandbox is).
 *
 *   gantry-replica NAME THREADS RESOLVED_JSON [SHM_FD]
 *
 * RESOLVED_JSON is the job's spec.resolved with "artifact" naming the model file as the sandbox
 * shows it (replica_proc binds it read-only at RP_MODEL_PATH).  The replica loads the model (a
 * TorchScript model's __setstate__ and load-time code run here, in the sandbox), runs its warm-up,
 * then installs a seccomp filter (below) and says RW_READY on stdout; from then on it answers
 * RW_BATCH frames from stdin with RW_REPLIES frames (workers/serve/replica_wire.h) until stdin
 * closes.  With SHM_FD (the worker's request region, workers/serve/replica_shm.h, mapped at the
 * start) it also answers RW_BATCH_SHM, whose bodies are in the region, with its replies there.  A model that does not load is
 * reported with RW_FAILED and exit status 2.
 *
 * It holds no credential, opens no file after loading and has no network: everything it gets is
 * a batch of request bodies, everything it gives is their replies.  The worker kills it
 * (SIGKILL) when it misses a deadline; it never needs to stop cleanly. */
#include "common/alloc.h"
#include "workers/replica_seccomp.h"
#include "workers/serve/replica_model.h"
#include "workers/serve/replica_shm.h"
#include "workers/serve/replica_wire.h"
#include "spec/serve_spec.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
/* The sanitizer build (CI): a model's huge allocation fails as it does in production (a bad_alloc
 * the model's forward reports, under RLIMIT_AS there) instead of aborting the process; no leak
 * check at exit (the replica is killed, and LeakSanitizer needs /proc, which the sandbox lacks).
 * The replica's environment is empty, so ASAN_OPTIONS cannot say it. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1:detect_leaks=0";
}
#endif

static void say(uint32_t type, const char *text)
{
    const void *p[1] = {text};
    size_t l[1] = {strlen(text)};
    rw_write(1, type, p, l, 1, 0);
}

/* answers the batch reqs[0..n): its replies in room (the shared region's, when they fit) or on stdout */
static int serve(replica_model *m, const char *name, serve_request *reqs, int n, char *room, size_t room_len)
{
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
    size_t total = 0;
    for (int i = 0; i < k; i++)
        total += lens[i];
    int rc;
    if (room && total <= room_len) {
        char *at = room;
        for (int i = 0; i < k; at += lens[i], i++)
            memcpy(at, pieces[i], lens[i]);
        uint64_t len = total;
        const void *p[1] = {&len};
        size_t l[1] = {sizeof len};
        rc = rw_write(1, RW_REPLIES_SHM, p, l, 1, 0);
    } else {
        rc = rw_write(1, RW_REPLIES, pieces, lens, k, 0);
    }
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
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: gantry-replica NAME THREADS RESOLVED_JSON [SHM_FD] (started by gantry-worker)\n");
        return 64;
    }
    char *shm = NULL; /* the request region (replica_shm.h), mapped before the lock-down */
    size_t shm_size = 0;
    if (argc == 5 && rs_attach(atoi(argv[4]), &shm, &shm_size) != 0) {
        say(RW_FAILED, "cannot map the worker's request region");
        return 2;
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
    if (replica_lock_down() != 0) {
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
        if (h.type != RW_BATCH && !(h.type == RW_BATCH_SHM && shm)) return 3;
        char *payload = xmalloc((size_t)h.len + 1);
        if (rw_read_exact(0, payload, (size_t)h.len, 0) != 0) return 3;
        size_t room = 0, room_len = 0;
        int n = h.type == RW_BATCH
                    ? rw_parse_batch(payload, (size_t)h.len, reqs, SERVE_MAX_SAMPLES)
                    : rw_parse_shm_batch(payload, (size_t)h.len, shm, shm_size, reqs, SERVE_MAX_SAMPLES, &room, &room_len);
        int rc = n > 0 ? serve(m, argv[1], reqs, n, h.type == RW_BATCH_SHM ? shm + room : NULL, room_len) : -1;
        free(payload);
        if (rc != 0) return 3;
    }
}
