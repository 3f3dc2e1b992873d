/* fed_sim.c - gantry-fed-sim: federated rounds of SecureD-FL and FedAvg side by
 * side, in one process, on Fashion-MNIST split non-IID across sites; and the
 * privacy audit of the exchange.
 *
 *   gantry-fed-sim [--sites 9] [--alpha 0.5] [--rounds 20] [--local-steps 50]
 *                  [--iters 7] [--batch 32] [--lr 0.001] [--seed 1]
 *   gantry-fed-sim --privacy-audit [--sites 9,15,21,27] [--coalitions-upto 15] [--coalitions3-upto 15]
 *                  [--t-max T] [--legacy] [--random-groups] [--drop-sites 5,9] [--no-dropouts]
 *   gantry-fed-sim --threshold [--sites 3,9,15] [--drop 1] [--rounds 10] [--dim 50890]
 *                  [--close-ms 200] [--t T]
 *
 * Every site trains the MLP 784-64-10 (Adam) locally from the global model on
 * its own samples; then the same local models are aggregated twice: by
 * SecureD-FL (ADMM; each iteration one sum over all sites, masked with every
 * other site and sealed, through the groups of a resolvable design: the job's
 * protocol code, workers/fed/secagg.c, with the sites as threads over the
 * in-memory transport) and by FedAvg (the plain weighted mean).  Each method
 * keeps its own global model.  Per round it prints both test accuracies,
 * SecureD-FL's consensus residual ||z - sum a_i w_i|| / ||sum a_i w_i||, the
 * bytes each site sends and receives and the aggregation time.
 *
 * --privacy-audit runs workers/fed/fed_audit.h: one line per (n, observer, T) with
 * the number of other sites' models the observer's view determines, then
 * "privacy audit: N determined by Redis or a single site" (exit status 1 when
 * N > 0, unless --legacy, which audits the exchange before issue 18).  --random-groups replaces the design's
 * groups by random ones (pairs meet more than once): the masks over all sites make them no less private.
 * Then the dropout path's audit (fed_audit_drop.h) at --drop-sites: a line per (n, scenario), its pairs'
 * count, and its Redis-or-single-site count is in the last line's N.
 *
 * --threshold measures the aggregation alone (random vectors of dim values, the MLP's size by default; no
 * training): per number of sites, FedAvg's sum over all sites (secagg.h), the threshold mode with every site
 * (secagg_drop.h, t: the default, ceil(2n/3) and at least 3), and the threshold mode with --drop sites killed in the first
 * round after their mask key (their masks recovered), down for the rest: rounds/s, ms a round, bytes sent and
 * received per live site per round, and the first round's time with the dropout. */
#include "workers/fed/secagg_drop.h"
#include "workers/fed/admm.h"
#include "workers/fed/fed_audit.h"
#include "workers/fed/fed_audit_drop.h"
#include "spec/fed_design.h"
#include "workers/fed/mask.h"
#include "workers/fed/memnet.h"
#include "workers/fed/partition.h"
#include "workers/fed/secagg.h"
#include "workers/train/model.h"
#include "workers/train/optim.h"
#include "common/rng.h"
#include "workers/train/train.h"

#include <math.h>
#include <pthread.h>
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
    fed_memnet *hub;
    fed_party p[MAXS];
    fed_admm_params P;
    int iters;
} secured;

typedef struct {
    fed_party *p;
    const fed_admm_params *P;
    double samples;
    const double *w;
    double *lambda, *z, *avg, *x, *m;
    int iters, setup, rc;
    char err[256];
} site_job;

static void *site_main(void *arg)
{
    site_job *j = arg;
    if (j->setup)
        j->rc = fed_party_setup(j->p, j->samples, j->err, sizeof j->err);
    else
        j->rc = fed_party_round(j->p, j->w, j->lambda, j->P, j->iters, 0, j->z, j->avg, j->x, j->m, j->err, sizeof j->err);
    return NULL;
}

/* every site at once, each a thread running the job's protocol code */
static int all_sites(site_job *jobs, int n)
{
    pthread_t th[MAXS];
    for (int i = 0; i < n; i++)
        pthread_create(&th[i], NULL, site_main, &jobs[i]);
    int rc = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        if (jobs[i].rc && !rc) {
            fprintf(stderr, "site %d: %s\n", i, jobs[i].err);
            rc = -1;
        }
    }
    return rc;
}

/* SecureD-FL over the sites' models w (n x dim): z from one masked, sealed sum per iteration; the residual to FedAvg */
static int aggregate(secured *S, double **w, size_t dim, double *z, double *residual, rng_state *r)
{
    int n = S->n;
    site_job jobs[MAXS];
    double *buf = malloc(sizeof(double) * dim * 5 * (size_t)n);
    for (int i = 0; i < n; i++) {
        double *b = buf + (size_t)i * 5 * dim;
        jobs[i] = (site_job){.p = &S->p[i],
                             .P = &S->P,
                             .w = w[i],
                             .lambda = b,
                             .z = b + dim,
                             .avg = b + 2 * dim,
                             .x = b + 3 * dim,
                             .m = b + 4 * dim,
                             .iters = S->iters};
        for (size_t j = 0; j < dim; j++)
            jobs[i].lambda[j] = 0.02 * (double)rng_normal(r); /* random duals, private to the site */
    }
    int rc = all_sites(jobs, n);
    if (rc == 0 && n > 0) {
        memcpy(z, jobs[0].z, sizeof(double) * dim);
        double num = 0, den = 0;
        for (size_t j = 0; j < dim; j++)
            num += (z[j] - jobs[0].avg[j]) * (z[j] - jobs[0].avg[j]), den += jobs[0].avg[j] * jobs[0].avg[j];
        *residual = sqrt(num / (den > 0 ? den : 1));
    }
    free(buf);
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

/* --privacy-audit */
static int audit_main(int argc, char **argv)
{
    int sizes[16], ns = 0;
    char list[256];
    snprintf(list, sizeof list, "%s", arg(argc, argv, "--sites", "9,15,21,27"));
    for (char *t = strtok(list, ","); t && ns < 16; t = strtok(NULL, ","))
        sizes[ns++] = atoi(t);
    fed_audit_opts o = {.legacy = flag(argc, argv, "--legacy"),
                        .random_groups = flag(argc, argv, "--random-groups"),
                        .coalitions_upto = atoi(arg(argc, argv, "--coalitions-upto", "15")),
                        .coalitions3_upto = atoi(arg(argc, argv, "--coalitions3-upto", "15")),
                        .t_min = atoi(arg(argc, argv, "--t-min", "1")),
                        .t_max = atoi(arg(argc, argv, "--t-max", "0")),
                        .out = stdout};
    fed_audit_result r;
    char err[512];
    if (fed_audit(sizes, ns, &o, &r, err, sizeof err)) {
        printf("privacy audit failed: %s\n", err);
        return 2;
    }
    printf("privacy audit (coalitions of 2 sites, n <= %d): %ld determined\n", o.coalitions_upto, r.coalition);
    printf("privacy audit (coalitions of 3 sites, n <= %d): %ld determined\n", o.coalitions3_upto, r.coalition3);
    fed_audit_drop_result dr = {0};
    if (!o.legacy && !flag(argc, argv, "--no-dropouts")) { /* the threshold mode's dropout path */
        int dsizes[16], nd = 0;
        snprintf(list, sizeof list, "%s", arg(argc, argv, "--drop-sites", "5,9"));
        for (char *t = strtok(list, ","); t && nd < 16; t = strtok(NULL, ","))
            dsizes[nd++] = atoi(t);
        if (fed_audit_drop(dsizes, nd, stdout, &dr, err, sizeof err)) {
            printf("privacy audit failed: %s\n", err);
            return 2;
        }
        printf("privacy audit (dropout path, pairs of sites): %ld determined\n", dr.pairs);
    }
    printf("privacy audit: %ld determined by Redis or a single site\n", r.single + dr.single);
    return r.single + dr.single > 0 && !o.legacy ? 1 : 0;
}

/* --threshold: one configuration's rounds, the sites as threads */
typedef struct {
    fed_party p;
    int mode, rounds, rc; /* mode 0: FedAvg's sum over all sites; 1: the threshold mode */
    fed_drop_opts o;
    double *v, *total, ms[64], sent, got;
    char err[256];
} bench_site;

static void *bench_main(void *arg)
{
    bench_site *b = arg;
    b->rc = fed_party_setup(&b->p, 100 + b->p.me, b->err, sizeof b->err);
    double s0 = b->p.bytes_sent, g0 = b->p.bytes_got;
    fed_drop_report r;
    int k = 0;
    for (; k < b->rounds && b->rc == FED_OK; k++) {
        double t0 = now();
        b->rc = b->mode ? fed_party_sum_drop(&b->p, &b->o, b->v, b->p.a, b->total, &r, b->err, sizeof b->err)
                        : fed_party_sum(&b->p, b->v, 1, 0, b->total, b->err, sizeof b->err);
        b->ms[k] = (now() - t0) * 1e3;
    }
    b->sent = (b->p.bytes_sent - s0) / (k ? k : 1), b->got = (b->p.bytes_got - g0) / (k ? k : 1);
    return NULL;
}

static int threshold_main(int argc, char **argv)
{
    int sizes[16], ns = 0, drop = atoi(arg(argc, argv, "--drop", "1")), rounds = atoi(arg(argc, argv, "--rounds", "10"));
    int close_ms = atoi(arg(argc, argv, "--close-ms", "200")), want_t = atoi(arg(argc, argv, "--t", "0"));
    size_t dim = (size_t)atol(arg(argc, argv, "--dim", "50890"));
    char list[256], err[256];
    snprintf(list, sizeof list, "%s", arg(argc, argv, "--sites", "3,9,15"));
    for (char *t = strtok(list, ","); t && ns < 16; t = strtok(NULL, ","))
        sizes[ns++] = atoi(t);
    if (rounds < 2 || rounds > 64 || dim < 1 || close_ms < 1 || drop < 0) {
        fprintf(stderr, "--rounds must be in [2, 64], --dim and --close-ms positive, --drop at least 0\n");
        return 2;
    }
    static const unsigned char secret[] = "gantry-fed-sim cluster secret";
    printf("%zu values a sum; a site closes a phase %d ms after the t-th arrival without all the others; %d rounds each\n", dim,
           close_ms, rounds);
    printf("| sites | t | aggregation | rounds/s | ms a round (first; rest) | bytes sent / received per live site per round |\n");
    printf("|---|---|---|---|---|---|\n");
    for (int q = 0; q < ns; q++) {
        int n = sizes[q], t = want_t ? want_t : fed_drop_threshold_default(n);
        fed_design d;
        if (n < 3 || n > MAXS || fed_drop_threshold_check(n, t) || fed_design_make(n, &d, err, sizeof err)) {
            fprintf(stderr, "%d sites: --sites in [3, %d], --t in [max(3, n/2 + 1), n]\n", n, MAXS);
            return 2;
        }
        for (int mode = 0; mode < 3; mode++) {                      /* FedAvg; threshold; threshold with dropouts */
            if (mode == 2 && (drop == 0 || drop > n - t)) continue; /* t = n (3 sites): no dropout tolerated */
            fed_memnet *hub = fed_memnet_new(0);
            bench_site *B = calloc((size_t)n, sizeof(bench_site));
            double *vals = malloc(sizeof(double) * dim * 2 * (size_t)n);
            pthread_t th[MAXS];
            for (int i = 0; i < n; i++) {
                bench_site *b = &B[i];
                b->v = vals + (size_t)i * 2 * dim, b->total = b->v + dim;
                for (size_t j = 0; j < dim; j++)
                    b->v[j] = sin((double)(i * 7 + 1) * (double)(j + 1));
                b->mode = mode > 0, b->rounds = rounds, b->o = (fed_drop_opts){t, close_ms, 2, 0};
                if (fed_party_init(&b->p, fed_memnet_endpoint(hub, i), n, i, "j_fed_sim", 0, secret, sizeof secret - 1, &d, dim,
                                   60000))
                    return 1;
                if (mode == 2 && i >= n - drop) fed_memnet_fault(hub, i, "dy:", FED_FAULT_KILL, 0);
            }
            for (int i = 0; i < n; i++)
                pthread_create(&th[i], NULL, bench_main, &B[i]);
            for (int i = 0; i < n; i++)
                pthread_join(th[i], NULL);
            int live = mode == 2 ? n - drop : n;
            for (int i = 0; i < live; i++)
                if (B[i].rc != FED_OK) {
                    fprintf(stderr, "%d sites, site %d: %s\n", n, i, B[i].err);
                    return 1;
                }
            double all = 0, rest = 0, sent = 0, got = 0;
            for (int k = 0; k < rounds; k++)
                all += B[0].ms[k], rest += k ? B[0].ms[k] : 0;
            for (int i = 0; i < live; i++)
                sent += B[i].sent / live, got += B[i].got / live;
            static const char *const names[] = {"FedAvg, all sites (today)", "threshold, all sites", "threshold"};
            char name[64];
            snprintf(name, sizeof name, mode == 2 ? "%s, %d dropped in round 1" : "%s", names[mode], drop);
            printf("| %d | %s | %s | %.2f | %.1f; %.1f | %.0f / %.0f |\n", n,
                   mode ? (snprintf(list, sizeof list, "%d", t), list) : "-", name, rounds / (all / 1e3), B[0].ms[0],
                   rest / (rounds - 1), sent, got);
            fflush(stdout);
            for (int i = 0; i < n; i++)
                fed_party_free(&B[i].p);
            free(B), free(vals);
            fed_memnet_free(hub);
        }
        fed_design_free(&d);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (flag(argc, argv, "--privacy-audit")) return audit_main(argc, argv);
    if (flag(argc, argv, "--threshold")) return threshold_main(argc, argv);
    int sites = atoi(arg(argc, argv, "--sites", "9")), rounds = atoi(arg(argc, argv, "--rounds", "20"));
    int local = atoi(arg(argc, argv, "--local-steps", "50")), batch = atoi(arg(argc, argv, "--batch", "32"));
    double alpha = atof(arg(argc, argv, "--alpha", "0.5"));
    uint64_t seed = (uint64_t)atoll(arg(argc, argv, "--seed", "1"));
    static secured S;
    S.n = sites, S.P = (fed_admm_params){0.1, 0.9, 2}, S.iters = atoi(arg(argc, argv, "--iters", "7"));
    double a[MAXS];
    char err[512], spec_text[512];
    if (sites < 3 || sites > MAXS) {
        fprintf(stderr, "--sites must be in [3, %d]\n", MAXS);
        return 2;
    }
    if (fed_design_make(sites, &S.d, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
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
    for (int s = 0; s < sites; s++)
        a[s] = (double)cnt[s] / (double)tr.n;
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
    rng_state r = {rng_mix(seed, 41, 0)};
    /* the sites' keys and weights, once, as a job's generation does */
    static const unsigned char secret[] = "gantry-fed-sim cluster secret";
    S.hub = fed_memnet_new(0);
    site_job setup[MAXS];
    for (int s = 0; s < sites; s++) {
        if (fed_party_init(&S.p[s], fed_memnet_endpoint(S.hub, s), sites, s, "j_fed_sim", 0, secret, sizeof secret - 1, &S.d, dim,
                           600000)) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        setup[s] = (site_job){.p = &S.p[s], .samples = (double)cnt[s], .setup = 1};
    }
    if (all_sites(setup, sites)) return 1;
    double sent0 = 0, got0 = 0;
    printf("%d sites (Dirichlet alpha %g), design: %s, P = %d classes; %d ADMM iterations, sums masked over all sites and "
           "sealed; %zu parameters\n",
           sites, alpha, S.d.kind, S.d.classes, S.iters, dim);
    printf("| round | SecureD-FL accuracy | FedAvg accuracy | consensus residual | bytes sent / received per site | aggregation ms "
           "|\n");
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
                for (int s = 0; s < sites; s++)
                    sent0 += -S.p[s].bytes_sent, got0 += -S.p[s].bytes_got;
                if (aggregate(&S, w, dim, zs, &residual, &r)) return 1;
                ms = (now() - t0) * 1e3;
                train_model_params_in(eval, zs);
                acc_s = accuracy(eval, &te, xb, yb, 1000);
            } else {
                memset(za, 0, sizeof(double) * dim);
                for (int s = 0; s < sites; s++)
                    for (size_t j = 0; j < dim; j++)
                        za[j] += a[s] * w[s][j];
                train_model_params_in(eval, za);
                acc_a = accuracy(eval, &te, xb, yb, 1000);
            }
        }
        for (int s = 0; s < sites; s++) /* this round's bytes, averaged over the sites */
            sent0 += S.p[s].bytes_sent, got0 += S.p[s].bytes_got;
        printf("| %d | %.2f%% | %.2f%% | %.1e | %.0f / %.0f | %.1f |\n", round, acc_s * 100, acc_a * 100, residual, sent0 / sites,
               got0 / sites, ms);
        sent0 = got0 = 0;
        fflush(stdout);
    }
    printf("final: SecureD-FL %.2f%%, FedAvg %.2f%%, difference %+.2f points\n", acc_s * 100, acc_a * 100, (acc_s - acc_a) * 100);
    return 0;
}
