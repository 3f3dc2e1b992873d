/* exec_fed.c - one site of a federated job (SecureD-FL, workers/fed/).
 *
 * The scheduler gives the job's task to one worker per site: a site with a
 * label (site=NAME) to a worker started with that label, the others to any
 * free workers.  Each worker claims its site (workers/fed_io.h), atomically:
 * the first unclaimed site whose label is its own, else the first unclaimed
 * site without a label.  The sites meet in the rendezvous of the generation,
 * then set up their keys (workers/fed/secagg.h: public keys authenticated with
 * the cluster secret of --fed-secret, pair keys, the job's key) and learn
 * their weights from a masked sum of the sample counts.
 *
 * Every round each site trains its copy of the global model on its own data
 * (local_steps steps), then the sites run the aggregation: for FedAvg (the
 * default) one weighted sum; for SecureD-FL the ADMM iterations and one more
 * sum, FedAvg's average for the consensus residual.  Each sum is masked with every other
 * site (the masks cancel only in the total), aggregated through the groups of
 * the design's class, and sealed (ChaCha20-Poly1305) on its way through Redis:
 * Redis sees sizes and timing, a site sees the total.  Raw data and individual
 * models never leave the site.  Site 0 evaluates each round's model on the
 * test set, reports the round as a metrics point, and at the end registers
 * the model; the others end silently.  Every wait has a deadline
 * (exchange_timeout_s); a lost site fails the job's generation (retried), a
 * key or message that does not authenticate fails the job.  This file never
 * talks to Redis itself: workers/fed_io.c does.  What every site does whatever
 * trains it (the claim, the rendezvous, the exchange, the round's point) is
 * workers/fed_site.c; this file is the built-in site's local training and
 * evaluation.  After every round each site checkpoints the global model
 * (workers/fed_ckpt.h: one tensor "params", the layer list's parameters in
 * order); a restarted job continues after the newest round a site holds
 * (fed_site_resume).  Each site's optimizer state and data order are its own
 * and start afresh then.  A spec with "program" is the program variant:
 * exec_fed_program (workers/exec_fed_program.c) runs it. */
#include "common/paths.h"
#include "common/alloc.h"
#include "workers/executor.h"
#include "workers/fed/partition.h"
#include "spec/fed_spec.h"
#include "workers/fed_site.h"
#include "workers/train/ckpt.h"
#include "workers/train/model.h"
#include "workers/train/optim.h"
#include "common/rng.h"
#include "workers/train/train.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* a member of the (valid) spec, or the default its shape documents */
static double num(const sch *shape, const json_t *o, const char *key)
{
    return sch_number(shape, o, key, 0);
}

/* this site's samples: its dataset, or its part of the built-in one (partition) */
static int load_site(const json_t *spec, int s, train_data *tr, train_data *te, char *err, size_t errlen)
{
    json_t *ts = fed_site_train_spec(spec, s);
    int rc = train_dataset_load(ts, tr, te, err, errlen);
    json_decref(ts);
    const json_t *part =
        json_object_get(json_object_get(json_array_get(json_object_get(spec, "sites"), (size_t)s), "dataset"), "partition");
    if (rc || !part) return rc;
    int sites = (int)num(&fed_partition_shape, part, "sites"), index = (int)num(&fed_partition_shape, part, "index");
    int *where = xmalloc(sizeof(int) * tr->n);
    if (fed_partition_dirichlet(tr->y, tr->n, tr->classes, sites, num(&fed_partition_shape, part, "alpha"),
                                (uint64_t)num(&fed_partition_shape, part, "seed"), where)) {
        free(where);
        snprintf(err, errlen, "cannot split the dataset");
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < tr->n; i++) /* keep this site's samples, in order */
        if (where[i] == index) {
            memmove(tr->x + k * tr->dim, tr->x + i * tr->dim, sizeof(float) * tr->dim);
            tr->y[k++] = tr->y[i];
        }
    free(where);
    tr->n = k;
    return 0;
}

static void evaluate(train_model *m, const train_data *te, float *xb, int32_t *yb, int cap, double *loss, double *acc)
{
    long correct = 0;
    double sum = 0;
    for (size_t i = 0; i < te->n; i += (size_t)cap) {
        int b = (int)(te->n - i < (size_t)cap ? te->n - i : (size_t)cap), c;
        memcpy(xb, te->x + i * te->dim, sizeof(float) * (size_t)b * te->dim);
        memcpy(yb, te->y + i, sizeof(int32_t) * (size_t)b);
        sum += m->be->softmax_ce(b, (int)train_model_out_size(m), train_model_forward(m, xb, b, false), yb, NULL, &c) * b;
        correct += c;
    }
    *loss = te->n ? sum / (double)te->n : 0, *acc = te->n ? (double)correct / (double)te->n : 0;
}

/* what the built-in site checkpoints: one tensor "params" of the layer list's dim parameters */
static void params_layout(size_t dim, tensorfile_tensor *t, tensorfile_header *h)
{
    static char name[] = "params";
    *t = (tensorfile_tensor){.name = name, .ndim = 1, .shape = {(int64_t)dim}, .count = dim, .offset = 0};
    *h = (tensorfile_header){.t = t, .n = 1, .total = dim, .meta = NULL};
}

int exec_federated(exec_ctx *ctx, json_t **result, char *err, size_t errlen)
{
    const json_t *spec = ctx->task->spec;
    char field[160], msg[300];
    if (fed_spec_validate(spec, field, sizeof(field), msg, sizeof(msg))) {
        snprintf(err, errlen, "%s: %s", field, msg);
        return EXEC_FAILED;
    }
    if (fed_spec_variant(spec) == FED_PROGRAM) return exec_fed_program(ctx, result, err, errlen);
    fed_site site;
    int rc = fed_site_join(&site, ctx, spec, err, errlen);
    if (rc) return rc;
    int n = site.n, me = site.me;
    const char *my_name = site.name;
    train_data tr = {0}, te = {0};
    train_model *m = NULL;
    train_optim *o = NULL;
    float *xb = NULL, *dl = NULL;
    int32_t *yb = NULL;
    double *z = NULL, *w = NULL;
    rc = EXEC_FAILED;
    json_t *tspec = fed_site_train_spec(spec, me);
    if (load_site(spec, me, &tr, &te, err, errlen)) goto out;
    if (json_object_get(spec, "test")) { /* the job's test set instead of the site's */
        json_t *t2 = json_deep_copy(tspec);
        json_object_set(t2, "dataset", json_object_get(spec, "test"));
        train_data tr2;
        train_data_free(&te);
        int lrc = train_dataset_load(t2, &tr2, &te, err, errlen);
        json_decref(t2);
        train_data_free(&tr2);
        if (lrc) goto out;
    }
    int batch = (int)num(&fed_spec_shape, spec, "batch_size"), cap = batch > 1000 ? batch : 1000;
    uint64_t seed = (uint64_t)num(&fed_spec_shape, spec, "seed");
    if (!(m = train_model_create(json_object_get(spec, "model"), train_backend_cpu(), seed, cap, err, errlen))) goto out;
    if (train_model_in_size(m) != tr.dim) {
        snprintf(err, errlen, "spec.model.input has %zu values per sample but site %s's data has %zu", train_model_in_size(m),
                 my_name, tr.dim);
        goto out;
    }
    o = train_optim_create(json_object_get(spec, "optimizer"), m);
    size_t dim = train_model_param_count(m);
    xb = xmalloc(sizeof(float) * (size_t)cap * tr.dim), yb = xmalloc(sizeof(int32_t) * (size_t)cap);
    dl = xmalloc(sizeof(float) * (size_t)cap * train_model_out_size(m));
    z = xmalloc(sizeof(double) * dim), w = xmalloc(sizeof(double) * dim);
    if (!o) { /* the training library's own allocation failed */
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    /* the data order and the duals from separate streams: SecureD-FL and FedAvg jobs with one seed train alike */
    if ((rc = fed_site_connect(&site, dim, (double)tr.n, rng_mix(seed, 59, (uint64_t)me), err, errlen))) goto out;
    int rounds = (int)num(&fed_spec_shape, spec, "rounds");
    long local = (long)num(&fed_spec_shape, spec, "local_steps");
    train_model_params_out(m, z); /* every site starts from the same seeded model, or the checkpoint's */
    tensorfile_tensor lt;
    tensorfile_header layout;
    params_layout(dim, &lt, &layout);
    int done = 0;
    if ((rc = fed_site_resume(&site, &layout, rounds, z, &done, err, errlen))) goto out;
    rc = EXEC_FAILED;
    size_t *order = xmalloc(sizeof(size_t) * (tr.n ? tr.n : 1)), pos = tr.n;
    rng_state rr = {rng_mix(seed, 53, (uint64_t)me)};
    double tl = 0, ta = 0;
    for (int round = done + 1; round <= rounds; round++) {
        /* asked once a round as well: while messages keep coming, the exchange's waits never ask (fed_io.c) */
        if (ctx->cancelled(ctx)) {
            snprintf(err, errlen, "stopped");
            rc = EXEC_RETRY;
            free(order);
            goto out;
        }
        fed_site_round_start(&site);
        train_model_params_in(m, z);
        for (long step = 0; step < local && tr.n > 0; step++) {
            int b = 0, correct;
            for (; b < batch; b++) {
                if (pos >= tr.n) train_shuffle(order, tr.n, rng_next(&rr), (uint64_t)round), pos = 0;
                size_t i = order[pos++];
                memcpy(xb + (size_t)b * tr.dim, tr.x + i * tr.dim, sizeof(float) * tr.dim);
                yb[b] = tr.y[i];
            }
            train_model_grad(m, xb, yb, b, dl, &correct);
            train_optim_step(o, m->be, o->lr);
        }
        train_model_params_out(m, w);
        if ((rc = fed_site_aggregate(&site, w, z, err, errlen))) {
            free(order);
            goto out;
        }
        rc = EXEC_FAILED;
        fed_site_checkpoint(&site, &layout, z, round, rounds);
        if (me == 0) {
            train_model_params_in(m, z);
            evaluate(m, &te, xb, yb, cap, &tl, &ta);
            json_t *pt = fed_site_point(&site, round);
            json_object_set_new(pt, "test_accuracy", json_real(ta));
            json_object_set_new(pt, "test_loss", json_real(tl));
            char line[200];
            snprintf(line, sizeof(line), "round %d of %d: test accuracy %.4f, consensus residual %.1e", round, rounds, ta,
                     site.residual);
            ctx->progress(ctx, (double)round / rounds, line, pt);
            json_decref(pt);
        }
    }
    free(order);
    if (me == 0 && done >= rounds) { /* every round was done before the restart: the checkpoint's model */
        train_model_params_in(m, z);
        evaluate(m, &te, xb, yb, cap, &tl, &ta);
    }
    if (me != 0) {
        rc = EXEC_SILENT;
        goto out;
    }
    char models[2048], artifact[2400];
    snprintf(models, sizeof(models), "%s/models", ctx->state_dir);
    snprintf(artifact, sizeof(artifact), "%s/%s.model", models, ctx->task->job_id);
    train_ckpt_state st = {.step = (uint64_t)rounds, .seed = seed, .rng = m->rng.s};
    train_model_params_in(m, z);
    if (path_mkdirs(models) != 0 || train_ckpt_save(artifact, m, NULL, &st, err, errlen)) goto out;
    *result =
        json_pack("{s:{s:f, s:f, s:i, s:i, s:f, s:f}, s:{s:O, s:I, s:s}, s:o}", "metrics", "test_accuracy", ta, "test_loss", tl,
                  "rounds", rounds, "sites", n, "residual", site.residual, "bytes_per_site_per_round",
                  site.S.bytes_sent / (rounds > done ? rounds - done : 1), "model", "architecture", json_object_get(spec, "model"),
                  "parameters", (json_int_t)dim, "artifact", artifact, "design", fed_site_design(&site));
    rc = EXEC_OK;
out:
    json_decref(tspec);
    train_data_free(&tr), train_data_free(&te);
    if (o) train_optim_free(o, m->be);
    train_model_free(m);
    free(xb), free(yb), free(dl), free(z), free(w);
    fed_site_free(&site);
    return rc;
}
