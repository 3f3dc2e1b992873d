/* exec_fed.c - one site of a federated job (SecureD-FL, workers/fed/).
 *
 * The scheduler gives the job's task to one worker per site: a site with a
 * label (site=NAME) to a worker started with that label, the others to any
 * free workers.  Each worker claims its site in Redis, atomically: the first
 * unclaimed site whose label is its own, else the first unclaimed site without
 * a label.  The sites meet in the rendezvous of the generation, then in Redis:
 *
 *   gantry:fed:<job>:<gen>:sites          HASH site index -> worker id (the claims)
 *   gantry:fed:<job>:<gen>:hello:<s>      "<samples> <X25519 public key, hex>"
 *   gantry:fed:<job>:<gen>:<it>:<s>       site s's message of exchange it (binary, 8 bytes per parameter)
 *
 * Every round each site trains its copy of the global model on its own data
 * (local_steps steps), then the sites run the aggregation: for SecureD-FL the
 * ADMM iterations over the design's groups, for FedAvg one weighted sum; one
 * more exchange gives the FedAvg average for the consensus residual.  A
 * message is a_i m_i in fixed point modulo 2^64 plus the pair masks of the
 * site's group (masking on), so what Redis holds reveals only sums; the total
 * of all messages is the sum of the group sums.  Raw data and individual
 * models never leave the site.  Site 0 evaluates each round's model on the
 * test set, reports the round as a metrics point, and at the end registers
 * the model; the others end silently.  Every wait has a deadline
 * (exchange_timeout_s); a lost site fails the job's generation (retried). */
#include "common/keys.h"
#include "common/paths.h"
#include "common/redis_sync.h"
#include "workers/executor.h"
#include "workers/fed/admm.h"
#include "workers/fed/design.h"
#include "workers/fed/mask.h"
#include "workers/fed/partition.h"
#include "workers/fed/spec.h"
#include "workers/train/ckpt.h"
#include "workers/train/model.h"
#include "workers/train/optim.h"
#include "workers/train/rng.h"
#include "workers/train/train.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FED_KEY_TTL_S 600

typedef struct {
    exec_ctx *ctx;
    const json_t *spec;
    int n, me, timeout_ms;
    char prefix[160]; /* gantry:fed:<job>:<gen> */
    unsigned char pub[FED_MAX_JOB_SITES][32], priv[32];
    double a[FED_MAX_JOB_SITES];
    long samples[FED_MAX_JOB_SITES];
    fed_design d;
    size_t dim;
    uint64_t *enc, *sum;
    long exchanges;
    double bytes_sent;
} site;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* a member of the (valid) spec, or the default its shape documents */
static double num(const sch *shape, const json_t *o, const char *key)
{
    return sch_number(shape, o, key, 0);
}

/* waits until every site's key <prefix>:<tag>:<s> exists, then fetches them; the replies in out (caller frees) */
static int gather(site *S, const char *tag, redisReply **out, char *err, size_t errlen)
{
    double deadline = now_s() + S->timeout_ms / 1000.0;
    const char *argv[FED_MAX_JOB_SITES + 1];
    char keys[FED_MAX_JOB_SITES][200];
    argv[0] = "EXISTS";
    for (int s = 0; s < S->n; s++) {
        snprintf(keys[s], sizeof(keys[s]), "%s:%s:%d", S->prefix, tag, s);
        argv[s + 1] = keys[s];
    }
    for (;;) {
        redisReply *r = rs_command_argv(S->ctx->redis, S->n + 1, argv, NULL);
        long have = r && r->type == REDIS_REPLY_INTEGER ? (long)r->integer : -1;
        freeReplyObject(r);
        if (have == S->n) break;
        if (S->ctx->cancelled(S->ctx)) {
            snprintf(err, errlen, "stopped");
            return 1;
        }
        if (now_s() > deadline) {
            snprintf(err, errlen, "exchange %s: only %ld of %d sites answered within %d s", tag, have < 0 ? 0 : have, S->n,
                     S->timeout_ms / 1000);
            return -1;
        }
        usleep(2000);
    }
    argv[0] = "MGET";
    redisReply *r = rs_command_argv(S->ctx->redis, S->n + 1, argv, NULL);
    if (!r || r->type != REDIS_REPLY_ARRAY || (int)r->elements != S->n) {
        freeReplyObject(r);
        snprintf(err, errlen, "exchange %s: Redis did not answer", tag);
        return -1;
    }
    *out = r;
    return 0;
}

/* One exchange: every site publishes its masked a_i v (v: dim doubles) and gets the total.  group_all:
 * mask with every other site (one group: FedAvg); else with the members of its group in class c. */
static int exchange(site *S, const double *v, int c, int group_all, int masked, double *total, char *err, size_t errlen)
{
    long it = S->exchanges++;
    for (size_t j = 0; j < S->dim; j++) {
        double x = S->a[S->me] * v[j];
        fed_encode(&x, &S->enc[j], 1);
    }
    for (int o = 0; masked && o < S->n; o++) {
        if (o == S->me || (!group_all && S->d.group[c * S->n + o] != S->d.group[c * S->n + S->me])) continue;
        unsigned char key[32];
        if (fed_shared_key(S->priv, S->pub[S->me], S->pub[o], key) ||
            fed_mask(S->enc, S->dim, key, S->me < o ? 1 : -1, (uint64_t)it, 0)) {
            snprintf(err, errlen, "masking with site %d failed (a bad public key?)", o);
            return -1;
        }
    }
    char key[220], tag[32];
    snprintf(tag, sizeof(tag), "%ld", it);
    snprintf(key, sizeof(key), "%s:%s:%d", S->prefix, tag, S->me);
    redisReply *r = rs_command(S->ctx->redis, "SET %s %b EX %d", key, (const char *)S->enc, S->dim * 8, FED_KEY_TTL_S);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    if (!ok) {
        snprintf(err, errlen, "exchange %ld: cannot publish this site's message", it);
        return -1;
    }
    S->bytes_sent += (double)S->dim * 8;
    redisReply *all = NULL;
    int rc = gather(S, tag, &all, err, errlen);
    if (rc) return rc;
    memset(S->sum, 0, sizeof(uint64_t) * S->dim);
    for (int s = 0; s < S->n; s++) {
        redisReply *e = all->element[s];
        if (e->type != REDIS_REPLY_STRING || e->len != S->dim * 8) {
            freeReplyObject(all);
            snprintf(err, errlen, "exchange %ld: site %d sent %zu bytes, expected %zu", it, s,
                     e->type == REDIS_REPLY_STRING ? e->len : 0, S->dim * 8);
            return -1;
        }
        const uint64_t *m = (const uint64_t *)e->str;
        for (size_t j = 0; j < S->dim; j++) /* masks cancel in each group's sum, so in the total */
            S->sum[j] += m[j];
    }
    freeReplyObject(all);
    for (size_t j = 0; j < S->dim; j++)
        total[j] = fed_decode(S->sum[j]);
    if (it >= 2) { /* every site has read exchange it - 2 (it published it - 1 after reading it) */
        snprintf(key, sizeof(key), "%s:%ld:%d", S->prefix, it - 2, S->me);
        freeReplyObject(rs_command(S->ctx->redis, "DEL %s", key));
    }
    return 0;
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
    int *where = malloc(sizeof(int) * tr->n);
    if (!where || fed_partition_dirichlet(tr->y, tr->n, tr->classes, sites, num(&fed_partition_shape, part, "alpha"),
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

/* Which site this worker runs (-1: none is left for it; -2: Redis did not answer): the first
 * unclaimed site labelled with its own label (site=NAME), else the first unclaimed site without a
 * label; claimed atomically in the generation's hash, so two workers never run one site (a worker
 * that claimed before, e.g. a restarted one, gets its own again).  The scheduler placed the job so
 * that every site has a worker that can claim it. */
static int claim_site(site *S, char *err, size_t errlen)
{
    static const char script[] = "for i = 1, #ARGV - 1 do "
                                 "  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[#ARGV] then return tonumber(ARGV[i]) end "
                                 "end "
                                 "for i = 1, #ARGV - 1 do "
                                 "  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[#ARGV]) == 1 then "
                                 "    redis.call('EXPIRE', KEYS[1], 86400) return tonumber(ARGV[i]) "
                                 "  end "
                                 "end "
                                 "return -1";
    const json_t *sites = json_object_get(S->spec, "sites");
    const char *mine = S->ctx->site && *S->ctx->site ? S->ctx->site : NULL;
    const char *argv[FED_MAX_JOB_SITES + 6];
    char idx[FED_MAX_JOB_SITES][8], key[200];
    int argc = 0, ncand = 0;
    snprintf(key, sizeof(key), "%s:sites", S->prefix);
    argv[argc++] = "EVAL", argv[argc++] = script, argv[argc++] = "1", argv[argc++] = key;
    for (int pass = 0; pass < 2; pass++) /* its labelled sites first, then the unlabelled ones */
        for (int s = 0; s < S->n && s < FED_MAX_JOB_SITES; s++) {
            const char *label = json_string_value(json_object_get(json_array_get(sites, (size_t)s), "label"));
            bool ours = label && mine && strncmp(label, "site=", 5) == 0 && strcmp(label + 5, mine) == 0;
            if (pass == 0 ? !ours : label != NULL) continue;
            snprintf(idx[ncand], sizeof(idx[ncand]), "%d", s);
            argv[argc++] = idx[ncand++];
        }
    argv[argc++] = S->ctx->worker_id ? S->ctx->worker_id : "?";
    redisReply *r = rs_command_argv(S->ctx->redis, argc, argv, NULL);
    int me = r && r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -2;
    freeReplyObject(r);
    if (me == -2)
        snprintf(err, errlen, "cannot claim a site: Redis did not answer");
    else if (me < 0)
        snprintf(err, errlen, "no site of the job is left for this worker (its label: site=%s)", mine ? mine : "(none)");
    return me < -1 ? -2 : me;
}

int exec_federated(exec_ctx *ctx, json_t **result, char *err, size_t errlen)
{
    const json_t *spec = ctx->task->spec;
    char field[160], msg[300];
    if (fed_spec_validate(spec, field, sizeof(field), msg, sizeof(msg))) {
        snprintf(err, errlen, "%s: %s", field, msg);
        return EXEC_FAILED;
    }
    site S = {.ctx = ctx, .spec = spec, .n = (int)json_array_size(json_object_get(spec, "sites")), .me = -1};
    S.timeout_ms = (int)num(&fed_spec_shape, spec, "exchange_timeout_s") * 1000;
    snprintf(S.prefix, sizeof(S.prefix), "gantry:fed:%s:%d", ctx->task->job_id, ctx->task->attempt);
    if ((S.me = claim_site(&S, err, errlen)) < 0) return S.me == -2 ? EXEC_RETRY : EXEC_FAILED;
    const char *my_name = json_string_value(json_object_get(json_array_get(json_object_get(spec, "sites"), (size_t)S.me), "name"));
    ctx->progress(ctx, 0.0, "waiting for the other sites", NULL);
    rdv_members mem;
    char why[400];
    if (ctx->rendezvous(ctx, S.n, "fed", S.timeout_ms, &mem, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "the sites did not meet: %s", why);
        return EXEC_RETRY;
    }
    train_data tr = {0}, te = {0};
    train_model *m = NULL;
    train_optim *o = NULL;
    float *xb = NULL, *dl = NULL;
    int32_t *yb = NULL;
    double *z = NULL, *w = NULL, *lambda = NULL, *x = NULL, *msgv = NULL, *avg = NULL;
    int rc = EXEC_FAILED;
    json_t *tspec = fed_site_train_spec(spec, S.me);
    if (load_site(spec, S.me, &tr, &te, err, errlen)) goto out;
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
    S.dim = train_model_param_count(m);
    xb = malloc(sizeof(float) * (size_t)cap * tr.dim), yb = malloc(sizeof(int32_t) * (size_t)cap);
    dl = malloc(sizeof(float) * (size_t)cap * train_model_out_size(m));
    z = malloc(sizeof(double) * S.dim), w = malloc(sizeof(double) * S.dim), lambda = malloc(sizeof(double) * S.dim);
    x = malloc(sizeof(double) * S.dim), msgv = malloc(sizeof(double) * S.dim), avg = malloc(sizeof(double) * S.dim);
    S.enc = malloc(sizeof(uint64_t) * S.dim), S.sum = malloc(sizeof(uint64_t) * S.dim);
    if (!o || !xb || !yb || !dl || !z || !w || !lambda || !x || !msgv || !avg || !S.enc || !S.sum) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    /* keys and sample counts (the weights) */
    unsigned char mypub[32];
    char hello[200], hex[65], key[220];
    if (fed_keypair(mypub, S.priv)) {
        snprintf(err, errlen, "cannot make an X25519 key pair");
        goto out;
    }
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", mypub[i]);
    snprintf(hello, sizeof(hello), "%zu %s", tr.n, hex);
    snprintf(key, sizeof(key), "%s:hello:%d", S.prefix, S.me);
    freeReplyObject(rs_command(ctx->redis, "SET %s %s EX %d", key, hello, FED_KEY_TTL_S * 10));
    redisReply *hs = NULL;
    int g = gather(&S, "hello", &hs, err, errlen);
    if (g) {
        rc = EXEC_RETRY; /* stopped, or a site did not answer */
        goto out;
    }
    double total = 0;
    for (int s = 0; s < S.n; s++) {
        const char *v = hs->element[s]->str;
        if (!v || sscanf(v, "%ld %64s", &S.samples[s], hex) != 2 || strlen(hex) != 64) {
            freeReplyObject(hs);
            snprintf(err, errlen, "site %d sent a malformed hello", s);
            goto out;
        }
        for (int i = 0; i < 32; i++)
            sscanf(hex + 2 * i, "%2hhx", &S.pub[s][i]);
        total += (double)S.samples[s];
    }
    freeReplyObject(hs);
    for (int s = 0; s < S.n; s++)
        S.a[s] = total > 0 ? (double)S.samples[s] / total : 1.0 / S.n;
    if (fed_design_make(S.n, &S.d, err, errlen)) goto out; /* verified inside */
    const char *agg = json_string_value(json_object_get(spec, "aggregation"));
    int fedavg = agg && !strcmp(agg, "fedavg"), masked = !json_is_false(json_object_get(spec, "masking"));
    const json_t *admm = json_object_get(spec, "admm");
    fed_admm_params P = {num(&fed_admm_shape, admm, "rho"), num(&fed_admm_shape, admm, "decay"),
                         (int)num(&fed_admm_shape, admm, "decay_every")};
    int iters = (int)num(&fed_admm_shape, admm, "iterations"), rounds = (int)num(&fed_spec_shape, spec, "rounds");
    long local = (long)num(&fed_spec_shape, spec, "local_steps");
    if (S.me == 0) {
        char note[300];
        snprintf(note, sizeof(note), "%d sites met; design: %s, %d classes; %s%s", S.n, S.d.kind, S.d.classes,
                 fedavg ? "FedAvg" : "SecureD-FL", masked ? " with masked group sums" : " without masks");
        ctx->progress(ctx, 0.0, note, NULL);
    }
    train_model_params_out(m, z); /* every site starts from the same seeded model */
    size_t *order = malloc(sizeof(size_t) * (tr.n ? tr.n : 1)), pos = tr.n;
    /* the data order and the duals from separate streams: SecureD-FL and FedAvg jobs with one seed train alike */
    train_rng rr = {train_rng_mix(seed, 53, (uint64_t)S.me)}, rl = {train_rng_mix(seed, 59, (uint64_t)S.me)};
    double tl = 0, ta = 0, residual = 0;
    for (int round = 1; round <= rounds; round++) {
        double t0 = now_s(), sent0 = S.bytes_sent;
        train_model_params_in(m, z);
        for (long step = 0; step < local && tr.n > 0; step++) {
            int b = 0, correct;
            for (; b < batch; b++) {
                if (pos >= tr.n) train_shuffle(order, tr.n, train_rng_next(&rr), (uint64_t)round), pos = 0;
                size_t i = order[pos++];
                memcpy(xb + (size_t)b * tr.dim, tr.x + i * tr.dim, sizeof(float) * tr.dim);
                yb[b] = tr.y[i];
            }
            train_model_grad(m, xb, yb, b, dl, &correct);
            train_optim_step(o, m->be, o->lr);
        }
        train_model_params_out(m, w);
        int erc = 0;
        if (fedavg) {
            erc = exchange(&S, w, 0, 1, masked, z, err, errlen);
        } else {
            for (size_t j = 0; j < S.dim; j++)
                lambda[j] = 0.02 * (double)train_rng_normal(&rl), z[j] = 0;
            for (int k = 0; k < iters && erc == 0; k++) {
                double rho = fed_admm_rho(&P, k);
                fed_admm_x(w, lambda, z, rho, x, S.dim);
                fed_admm_message(x, lambda, rho, 1.0, msgv, S.dim); /* exchange() weighs by a_i */
                erc = exchange(&S, msgv, k % S.d.classes, 0, masked, z, err, errlen);
                if (erc == 0) fed_admm_dual(lambda, x, z, rho, S.dim);
            }
        }
        if (erc == 0) erc = exchange(&S, w, 0, 1, masked, avg, err, errlen); /* FedAvg's model, for the residual */
        if (erc) {
            rc = EXEC_RETRY;
            free(order);
            goto out;
        }
        double num = 0, den = 0;
        for (size_t j = 0; j < S.dim; j++)
            num += (z[j] - avg[j]) * (z[j] - avg[j]), den += avg[j] * avg[j];
        residual = sqrt(num / (den > 0 ? den : 1));
        if (S.me == 0) {
            train_model_params_in(m, z);
            evaluate(m, &te, xb, yb, cap, &tl, &ta);
            json_t *pt = json_pack("{s:i, s:I, s:f, s:f, s:f, s:f, s:f, s:i}", "round", round, "step", (json_int_t)round,
                                   "test_accuracy", ta, "test_loss", tl, "residual", residual, "bytes_sent", S.bytes_sent - sent0,
                                   "round_s", now_s() - t0, "sites", S.n);
            char line[200];
            snprintf(line, sizeof(line), "round %d of %d: test accuracy %.4f, consensus residual %.1e", round, rounds, ta,
                     residual);
            ctx->progress(ctx, (double)round / rounds, line, pt);
            json_decref(pt);
        }
    }
    free(order);
    if (S.me != 0) {
        rc = EXEC_SILENT;
        goto out;
    }
    char models[2048], artifact[2400];
    snprintf(models, sizeof(models), "%s/models", ctx->state_dir);
    snprintf(artifact, sizeof(artifact), "%s/%s.model", models, ctx->task->job_id);
    train_ckpt_state st = {.step = (uint64_t)rounds, .seed = seed, .rng = m->rng.s};
    train_model_params_in(m, z);
    if (path_mkdirs(models) != 0 || train_ckpt_save(artifact, m, NULL, &st, err, errlen)) goto out;
    json_t *groups = json_array();
    for (int c = 0; c < S.d.classes; c++) {
        json_t *cls = json_array();
        for (int gi = 0; gi < S.d.ngroups[c]; gi++) {
            json_t *grp = json_array();
            for (int s = 0; s < S.n; s++)
                if (S.d.group[c * S.n + s] == gi)
                    json_array_append_new(
                        grp, json_copy(json_object_get(json_array_get(json_object_get(spec, "sites"), (size_t)s), "name")));
            json_array_append_new(cls, grp);
        }
        json_array_append_new(groups, cls);
    }
    *result =
        json_pack("{s:{s:f, s:f, s:i, s:i, s:f, s:f}, s:{s:O, s:I, s:s}, s:{s:s, s:i, s:o}}", "metrics", "test_accuracy", ta,
                  "test_loss", tl, "rounds", rounds, "sites", S.n, "residual", residual, "bytes_per_site_per_round",
                  S.bytes_sent / rounds, "model", "architecture", json_object_get(spec, "model"), "parameters", (json_int_t)S.dim,
                  "artifact", artifact, "design", "kind", S.d.kind, "classes", S.d.classes, "groups", groups);
    rc = EXEC_OK;
out:
    json_decref(tspec);
    train_data_free(&tr), train_data_free(&te);
    if (o) train_optim_free(o, m->be);
    train_model_free(m);
    free(xb), free(yb), free(dl), free(z), free(w), free(lambda), free(x), free(msgv), free(avg), free(S.enc), free(S.sum);
    fed_design_free(&S.d);
    return rc;
}
