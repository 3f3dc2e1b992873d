/* mop.c - model hopper parallelism: the schedule and the run (mop.h).
 *
 * A model travels as a 16-byte header (configuration index, the epoch's
 * training-loss sum and batch count so far) followed by the model and its
 * optimizer in the checkpoint format (ckpt.h), which carries the step and the
 * dropout PRNG: a model's training does not depend on where it runs, so its
 * result equals training it alone on the partitions in the same order
 * (mop_alone, tested bit for bit).  The search's shape and its expansion into configurations
 * (mop_expand) are in the training spec module, spec/train_spec_search.c. */
#include "workers/train/mop.h"

#include "workers/train/ckpt.h"
#include "workers/train/data.h"
#include "workers/train/model.h"
#include "workers/train/optim.h"
#include "common/rng.h"
#include "common/alloc.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the schedule ---- */

int mop_per_worker(int n, int w)
{
    return (n + w - 1) / w;
}

int mop_model_at(int n, int w, int t, int pos)
{
    int M = mop_per_worker(n, w) * w, m = ((pos - t) % M + M) % M;
    return m < n ? m : -1;
}

int mop_partition_order(int n, int w, int m, int *order)
{
    int K = mop_per_worker(n, w), M = K * w, k = 0;
    for (int t = 0; t < M; t++)
        for (int v = 0; v < w; v++)
            if (mop_model_at(n, w, t, v * K) == m) order[k++] = v;
    return k;
}

/* ---- one configuration on a worker ---- */

typedef struct {
    int id;
    train_model *m;
    train_optim *o;
    train_schedule sched;
    train_ckpt_state st;
    long total;
    int batch;
    float *xb, *dlogits;
    int32_t *yb;
    double loss_sum, batches; /* this epoch's training loss so far (travels with the model) */
} slot;

typedef struct {
    const json_t *configs;
    int n, world, rank;
    const train_backend *be;
    const train_data *tr, *te;
    size_t *perm, *tmp; /* partitions: perm[off[p] .. off[p] + len[p]) */
    size_t off[TRAIN_MAX_WORKERS], len[TRAIN_MAX_WORKERS];
    uint64_t seed;
    long epochs;
} mop;

static void slot_free(slot *s, const train_backend *be)
{
    if (!s) return;
    if (s->xb) be->free(s->xb);
    if (s->yb) be->free(s->yb);
    if (s->dlogits) be->free(s->dlogits);
    if (s->o) train_optim_free(s->o, be);
    train_model_free(s->m);
    free(s);
}

/* configuration id, freshly initialised from its spec's seed */
static slot *slot_new(const mop *P, int id, char *err, size_t el)
{
    const json_t *spec = json_object_get(json_array_get(P->configs, (size_t)id), "spec");
    slot *s = xcalloc(1, sizeof *s);
    s->id = id;
    s->batch = (int)json_integer_value(json_object_get(spec, "batch_size"));
    json_t *sd = json_object_get(spec, "seed");
    uint64_t seed = sd ? (uint64_t)json_integer_value(sd) : 1;
    if (!(s->m = train_model_create(json_object_get(spec, "model"), P->be, seed, s->batch, err, el))) goto fail;
    if (train_model_in_size(s->m) != P->tr->dim) {
        snprintf(err, el, "configuration %d: spec.model.input has %zu values per sample but the training set has %zu", id,
                 train_model_in_size(s->m), P->tr->dim);
        goto fail;
    }
    s->o = train_optim_create(json_object_get(spec, "optimizer"), s->m);
    s->xb = P->be->alloc((size_t)s->batch * P->tr->dim);
    s->yb = (int32_t *)P->be->alloc((size_t)s->batch);
    s->dlogits = P->be->alloc((size_t)s->batch * train_model_out_size(s->m));
    if (!s->o || !s->xb || !s->yb || !s->dlogits) {
        snprintf(err, el, "out of memory");
        goto fail;
    }
    train_schedule_init(&s->sched, json_object_get(spec, "schedule"));
    long spe = 0;
    for (int p = 0; p < P->world; p++)
        spe += (long)((P->len[p] + (size_t)s->batch - 1) / (size_t)s->batch);
    s->total = spe * P->epochs;
    s->st.seed = seed;
    return s;
fail:
    slot_free(s, P->be);
    return NULL;
}

/* one sub-epoch: the model trains once over partition part */
static void pass(const mop *P, slot *s, int part, uint64_t epoch)
{
    size_t len = P->len[part], dim = P->tr->dim;
    const size_t *idx = P->perm + P->off[part];
    train_shuffle(P->tmp, len, rng_mix(P->seed, 17, (uint64_t)part), epoch);
    for (size_t i = 0; i < len; i += (size_t)s->batch) {
        int cnt = (int)(len - i < (size_t)s->batch ? len - i : (size_t)s->batch), correct;
        for (int j = 0; j < cnt; j++) {
            size_t x = idx[P->tmp[i + (size_t)j]];
            memcpy(s->xb + (size_t)j * dim, P->tr->x + x * dim, sizeof(float) * dim);
            s->yb[j] = P->tr->y[x];
        }
        s->loss_sum += train_model_grad(s->m, s->xb, s->yb, cnt, s->dlogits, &correct);
        s->batches += 1;
        train_optim_step(s->o, P->be, train_schedule_lr(&s->sched, s->o->lr, (long)s->st.step, s->total));
        s->st.step++;
    }
}

/* test loss and accuracy over the whole test set */
static void evaluate(const mop *P, slot *s, double *loss, double *acc)
{
    size_t n = P->te->n, dim = P->te->dim;
    int k = (int)train_model_out_size(s->m);
    double sum = 0;
    long correct = 0;
    for (size_t i = 0; i < n; i += (size_t)s->batch) {
        int b = (int)(n - i < (size_t)s->batch ? n - i : (size_t)s->batch), c;
        memcpy(s->xb, P->te->x + i * dim, sizeof(float) * (size_t)b * dim);
        memcpy(s->yb, P->te->y + i, sizeof(int32_t) * (size_t)b);
        sum += s->m->be->softmax_ce(b, k, train_model_forward(s->m, s->xb, b, false), s->yb, NULL, &c) * b;
        correct += c;
    }
    *loss = n ? sum / (double)n : 0, *acc = n ? (double)correct / (double)n : 0;
}

/* a model's message: header, then its checkpoint encoding */
static int encode(slot *s, unsigned char **out, size_t *len, char *err, size_t el)
{
    unsigned char *blob;
    size_t bl;
    s->st.rng = s->m->rng.s;
    if (train_ckpt_encode(s->m, s->o, &s->st, &blob, &bl, err, el)) return -1;
    unsigned char *msg = xmalloc(16 + bl);
    int32_t id = s->id, pad = 0;
    float f[2] = {(float)s->loss_sum, (float)s->batches};
    memcpy(msg, &id, 4), memcpy(msg + 4, &pad, 4), memcpy(msg + 8, f, 8);
    memcpy(msg + 16, blob, bl);
    free(blob);
    *out = msg, *len = 16 + bl;
    return 0;
}

static slot *decode(const mop *P, const unsigned char *msg, size_t len, int want, char *err, size_t el)
{
    int32_t id;
    float f[2];
    if (len < 16) {
        snprintf(err, el, "a model message of %zu bytes", len);
        return NULL;
    }
    memcpy(&id, msg, 4), memcpy(f, msg + 8, 8);
    if (id != want) {
        snprintf(err, el, "received configuration %d where the schedule has %d", id, want);
        return NULL;
    }
    slot *s = slot_new(P, id, err, el);
    if (!s) return NULL;
    if (train_ckpt_decode(msg + 16, len - 16, s->m, s->o, &s->st, "a model from the previous worker", err, el)) {
        slot_free(s, P->be);
        return NULL;
    }
    s->m->rng.s = s->st.rng;
    s->loss_sum = f[0], s->batches = f[1];
    return s;
}

/* ---- the run ---- */

static int setup(mop *P, const json_t *spec, const train_hooks *hooks, json_t *configs, train_data *own_tr, train_data *own_te,
                 char *err, size_t el)
{
    P->configs = configs;
    P->n = (int)json_array_size(configs);
    P->world = hooks && hooks->world > 1 ? hooks->world : 1;
    P->rank = P->world > 1 ? hooks->rank : 0;
    P->be = hooks && hooks->backend ? hooks->backend : train_backend_cpu();
    json_t *sd = json_object_get(spec, "seed");
    P->seed = sd ? (uint64_t)json_integer_value(sd) : 1;
    P->epochs = (long)json_integer_value(json_object_get(spec, "epochs"));
    if (hooks && hooks->train_set && hooks->test_set) {
        P->tr = hooks->train_set, P->te = hooks->test_set;
    } else {
        if (train_dataset_load(json_object_get(json_array_get(configs, 0), "spec"), own_tr, own_te, err, el)) return -1;
        P->tr = own_tr, P->te = own_te;
    }
    if ((size_t)P->world > P->tr->n) {
        snprintf(err, el, "%d workers but %zu training samples", P->world, P->tr->n);
        return -1;
    }
    P->perm = xmalloc(sizeof(size_t) * P->tr->n);
    P->tmp = xmalloc(sizeof(size_t) * P->tr->n);
    /* the partitions: a fixed shuffle of the training set cut in world pieces */
    train_shuffle(P->perm, P->tr->n, rng_mix(P->seed, 29, 0), 0);
    for (int p = 0; p < P->world; p++) {
        size_t b, e;
        train_shard(P->tr->n, p, P->world, &b, &e);
        P->off[p] = b, P->len[p] = e - b;
    }
    return 0;
}

static json_t *config_row(const json_t *configs, int i, double tl, double ta, double trl, double epochs, long stopped)
{
    json_t *row = json_pack("{s:i, s:O, s:f, s:f, s:f, s:f}", "index", i, "params",
                            json_object_get(json_array_get(configs, (size_t)i), "params"), "test_accuracy", ta, "test_loss", tl,
                            "train_loss", trl, "epochs", epochs);
    json_object_set_new(row, "stopped", stopped ? json_integer(stopped) : json_null());
    return row;
}

int mop_alone(const json_t *spec, int world, int config, json_t **result, char *err, size_t el)
{
    char field[160], msg[200];
    json_t *configs;
    *result = NULL;
    if (mop_expand(spec, &configs, field, sizeof field, msg, sizeof msg)) {
        snprintf(err, el, "%s: %s", field, msg);
        return -1;
    }
    mop P = {0};
    train_data tr = {0}, te = {0};
    train_hooks h = {.world = world, .rank = 0};
    int rc = -1, order[TRAIN_MAX_WORKERS];
    slot *s = NULL;
    if (config < 0 || config >= (int)json_array_size(configs) || world < 1 || world > TRAIN_MAX_WORKERS) {
        snprintf(err, el, "no configuration %d, or world %d out of range", config, world);
        goto out;
    }
    if (setup(&P, spec, &h, configs, &tr, &te, err, el) || !(s = slot_new(&P, config, err, el))) goto out;
    int parts = mop_partition_order(P.n, world, config, order); /* world of them */
    for (long e = 0; e < P.epochs; e++) {
        s->loss_sum = s->batches = 0;
        for (int k = 0; k < parts; k++)
            pass(&P, s, order[k], (uint64_t)e);
    }
    double tl, ta;
    evaluate(&P, s, &tl, &ta);
    /* as mop_run reports them: the figures travel between workers as floats */
    *result =
        config_row(configs, config, (float)tl, (float)ta, (float)(s->batches ? s->loss_sum / s->batches : 0), (double)P.epochs, 0);
    rc = 0;
out:
    slot_free(s, P.be);
    free(P.perm), free(P.tmp);
    train_data_free(&tr), train_data_free(&te);
    json_decref(configs);
    return rc;
}

/* sums over the ranks (nothing to do alone); -2 when a peer is lost */
static int reduce(const train_hooks *h, int world, float *buf, size_t n, char *err, size_t el)
{
    if (world == 1) return 0;
    return h->allreduce(h->ctx, buf, n, err, el) == 0 ? 0 : -2;
}

/* the best model reaches rank 0 (from the rank that holds it) and rank 0 writes it */
static int publish_best(const mop *P, const train_hooks *h, slot **slots, int K, int best, const char *path, size_t *params,
                        char *err, size_t el)
{
    int holder = best / K, rc = 0;
    slot *mine = P->rank == holder ? slots[best % K] : NULL, *got = NULL;
    if (P->world > 1 && holder != 0) {
        unsigned char *msg = NULL;
        size_t len = 0;
        if (mine && encode(mine, &msg, &len, err, el)) return -1;
        double hdr = (double)len;
        float *hb = P->be->alloc(2), *buf = NULL;
        if (!hb) return -1;
        memcpy(hb, &hdr, 8);
        rc = h->broadcast(h->ctx, hb, 8, holder, err, el) ? -2 : 0;
        memcpy(&hdr, hb, 8);
        P->be->free(hb);
        len = (size_t)hdr;
        if (rc == 0 && (len < 16 || !(buf = P->be->alloc((len + 3) / 4)))) rc = -1, snprintf(err, el, "no best model to send");
        if (rc == 0) {
            if (msg) memcpy(buf, msg, len);
            rc = h->broadcast(h->ctx, buf, len, holder, err, el) ? -2 : 0;
            if (rc == 0 && P->rank == 0 && !(got = decode(P, (const unsigned char *)buf, len, best, err, el))) rc = -1;
        }
        if (buf) P->be->free(buf);
        free(msg);
        mine = got;
    }
    if (rc == 0 && mine) *params = train_model_param_count(mine->m);
    if (rc == 0 && P->rank == 0 && path && mine) {
        mine->st.rng = mine->m->rng.s;
        rc = train_ckpt_save(path, mine->m, NULL, &mine->st, err, el);
    }
    slot_free(got, P->be);
    return rc;
}

int mop_run(const json_t *spec, const char *model_path, const train_hooks *hooks, json_t **result, char *err, size_t el)
{
    char field[160], msg[200];
    json_t *configs;
    *result = NULL;
    if (mop_expand(spec, &configs, field, sizeof field, msg, sizeof msg)) {
        snprintf(err, el, "%s: %s", field, msg);
        return -1;
    }
    int n = (int)json_array_size(configs);
    if (n < 1) { /* mop_expand makes at least one (its shape says so); the schedule divides by the count */
        snprintf(err, el, "spec.search: no configurations");
        json_decref(configs);
        return -1;
    }
    if (hooks && hooks->world > 1 && (!hooks->shift || !hooks->allreduce || !hooks->broadcast)) {
        snprintf(err, el, "rank %d of %d without a shift, an all-reduce and a broadcast", hooks->rank, hooks->world);
        json_decref(configs);
        return -1;
    }
    mop P = {0};
    train_data tr = {0}, te = {0};
    /* rc stays -1 (err says why) unless a peer is lost (-2), the run is stopped (1) or it ends (0) */
    int rc = -1, lost, K = 0;
    slot **slots = NULL;
    double *tl = xcalloc((size_t)n, sizeof(double)), *ta = xcalloc((size_t)n, sizeof(double));
    double *trl = xcalloc((size_t)n, sizeof(double)), *done = xcalloc((size_t)n, sizeof(double));
    long *stopped = xcalloc((size_t)n, sizeof(long));
    float *v = NULL;
    if (setup(&P, spec, hooks, configs, &tr, &te, err, el)) goto out;
    K = mop_per_worker(n, P.world);
    int M = K * P.world;
    slots = xcalloc((size_t)K, sizeof(slot *));
    v = P.be->alloc(4 * (size_t)n + 1);
    if (!v) {
        snprintf(err, el, "out of memory");
        goto out;
    }
    for (int k = 0; k < K; k++) {
        int id = mop_model_at(n, P.world, 0, P.rank * K + k);
        if (id >= 0 && !(slots[k] = slot_new(&P, id, err, el))) goto out;
    }
    const json_t *es = json_object_get(json_object_get(spec, "search"), "early_stop");
    long after = es ? (long)json_integer_value(json_object_get(es, "after_epochs")) : 0;
    double keep = es ? json_number_value(json_object_get(es, "keep")) : 1.0;
    for (long e = 0; e < P.epochs; e++) {
        for (int t = 0; t < M; t++) {
            /* stop votes, once per sub-epoch: every rank stops at the same one */
            v[0] = hooks && hooks->should_stop && hooks->should_stop(hooks->ctx) ? 1.0f : 0.0f;
            if ((lost = reduce(hooks, P.world, v, 1, err, el))) {
                rc = lost;
                goto out;
            }
            if (v[0] > 0) {
                rc = 1;
                goto out;
            }
            if (slots[0] && !stopped[slots[0]->id]) pass(&P, slots[0], P.rank, (uint64_t)e);
            /* hop: the model at the last position goes to the next worker */
            slot *leaving = slots[K - 1];
            for (int k = K - 1; k > 0; k--)
                slots[k] = slots[k - 1];
            slots[0] = NULL;
            if (P.world == 1) {
                slots[0] = leaving;
                continue;
            }
            unsigned char *out = NULL;
            size_t olen = 0, ilen = 0;
            void *in = NULL;
            if (leaving && encode(leaving, &out, &olen, err, el)) {
                slot_free(leaving, P.be);
                goto out;
            }
            slot_free(leaving, P.be);
            int shifted = hooks->shift(hooks->ctx, out, olen, &in, &ilen, err, el);
            free(out);
            int want = mop_model_at(n, P.world, t + 1, P.rank * K);
            if (shifted) {
                rc = -2;
                goto out;
            }
            if (want >= 0 && !(slots[0] = decode(&P, in, ilen, want, err, el))) {
                free(in);
                goto out;
            }
            free(in);
        }
        /* every model is home: evaluate what this rank holds, then share the figures */
        for (int i = 0; i < 4 * n + 1; i++)
            v[i] = 0;
        for (int k = 0; k < K; k++) {
            slot *s = slots[k];
            if (!s || stopped[s->id]) continue;
            double l, a;
            evaluate(&P, s, &l, &a);
            v[4 * s->id] = (float)l, v[4 * s->id + 1] = (float)a;
            v[4 * s->id + 2] = (float)(s->batches ? s->loss_sum / s->batches : 0), v[4 * s->id + 3] = 1;
            s->loss_sum = s->batches = 0;
        }
        if ((lost = reduce(hooks, P.world, v, 4 * (size_t)n, err, el))) {
            rc = lost;
            goto out;
        }
        int active = 0;
        for (int i = 0; i < n; i++) {
            if (v[4 * i + 3] == 0) continue;
            tl[i] = v[4 * i], ta[i] = v[4 * i + 1], trl[i] = v[4 * i + 2], done[i] = (double)(e + 1), active++;
            if (hooks && hooks->progress && P.rank == 0) {
                json_t *pt =
                    json_pack("{s:f, s:I, s:i, s:f, s:f, s:f, s:i, s:O}", "epoch", (double)(e + 1), "step", (json_int_t)e + 1,
                              "config", i, "test_loss", tl[i], "test_accuracy", ta[i], "loss", trl[i], "configurations", n,
                              "params", json_object_get(json_array_get(configs, (size_t)i), "params"));
                hooks->progress(hooks->ctx, pt);
                json_decref(pt);
            }
        }
        /* early stopping: all but the best `keep` of the running configurations (ties: lower index) */
        if (es && e + 1 >= after && e + 1 < P.epochs && active > 1) {
            int keep_n = (int)ceil(keep * active);
            for (int i = 0; i < n; i++) {
                if (stopped[i] || done[i] != (double)(e + 1)) continue;
                int better = 0; /* running configurations ranked above i */
                for (int j = 0; j < n; j++)
                    if (j != i && !stopped[j] && done[j] == (double)(e + 1) && (ta[j] > ta[i] || (ta[j] == ta[i] && j < i)))
                        better++;
                if (better >= keep_n) stopped[i] = e + 1;
            }
        }
    }
    int best = 0;
    for (int i = 1; i < n; i++)
        if (ta[i] > ta[best]) best = i;
    size_t nparams = 0;
    if ((rc = publish_best(&P, hooks, slots, K, best, model_path, &nparams, err, el))) goto out;
    json_t *rows = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(rows, config_row(configs, i, tl[i], ta[i], trl[i], done[i], stopped[i]));
    const json_t *bspec = json_object_get(json_array_get(configs, (size_t)best), "spec");
    *result = json_pack("{s:{s:f, s:f, s:f, s:f, s:i, s:i}, s:O, s:o, s:{s:O, s:I}}", "metrics", "test_accuracy", ta[best],
                        "test_loss", tl[best], "train_loss", trl[best], "epochs", done[best], "configurations", n, "best", best,
                        "best_params", json_object_get(json_array_get(configs, (size_t)best), "params"), "configurations", rows,
                        "model", "architecture", json_object_get(bspec, "model"), "parameters", (json_int_t)nparams);
    rc = 0;
out:
    for (int k = 0; slots && k < K; k++)
        slot_free(slots[k], P.be);
    free(slots);
    if (v) P.be->free(v);
    free(tl), free(ta), free(trl), free(done), free(stopped);
    free(P.perm), free(P.tmp);
    train_data_free(&tr), train_data_free(&te);
    json_decref(configs);
    return rc;
}
