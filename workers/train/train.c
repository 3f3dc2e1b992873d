/* train.c - the (data-parallel) training loop; the spec it runs is checked by the training spec
 * module (spec.h, train_spec_validate).
 *
 * The loop's state is (step, epoch, data_pos, dropout rng) plus the model and
 * optimizer; the epoch's order is recomputed from (seed, epoch), so a resumed
 * run replays exactly the batches an uninterrupted run would have seen.  Each
 * global batch is cut with train_shard: rank r of w computes the gradient of
 * its slice, scaled by slice/batch, and one all-reduce (hooks->allreduce) sums
 * the scaled gradients together with the step's loss, correct count and stop
 * votes, so every rank applies the same update and stops at the same step. */
#include "workers/train/train.h"

#include "common/alloc.h"

#include "workers/train/adapt.h"
#include "workers/train/ckpt.h"
#include "workers/train/data.h"
#include "workers/train/model.h"
#include "workers/train/optim.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int train_dataset_load(const json_t *spec, train_data *tr, train_data *te, char *err, size_t el)
{
    char p[4][4096];
    const json_t *d = json_object_get(spec, "dataset");
    const char *name = json_string_value(json_object_get(d, "name"));
    const char *fmt = json_string_value(json_object_get(d, "format"));
    memset(tr, 0, sizeof *tr), memset(te, 0, sizeof *te);
    int rc;
    if (name || (fmt && !strcmp(fmt, "idx"))) {
        static const char *keys[] = {"train_images", "train_labels", "test_images", "test_labels"};
        static const char *files[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                                      "t10k-labels-idx1-ubyte.gz"};
        for (int i = 0; i < 4; i++) {
            if (name)
                snprintf(p[i], sizeof p[i], "%s/%s", TRAIN_FASHION_MNIST_DIR, files[i]);
            else
                snprintf(p[i], sizeof p[i], "%s", json_string_value(json_object_get(d, keys[i])));
        }
        rc = train_data_load_idx(p[0], p[1], tr, err, el);
        if (rc == 0) rc = train_data_load_idx(p[2], p[3], te, err, el);
    } else if (fmt && !strcmp(fmt, "csv")) {
        json_t *s = json_object_get(d, "scale"), *in = json_object_get(json_object_get(spec, "model"), "input");
        float scale = s ? (float)json_number_value(s) : 1.0f;
        int c = (int)json_integer_value(json_array_get(in, 0)), h = (int)json_integer_value(json_array_get(in, 1)),
            w = (int)json_integer_value(json_array_get(in, 2));
        rc = train_data_load_csv(json_string_value(json_object_get(d, "train")), c, h, w, scale, tr, err, el);
        if (rc == 0) rc = train_data_load_csv(json_string_value(json_object_get(d, "test")), c, h, w, scale, te, err, el);
    } else {
        snprintf(err, el, "spec.dataset: give \"name\" or \"format\"");
        rc = -1;
    }
    if (rc) train_data_free(tr), train_data_free(te);
    return rc;
}

/* the sets fit the model: values per sample, classes */
static int check_data(const train_model *m, const train_data *tr, const train_data *te, char *err, size_t el)
{
    size_t in = train_model_in_size(m), out = train_model_out_size(m);
    for (int i = 0; i < 2; i++) {
        const train_data *x = i ? te : tr;
        if (x->dim != in) {
            snprintf(err, el, "spec.model.input [%d,%d,%d] has %zu values per sample but the %s set has %zu (%dx%dx%d)", m->in_c,
                     m->in_h, m->in_w, in, i ? "test" : "training", x->dim, x->c, x->h, x->w);
            return -1;
        }
        if ((size_t)x->classes > out) {
            snprintf(err, el, "the %s set has %d classes but the model's last layer outputs %zu", i ? "test" : "training",
                     x->classes, out);
            return -1;
        }
    }
    return 0;
}

typedef struct {
    const json_t *spec;
    const char *ckpt;
    const train_hooks *hooks;
    train_model *m;
    train_optim *o;
    train_data own_tr, own_te; /* loaded here, unless the caller gave the sets */
    const train_data *tr, *te;
    train_schedule sched;
    size_t *order;
    float *xb, *dlogits;
    int32_t *yb;
    long batch, total, spe, eval_every, ckpt_every, progress_every;
    uint64_t seed;
    int rank, world;
    float *red; /* all-reduce buffer: every gradient, then RED_TAIL step totals */
    size_t nred;
    char *err;
    size_t el;
    train_ckpt_state st;
    /* window since the last progress event, and the current epoch */
    double w_loss, w_compute, w_comm, w_data, w_start, e_loss;
    long w_correct, w_samples, w_batches, e_batches, run_samples;
    double run_start, last_train_loss, load_s;
    train_policies *pol; /* adaptation policies (adapt.h), NULL none */
    int strategy;        /* the all-reduce strategy now (train_strategy) */
    bool vote;           /* this rank's strategy vote, sent with the next step */
    double last_sps;     /* this rank's samples/s over the last step */
    double last_end;     /* when the last step ended */
    long epochs;         /* the spec's epochs (0: a run of steps) */
} loop;

/* the step totals after the gradients: loss x samples, correct, samples, stop votes, the sum of the
 * slices' squared gradient norms (the noise scale), votes to switch the all-reduce strategy */
enum { RED_LOSS, RED_CORRECT, RED_SAMPLES, RED_STOP, RED_GSQ, RED_VOTE, RED_TAIL };

/* sums buf over the ranks (nothing to do alone); -2 with L->err when a peer is lost */
static int reduce(loop *L, float *buf, size_t n)
{
    if (L->world == 1) return 0;
    double t0 = now_s();
    /* world > 1 only with hooks that have an all-reduce (train_run checks them first); the analyser forgets
     * that link once the address of a member of L (&L.own_tr, &L.sched) goes to a function in another file */
    /* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): see above */
    int rc = L->hooks->allreduce(L->hooks->ctx, buf, n, L->err, L->el);
    L->w_comm += now_s() - t0;
    return rc == 0 ? 0 : -2;
}

/* test loss and accuracy; each rank takes its shard of the test set */
static int evaluate(loop *L, double *loss, double *acc)
{
    size_t n = L->te->n, dim = L->te->dim, lo, hi;
    train_shard(n, L->rank, L->world, &lo, &hi);
    int k = (int)train_model_out_size(L->m);
    double sum = 0;
    long correct = 0;
    for (size_t i = lo; i < hi; i += (size_t)L->batch) {
        int b = (int)(hi - i < (size_t)L->batch ? hi - i : (size_t)L->batch);
        /* through the batch buffers: the backend's memory (a GPU's) may not reach the dataset's */
        memcpy(L->xb, L->te->x + i * dim, sizeof(float) * (size_t)b * dim);
        memcpy(L->yb, L->te->y + i, sizeof(int32_t) * (size_t)b);
        const float *logits = train_model_forward(L->m, L->xb, b, false);
        int c;
        sum += L->m->be->softmax_ce(b, k, logits, L->yb, NULL, &c) * b;
        correct += c;
    }
    float tot[2] = {(float)sum, (float)correct};
    if (reduce(L, tot, 2)) return -2;
    if (L->world > 1) sum = tot[0], correct = (long)tot[1];
    *loss = n ? sum / (double)n : 0;
    *acc = n ? (double)correct / (double)n : 0;
    return 0;
}

static int progress(loop *L, int with_eval)
{
    double tl = 0, ta = 0;
    if (with_eval && evaluate(L, &tl, &ta)) return -2;
    if (L->hooks && L->hooks->progress) {
        double t = now_s();
        json_t *j = json_pack("{s:f, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:i}", "epoch",
                              (double)L->st.epoch + (double)L->st.data_pos / (double)L->tr->n, "step", (json_int_t)L->st.step,
                              "loss", L->w_batches ? L->w_loss / L->w_batches : 0.0, "accuracy",
                              L->w_samples ? (double)L->w_correct / L->w_samples : 0.0, "samples_per_s",
                              t > L->w_start ? L->w_samples / (t - L->w_start) : 0.0, "compute_s", L->w_compute, "comm_s",
                              L->w_comm, "data_s", L->w_data, "lr",
                              (double)train_schedule_lr(&L->sched, L->o->lr, (long)L->st.step, L->total), "workers", L->world);
        if (j) json_object_set_new(j, "batch_size", json_integer(L->batch));
        if (j && train_policies_gns_value(L->pol) > 0) json_object_set_new(j, "gns", json_real(train_policies_gns_value(L->pol)));
        if (j && L->pol && L->world > 1) json_object_set_new(j, "strategy", json_string(train_strategy_name(L->strategy)));
        if (j && with_eval) {
            json_object_set_new(j, "test_loss", json_real(tl));
            json_object_set_new(j, "test_accuracy", json_real(ta));
        }
        if (j) L->hooks->progress(L->hooks->ctx, j);
        json_decref(j);
    }
    L->w_loss = L->w_compute = L->w_comm = L->w_data = 0;
    L->w_correct = L->w_samples = L->w_batches = 0;
    L->w_start = now_s();
    return 0;
}

/* rank 0 writes the checkpoints (every rank holds the same model) */
static int save(loop *L, char *err, size_t el)
{
    if (!L->ckpt || L->rank != 0) return 0;
    L->st.rng = L->m->rng.s;
    return train_ckpt_save(L->ckpt, L->m, L->o, &L->st, err, el);
}

/* Sums the ranks' scaled gradients (and the step totals in tot) in one all-reduce. */
static int reduce_grads(loop *L, float scale, float *tot)
{
    size_t off = 0;
    for (int p = 0; p < L->m->nparams; p++) {
        const train_param *P = L->m->params[p];
        for (size_t i = 0; i < P->n; i++)
            L->red[off + i] = P->g[i] * scale;
        off += P->n;
    }
    memcpy(L->red + off, tot, sizeof(float) * RED_TAIL);
    if (reduce(L, L->red, L->nred)) return -2;
    off = 0;
    for (int p = 0; p < L->m->nparams; p++) {
        memcpy(L->m->params[p]->g, L->red + off, sizeof(float) * L->m->params[p]->n);
        off += L->m->params[p]->n;
    }
    memcpy(tot, L->red + off, sizeof(float) * RED_TAIL);
    return 0;
}

/* the squared norm of the gradients (times scale^2) */
static double grad_sq(const loop *L, float scale)
{
    double sum = 0;
    for (int p = 0; p < L->m->nparams; p++) {
        const train_param *P = L->m->params[p];
        for (size_t i = 0; i < P->n; i++)
            sum += (double)P->g[i] * P->g[i];
    }
    return sum * scale * scale;
}

/* an adaptation, as a metrics point with "event" (rank 0 reports it) */
static void adapt_event(loop *L, const train_adapt *a)
{
    if (!L->hooks || !L->hooks->progress || !a->event[0]) return;
    json_t *j = json_pack("{s:s, s:s, s:I, s:f, s:I, s:f, s:f, s:s, s:i}", "event", a->event, "detail", a->detail, "step",
                          (json_int_t)L->st.step, "epoch", (double)L->st.epoch + (double)L->st.data_pos / (double)L->tr->n,
                          "batch_size", (json_int_t)L->batch, "lr", (double)L->o->lr, "gns", train_policies_gns_value(L->pol),
                          "strategy", train_strategy_name(L->strategy), "workers", L->world);
    if (j) L->hooks->progress(L->hooks->ctx, j);
    json_decref(j);
}

static void adapt_fill(const loop *L, train_adapt *a)
{
    *a = (train_adapt){.step = (long)L->st.step,
                       .epoch = (long)L->st.epoch,
                       .world = L->world,
                       .batch = L->batch,
                       .lr = L->o->lr,
                       .gns = train_policies_gns_value(L->pol),
                       .samples_per_s = L->last_sps,
                       .strategy = L->strategy,
                       .lr_factor = 1.0};
}

/* the vote passed: every rank moves to the next all-reduce strategy at this step */
static void switch_strategy(loop *L)
{
    train_adapt a;
    adapt_fill(L, &a);
    int next = train_policies_switch(L->pol, &a);
    if (L->hooks->set_strategy && L->hooks->set_strategy(L->hooks->ctx, next) == 0) {
        L->strategy = next;
        adapt_event(L, &a);
    }
}

/* steps left to the end of the spec's epochs at the current global batch */
static long steps_left(const loop *L)
{
    size_t n = L->tr->n, b = (size_t)L->batch;
    long left = (long)((n - L->st.data_pos + b - 1) / b);
    if (L->epochs > (long)L->st.epoch + 1) left += (L->epochs - (long)L->st.epoch - 1) * (long)((n + b - 1) / b);
    return left;
}

/* after a step: the policies decide; their requests apply to the next step on every rank */
static void adapt(loop *L)
{
    if (!L->pol) return;
    train_adapt a;
    adapt_fill(L, &a);
    train_policies_after_step(L->pol, &a);
    L->vote = a.vote_switch;
    if (a.new_batch > 0 && a.new_batch != L->batch) {
        L->batch = a.new_batch;
        if (a.lr_factor != 1.0) L->o->lr *= (float)a.lr_factor;
        if (L->epochs) L->total = (long)L->st.step + steps_left(L);
        adapt_event(L, &a);
    }
}

/* One step on this rank's slice of the next global batch.  Returns 0, 1 when
 * some rank voted to stop (nothing applied, every rank stops here), -2 when a
 * peer was lost. */
static int step(loop *L, int stop_vote)
{
    if (L->world == 1 && stop_vote) return 1;
    uint64_t rng0 = L->m->rng.s; /* a stopped step leaves no trace, dropout masks included */
    size_t n = L->tr->n, dim = L->tr->dim;
    double t0 = now_s();
    size_t len = n - L->st.data_pos < (size_t)L->batch ? n - L->st.data_pos : (size_t)L->batch, b, e;
    train_shard(len, L->rank, L->world, &b, &e);
    int cnt = (int)(e - b);
    for (int i = 0; i < cnt; i++) {
        size_t s = L->order[L->st.data_pos + b + (size_t)i];
        memcpy(L->xb + (size_t)i * dim, L->tr->x + s * dim, sizeof(float) * dim);
        L->yb[i] = L->tr->y[s];
    }
    double t1 = now_s();
    int correct = 0;
    double loss = 0;
    if (cnt > 0) {
        loss = train_model_grad(L->m, L->xb, L->yb, cnt, L->dlogits, &correct);
    } else {
        for (int p = 0; p < L->m->nparams; p++)
            L->m->be->fill(L->m->params[p]->n, 0.0f, L->m->params[p]->g);
    }
    double t2 = now_s();
    bool gns = L->world > 1 && train_policies_want_gns(L->pol, (long)L->st.step);
    if (L->world > 1) {
        /* the global batch's mean gradient is the sum of slice means weighted by slice/len */
        float tot[RED_TAIL] = {
            (float)(loss * cnt),  (float)correct, (float)cnt, (float)stop_vote, gns ? (float)grad_sq(L, 1.0f) : 0.0f,
            L->vote ? 1.0f : 0.0f};
        if (reduce_grads(L, (float)cnt / (float)len, tot)) {
            L->m->rng.s = rng0; /* survivors keep the state before this step */
            return -2;
        }
        if (tot[RED_STOP] > 0) {
            L->m->rng.s = rng0;
            return 1;
        }
        loss = tot[RED_LOSS] / (double)len, correct = (int)tot[RED_CORRECT], cnt = (int)len;
        if (gns) train_policies_gns(L->pol, tot[RED_GSQ] / L->world, (double)len / L->world, grad_sq(L, 1.0f), (double)len);
        L->vote = false;
        if (tot[RED_VOTE] * 2 > (float)L->world) switch_strategy(L);
    }
    double t3 = now_s();
    train_optim_step(L->o, L->m->be, train_schedule_lr(&L->sched, L->o->lr, (long)L->st.step, L->total));
    double t4 = now_s();
    L->st.data_pos += len;
    L->st.step++;
    L->w_loss += loss, L->w_batches++, L->w_correct += correct, L->w_samples += cnt;
    L->w_data += t1 - t0, L->w_compute += (t2 - t1) + (t4 - t3);
    L->e_loss += loss, L->e_batches++;
    L->run_samples += cnt;
    /* throughput from one step's end to the next: the time between steps counts too */
    L->last_sps = L->last_end > 0 && t4 > L->last_end ? (double)cnt / (t4 - L->last_end) : 0;
    L->last_end = t4;
    return 0;
}

static int run_loop(loop *L, char *err, size_t el)
{
    train_shuffle(L->order, L->tr->n, L->seed, L->st.epoch);
    L->run_start = L->w_start = now_s();
    if (L->pol) {
        train_adapt a;
        adapt_fill(L, &a);
        train_policies_before_train(L->pol, &a);
    }
    while ((long)L->st.step < L->total) {
        int vote = L->hooks && L->hooks->should_stop && L->hooks->should_stop(L->hooks->ctx);
        int rc = step(L, vote);
        if (rc == 1) return save(L, err, el) ? -1 : 1;
        if (rc) return rc;
        adapt(L);
        int epoch_end = L->st.data_pos >= L->tr->n;
        if (epoch_end) {
            L->st.epoch++;
            L->st.data_pos = 0;
            L->last_train_loss = L->e_loss / (L->e_batches ? L->e_batches : 1);
            L->e_loss = 0, L->e_batches = 0;
            train_shuffle(L->order, L->tr->n, L->seed, L->st.epoch);
            if (L->pol) {
                train_adapt a;
                adapt_fill(L, &a);
                train_policies_after_epoch(L->pol, &a);
            }
        }
        long s = (long)L->st.step;
        int eval = L->eval_every && s % L->eval_every == 0;
        int last = s == L->total;
        if ((eval || epoch_end || last || s % L->progress_every == 0) && progress(L, eval || epoch_end || last)) return -2;
        if ((L->ckpt_every && s % L->ckpt_every == 0) || epoch_end)
            if (save(L, err, el)) return -1;
    }
    if (L->e_batches) L->last_train_loss = L->e_loss / L->e_batches;
    if (L->pol) {
        train_adapt a;
        adapt_fill(L, &a);
        train_policies_after_train(L->pol, &a);
    }
    return 0;
}

/* distinct dropout masks per rank: rank r's stream is the shared one offset by r strides */
#define RNG_RANK_STRIDE 0x9E3779B97F4A7C15ULL

/* takes an encoded state (a hand-off, a checkpoint file's bytes, a broadcast) */
static int adopt(loop *L, const unsigned char *blob, size_t len, const char *what, char *err, size_t el)
{
    train_ckpt_state st;
    if (train_ckpt_decode(blob, len, L->m, L->o, &st, what, err, el)) return -1;
    if (st.seed != L->seed || st.data_pos >= L->tr->n) {
        snprintf(err, el, "%s was written for a different seed or dataset", what);
        return -1;
    }
    L->st = st;
    L->m->rng.s = st.rng;
    return 0;
}

static int bcast(loop *L, void *buf, size_t bytes, int root)
{
    double t0 = now_s();
    int rc = L->hooks->broadcast(L->hooks->ctx, buf, bytes, root, L->err, L->el);
    L->w_comm += now_s() - t0;
    return rc == 0 ? 0 : -2;
}

/* src's state to every rank: a header (length, when taken), then the encoded
 * state, both in the backend's memory (NCCL broadcasts on the GPU) */
static int share_state(loop *L, int src, train_start_info *info, char *err, size_t el)
{
    const train_backend *be = L->m->be;
    unsigned char *blob = NULL;
    size_t len = 0;
    double hdr[2] = {0, info->taken_at};
    if (L->rank == src) {
        train_ckpt_state st = L->st;
        st.rng = L->m->rng.s;
        char why[200];
        if (train_ckpt_encode(L->m, L->o, &st, &blob, &len, why, sizeof why) == 0) hdr[0] = (double)len;
    }
    float *hb = be->alloc(4), *buf = NULL;
    int rc = 0;
    if (!hb) rc = -1, snprintf(err, el, "out of memory");
    if (hb) {
        memcpy(hb, hdr, sizeof hdr);
        rc = bcast(L, hb, sizeof hdr, src);
        memcpy(hdr, hb, sizeof hdr);
        be->free(hb);
    }
    len = (size_t)hdr[0];
    if (rc == 0 && len == 0) {
        snprintf(err, el, "rank %d could not encode its state", src);
        rc = -1;
    }
    if (rc == 0 && !(buf = be->alloc((len + 3) / 4))) rc = -1, snprintf(err, el, "out of memory");
    if (rc == 0) {
        if (blob) memcpy(buf, blob, len);
        rc = bcast(L, buf, len, src);
        char what[64];
        snprintf(what, sizeof what, "the state broadcast by rank %d", src);
        if (rc == 0 && L->rank != src) rc = adopt(L, (const unsigned char *)buf, len, what, err, el);
    }
    if (buf) be->free(buf);
    free(blob);
    info->bytes = len, info->taken_at = hdr[1];
    return rc;
}

/* the state at the end of an unfinished run, for the next generation (rank offset removed) */
static void keep_state(loop *L)
{
    train_ckpt_state st = L->st;
    st.rng = L->m->rng.s - RNG_RANK_STRIDE * (uint64_t)L->rank;
    unsigned char *blob;
    size_t len;
    char why[200];
    if (train_ckpt_encode(L->m, L->o, &st, &blob, &len, why, sizeof why) == 0) L->hooks->keep(L->hooks->ctx, blob, len);
}

/* The start of a run (a generation of a gang): each rank offers the state it
 * has (its hand-off from an earlier generation, else the checkpoint, else
 * none); one all-reduce tells every rank what the others have; the rank with
 * the newest step (the lowest such rank on a tie) broadcasts its state and
 * every other rank adopts it.  Steps travel as two exact 24-bit halves. */
static int agree_state(loop *L, char *err, size_t el)
{
    const train_hooks *h = L->hooks;
    double t0 = now_s(), taken = 0;
    int have = 0; /* 1 checkpoint, 2 survivor */
    if (h && h->handoff && h->handoff_len) {
        char why[300];
        if (adopt(L, h->handoff, h->handoff_len, "the hand-off", why, sizeof why) == 0) have = 2, taken = h->handoff_at;
    }
    struct stat sb;
    if (!have && L->ckpt && stat(L->ckpt, &sb) == 0) {
        train_ckpt_state st;
        if (train_ckpt_load(L->ckpt, L->m, L->o, &st, err, el)) return -1;
        if (st.seed != L->seed || st.data_pos >= L->tr->n) {
            snprintf(err, el, "%s: checkpoint was written for a different seed or dataset", L->ckpt);
            return -1;
        }
        L->st = st;
        L->m->rng.s = st.rng;
        have = 1, taken = (double)sb.st_mtim.tv_sec + sb.st_mtim.tv_nsec * 1e-9;
    }
    static const char *kinds[] = {"fresh", "checkpoint", "survivor"};
    train_start_info info = {kinds[have], have ? L->rank : -1, (unsigned long long)L->st.step, 0, 0, taken, L->load_s};
    if (L->world > 1) {
        size_t nv = 3 * (size_t)L->world;
        float *v = L->m->be->alloc(nv > 4 ? nv : 4);
        if (!v) {
            snprintf(err, el, "out of memory");
            return -1;
        }
        L->m->be->fill(nv, 0.0f, v);
        v[3 * L->rank] = (float)have;
        v[3 * L->rank + 1] = (float)(L->st.step >> 24);
        v[3 * L->rank + 2] = (float)(L->st.step & 0xFFFFFF);
        int rc = reduce(L, v, nv), src = -1;
        unsigned long long best = 0;
        for (int r = 0; rc == 0 && r < L->world; r++) {
            unsigned long long s = ((unsigned long long)v[3 * r + 1] << 24) | (unsigned long long)v[3 * r + 2];
            if (v[3 * r] > 0 && (src < 0 || s > best)) src = r, best = s;
        }
        if (rc == 0 && src >= 0) {
            info.from = kinds[(int)v[3 * src]], info.source = src, info.step = best;
            rc = share_state(L, src, &info, err, el);
        }
        L->m->be->free(v);
        if (rc) return rc;
        L->m->rng.s += RNG_RANK_STRIDE * (uint64_t)L->rank;
    }
    info.seconds = now_s() - t0;
    if (L->rank == 0 && h && h->started) h->started(h->ctx, &info);
    return 0;
}

int train_run(const json_t *spec, const char *ckpt_path, const train_hooks *hooks, json_t **result, char *err, size_t el)
{
    char field[160], msg[200];
    if (result) *result = NULL;
    if (train_spec_validate(spec, field, sizeof field, msg, sizeof msg)) {
        snprintf(err, el, "%s: %s", field, msg);
        return -1;
    }
    int rc = -1;
    loop L = {.spec = spec, .ckpt = ckpt_path, .hooks = hooks, .rank = 0, .world = 1, .err = err, .el = el};
    if (hooks && hooks->world > 1) {
        if (!hooks->allreduce || !hooks->broadcast || hooks->rank < 0 || hooks->rank >= hooks->world) {
            snprintf(err, el, "rank %d of %d without an all-reduce and a broadcast", hooks->rank, hooks->world);
            return -1;
        }
        L.rank = hooks->rank, L.world = hooks->world;
    }
    L.batch = train_spec_long(spec, "batch_size");
    L.seed = (uint64_t)train_spec_long(spec, "seed");
    L.eval_every = train_spec_long(spec, "eval_every_steps");
    L.ckpt_every = train_spec_long(spec, "checkpoint_every_steps");
    L.progress_every = train_spec_long(spec, "progress_every_steps");
    const train_backend *be = hooks && hooks->backend ? hooks->backend : train_backend_cpu();
    L.pol = train_policies_create(spec);
    L.epochs = train_spec_long(spec, "epochs");
    long cap = train_policies_max_batch(L.pol, L.batch); /* an adaptive batch may grow to it */
    L.m = train_model_create(json_object_get(spec, "model"), be, L.seed, (int)cap, err, el);
    if (!L.m) return -1;
    if (!(L.o = train_optim_create(json_object_get(spec, "optimizer"), L.m))) {
        snprintf(err, el, "out of memory");
        goto out;
    }
    train_schedule_init(&L.sched, json_object_get(spec, "schedule"));
    if (hooks && hooks->train_set && hooks->test_set) {
        L.tr = hooks->train_set, L.te = hooks->test_set;
    } else {
        double t_load = now_s();
        if (train_dataset_load(spec, &L.own_tr, &L.own_te, err, el)) goto out;
        L.load_s = now_s() - t_load;
        L.tr = &L.own_tr, L.te = &L.own_te;
    }
    if (check_data(L.m, L.tr, L.te, err, el)) goto out;
    L.spe = (long)((L.tr->n + (size_t)L.batch - 1) / (size_t)L.batch);
    L.total = json_object_get(spec, "steps") ? train_spec_long(spec, "steps") : train_spec_long(spec, "epochs") * L.spe;
    L.order = xmalloc(sizeof(size_t) * L.tr->n);
    L.xb = L.m->be->alloc((size_t)cap * L.tr->dim);
    L.yb = (int32_t *)L.m->be->alloc((size_t)cap);
    L.dlogits = L.m->be->alloc((size_t)cap * train_model_out_size(L.m));
    L.nred = train_model_param_count(L.m) + RED_TAIL;
    if (L.world > 1) L.red = L.m->be->alloc(L.nred); /* the backend's memory: NCCL reduces it on the GPU */
    if (!L.xb || !L.yb || !L.dlogits || (L.world > 1 && !L.red)) {
        snprintf(err, el, "out of the backend's memory");
        goto out;
    }
    L.st.seed = L.seed;
    if ((rc = agree_state(&L, err, el)) != 0) goto out;
    rc = run_loop(&L, err, el);
    if ((rc == 1 || rc == -2) && hooks && hooks->keep) keep_state(&L);
    if (rc != 0) goto out;
    double tl, ta;
    if (evaluate(&L, &tl, &ta)) {
        rc = -2;
        goto out;
    }
    if (ckpt_path && L.rank == 0) {
        char mpath[4200];
        snprintf(mpath, sizeof mpath, "%s.model", ckpt_path);
        L.st.rng = L.m->rng.s;
        if (save(&L, err, el) || train_ckpt_save(mpath, L.m, NULL, &L.st, err, el)) {
            rc = -1;
            goto out;
        }
    }
    double el_s = now_s() - L.run_start;
    if (result)
        *result = json_pack("{s:{s:f, s:f, s:f, s:f, s:I, s:f}, s:{s:O, s:I}}", "metrics", "test_accuracy", ta, "test_loss", tl,
                            "train_loss", L.last_train_loss, "epochs", (double)L.st.step / (double)L.spe, "steps",
                            (json_int_t)L.st.step, "samples_per_s", el_s > 0 ? L.run_samples / el_s : 0.0, "model", "architecture",
                            L.m->arch, "parameters", (json_int_t)train_model_param_count(L.m));
out:
    free(L.order);
    if (L.m) {
        if (L.red) L.m->be->free(L.red);
        if (L.xb) L.m->be->free(L.xb);
        if (L.yb) L.m->be->free(L.yb);
        if (L.dlogits) L.m->be->free(L.dlogits);
    }
    train_data_free(&L.own_tr), train_data_free(&L.own_te);
    if (L.o) train_optim_free(L.o, L.m->be);
    train_model_free(L.m);
    train_policies_free(L.pol);
    return rc;
}
