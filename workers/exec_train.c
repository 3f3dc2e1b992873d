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
#include "workers/comm/mesh.h"
#include "workers/comm/ring.h"
#include "workers/executor.h"
#include "spec/train_spec.h"
#include "workers/train/adapt.h"
#include "workers/train/backend.h"
#include "workers/train/mop.h"
#include "workers/train/train.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    exec_ctx *ctx;
    ring *ring;   /* CPU gangs */
    mesh *mesh;   /* CPU gangs with the strategy_switch policy: tree and star */
    int strategy; /* the all-reduce in use (train_strategy) */
    gnccl *nccl;  /* GPU gangs */
    int rank;
    int timeout_ms;
    int world;
    double rendezvous_s; /* joining the generation's rendezvous and forming the ring or communicator */
    double load_s;       /* loading the dataset (0 when this worker still had it) */
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
    if (json_object_get(m, "event")) { /* an adaptation (adapt.h): its sentence */
        snprintf(msg, sizeof(msg), "%s: %s", json_string_value(json_object_get(m, "event")),
                 json_string_value(json_object_get(m, "detail")) ? json_string_value(json_object_get(m, "detail")) : "");
        ctx->progress(ctx, fraction > 1.0 ? 1.0 : fraction, msg, m);
        return;
    }
    if (json_object_get(m, "config")) { /* model selection: one point per configuration and epoch */
        snprintf(msg, sizeof(msg), "epoch %g: configuration %lld of %lld, test accuracy %.4f, train loss %.4f", epoch,
                 (long long)json_integer_value(json_object_get(m, "config")),
                 (long long)json_integer_value(json_object_get(m, "configurations")),
                 json_number_value(json_object_get(m, "test_accuracy")), json_number_value(json_object_get(m, "loss")));
        ctx->progress(ctx, epochs > 0 && epoch / epochs < 1.0 ? epoch / epochs : 1.0, msg, m);
        return;
    }
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
    if (g->nccl) return gnccl_allreduce(g->nccl, buf, n, g->timeout_ms, err, errlen);
    if (g->mesh && g->strategy != TRAIN_RING)
        return mesh_allreduce(g->mesh, buf, n, g->strategy == TRAIN_TREE ? 2 : ring_world(g->ring) - 1, g->timeout_ms, err, errlen);
    return ring_allreduce(g->ring, buf, n, g->timeout_ms, err, errlen);
}

static int on_set_strategy(void *arg, int strategy)
{
    gang *g = arg;
    if (!g->mesh || strategy < 0 || strategy >= TRAIN_NSTRATEGIES) return -1; /* NCCL picks its own algorithms */
    g->strategy = strategy;
    return 0;
}

static int on_shift(void *arg, const void *send, size_t len, void **recv, size_t *recv_len, char *err, size_t errlen)
{
    gang *g = arg;
    return ring_shift(g->ring, send, len, recv, recv_len, g->timeout_ms, err, errlen);
}

static int on_broadcast(void *arg, void *buf, size_t bytes, int root, char *err, size_t errlen)
{
    gang *g = arg;
    return g->nccl ? gnccl_broadcast(g->nccl, buf, bytes, root, g->timeout_ms, err, errlen)
                   : ring_broadcast(g->ring, buf, bytes, root, g->timeout_ms, err, errlen);
}

/* What a worker process keeps between the generations of a training job it
 * runs (one job at a time, forgotten when the job finishes or the worker runs
 * another job):
 * - the hand-off: the state it held when its last generation ended unfinished
 *   (stopped for a resize or preemption, or a peer lost).  Any generation of
 *   the job may use it: every state of a job is a valid place to continue
 *   from, and the gang takes the newest step.  Without it the gang falls back
 *   to the checkpoint.
 * - the dataset in memory, so that a survivor does not read it again (a new
 *   member of the gang loads it; the slowest loader sets the resize time). */
static struct {
    char job[64];
    unsigned char *blob;
    size_t len;
    double at;
    bool have_data;
    train_data tr, te;
} kept;

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void on_keep(void *arg, unsigned char *blob, size_t len)
{
    (void)arg;
    free(kept.blob);
    kept.blob = blob, kept.len = len, kept.at = wall_s();
}

void exec_training_release(const char *job_id)
{
    if (job_id && strcmp(kept.job, job_id) == 0) return;
    free(kept.blob);
    if (kept.have_data) train_data_free(&kept.tr), train_data_free(&kept.te);
    memset(&kept, 0, sizeof(kept));
    if (job_id) snprintf(kept.job, sizeof(kept.job), "%s", job_id);
}

/* rank 0: how the gang got its state, as an event and a metrics point (the training page lists them) */
static void on_started(void *arg, const train_start_info *info)
{
    gang *g = arg;
    exec_ctx *ctx = g->ctx;
    if (info->source < 0 && ctx->task->attempt == 0) return; /* a plain first start */
    double gap = info->taken_at > 0 ? wall_s() - info->taken_at : 0;
    char msg[320];
    int n = snprintf(msg, sizeof(msg), "generation %d: %d worker%s from step %llu, state from ", ctx->task->attempt, g->world,
                     g->world == 1 ? "" : "s", info->step);
    if (info->source < 0)
        n += snprintf(msg + n, sizeof(msg) - (size_t)n, "scratch (no checkpoint)");
    else if (info->bytes)
        n += snprintf(msg + n, sizeof(msg) - (size_t)n, "%s rank %d (%.2f MB broadcast in %.0f ms)",
                      strcmp(info->from, "survivor") == 0 ? "a survivor," : "the checkpoint of", info->source,
                      (double)info->bytes / 1e6, info->seconds * 1e3);
    else
        n += snprintf(msg + n, sizeof(msg) - (size_t)n, "the %s", info->from);
    if (gap > 0) snprintf(msg + n, sizeof(msg) - (size_t)n, "; %.2f s after the previous generation stopped", gap);
    json_t *m =
        json_pack("{s:s, s:i, s:I, s:s, s:i, s:I, s:f, s:f, s:f, s:f}", "event", "resize", "workers", g->world, "step",
                  (json_int_t)info->step, "state_from", info->from, "source", info->source, "state_bytes", (json_int_t)info->bytes,
                  "state_s", info->seconds, "resize_s", gap, "rendezvous_s", g->rendezvous_s, "load_s", g->load_s);
    ctx->progress(ctx, 0.0, msg, m);
    json_decref(m);
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

/* joins the rendezvous and forms the ring; 0, or -1 with err */
static bool wants_strategies(const json_t *spec)
{
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(spec, "policies"), i, p)
    {
        const char *name = json_string_value(json_object_get(p, "name"));
        if (name && !strcmp(name, "strategy_switch")) return true;
    }
    return false;
}

/* joins the rendezvous and forms the ring, and for the strategy_switch policy also the mesh of
 * the tree and star all-reduce (its port after a '+' in the published address); 0, or -1 with err */
static int form_gang(exec_ctx *ctx, int *world, gang *g, char *err, size_t errlen)
{
    int port = 0, mport = 0, rdv_ms = (int)train_spec_long(ctx->task->spec, "rendezvous_timeout_s") * 1000;
    bool mesh_too = wants_strategies(ctx->task->spec);
    int fd = ring_listen(ctx->advertise_host, &port, err, errlen), mfd = -1;
    if (fd < 0) return -1;
    if (mesh_too && (mfd = ring_listen(ctx->advertise_host, &mport, err, errlen)) < 0) {
        close(fd);
        return -1;
    }
    char addr[RDV_ADDR_LEN], token[160];
    if (mesh_too)
        snprintf(addr, sizeof(addr), "%s:%d+%d", ctx->advertise_host, port, mport);
    else
        snprintf(addr, sizeof(addr), "%s:%d", ctx->advertise_host, port);
    rdv_members m;
    if (ctx->rendezvous(ctx, *world, addr, rdv_ms, &m, err, errlen) != 0) {
        close(fd);
        if (mfd >= 0) close(mfd);
        return -1;
    }
    snprintf(token, sizeof(token), "%s:%d", ctx->task->job_id, ctx->task->attempt);
    g->rank = m.rank, *world = m.world;
    static char ring_addr[RDV_MAX_WORLD][RDV_ADDR_LEN], mesh_addr[RDV_MAX_WORLD][RDV_ADDR_LEN];
    const char *maddrs[RDV_MAX_WORLD];
    for (int r = 0; r < m.world; r++) { /* "host:port+mport" -> "host:port" and "host:mport" */
        snprintf(ring_addr[r], sizeof(ring_addr[r]), "%s", m.addrs[r]);
        char *plus = strchr(ring_addr[r], '+'), *colon;
        mesh_addr[r][0] = '\0';
        if (plus) {
            *plus = '\0';
            colon = strrchr(ring_addr[r], ':');
            snprintf(mesh_addr[r], sizeof(mesh_addr[r]), "%.*s:%s", colon ? (int)(colon - ring_addr[r]) : 0, ring_addr[r],
                     plus + 1);
        }
        maddrs[r] = mesh_addr[r];
    }
    g->ring = ring_connect(fd, m.rank, m.world, ring_addr[(m.rank + 1) % m.world], token, rdv_ms, err, errlen);
    if (g->ring && mfd >= 0) {
        g->mesh = mesh_connect(mfd, m.rank, m.world, maddrs, token, rdv_ms, err, errlen);
        return g->mesh ? 0 : -1;
    }
    if (mfd >= 0) close(mfd);
    return g->ring ? 0 : -1;
}

/* GPU workers: ranks from the rendezvous, rank 0's NCCL id through it, then the communicator */
static int form_gpu_gang(exec_ctx *ctx, int *world, gang *g, char *err, size_t errlen)
{
    int rdv_ms = (int)train_spec_long(ctx->task->spec, "rendezvous_timeout_s") * 1000;
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
    if (train_spec_variant(ctx->task->spec) == TRAIN_PROGRAM)
        return exec_program(ctx, result, err, errlen); /* the team's own program */
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
    int world = elastic ? 0 : (int)train_spec_long(ctx->task->spec, "workers");
    bool in_gang = elastic || world > 1;
    bool search = json_object_get(ctx->task->spec, "search") != NULL; /* model selection (workers/train/mop.h) */
    gang g = {.ctx = ctx, .timeout_ms = (int)train_spec_long(ctx->task->spec, "collective_timeout_s") * 1000, .world = 1};
    train_hooks hooks = {.progress = on_metrics,
                         .should_stop = should_stop,
                         .ctx = &g,
                         .rank = 0,
                         .world = 1,
                         .keep = on_keep,
                         .started = on_started};
    exec_training_release(ctx->task->job_id); /* another job's state and data: useless now */
    hooks.handoff = kept.blob, hooks.handoff_len = kept.len, hooks.handoff_at = kept.at;
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
        double t0 = wall_s();
        /* model selection moves whole models between workers: over the TCP ring even on GPUs */
        int formed = (hooks.backend && !search ? form_gpu_gang : form_gang)(ctx, &world, &g, why, sizeof(why));
        g.rendezvous_s = wall_s() - t0;
        if (formed != 0) {
            snprintf(err, errlen, "could not form the gang: %s", why);
            if (g.ring) ring_close(g.ring);
            if (g.mesh) mesh_close(g.mesh);
            if (g.nccl) gnccl_destroy(g.nccl);
            return EXEC_RETRY;
        }
        hooks.rank = g.rank, hooks.world = world, hooks.allreduce = on_allreduce, hooks.broadcast = on_broadcast;
        hooks.shift = on_shift, hooks.set_strategy = on_set_strategy;
        g.world = world;
    }
    if (hooks.rank == 0) {
        char msg[96] = "loading data";
        if (in_gang) snprintf(msg, sizeof(msg), "gang of %d formed; loading data", world);
        ctx->progress(ctx, 0.0, msg, NULL);
    }
    double t_load = wall_s();
    if (!kept.have_data) {
        char field[160], msg[200];
        if (train_spec_validate(ctx->task->spec, field, sizeof(field), msg, sizeof(msg)) != 0) {
            snprintf(err, errlen, "%s: %s", field, msg);
            return EXEC_FAILED;
        }
        if (train_dataset_load(ctx->task->spec, &kept.tr, &kept.te, err, errlen) != 0) return EXEC_FAILED;
        kept.have_data = true;
    }
    hooks.train_set = &kept.tr, hooks.test_set = &kept.te;
    g.load_s = wall_s() - t_load;
    snprintf(model_file, sizeof(model_file), "%s.model", ckpt);
    int rc = search ? mop_run(ctx->task->spec, model_file, &hooks, result, err, errlen)
                    : train_run(ctx->task->spec, ckpt, &hooks, result, err, errlen);
    int rank = hooks.rank;
    if (g.ring) ring_close(g.ring);
    if (g.mesh) mesh_close(g.mesh);
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
    if (rc != 0) {
        exec_training_release(NULL);
        return EXEC_FAILED;
    }
    exec_training_release(NULL); /* finished: nothing to continue */
    if (rank != 0) {
        json_decref(*result);
        *result = NULL;
        return EXEC_SILENT;
    }
    /* the model store: where inference replicas load (name, version) from */
    snprintf(artifact, sizeof(artifact), "%s/%s.model", models, ctx->task->job_id);
    json_t *model = json_object_get(*result, "model");
    if (json_is_object(model) && copy_file(model_file, artifact) == 0)
        json_object_set_new(model, "artifact", json_string(artifact));
    json_object_set_new(json_object_get(*result, "metrics"), "workers", json_integer(world));
    return EXEC_OK;
}
