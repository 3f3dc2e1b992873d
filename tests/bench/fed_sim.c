/* fed_sim.c - gantry-fed-sim: federated rounds of SecureD-FL and FedAvg side by
 * side, in one process, on Fashion-MNIST split non-IID across sites.
 *
 *   gantry-fed-sim [--sites 9] [--alpha 0.5] [--rounds 20] [--local-steps 50]
 *                  [--iters 7] [--batch 32] [--lr 0.001] [--seed 1] [--no-mask]
 *
 * Every site trains the MLP 784-64-10 (Adam) locally from the global model on
 * its own samples; then the same local models are aggregated twice: by
 * SecureD-FL (ADMM over the groups of a resolvable design, each group revealing
 * only its masked sum: X25519 pair keys, ChaCha20 masks, fixed point mod 2^64)
 * and by FedAvg (the plain weighted mean).  Each method keeps its own global
 * model.  Per round it prints both test accuracies, SecureD-FL's consensus
 * residual ||z - sum a_i w_i|| / ||sum a_i w_i||, the bytes each site sends and
 * the aggregation time.  The library code is the job's (workers/fed/, workers/train/). */
#include "workers/fed/admm.h"
#include "workers/fed/design.h"
#include "workers/fed/mask.h"
#include "workers/fed/partition.h"
#include "workers/train/model.h"
#include "workers/train/optim.h"
#include "workers/train/rng.h"
#include "workers/train/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXS 64

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t nparams_of(const train_model *m)
{
    return train_model_param_count(m);
}

static double accuracy(train_model *m, const train_data *te, float *xb, int32_t *yb, int cap)
{
    long correct = 0;
    for (size_t i = 0; i < te->n; i += (size_t)cap) {
        int b = (int)(te->n - i < (size_t)cap ? te->n - i : (size_t)cap), c;
        memcpy(xb, te->x + i * te->dim, sizeof(float) * (size_t)b * te->dim);
        memcpy(yb, te->y + i, sizeof(int32_t) * (size_t)b);
        m->be->softmax_ce(b, (int)train_model_out_size(m), train_model_forward(m, xb, b, false), yb, NULL, &c);
        correct += c;
    }
    return (double)correct / (double)te->n;
}

typedef struct {
    int n;
    fed_design d;
    unsigned char pub[MAXS][32], priv[MAXS][32];
    double a[MAXS];
    fed_admm_params p;
    int iters, masked;
} secured;

/* SecureD-FL over the sites' models w (n x dim): z from group sums only; the residual to FedAvg */
static int aggregate(secured *S, double **w, size_t dim, uint64_t round, double *z, double *residual, train_rng *r)
{
    int n = S->n;
    double **lambda = malloc(sizeof(double *) * (size_t)n), *x = malloc(sizeof(double) * dim), *m = malloc(sizeof(double) * dim);
    uint64_t *enc = malloc(sizeof(uint64_t) * dim), *gsum = calloc(dim * (size_t)n, sizeof(uint64_t));
    for (int i = 0; i < n; i++) {
        lambda[i] = malloc(sizeof(double) * dim);
        for (size_t j = 0; j < dim; j++)
            lambda[i][j] = 0.02 * (double)train_rng_normal(r); /* random duals, private to the site */
    }
    memset(z, 0, sizeof(double) * dim);
    double *xs = malloc(sizeof(double) * dim * (size_t)n);
    int rc = 0;
    for (int k = 0; k < S->iters && rc == 0; k++) {
        double rho = fed_admm_rho(&S->p, k);
        int c = k % S->d.classes;
        memset(gsum, 0, sizeof(uint64_t) * dim * (size_t)n);
        for (int i = 0; i < n && rc == 0; i++) {
            fed_admm_x(w[i], lambda[i], z, rho, xs + (size_t)i * dim, dim);
            fed_admm_message(xs + (size_t)i * dim, lambda[i], rho, S->a[i], m, dim);
            fed_encode(m, enc, dim);
            int members[MAXS], g = S->d.group[c * n + i], k2 = fed_design_members(&S->d, c, i, members);
            for (int q = 0; S->masked && q < k2 && rc == 0; q++) {
                unsigned char key[32];
                int o = members[q];
                if (o == i) continue;
                rc = fed_shared_key(S->priv[i], S->pub[i], S->pub[o], key) ||
                     fed_mask(enc, dim, key, i < o ? 1 : -1, round, (uint64_t)k);
            }
            for (size_t j = 0; j < dim; j++) /* what the group's sum receives: masked, modulo 2^64 */
                gsum[(size_t)g * dim + j] += enc[j];
        }
        memset(z, 0, sizeof(double) * dim);
        for (int g = 0; g < S->d.ngroups[c]; g++)
            for (size_t j = 0; j < dim; j++)
                z[j] += fed_decode(gsum[(size_t)g * dim + j]);
        for (int i = 0; i < n; i++)
            fed_admm_dual(lambda[i], xs + (size_t)i * dim, z, rho, dim);
    }
    double num = 0, den = 0;
    for (size_t j = 0; j < dim; j++) {
        double avg = 0;
        for (int i = 0; i < n; i++)
            avg += S->a[i] * w[i][j];
        num += (z[j] - avg) * (z[j] - avg), den += avg * avg;
    }
    *residual = sqrt(num / (den > 0 ? den : 1));
    for (int i = 0; i < n; i++)
        free(lambda[i]);
    free(lambda), free(x), free(m), free(enc), free(gsum), free(xs);
    return rc;
}

static const char *arg(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name)) return argv[i + 1];
    return def;
}

static int flag(int argc, char **argv, const char *name)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name)) return 1;
    return 0;
}

int main(int argc, char **argv)
{
    int sites = atoi(arg(argc, argv, "--sites", "9")), rounds = atoi(arg(argc, argv, "--rounds", "20"));
    int local = atoi(arg(argc, argv, "--local-steps", "50")), batch = atoi(arg(argc, argv, "--batch", "32"));
    double alpha = atof(arg(argc, argv, "--alpha", "0.5"));
    uint64_t seed = (uint64_t)atoll(arg(argc, argv, "--seed", "1"));
    secured S = {
        .n = sites, .p = {0.1, 0.9, 2}, .iters = atoi(arg(argc, argv, "--iters", "7")), .masked = !flag(argc, argv, "--no-mask")};
    char err[512], spec_text[512];
    if (sites < 3 || sites > MAXS) {
        fprintf(stderr, "--sites must be in [3, %d]\n", MAXS);
        return 2;
    }
    if (fed_design_make(sites, &S.d, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (!S.masked && S.iters > S.d.classes) {
        fprintf(stderr, "without masks the iterations are capped at P = %d (a site would see a peer's message twice)\n",
                S.d.classes);
        return 2;
    }
    snprintf(spec_text, sizeof spec_text,
             "{\"model\":{\"input\":[1,28,28],\"layers\":[{\"type\":\"flatten\"},{\"type\":\"dense\",\"units\":64},"
             "{\"type\":\"relu\"},{\"type\":\"dense\",\"units\":10}]},\"dataset\":{\"name\":\"fashion-mnist\"},"
             "\"optimizer\":{\"type\":\"adam\",\"lr\":%s}}",
             arg(argc, argv, "--lr", "0.001"));
    json_t *spec = json_loads(spec_text, 0, NULL);
    train_data tr, te;
    if (train_dataset_load(spec, &tr, &te, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int *site = malloc(sizeof(int) * tr.n);
    fed_partition_dirichlet(tr.y, tr.n, tr.classes, sites, alpha, seed, site);
    size_t *idx[MAXS], cnt[MAXS] = {0};
    for (size_t i = 0; i < tr.n; i++)
        cnt[site[i]]++;
    for (int s = 0; s < sites; s++) {
        idx[s] = malloc(sizeof(size_t) * (cnt[s] ? cnt[s] : 1));
        cnt[s] = 0;
    }
    for (size_t i = 0; i < tr.n; i++)
        idx[site[i]][cnt[site[i]]++] = i;
    for (int s = 0; s < sites; s++) {
        S.a[s] = (double)cnt[s] / (double)tr.n;
        if (S.masked && fed_keypair(S.pub[s], S.priv[s])) return 1;
    }
    const train_backend *be = train_backend_cpu();
    train_model *m[MAXS], *eval = train_model_create(json_object_get(spec, "model"), be, seed, 1000, err, sizeof err);
    train_optim *o[2][MAXS]; /* each method's sites keep their own optimizer state */
    for (int s = 0; s < sites; s++) {
        m[s] = train_model_create(json_object_get(spec, "model"), be, seed, batch, err, sizeof err);
        o[0][s] = train_optim_create(json_object_get(spec, "optimizer"), m[s]);
        o[1][s] = train_optim_create(json_object_get(spec, "optimizer"), m[s]);
    }
    size_t dim = nparams_of(eval);
    double *zs = malloc(sizeof(double) * dim), *za = malloc(sizeof(double) * dim), **w = malloc(sizeof(double *) * (size_t)sites);
    for (int s = 0; s < sites; s++)
        w[s] = malloc(sizeof(double) * dim);
    train_model_params_out(eval, zs);
    memcpy(za, zs, sizeof(double) * dim);
    float *xb = malloc(sizeof(float) * 1000 * tr.dim), *dl = malloc(sizeof(float) * (size_t)batch * 10);
    int32_t *yb = malloc(sizeof(int32_t) * 1000);
    train_rng r = {train_rng_mix(seed, 41, 0)};
    printf("%d sites (Dirichlet alpha %g), design: %s, P = %d classes; %d ADMM iterations%s; %zu parameters\n", sites, alpha,
           S.d.kind, S.d.classes, S.iters, S.masked ? ", masked group sums" : ", no masks", dim);
    printf("| round | SecureD-FL accuracy | FedAvg accuracy | consensus residual | bytes sent per site | aggregation ms |\n");
    printf("|---|---|---|---|---|---|\n");
    double acc_s = 0, acc_a = 0, residual = 0, ms = 0;
    size_t pos[MAXS] = {0};
    for (int round = 1; round <= rounds; round++) {
        for (int method = 0; method < 2; method++) { /* 0: SecureD-FL's global model, 1: FedAvg's */
            double *z = method ? za : zs;
            for (int s = 0; s < sites; s++) {
                train_model_params_in(m[s], z);
                size_t saved = pos[s];
                for (int step = 0; step < local && cnt[s] > 0; step++) {
                    int b = 0, correct;
                    for (; b < batch; b++) {
                        size_t i = idx[s][(pos[s]++) % cnt[s]];
                        memcpy(xb + (size_t)b * tr.dim, tr.x + i * tr.dim, sizeof(float) * tr.dim);
                        yb[b] = tr.y[i];
                    }
                    train_model_grad(m[s], xb, yb, b, dl, &correct);
                    train_optim_step(o[method][s], be, o[method][s]->lr);
                }
                if (method == 0) pos[s] = saved; /* both methods see the same local batches */
                train_model_params_out(m[s], w[s]);
            }
            if (method == 0) {
                double t0 = now();
                if (aggregate(&S, w, dim, (uint64_t)round, zs, &residual, &r)) {
                    fprintf(stderr, "masking failed\n");
                    return 1;
                }
                ms = (now() - t0) * 1e3;
                train_model_params_in(eval, zs);
                acc_s = accuracy(eval, &te, xb, yb, 1000);
            } else {
                memset(za, 0, sizeof(double) * dim);
                for (int s = 0; s < sites; s++)
                    for (size_t j = 0; j < dim; j++)
                        za[j] += S.a[s] * w[s][j];
                train_model_params_in(eval, za);
                acc_a = accuracy(eval, &te, xb, yb, 1000);
            }
        }
        printf("| %d | %.2f%% | %.2f%% | %.1e | %.0f | %.1f |\n", round, acc_s * 100, acc_a * 100, residual,
               (double)S.iters * (double)dim * 8, ms);
        fflush(stdout);
    }
    printf("final: SecureD-FL %.2f%%, FedAvg %.2f%%, difference %+.2f points\n", acc_s * 100, acc_a * 100, (acc_s - acc_a) * 100);
    return 0;
}
