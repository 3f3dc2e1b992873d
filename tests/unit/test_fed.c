/* test_fed.c - SecureD-FL's pure parts: every design verified for every n up
 * to 99 (exact for the constructions), the ADMM identities, masks that cancel
 * exactly, the exchange protocol (sums, keys refused when tampered with), and
 * the privacy audit of what Redis, each site and each pair of sites can read. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "workers/fed/admm.h"
#include "workers/fed/fed_audit.h"
#include "spec/fed_design.h"
#include "workers/fed/mask.h"
#include "workers/fed/memnet.h"
#include "workers/fed/partition.h"
#include "workers/fed/secagg.h"

static void test_designs_up_to_99(void **state)
{
    (void)state;
    int exact = 0;
    for (int n = 3; n <= 99; n++) {
        fed_design d;
        char err[200];
        if (fed_design_make(n, &d, err, sizeof err)) fail_msg("n %d: %s", n, err);
        assert_int_equal(fed_design_verify(&d, err, sizeof err), 0);
        int q = (n - 1) / 2, m = n;
        while (m % 3 == 0)
            m /= 3;
        int prime = q > 1;
        for (int f = 2; f * f <= q; f++)
            if (q % f == 0) prime = 0;
        if (m == 1 || (n % 2 == 1 && prime && q % 6 == 1)) { /* a Kirkman triple system: (n-1)/2 classes */
            if (!d.exact || d.classes != (n - 1) / 2) fail_msg("n %d (%s): %d classes, exact %d", n, d.kind, d.classes, d.exact);
            exact++;
        }
        if (n == 25 || n == 49) assert_int_equal(d.classes, (int)sqrt(n) + 1); /* affine planes */
        assert_true(d.classes >= 1);
        fed_design_free(&d);
    }
    assert_int_equal(exact, 9); /* 3, 9, 27, 81; 15, 27 (again), 39, 63, 75, 87 */
    /* the verifier catches a pair that meets twice and a group of two */
    fed_design d;
    char err[200];
    assert_int_equal(fed_design_make(9, &d, err, sizeof err), 0);
    int saved = d.group[1 * 9 + 0];
    d.group[1 * 9 + 0] = d.group[0 * 9 + 0] == d.group[0 * 9 + 1] ? d.group[1 * 9 + 1] : saved;
    d.group[0 * 9 + 1] = d.group[0 * 9 + 0]; /* sites 0 and 1 together in class 0 ... */
    assert_int_equal(fed_design_verify(&d, err, sizeof err), -1);
    fed_design_free(&d);
    fed_design_make(9, &d, err, sizeof err);
    d.exact = 0;
    for (int i = 0; i < 9; i++) /* class 0: groups {0,1}, {2..8} */
        d.group[i] = i < 2 ? 0 : 1;
    d.ngroups[0] = 2;
    assert_int_equal(fed_design_verify(&d, err, sizeof err), -1);
    assert_non_null(strstr(err, "at least 3"));
    fed_design_free(&d);
    assert_int_equal(fed_design_make(2, &d, err, sizeof err), -1);
}

/* ---- ADMM ---- */

#define MAXN 16
#define DIM 5

typedef struct {
    int n;
    double a[MAXN], w[MAXN][DIM], lambda[MAXN][DIM], x[MAXN][DIM], z[DIM];
} sim;

static double unit(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

static void sim_init(sim *S, int n, uint64_t seed)
{
    memset(S, 0, sizeof *S);
    S->n = n;
    double tot = 0;
    for (int i = 0; i < n; i++)
        tot += S->a[i] = 1 + 9 * unit(&seed);
    for (int i = 0; i < n; i++) {
        S->a[i] /= tot;
        for (int j = 0; j < DIM; j++)
            S->w[i][j] = 2 * unit(&seed) - 1, S->lambda[i][j] = unit(&seed) - 0.5;
    }
}

/* one iteration; group sums of class c, added up */
static void sim_iter(sim *S, const fed_design *d, int k, const fed_admm_params *p)
{
    double rho = fed_admm_rho(p, k), m[MAXN][DIM], z[DIM] = {0};
    int c = k % d->classes;
    for (int i = 0; i < S->n; i++) {
        fed_admm_x(S->w[i], S->lambda[i], S->z, rho, S->x[i], DIM);
        fed_admm_message(S->x[i], S->lambda[i], rho, S->a[i], m[i], DIM);
    }
    for (int g = 0; g < d->ngroups[c]; g++)
        for (int i = 0; i < S->n; i++)
            if (d->group[c * S->n + i] == g)
                for (int j = 0; j < DIM; j++)
                    z[j] += m[i][j];
    memcpy(S->z, z, sizeof z);
    for (int i = 0; i < S->n; i++)
        fed_admm_dual(S->lambda[i], S->x[i], S->z, rho, DIM);
}

static void test_admm_identities(void **state)
{
    (void)state;
    fed_admm_params p = {0.1, 0.9, 2};
    for (int n = 9; n <= 15; n += 6) {
        fed_design d;
        char err[200];
        assert_int_equal(fed_design_make(n, &d, err, sizeof err), 0);
        sim S;
        sim_init(&S, n, (uint64_t)n);
        double avg[DIM] = {0}, lam0[DIM] = {0}, pred[DIM], prev = 1e9;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < DIM; j++)
                avg[j] += S.a[i] * S.w[i][j], lam0[j] += S.a[i] * S.lambda[i][j];
        for (int k = 0; k < 12; k++) {
            /* z depends on the totals alone (docs/federated.md, "Which aggregation"): z_1 = (2 avg - L)/(2 + rho) + L/rho
             * with L = sum a_i lambda_i at the start, then z_k = (2 avg + rho z_(k-1))/(2 + rho) */
            double rho = fed_admm_rho(&p, k);
            for (int j = 0; j < DIM; j++)
                pred[j] = k == 0 ? (2 * avg[j] - lam0[j]) / (2 + rho) + lam0[j] / rho : (2 * avg[j] + rho * S.z[j]) / (2 + rho);
            sim_iter(&S, &d, k, &p);
            for (int j = 0; j < DIM; j++)
                assert_true(fabs(S.z[j] - pred[j]) < 1e-12 * (1 + fabs(pred[j])));
            for (int j = 0; j < DIM; j++) { /* sum a_i lambda_i = 0 after every iteration */
                double s = 0;
                for (int i = 0; i < n; i++)
                    s += S.a[i] * S.lambda[i][j];
                assert_true(fabs(s) < 1e-12);
            }
            double num = 0, den = 0;
            for (int j = 0; j < DIM; j++)
                num += (S.z[j] - avg[j]) * (S.z[j] - avg[j]), den += avg[j] * avg[j];
            double rel = sqrt(num / den);
            if (k >= 1) assert_true(rel < prev); /* geometric convergence to FedAvg */
            prev = rel;
            if (k == 6) print_message("n %d: relative error to FedAvg after 7 iterations %.2e\n", n, rel);
            if (k == 6) assert_true(rel < 1e-4);
        }
        fed_design_free(&d);
    }
}

/* ---- masks ---- */

static void test_masks_cancel(void **state)
{
    (void)state;
    enum { G = 4, D = 1000 };
    unsigned char pub[G][32], priv[G][32], k01[32], k10[32];
    for (int i = 0; i < G; i++)
        assert_int_equal(fed_keypair(pub[i], priv[i]), 0);
    assert_int_equal(fed_shared_key(priv[0], pub[0], pub[1], k01), 0);
    assert_int_equal(fed_shared_key(priv[1], pub[1], pub[0], k10), 0);
    assert_memory_equal(k01, k10, 32); /* both ends derive the same key */
    static double v[G][D];
    static uint64_t msg[G][D];
    uint64_t seed = 3;
    double want[D] = {0};
    for (int i = 0; i < G; i++) {
        for (int j = 0; j < D; j++)
            v[i][j] = (unit(&seed) - 0.5) * 100, want[j] += v[i][j];
        fed_encode(v[i], msg[i], D);
        for (int o = 0; o < G; o++) {
            if (o == i) continue;
            unsigned char key[32];
            assert_int_equal(fed_shared_key(priv[i], pub[i], pub[o], key), 0);
            assert_int_equal(fed_mask(msg[i], D, key, i < o ? 1 : -1, 7, 2), 0);
        }
    }
    uint64_t enc[D];
    fed_encode(v[0], enc, D);
    int same = 0;
    for (int j = 0; j < D; j++)
        same += msg[0][j] == enc[j];
    assert_true(same < 3); /* the masked message is not the message */
    for (int j = 0; j < D; j++) {
        uint64_t s = 0;
        for (int i = 0; i < G; i++)
            s += msg[i][j];
        uint64_t exact = 0; /* the sum of the encodings, exactly */
        for (int i = 0; i < G; i++) {
            uint64_t e;
            fed_encode(&v[i][j], &e, 1);
            exact += e;
        }
        assert_true(s == exact);
        assert_true(fabs(fed_decode(s) - want[j]) < 1e-8);
    }
}

/* ---- the exchange protocol (secagg.h) over the in-memory transport ---- */

#define SITES 9
#define VDIM 64

static const unsigned char test_secret[] = "unit-test cluster secret";

/* a transport that lets a test change what one site writes */
typedef struct {
    fed_net net;
    fed_net *inner;
    int tamper; /* 1: swap the public key in this site's hello; 2: flip a bit of what it sends in exchange 3 */
} evil_net;

static int evil_put(fed_net *net, const char *chan, const void *data, size_t len, char *err, size_t errlen)
{
    evil_net *e = (evil_net *)net;
    unsigned char *copy = malloc(len);
    memcpy(copy, data, len);
    if (e->tamper == 1 && strcmp(chan, "hello") == 0) { /* another valid-looking key and tag */
        for (size_t i = FED_HDR_LEN; i < len; i++)
            copy[i] = (unsigned char)(copy[i] * 31 + 7);
    }
    if (e->tamper == 2 && strncmp(chan, "x:3", 3) == 0) copy[len / 2] ^= 1; /* its share, or its group's sum */
    int rc = e->inner->put(e->inner, chan, copy, len, err, errlen);
    free(copy);
    return rc;
}

static int evil_get(fed_net *net, const char *chan, int count, int timeout_ms, fed_blob *out, char *err, size_t errlen)
{
    evil_net *e = (evil_net *)net;
    return e->inner->get(e->inner, chan, count, timeout_ms, out, err, errlen);
}

static void evil_drop(fed_net *net, const char *chan)
{
    evil_net *e = (evil_net *)net;
    e->inner->drop(e->inner, chan);
}

typedef struct {
    fed_party p;
    evil_net net;
    const fed_design *d;
    const unsigned char *secret;
    size_t secret_len;
    int me, rc, sums;
    double v[VDIM], total[VDIM], samples, reweigh; /* reweigh > 0: fed_party_weigh with it after the setup */
    char err[256];
} party_run;

static void *party_main(void *arg)
{
    party_run *r = arg;
    r->rc = fed_party_init(&r->p, &r->net.net, SITES, r->me, "j_test", 2, r->secret, r->secret_len, r->d, VDIM, 2000) ? FED_BROKEN
                                                                                                                      : FED_OK;
    if (r->rc == FED_OK) r->rc = fed_party_setup(&r->p, r->samples, r->err, sizeof r->err);
    if (r->rc == FED_OK && r->reweigh > 0) r->rc = fed_party_weigh(&r->p, r->reweigh, r->err, sizeof r->err);
    for (int k = 0; k < r->sums && r->rc == FED_OK; k++)
        r->rc = fed_party_sum(&r->p, r->v, 1, k % r->d->classes, r->total, r->err, sizeof r->err);
    fed_party_free(&r->p);
    return NULL;
}

/* SITES parties as threads; tamper: what site 1's transport does to its messages */
static void run_parties(party_run *runs, int tamper, int other_secret, int sums, int reweigh)
{
    fed_design d;
    char err[200];
    assert_int_equal(fed_design_make(SITES, &d, err, sizeof err), 0);
    fed_memnet *hub = fed_memnet_new(0);
    pthread_t th[SITES];
    uint64_t seed = 5;
    for (int i = 0; i < SITES; i++) {
        party_run *r = &runs[i];
        memset(r, 0, sizeof(*r));
        r->net = (evil_net){{evil_put, evil_get, evil_drop, NULL}, fed_memnet_endpoint(hub, i), i == 1 ? tamper : 0};
        r->d = &d, r->me = i, r->sums = sums, r->samples = 100 + 37 * i, r->reweigh = reweigh ? 7 * (i + 1) : 0;
        r->secret = test_secret, r->secret_len = sizeof test_secret - 1 - (other_secret && i == 2);
        for (int j = 0; j < VDIM; j++)
            r->v[j] = 20 * unit(&seed) - 10;
        pthread_create(&th[i], NULL, party_main, r);
    }
    for (int i = 0; i < SITES; i++)
        pthread_join(th[i], NULL);
    fed_memnet_free(hub);
    fed_design_free(&d);
}

/* every site's weighted total: its counts are samples (setup), or reweigh (fed_party_weigh after it) */
static void check_sums(party_run *runs)
{
    double tot = 0, want[VDIM] = {0};
    for (int i = 0; i < SITES; i++)
        tot += runs[i].reweigh > 0 ? runs[i].reweigh : runs[i].samples;
    for (int i = 0; i < SITES; i++)
        for (int j = 0; j < VDIM; j++)
            want[j] += (runs[i].reweigh > 0 ? runs[i].reweigh : runs[i].samples) / tot * runs[i].v[j];
    for (int i = 0; i < SITES; i++) {
        if (runs[i].rc != FED_OK) fail_msg("site %d: %s", i, runs[i].err);
        assert_true(fabs(runs[i].p.total_samples - tot) < 1e-6); /* the weights: only the total count is revealed */
        for (int j = 0; j < VDIM; j++)
            assert_true(fabs(runs[i].total[j] - want[j]) < 1e-8); /* every site gets the weighted total, to fixed point */
    }
}

static void test_secagg_sums(void **state)
{
    (void)state;
    static party_run runs[SITES];
    run_parties(runs, 0, 0, 5, 0);
    check_sums(runs);
}

/* a federated program's site weighs its update by each round's count: one sum of one value, then the sums
 * weigh by the new counts */
static void test_secagg_reweigh(void **state)
{
    (void)state;
    static party_run runs[SITES];
    run_parties(runs, 0, 0, 3, 1);
    check_sums(runs);
}

static void test_secagg_tampering(void **state)
{
    (void)state;
    static party_run runs[SITES];
    /* a man in the middle swaps site 1's public key (and tag) for another: every site refuses it */
    run_parties(runs, 1, 0, 1, 0);
    for (int i = 0; i < SITES; i++) {
        if (runs[i].rc != FED_TAMPERED) fail_msg("site %d: %d %s", i, runs[i].rc, runs[i].err);
        assert_non_null(strstr(runs[i].err, "site 1's public key is not authenticated (tampered in Redis?"));
    }
    /* a worker with another cluster secret: its key is refused by the others, theirs by it */
    run_parties(runs, 0, 1, 1, 0);
    for (int i = 0; i < SITES; i++) {
        assert_int_equal(runs[i].rc, FED_TAMPERED);
        assert_non_null(strstr(runs[i].err, i == 2 ? "site 0's public key" : "site 2's public key"));
        assert_non_null(strstr(runs[i].err, "--fed-secret"));
    }
    /* a message changed in transit: whoever opens it fails the job, the others stop waiting at their deadline */
    run_parties(runs, 2, 0, 5, 0);
    int tampered = 0;
    for (int i = 0; i < SITES; i++) {
        assert_int_not_equal(runs[i].rc, FED_OK);
        if (runs[i].rc == FED_TAMPERED) assert_non_null(strstr(runs[i].err, "does not authenticate")), tampered++;
    }
    assert_true(tampered >= 1);
}

/* ---- privacy: the audit of what each party can read (fed_audit.h) ----
 * The view is what the protocol code writes through the in-memory transport, opened with
 * the observer's keys; every message is explained exactly as pair masks plus a linear
 * function of the secrets, and w_j is determined iff e_wj is in the row space. */

static void test_privacy_audit(void **state)
{
    (void)state;
    int sizes[] = {9, 15};
    fed_audit_opts o = {.coalitions_upto = 15};
    fed_audit_result r;
    char err[512];
    if (fed_audit(sizes, 2, &o, &r, err, sizeof err)) fail_msg("%s", err);
    /* every view: 9 sites, T = 1..12: Redis, 9 sites, 36 pairs; 15 sites, T = 1..21: 1 + 15 + 105 */
    assert_int_equal(r.views, 12 * (1 + 9 + 36) + 21 * (1 + 15 + 105));
    print_message("privacy audit, 9 and 15 sites, T = 1..3P: %ld models determined by Redis or a single site, %ld by "
                  "coalitions of 2\n",
                  r.single, r.coalition);
    assert_int_equal(r.single, 0);
    assert_int_equal(r.coalition, 0);
    /* two sites of three know the third's model from z (inherent: nothing else is revealed to them) */
    int three[] = {3};
    fed_audit_opts o3 = {.coalitions_upto = 3, .t_max = 2};
    assert_int_equal(fed_audit(three, 1, &o3, &r, err, sizeof err), 0);
    assert_int_equal(r.single, 0);
    assert_int_equal(r.coalition, 2 * 3);
}

/* the same audit finds the leak of the exchange before issue 18 (group masks, every message
 * readable): 9 sites, 7 iterations: 2 of 8 models; 8 iterations: all of them, Redis too */
static void test_privacy_audit_finds_the_old_leak(void **state)
{
    (void)state;
    int sizes[] = {9};
    fed_audit_opts o = {.legacy = 1, .t_min = 7, .t_max = 7};
    fed_audit_result r;
    char err[512];
    if (fed_audit(sizes, 1, &o, &r, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(r.single, 9 * 2); /* each site: 2 of 8 */
    o.t_min = o.t_max = 8;
    if (fed_audit(sizes, 1, &o, &r, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(r.single, 9 + 9 * 8); /* Redis: all 9; each site: all 8 others */
}

/* the designs are not what keeps the models private: groups drawn at random (pairs meeting more than once) hide as
 * much, since the masks cancel only in the total (docs/federated.md, "Which aggregation") */
static void test_privacy_audit_random_groups(void **state)
{
    (void)state;
    int sizes[] = {9};
    fed_audit_opts o = {.coalitions_upto = 9, .random_groups = 1};
    fed_audit_result r;
    char err[512];
    if (fed_audit(sizes, 1, &o, &r, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(r.views, 12 * (1 + 9 + 36));
    assert_int_equal(r.single, 0);
    assert_int_equal(r.coalition, 0);
}

/* Dirichlet label skew: every sample on one site; small alpha concentrates each class on few sites */
static void test_partition(void **state)
{
    (void)state;
    enum { N = 20000, C = 10, S = 9 };
    static int32_t labels[N];
    static int site[N];
    for (int i = 0; i < N; i++)
        labels[i] = i % C;
    double skew[2];
    for (int t = 0; t < 2; t++) {
        double alpha = t ? 100.0 : 0.1;
        for (int i = 0; i < N; i++)
            site[i] = -1;
        assert_int_equal(fed_partition_dirichlet(labels, N, C, S, alpha, 7, site), 0);
        int count[S][C] = {{0}};
        for (int i = 0; i < N; i++) {
            assert_true(site[i] >= 0 && site[i] < S);
            count[site[i]][labels[i]]++;
        }
        /* skew: the mean over classes of the largest site's share of the class */
        double sum = 0;
        for (int c = 0; c < C; c++) {
            int mx = 0;
            for (int s = 0; s < S; s++)
                mx = count[s][c] > mx ? count[s][c] : mx;
            sum += (double)mx / ((double)N / C);
        }
        skew[t] = sum / C;
    }
    assert_true(skew[0] > 0.5); /* alpha 0.1: most of a class on one site */
    assert_true(skew[1] < 0.2); /* alpha 100: close to 1/9 each */
    assert_int_equal(fed_partition_dirichlet(labels, N, C, 0, 1, 1, site), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_designs_up_to_99),
        cmocka_unit_test(test_admm_identities),
        cmocka_unit_test(test_masks_cancel),
        cmocka_unit_test(test_secagg_sums),
        cmocka_unit_test(test_secagg_reweigh),
        cmocka_unit_test(test_secagg_tampering),
        cmocka_unit_test(test_privacy_audit),
        cmocka_unit_test(test_privacy_audit_finds_the_old_leak),
        cmocka_unit_test(test_privacy_audit_random_groups),
        cmocka_unit_test(test_partition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
