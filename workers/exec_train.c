/* exec_train.c - the training executor: the pure library in workers/train runs the
 * loop; this file gives it a checkpoint path under the worker's state directory
 * (a resumed job continues from it), turns its metrics into progress events, stops
 * it on cancel or preemption, and publishes the final model to the model store.
 *
 * A job with spec.workers = N > 1 runs as a gang: the scheduler gives the same
 * task to N workers; each joins the rendezvous of the task's generation, forms
 * the TCP ring (workers/comm/ring.h), or on GPU workers an NCCL communicator from
 * rank 0's id shared through the rendezvous (workers/comm/gnccl.h), and runs
 * train_run as its rank.  Rank 0
 * reports progress and the result; the others end silently.  When a peer is
 * lost or too slow the all-reduce fails within spec.collective_timeout_s and
 * every survivor answers EXEC_RETRY: the job is requeued once (as its next
 * generation) and resumes from the last checkpoint with the workers it gets. */
#include "common/paths.h"
#include "workers/comm/gnccl.h"
#include "workers/comm/ring.h"
#include "workers/executor.h"
#include "workers/train/backend.h"
#include "workers/train/train.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_COLLECTIVE_TIMEOUT_S 120
#define DEFAULT_RENDEZVOUS_TIMEOUT_S 60

typedef struct {
    exec_ctx *ctx;
    ring *ring;  /* CPU gangs */
    gnccl *nccl; /* GPU gangs */
    int rank;
    int timeout_ms;
} gang;

static void on_metrics(void *arg, const json_t *m)
{
    gang *g = arg;
    exec_ctx *ctx = g->ctx;
    if (g->rank != 0) return; /* every rank has the same figures: rank 0 reports them */
    double epochs = json_number_value(json_object_get(ctx->task->spec, "epochs"));
    double steps = json_number_value(json_object_get(ctx->task->spec, "steps"));
    double epoch = json_number_value(json_object_get(m, "epoch"));
    double step = (double)json_integer_value(json_object_get(m, "step"));
    /* the last report reaches 1.0, which the worker's progress rate limit always lets through */
    double fraction = steps > 0 ? step / steps : epochs > 0 ? epoch / epochs : 0.0;
    char msg[256];
    snprintf(msg, sizeof(msg), "epoch %g step %lld loss %.4f accuracy %.4f %.0f samples/s", epoch,
             (long long)json_integer_value(json_object_get(m, "step")), json_number_value(json_object_get(m, "loss")),
             json_number_value(json_object_get(m, "accuracy")), json_number_value(json_object_get(m, "samples_per_s")));
    ctx->progress(ctx, fraction > 1.0 ? 1.0 : fraction, msg, m);
}

static int should_stop(void *arg)
{
    gang *g = arg;
    return g->ctx->cancelled(g->ctx);
}

static int on_allreduce(void *arg, float *buf, size_t n, char *err, size_t errlen)
{
    gang *g = arg;
    return g->nccl ? gnccl_allreduce(g->nccl, buf, n, g->timeout_ms, err, errlen)
                   : ring_allreduce(g->ring, buf, n, g->timeout_ms, err, errlen);
}

static int copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t n;
    int rc = in && out ? 0 : -1;
    while (rc == 0 && (n = fread(buf, 1, sizeof(buf), in)) > 0)
        if (fwrite(buf, 1, n, out) != n) rc = -1;
    if (in) fclose(in);
    if (out && fclose(out) != 0) rc = -1;
    return rc;
}

static long spec_long(const json_t *spec, const char *key, long def)
{
    json_t *v = json_object_get(spec, key);
    return json_is_integer(v) ? (long)json_integer_value(v) : def;
}

/* joins the rendezvous and forms the ring; 0, or -1 with err */
static int form_gang(exec_ctx *ctx, int *world, gang *g, char *err, size_t errlen)
{
    int port = 0, rdv_ms = (int)spec_long(ctx->task->spec, "rendezvous_timeout_s", DEFAULT_RENDEZVOUS_TIMEOUT_S) * 1000;
    int fd = ring_listen(ctx->advertise_host, &port, err, errlen);
    if (fd < 0) return -1;
    char addr[RDV_ADDR_LEN], token[160];
    snprintf(addr, sizeof(addr), "%s:%d", ctx->advertise_host, port);
    rdv_members m;
    if (ctx->rendezvous(ctx, *world, addr, rdv_ms, &m, err, errlen) != 0) {
        close(fd);
        return -1;
    }
    snprintf(token, sizeof(token), "%s:%d", ctx->task->job_id, ctx->task->attempt);
    g->rank = m.rank, *world = m.world;
    g->ring = ring_connect(fd, m.rank, m.world, m.addrs[(m.rank + 1) % m.world], token, rdv_ms, err, errlen);
    return g->ring ? 0 : -1;
}

/* GPU workers: ranks from the rendezvous, rank 0's NCCL id through it, then the communicator */
static int form_gpu_gang(exec_ctx *ctx, int *world, gang *g, char *err, size_t errlen)
{
    int rdv_ms = (int)spec_long(ctx->task->spec, "rendezvous_timeout_s", DEFAULT_RENDEZVOUS_TIMEOUT_S) * 1000;
    rdv_members m;
    char id[GNCCL_ID_HEX];
    if (ctx->rendezvous(ctx, *world, "nccl", rdv_ms, &m, err, errlen) != 0) return -1;
    g->rank = m.rank, *world = m.world;
    if (m.rank == 0 ? gnccl_unique_id(id, err, errlen) != 0 || ctx->gang_put(ctx, "nccl_id", id) != 0
                    : ctx->gang_get(ctx, "nccl_id", rdv_ms, id, sizeof(id), err, errlen) != 0)
        return -1;
    g->nccl = gnccl_init(id, m.rank, m.world, rdv_ms, err, errlen);
    return g->nccl ? 0 : -1;
}

int exec_training(exec_ctx *ctx, json_t **result, char *err, size_t errlen)
{
    char dir[2048], ckpt[2300], models[2048], artifact[2400], model_file[2400];
    snprintf(dir, sizeof(dir), "%s/jobs/%s", ctx->state_dir, ctx->task->job_id);
    snprintf(models, sizeof(models), "%s/models", ctx->state_dir);
    if (path_mkdirs(dir) != 0 || path_mkdirs(models) != 0) {
        snprintf(err, errlen, "cannot create the job's state directory %s: %s", dir, strerror(errno));
        return EXEC_FAILED;
    }
    snprintf(ckpt, sizeof(ckpt), "%s/checkpoint", dir);
    /* an elastic job ({"min","max"}) learns its size from the rendezvous: the workers it got */
    bool elastic = json_is_object(json_object_get(ctx->task->spec, "workers"));
    int world = elastic ? 0 : (int)spec_long(ctx->task->spec, "workers", 1);
    bool in_gang = elastic || world > 1;
    gang g = {ctx, NULL, NULL, 0, (int)spec_long(ctx->task->spec, "collective_timeout_s", DEFAULT_COLLECTIVE_TIMEOUT_S) * 1000};
    train_hooks hooks = {.progress = on_metrics, .should_stop = should_stop, .ctx = &g, .rank = 0, .world = 1};
    if (ctx->worker_kind && strcmp(ctx->worker_kind, "gpu") == 0) { /* a GPU worker trains on its GPU */
        hooks.backend = train_backend_cuda();
        if (!hooks.backend) {
            snprintf(err, errlen, "this GPU worker has no usable CUDA device (or was built without CUDA)");
            return EXEC_FAILED;
        }
    }
    if (in_gang) {
        ctx->progress(ctx, 0.0, "waiting for the other workers of the gang", NULL);
        char why[400];
        if ((hooks.backend ? form_gpu_gang : form_gang)(ctx, &world, &g, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "could not form the gang: %s", why);
            if (g.ring) ring_close(g.ring);
            if (g.nccl) gnccl_destroy(g.nccl);
            return EXEC_RETRY;
        }
        hooks.rank = g.rank, hooks.world = world, hooks.allreduce = on_allreduce;
    }
    if (hooks.rank == 0) {
        char msg[96] = "loading data";
        if (in_gang) snprintf(msg, sizeof(msg), "gang of %d formed; loading data", world);
        ctx->progress(ctx, 0.0, msg, NULL);
    }
    int rc = train_run(ctx->task->spec, ckpt, &hooks, result, err, errlen);
    int rank = hooks.rank;
    if (g.ring) ring_close(g.ring);
    if (g.nccl) gnccl_destroy(g.nccl);
    if (rc == 1) { /* stopped: by our own cancel/preempt check, or by a peer's vote (the worker tells which) */
        snprintf(err, errlen, "stopped");
        return in_gang ? EXEC_RETRY : EXEC_FAILED;
    }
    if (rc == -2) {
        char why[512];
        snprintf(why, sizeof(why), "%s", err);
        snprintf(err, errlen, "rank %d of %d lost a peer: %s", rank, world, why);
        return EXEC_RETRY;
    }
    if (rc != 0) return EXEC_FAILED;
    if (rank != 0) {
        json_decref(*result);
        *result = NULL;
        return EXEC_SILENT;
    }
    /* the model store: where inference replicas load (name, version) from */
    snprintf(model_file, sizeof(model_file), "%s.model", ckpt);
    snprintf(artifact, sizeof(artifact), "%s/%s.model", models, ctx->task->job_id);
    json_t *model = json_object_get(*result, "model");
    if (json_is_object(model) && copy_file(model_file, artifact) == 0)
        json_object_set_new(model, "artifact", json_string(artifact));
    json_object_set_new(json_object_get(*result, "metrics"), "workers", json_integer(world));
    return EXEC_OK;
}
