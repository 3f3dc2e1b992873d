/* exec_train.c - the training executor: the pure library in workers/train runs the
 * loop; this file gives it a checkpoint path under the worker's state directory
 * (a resumed job continues from it), turns its metrics into progress events, stops
 * it on cancel or preemption, and publishes the final model to the model store. */
#include "common/paths.h"
#include "workers/executor.h"
#include "workers/train/train.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void on_metrics(void *arg, const json_t *m)
{
    exec_ctx *ctx = arg;
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
    exec_ctx *ctx = arg;
    return ctx->cancelled(ctx);
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

int exec_training(exec_ctx *ctx, json_t **result, char *err, size_t errlen)
{
    char dir[2048], ckpt[2300], models[2048], artifact[2400], model_file[2400];
    snprintf(dir, sizeof(dir), "%s/jobs/%s", ctx->state_dir, ctx->task->job_id);
    snprintf(models, sizeof(models), "%s/models", ctx->state_dir);
    if (path_mkdirs(dir) != 0 || path_mkdirs(models) != 0) {
        snprintf(err, errlen, "cannot create the job's state directory %s: %s", dir, strerror(errno));
        return -1;
    }
    snprintf(ckpt, sizeof(ckpt), "%s/checkpoint", dir);
    train_hooks hooks = {on_metrics, should_stop, ctx};
    ctx->progress(ctx, 0.0, "loading data", NULL);
    int rc = train_run(ctx->task->spec, ckpt, &hooks, result, err, errlen);
    if (rc == 1) {
        snprintf(err, errlen, "stopped");
        return -1;
    }
    if (rc != 0) return -1;
    /* the model store: where inference replicas load (name, version) from */
    snprintf(model_file, sizeof(model_file), "%s.model", ckpt);
    snprintf(artifact, sizeof(artifact), "%s/%s.model", models, ctx->task->job_id);
    json_t *model = json_object_get(*result, "model");
    if (json_is_object(model) && copy_file(model_file, artifact) == 0)
        json_object_set_new(model, "artifact", json_string(artifact));
    return 0;
}
