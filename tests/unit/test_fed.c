/* test_fed.c - SecureD-FL's pure parts: every design verified for every n up
 * to 99 (exact for the constructions), the ADMM identities, masks that cancel
 * exactly, and the privacy rank tests on the complete transcript. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "workers/fed/admm.h"
#include "workers/fed/design.h"
#include "workers/fed/mask.h"
#include "workers/fed/partition.h"

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
        double avg[DIM] = {0}, prev = 1e9;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < DIM; j++)
                avg[j] += S.a[i] * S.w[i][j];
        for (int k = 0; k < 12; k++) {
            sim_iter(&S, &d, k, &p);
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

/* ---- privacy: what the transcript determines (exact rank tests, per coordinate) ----
 * Every quantity is linear in the unknowns u = (w_1..w_n, lambda_1^0..lambda_n^0); we carry
 * its coefficient row.  An observer knows its own two secrets, z after every iteration (every
 * site needs it), and either its group's sum (masked) or each member's message (unmasked). */

#define U (2 * MAXN)

typedef struct {
    double r[U];
} row;

static void row_axpy(row *y, double a, const row *x, int nu)
{
    for (int k = 0; k < nu; k++)
        y->r[k] += a * x->r[k];
}

/* rank of m rows (Gaussian elimination with partial pivoting, relative tolerance) */
static int rank_of(row *rows, int m, int nu)
{
    int rank = 0;
    for (int col = 0; col < nu && rank < m; col++) {
        int piv = rank;
        for (int i = rank; i < m; i++)
            if (fabs(rows[i].r[col]) > fabs(rows[piv].r[col])) piv = i;
        if (fabs(rows[piv].r[col]) < 1e-9) continue;
        row t = rows[piv];
        rows[piv] = rows[rank], rows[rank] = t;
        for (int i = 0; i < m; i++)
            if (i != rank) row_axpy(&rows[i], -rows[i].r[col] / rows[rank].r[col], &rows[rank], nu);
        rank++;
    }
    return rank;
}

/* the sites (other than the observers) whose model the observers' transcript determines after T iterations */
static int leaked(const fed_design *d, int n, const int *observers, int nobs, int T, int masked, const double *a)
{
    fed_admm_params p = {0.1, 0.9, 2};
    int nu = 2 * n, cap = 4 * n + T * (n + 2) + 8, m = 0;
    row *obs = calloc((size_t)cap, sizeof(row)), lam[MAXN], z = {{0}}, x[MAXN], msg[MAXN];
    memset(lam, 0, sizeof lam);
    for (int i = 0; i < n; i++)
        lam[i].r[n + i] = 1;
    int watching[MAXN] = {0};
    for (int o = 0; o < nobs; o++) {
        watching[observers[o]] = 1;
        obs[m].r[observers[o]] = 1, m++;     /* its model */
        obs[m].r[n + observers[o]] = 1, m++; /* its first dual */
    }
    for (int k = 0; k < T; k++) {
        double rho = fed_admm_rho(&p, k);
        int c = k % d->classes;
        row nz = {{0}};
        for (int i = 0; i < n; i++) { /* x = (2w - lambda + rho z) / (2 + rho); msg = a (x + lambda / rho) */
            memset(&x[i], 0, sizeof(row));
            x[i].r[i] = 2 / (2 + rho);
            row_axpy(&x[i], -1 / (2 + rho), &lam[i], nu);
            row_axpy(&x[i], rho / (2 + rho), &z, nu);
            memset(&msg[i], 0, sizeof(row));
            row_axpy(&msg[i], a[i], &x[i], nu);
            row_axpy(&msg[i], a[i] / rho, &lam[i], nu);
            row_axpy(&nz, 1, &msg[i], nu);
        }
        for (int o = 0; o < nobs; o++) {
            int me = observers[o];
            if (masked) { /* its group's sum */
                row s = {{0}};
                for (int j = 0; j < n; j++)
                    if (d->group[c * n + j] == d->group[c * n + me]) row_axpy(&s, 1, &msg[j], nu);
                obs[m++] = s;
            } else {
                for (int j = 0; j < n; j++)
                    if (d->group[c * n + j] == d->group[c * n + me]) obs[m++] = msg[j];
            }
        }
        z = nz;
        obs[m++] = z;
        for (int i = 0; i < n; i++) { /* lambda += rho (x - z) */
            row_axpy(&lam[i], rho, &x[i], nu);
            row_axpy(&lam[i], -rho, &z, nu);
        }
    }
    row *tmp = calloc((size_t)cap + 1, sizeof(row));
    memcpy(tmp, obs, sizeof(row) * (size_t)m);
    int base = rank_of(tmp, m, nu), count = 0;
    for (int j = 0; j < n; j++) {
        if (watching[j]) continue;
        memcpy(tmp, obs, sizeof(row) * (size_t)m);
        memset(&tmp[m], 0, sizeof(row));
        tmp[m].r[j] = 1;
        if (rank_of(tmp, m + 1, nu) == base) count++; /* e_wj is in the row space: w_j is determined */
    }
    free(obs), free(tmp);
    return count;
}

static void test_privacy_rank(void **state)
{
    (void)state;
    for (int n = 9; n <= 15; n += 6) {
        fed_design d;
        char err[200];
        assert_int_equal(fed_design_make(n, &d, err, sizeof err), 0);
        double a[MAXN];
        uint64_t seed = 11;
        double tot = 0;
        for (int i = 0; i < n; i++)
            tot += a[i] = 1 + unit(&seed);
        for (int i = 0; i < n; i++)
            a[i] /= tot;
        int P = d.classes;
        for (int T = 1; T <= 3 * P; T++) {
            for (int o = 0; o < n; o++) { /* masked: one site learns nobody's model, however long */
                int obs[1] = {o};
                if (leaked(&d, n, obs, 1, T, 1, a))
                    fail_msg("n %d T %d: site %d's transcript (masked) determines a model", n, T, o);
            }
        }
        /* a whole group pooling what it saw (masked), over 3P iterations: still nothing */
        int members[MAXN], k = fed_design_members(&d, 0, 0, members);
        assert_int_equal(leaked(&d, n, members, k, 3 * P, 1, a), 0);
        /* unmasked: safe up to T = P (pairs meet at most once), a leak once classes repeat */
        for (int T = 1; T <= P; T++)
            assert_int_equal(leaked(&d, n, (int[]){0}, 1, T, 0, a), 0);
        int leak = leaked(&d, n, (int[]){0}, 1, 2 * P, 0, a);
        print_message("n %d, P %d: unmasked, site 0 determines %d models after 2P iterations; masked, none after 3P\n", n, P, leak);
        assert_true(leak > 0);
        fed_design_free(&d);
    }
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
            sum += (double)mx / (N / C);
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
        cmocka_unit_test(test_designs_up_to_99), cmocka_unit_test(test_admm_identities), cmocka_unit_test(test_masks_cancel),
        cmocka_unit_test(test_privacy_rank),     cmocka_unit_test(test_partition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
