/* fed_audit.c - the privacy audit of the federated exchange (fed_audit.h). */
#include "workers/fed/fed_audit.h"
#include "common/alloc.h"
#include "common/rng.h"
#include "spec/fed_design.h"
#include "spec/fed_sitekey.h"
#include "workers/fed/mask.h"
#include "workers/fed/memnet.h"
#include "workers/fed/secagg.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SCALE 65536.0 /* the probes' value: coefficients keep ~48 bits through fixed point */
#define ZPAD 48       /* zero coordinates beyond the number of pairs: the GF(2) systems have full rank */
#define AUDIT_JOB "j_privacy_audit"
#define ROW_DROP 1e-8 /* a row left after eliminating the masks is noise below this (relative) */
#define SV_TOL 1e-9   /* singular values below this (relative) span the null space */
#define IN_SPAN 1e-8  /* e_j is in the row space when its squared distance is below this */

static const unsigned char audit_secret[] = "the privacy audit's cluster secret";

/* uniform in [0, 1), 53 bits, from the training library's splitmix64 */
static double uniform(rng_state *r)
{
    return (double)(rng_next(r) >> 11) / 9007199254740992.0;
}

/* ---- one run of the protocol: n sites as threads over memory ---- */

typedef struct {
    int n, T, legacy;
    const fed_design *d;
    size_t D; /* 1 (random secrets) + 2n probes + zero coordinates */
    fed_memnet *hub;
    fed_party *parties;
    double *w, *lam, *samples;                       /* w, lam: n x D */
    unsigned char (*id)[32], (*roster)[32], *pinned; /* each site's identity key; the roster pins the even sites */
    int *rc;
    char (*err)[256];
} run;

typedef struct {
    run *r;
    int i;
} site_arg;

static void *site_main(void *arg)
{
    site_arg *a = arg;
    run *R = a->r;
    int i = a->i;
    size_t D = R->D;
    fed_party *p = &R->parties[i];
    double *lam = xcalloc(D, sizeof(double)), *z = xcalloc(D, sizeof(double)), *avg = xcalloc(D, sizeof(double));
    double *x = xcalloc(D, sizeof(double)), *m = xcalloc(D, sizeof(double));
    memcpy(lam, R->lam + (size_t)i * D, sizeof(double) * D);
    fed_admm_params P = {0.1, 0.9, 2}; /* the job's defaults */
    int rc = fed_party_init(p, fed_memnet_endpoint(R->hub, i), R->n, i, AUDIT_JOB, 0, audit_secret, sizeof audit_secret - 1, R->d,
                            D, 60000)
                 ? FED_BROKEN
                 : FED_OK;
    p->legacy = R->legacy;
    if (rc == FED_OK && fed_party_identity(p, (const unsigned char(*)[32])R->roster, R->pinned, R->id[i])) rc = FED_BROKEN;
    if (rc == FED_OK) rc = fed_party_setup(p, R->samples[i], R->err[i], sizeof R->err[i]);
    if (rc == FED_OK) rc = fed_party_round(p, R->w + (size_t)i * D, lam, &P, R->T, 0, z, avg, x, m, R->err[i], sizeof R->err[i]);
    R->rc[i] = rc;
    free(lam), free(z), free(avg), free(x), free(m);
    return NULL;
}

static int run_protocol(run *R, uint64_t seed, char *err, size_t errlen)
{
    int n = R->n;
    size_t D = R->D;
    R->hub = fed_memnet_new(1);
    R->parties = xcalloc((size_t)n, sizeof(fed_party));
    R->w = xcalloc((size_t)n * D, sizeof(double)), R->lam = xcalloc((size_t)n * D, sizeof(double));
    R->samples = xcalloc((size_t)n, sizeof(double));
    R->rc = xcalloc((size_t)n, sizeof(int));
    R->err = xcalloc((size_t)n, sizeof(*R->err));
    R->id = xcalloc((size_t)n, 32), R->roster = xcalloc((size_t)n, 32), R->pinned = xcalloc((size_t)n, 1);
    for (int i = 0; i < n; i++) { /* a mixed roster (not for the legacy exchange, which sends in the clear) */
        if (fed_sitekey_generate(R->id[i]) || fed_sitekey_public(R->id[i], R->roster[i])) {
            snprintf(err, errlen, "cannot make an Ed25519 key");
            return -1;
        }
        R->pinned[i] = !R->legacy && i % 2 == 0;
    }
    rng_state rng = {seed};
    for (int i = 0; i < n; i++) {
        double *w = R->w + (size_t)i * D, *l = R->lam + (size_t)i * D;
        w[0] = 2 * uniform(&rng) - 1, l[0] = 0.1 * uniform(&rng) - 0.05; /* coordinate 0: secrets as a job's */
        w[1 + i] = SCALE;                                                /* probes: w_i */
        l[1 + n + i] = SCALE;                                            /* and lambda_i */
        R->samples[i] = (double)(500 + rng_next(&rng) % 5000);
    }
    pthread_t *th = xcalloc((size_t)n, sizeof(pthread_t));
    site_arg *args = xcalloc((size_t)n, sizeof(site_arg));
    for (int i = 0; i < n; i++) {
        args[i] = (site_arg){R, i};
        pthread_create(&th[i], NULL, site_main, &args[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    free(th), free(args);
    for (int i = 0; i < n; i++)
        if (R->rc[i] != FED_OK) {
            snprintf(err, errlen, "n %d T %d: site %d: %s", n, R->T, i, R->err[i]);
            return -1;
        }
    return 0;
}

static void run_free(run *R)
{
    for (int i = 0; R->parties && i < R->n; i++)
        fed_party_free(&R->parties[i]);
    fed_memnet_free(R->hub);
    free(R->parties), free(R->w), free(R->lam), free(R->samples), free(R->rc), free(R->err);
    free(R->id), free(R->roster), free(R->pinned);
}

/* ---- what each message is ---- */

enum { K_OPAQUE, K_PUBLIC, K_KEYMAT, K_VECTOR, K_MODELFREE };

typedef struct {
    int kind, opener, keymat; /* opener: the key that opens it (-1: in the clear); keymat: the key it carries */
    uint32_t exchange;
    double *coef; /* 2n: the value's coefficients on w_0..w_{n-1}, lambda_0..lambda_{n-1} */
    int nm;       /* the masks in it: pair and sign */
    int *mp;
    signed char *ms;
    unsigned char *plain;
    size_t plen;
} msginfo;

/* GF(2) solver for one exchange: for column p, which zero coordinates add up to its unknown */
typedef struct {
    int np, nz, wz;
    uint64_t *track; /* np x wz */
} gf2;

static int gf2_build(gf2 *g, uint64_t *const *mu, int np, size_t z0, int nz)
{
    int wp = (np + 63) / 64, wz = (nz + 63) / 64;
    uint64_t *rows = xcalloc((size_t)nz * (size_t)wp, 8), *tr = xcalloc((size_t)nz * (size_t)wz, 8);
    for (int r = 0; r < nz; r++) {
        for (int p = 0; p < np; p++)
            if (mu[p][z0 + (size_t)r] & 1) rows[(size_t)r * wp + p / 64] |= 1ULL << (p % 64);
        tr[(size_t)r * wz + r / 64] |= 1ULL << (r % 64);
    }
    int rank = 0, ok = 1;
    int *piv = xcalloc((size_t)np, sizeof(int));
    for (int p = 0; p < np && ok; p++) {
        int r = rank;
        while (r < nz && !(rows[(size_t)r * wp + p / 64] >> (p % 64) & 1))
            r++;
        if (r == nz) {
            ok = 0;
            break;
        }
        if (r != rank)
            for (int k = 0; k < wp; k++) {
                uint64_t t = rows[(size_t)r * wp + k];
                rows[(size_t)r * wp + k] = rows[(size_t)rank * wp + k], rows[(size_t)rank * wp + k] = t;
            }
        if (r != rank)
            for (int k = 0; k < wz; k++) {
                uint64_t t = tr[(size_t)r * wz + k];
                tr[(size_t)r * wz + k] = tr[(size_t)rank * wz + k], tr[(size_t)rank * wz + k] = t;
            }
        for (int r2 = 0; r2 < nz; r2++)
            if (r2 != rank && (rows[(size_t)r2 * wp + p / 64] >> (p % 64) & 1)) {
                for (int k = 0; k < wp; k++)
                    rows[(size_t)r2 * wp + k] ^= rows[(size_t)rank * wp + k];
                for (int k = 0; k < wz; k++)
                    tr[(size_t)r2 * wz + k] ^= tr[(size_t)rank * wz + k];
            }
        piv[p] = rank++;
    }
    g->np = np, g->nz = nz, g->wz = wz;
    g->track = xcalloc((size_t)np * (size_t)wz, 8);
    for (int p = 0; ok && p < np; p++)
        memcpy(g->track + (size_t)p * wz, tr + (size_t)piv[p] * wz, (size_t)wz * 8);
    free(rows), free(tr), free(piv);
    return ok ? 0 : -1;
}

/* x (np bits as bytes) from the right-hand side b (nz bits) */
static void gf2_solve(const gf2 *g, const uint64_t *b, unsigned char *x)
{
    for (int p = 0; p < g->np; p++) {
        uint64_t acc = 0;
        for (int k = 0; k < g->wz; k++)
            acc ^= g->track[(size_t)p * g->wz + k] & b[k];
        x[p] = (unsigned char)(__builtin_popcountll(acc) & 1);
    }
}

typedef struct {
    int n, np;
    size_t D;
    const run *R;
} ctx_t;

/* a plaintext vector as pair masks plus a linear function of the secrets; 0, or -1 (not of that form) */
static int decompose(const ctx_t *C, uint64_t *const *mu, const gf2 *g, const uint64_t *v, msginfo *mi, char *why, size_t wl)
{
    int n = C->n, np = C->np, nz = g->nz;
    size_t z0 = 1 + 2 * (size_t)n, D = C->D;
    uint64_t *b = xcalloc((size_t)g->wz, 8);
    unsigned char *inS = xcalloc((size_t)np, 1), *inN = xcalloc((size_t)np, 1);
    for (int r = 0; r < nz; r++)
        if (v[z0 + (size_t)r] & 1) b[r / 64] |= 1ULL << (r % 64);
    gf2_solve(g, b, inS);
    memset(b, 0, (size_t)g->wz * 8);
    int ok = 1;
    for (int r = 0; r < nz && ok; r++) {
        uint64_t q = v[z0 + (size_t)r];
        for (int p = 0; p < np; p++)
            if (inS[p]) q -= mu[p][z0 + (size_t)r];
        if (q & 1) ok = 0;
        if (q >> 1 & 1) b[r / 64] |= 1ULL << (r % 64);
    }
    if (ok) gf2_solve(g, b, inN);
    for (int p = 0; ok && p < np; p++)
        if (inN[p] && !inS[p]) ok = 0;
    mi->nm = 0;
    mi->mp = xcalloc((size_t)np, sizeof(int)), mi->ms = xcalloc((size_t)np, 1);
    for (int p = 0; ok && p < np; p++)
        if (inS[p]) mi->mp[mi->nm] = p, mi->ms[mi->nm++] = inN[p] ? -1 : 1;
    uint64_t *res = xcalloc(D, 8);
    for (size_t c = 0; ok && c < D; c++) {
        uint64_t s = v[c];
        for (int k = 0; k < mi->nm; k++)
            s -= mi->ms[k] > 0 ? mu[mi->mp[k]][c] : (uint64_t)0 - mu[mi->mp[k]][c];
        res[c] = s;
        if (c >= z0 && s != 0) ok = 0;
    }
    if (!ok) snprintf(why, wl, "not a sum of +/- pair masks on the zero coordinates");
    mi->coef = xcalloc(2 * (size_t)n, sizeof(double));
    int modelfree = 1;
    for (int j = 0; ok && j < 2 * n; j++) {
        mi->coef[j] = fed_decode(res[1 + j]) / SCALE;
        if (fabs(mi->coef[j]) > 1e-9) modelfree = 0;
    }
    if (ok && !modelfree) { /* coordinate 0: the same linear function of the random secrets */
        double v0 = fed_decode(res[0]), pred = 0;
        for (int j = 0; j < n; j++)
            pred += mi->coef[j] * C->R->w[(size_t)j * D] + mi->coef[n + j] * C->R->lam[(size_t)j * D];
        if (fabs(v0 - pred) > 1e-6 * (1 + fabs(v0))) {
            snprintf(why, wl, "its value (%.9g) is not the linear function of the secrets its probes say (%.9g)", v0, pred);
            ok = 0;
        }
    }
    mi->kind = modelfree ? K_MODELFREE : K_VECTOR;
    free(b), free(inS), free(inN), free(res);
    return ok ? 0 : -1;
}

/* ---- rank ---- */

/* for each target column, whether its unit vector is in the row space of A (m x k, row-major; destroyed) */
static void in_row_space(double *A, int m, int k, const int *targets, int nt, int *out)
{
    int r = m < k ? m : k;
    for (int c = 0; c < r; c++) { /* Householder QR: R in the top rows */
        double norm = 0;
        for (int i = c; i < m; i++)
            norm += A[(size_t)i * k + c] * A[(size_t)i * k + c];
        norm = sqrt(norm);
        if (norm == 0) continue;
        double alpha = A[(size_t)c * k + c] > 0 ? -norm : norm;
        double *v = xcalloc((size_t)m, sizeof(double)), beta = 0;
        for (int i = c; i < m; i++)
            v[i] = A[(size_t)i * k + c];
        v[c] -= alpha;
        for (int i = c; i < m; i++)
            beta += v[i] * v[i];
        for (int c2 = c; beta > 0 && c2 < k; c2++) {
            double s = 0;
            for (int i = c; i < m; i++)
                s += v[i] * A[(size_t)i * k + c2];
            s = 2 * s / beta;
            for (int i = c; i < m; i++)
                A[(size_t)i * k + c2] -= s * v[i];
        }
        free(v);
    }
    /* one-sided Jacobi on the columns of R (r x k): B V = U S */
    double *V = xcalloc((size_t)k * k, sizeof(double));
    for (int i = 0; i < k; i++)
        V[(size_t)i * k + i] = 1;
    for (int sweep = 0; sweep < 60; sweep++) {
        double off = 0;
        for (int p = 0; p < k; p++)
            for (int q = p + 1; q < k; q++) {
                double a = 0, b = 0, g = 0;
                for (int i = 0; i < r; i++) {
                    double x = A[(size_t)i * k + p], y = A[(size_t)i * k + q];
                    a += x * x, b += y * y, g += x * y;
                }
                if (g == 0 || fabs(g) <= 1e-15 * sqrt(a * b)) continue;
                off = fmax(off, fabs(g) / sqrt(a * b));
                double zeta = (b - a) / (2 * g), t = (zeta >= 0 ? 1 : -1) / (fabs(zeta) + sqrt(1 + zeta * zeta));
                double cs = 1 / sqrt(1 + t * t), sn = cs * t;
                for (int i = 0; i < r; i++) {
                    double x = A[(size_t)i * k + p], y = A[(size_t)i * k + q];
                    A[(size_t)i * k + p] = cs * x - sn * y, A[(size_t)i * k + q] = sn * x + cs * y;
                }
                for (int i = 0; i < k; i++) {
                    double x = V[(size_t)i * k + p], y = V[(size_t)i * k + q];
                    V[(size_t)i * k + p] = cs * x - sn * y, V[(size_t)i * k + q] = sn * x + cs * y;
                }
            }
        if (off < 1e-15) break;
    }
    double *sv = xcalloc((size_t)k, sizeof(double)), smax = 0;
    for (int c = 0; c < k; c++) {
        for (int i = 0; i < r; i++)
            sv[c] += A[(size_t)i * k + c] * A[(size_t)i * k + c];
        sv[c] = sqrt(sv[c]);
        smax = fmax(smax, sv[c]);
    }
    for (int t = 0; t < nt; t++) { /* the squared length of e_j's part in the null space */
        double d = 0;
        for (int c = 0; c < k; c++)
            if (m == 0 || sv[c] <= SV_TOL * smax) d += V[(size_t)targets[t] * k + c] * V[(size_t)targets[t] * k + c];
        out[t] = d < IN_SPAN;
    }
    free(V), free(sv);
}

/* ---- one observer's view ---- */

typedef struct {
    double *a; /* rows x (np + 2n) */
    int rows, cap;
} rowset;

static void row_add(rowset *s, int width, const double *row)
{
    if (s->rows == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->a = xrealloc(s->a, sizeof(double) * (size_t)s->cap * (size_t)width);
    }
    memcpy(s->a + (size_t)s->rows++ * width, row, sizeof(double) * (size_t)width);
}

/* how many of the other sites' models the observers' view determines */
static int observe(const ctx_t *C, const msginfo *mi, size_t nmsg, const int *pa, const int *pb, const int *obs, int nobs,
                   int *opened)
{
    int n = C->n, np = C->np, k = 2 * n, width = np + k;
    unsigned char *know = xcalloc((size_t)np + 1, 1), in[256] = {0};
    for (int o = 0; o < nobs; o++)
        in[obs[o]] = 1;
    for (int p = 0; p < np; p++)
        know[p] = in[pa[p]] || in[pb[p]];
    for (int changed = 1; changed;) { /* keys carried by messages it can open */
        changed = 0;
        for (size_t i = 0; i < nmsg; i++)
            if (mi[i].kind == K_KEYMAT && (mi[i].opener < 0 || know[mi[i].opener]) && !know[mi[i].keymat])
                know[mi[i].keymat] = 1, changed = 1;
    }
    *opened = 0;
    rowset out = {0};
    uint32_t maxe = 0;
    for (size_t i = 0; i < nmsg; i++)
        if (mi[i].exchange > maxe) maxe = mi[i].exchange;
    double *row = xcalloc((size_t)width, sizeof(double));
    for (uint32_t e = 0; e <= maxe; e++) {
        rowset ex = {0};
        double scale = 0;
        for (size_t i = 0; i < nmsg; i++) {
            if (mi[i].exchange != e || mi[i].kind == K_OPAQUE || mi[i].kind == K_PUBLIC) continue;
            if (mi[i].opener >= 0 && !know[mi[i].opener]) continue;
            if (e == mi[i].exchange && mi[i].opener >= 0) ++*opened;
            if (mi[i].kind != K_VECTOR) continue;
            memset(row, 0, sizeof(double) * (size_t)width);
            for (int m = 0; m < mi[i].nm; m++)
                if (!know[mi[i].mp[m]]) row[mi[i].mp[m]] = mi[i].ms[m];
            double nr = 0;
            for (int j = 0; j < k; j++)
                row[np + j] = mi[i].coef[j], nr += mi[i].coef[j] * mi[i].coef[j];
            scale = fmax(scale, sqrt(nr));
            row_add(&ex, width, row);
        }
        /* eliminate the masks it does not know: a row that keeps one tells nothing */
        int *alive = xcalloc((size_t)ex.rows + 1, sizeof(int));
        for (int r = 0; r < ex.rows; r++)
            alive[r] = 1;
        for (int c = 0; c < np; c++) {
            int piv = -1;
            for (int r = 0; r < ex.rows; r++)
                if (alive[r] && fabs(ex.a[(size_t)r * width + c]) > 1e-9 &&
                    (piv < 0 || fabs(ex.a[(size_t)r * width + c]) > fabs(ex.a[(size_t)piv * width + c])))
                    piv = r;
            if (piv < 0) continue;
            double *pr = ex.a + (size_t)piv * width;
            for (int r = 0; r < ex.rows; r++) {
                double *rr = ex.a + (size_t)r * width;
                if (!alive[r] || r == piv || rr[c] == 0) continue;
                double f = rr[c] / pr[c];
                for (int j = 0; j < width; j++)
                    rr[j] -= f * pr[j];
                rr[c] = 0;
            }
            alive[piv] = 0;
        }
        for (int r = 0; r < ex.rows; r++) {
            if (!alive[r]) continue;
            double *rr = ex.a + (size_t)r * width, nr = 0;
            for (int j = 0; j < k; j++)
                nr += rr[np + j] * rr[np + j];
            nr = sqrt(nr);
            if (nr <= ROW_DROP * scale || nr == 0) continue;
            memset(row, 0, sizeof(double) * (size_t)width);
            for (int j = 0; j < k; j++)
                row[j] = rr[np + j] / nr;
            row_add(&out, k, row);
        }
        free(alive), free(ex.a);
    }
    for (int o = 0; o < nobs; o++) { /* its own secrets */
        memset(row, 0, sizeof(double) * (size_t)k);
        row[obs[o]] = 1;
        row_add(&out, k, row);
        memset(row, 0, sizeof(double) * (size_t)k);
        row[n + obs[o]] = 1;
        row_add(&out, k, row);
    }
    int targets[256], nt = 0, det[256], count = 0;
    for (int j = 0; j < n; j++)
        if (!in[j]) targets[nt++] = j;
    in_row_space(out.a, out.rows, k, targets, nt, det);
    for (int t = 0; t < nt; t++)
        count += det[t];
    free(row), free(out.a), free(know);
    return count;
}

/* ---- the audit ---- */

/* every coalition of c sites (c < n) as one observer: its members' keys and secrets pooled */
static void audit_coalitions(const ctx_t *C, const msginfo *mi, size_t nmsg, const int *pa, const int *pb, int c, int T,
                             const fed_audit_opts *o, fed_audit_result *res)
{
    int n = C->n, obs[FED_AUDIT_MAX_COALITION];
    if (c < 2 || c > FED_AUDIT_MAX_COALITION || c >= n) return;
    for (int k = 0; k < c; k++)
        obs[k] = k;
    for (;;) {
        int opened = 0, det = observe(C, mi, nmsg, pa, pb, obs, c, &opened);
        res->views++;
        *(c == 2 ? &res->coalition : &res->coalition3) += det;
        if (o->out) {
            char who[64];
            size_t w = 0;
            for (int k = 0; k < c; k++)
                w += (size_t)snprintf(who + w, sizeof who - w, "%s%d", k ? "+" : "", obs[k]);
            fprintf(o->out, "n=%d T=%d sites %s: %d of %d other models determined (opens %d messages)\n", n, T, who, det, n - c,
                    opened);
        }
        int k = c - 1; /* the next combination, in lexicographic order */
        while (k >= 0 && obs[k] == n - c + k)
            k--;
        if (k < 0) return;
        obs[k]++;
        for (int j = k + 1; j < c; j++)
            obs[j] = obs[j - 1] + 1;
    }
}

static void msginfo_free(msginfo *m)
{
    free(m->coef), free(m->mp), free(m->ms), free(m->plain);
}

/* runs the protocol for (n, T), explains every message, reports every observer; -1 with err */
static int audit_one(int n, int T, const fed_design *d, const fed_audit_opts *o, fed_audit_result *res, char *err, size_t errlen)
{
    int np = n * (n - 1) / 2;
    size_t D = 1 + 2 * (size_t)n + (size_t)np + ZPAD;
    run R = {.n = n, .T = T, .legacy = o->legacy, .d = d, .D = D};
    int rc = run_protocol(&R, 0x5eed0000ULL + (uint64_t)n * 1000 + (uint64_t)T, err, errlen);
    int *pa = xcalloc((size_t)np, sizeof(int)), *pb = xcalloc((size_t)np, sizeof(int));
    unsigned char(*keys)[32] = xcalloc((size_t)np + 1, 32);
    for (int a = 0, p = 0; a < n; a++)
        for (int b = a + 1; b < n; b++, p++) {
            pa[p] = a, pb[p] = b;
            memcpy(keys[p], R.parties[a].akey[b], 32);
            if (rc == 0 && (memcmp(R.parties[a].akey[b], R.parties[b].akey[a], 32) ||
                            memcmp(R.parties[a].mkey[b], R.parties[b].mkey[a], 32))) {
                snprintf(err, errlen, "n %d: sites %d and %d derived different pair keys", n, a, b);
                rc = -1;
            }
        }
    memcpy(keys[np], R.parties[0].bkey, 32);
    size_t nmsg = rc == 0 ? fed_memnet_count(R.hub) : 0;
    msginfo *mi = xcalloc(nmsg, sizeof(msginfo));
    ctx_t C = {n, np, D, &R};
    int clear_keys = 0, sealed = 0, sigs = 0;
    double bytes = 0;
    /* open and classify; vectors wait for their exchange's masks */
    for (size_t i = 0; i < nmsg && rc == 0; i++) {
        const fed_memnet_msg *m = fed_memnet_at(R.hub, i);
        fed_hdr h;
        bytes += (double)m->blob.len;
        mi[i].opener = -1, mi[i].kind = K_OPAQUE;
        if (fed_hdr_parse(m->blob.data, m->blob.len, &h)) {
            snprintf(err, errlen, "n %d T %d: message %zu on %s has no header", n, T, i, m->chan);
            rc = -1;
            break;
        }
        mi[i].exchange = h.exchange;
        mi[i].plain = xcalloc(m->blob.len, 1);
        /* a pinned sender's signature (public: it tells what its key signed, which is the message) */
        size_t blen = m->blob.len;
        if (h.type != FED_MSG_HELLO && h.recipient == FED_TO_ALL && h.sender < n && R.pinned[h.sender]) {
            if (!(blen = fed_bcast_unsign(&R.parties[0], m->blob.data, m->blob.len))) {
                snprintf(err, errlen, "n %d T %d: message %zu on %s from site %d is not signed by its roster key", n, T, i, m->chan,
                         h.sender);
                rc = -1;
                break;
            }
            sigs++;
        }
        int first = h.recipient == FED_TO_ALL ? np : -1; /* the key its header suggests, then every key */
        if (h.recipient < n && h.sender < n && h.recipient != h.sender) {
            int a = h.sender < h.recipient ? h.sender : h.recipient, b = h.sender ^ h.recipient ^ a;
            first = a * n - a * (a + 1) / 2 + (b - a - 1);
        }
        long pl = -1;
        if (first >= 0) pl = fed_msg_open(keys[first], AUDIT_JOB, 0, m->blob.data, blen, mi[i].plain);
        if (pl >= 0) mi[i].opener = first;
        for (int k = 0; pl < 0 && k <= np; k++)
            if (k != first && (pl = fed_msg_open(keys[k], AUDIT_JOB, 0, m->blob.data, blen, mi[i].plain)) >= 0) mi[i].opener = k;
        if (pl >= 0) {
            sealed++;
            mi[i].plen = (size_t)pl;
            if (pl == 32) {
                mi[i].kind = K_KEYMAT, mi[i].keymat = -1;
                for (int k = 0; k <= np; k++)
                    if (memcmp(keys[k], mi[i].plain, 32) == 0) mi[i].keymat = k;
                if (mi[i].keymat < 0) {
                    snprintf(err, errlen, "n %d T %d: message %zu on %s carries 32 bytes that are no key of the run", n, T, i,
                             m->chan);
                    rc = -1;
                }
            } else if ((size_t)pl == D * 8) {
                mi[i].kind = K_VECTOR; /* decomposed below */
            } else {
                snprintf(err, errlen, "n %d T %d: message %zu on %s opens to %ld bytes the audit cannot explain", n, T, i, m->chan,
                         pl);
                rc = -1;
            }
        } else if (h.type == FED_MSG_HELLO && (blen == FED_HELLO_LEN || blen == FED_HELLO_LEN + FED_SIG_LEN)) {
            mi[i].kind = K_PUBLIC, clear_keys++;
            if (h.sender >= n || memcmp(m->blob.data + FED_HDR_LEN, R.parties[h.sender].pub[h.sender], 32) != 0 ||
                fed_hello_check(&R.parties[0], h.sender, m->blob.data, blen) != 0) {
                snprintf(err, errlen, "n %d T %d: a public key message that is not its sender's key, authenticated", n, T);
                rc = -1;
            }
            sigs += blen > FED_HELLO_LEN;
        } else { /* in the clear if it reads as a masked vector (checked below), else opaque */
            size_t body = blen - FED_HDR_LEN;
            if (body == D * 8 || body == D * 8 + FED_TAG_LEN) {
                memcpy(mi[i].plain, m->blob.data + FED_HDR_LEN, D * 8);
                mi[i].plen = D * 8, mi[i].kind = K_VECTOR, mi[i].opener = -2; /* -2: to try */
            } else {
                sealed++;
            }
        }
    }
    /* decompose the vectors, exchange by exchange */
    uint32_t maxe = 0;
    for (size_t i = 0; i < nmsg; i++)
        if (mi[i].kind == K_VECTOR && mi[i].exchange > maxe) maxe = mi[i].exchange;
    uint64_t **mu = xcalloc((size_t)np, sizeof(uint64_t *));
    for (int p = 0; p < np; p++)
        mu[p] = xcalloc(D, 8);
    for (uint32_t e = 0; e <= maxe && rc == 0; e++) {
        int any = 0;
        for (size_t i = 0; i < nmsg; i++)
            any |= mi[i].kind == K_VECTOR && mi[i].exchange == e;
        if (!any) continue;
        for (int p = 0; p < np; p++) { /* every pair's mask stream of exchange e */
            memset(mu[p], 0, D * 8);
            fed_mask(mu[p], D, R.parties[pa[p]].mkey[pb[p]], 1, e, 0);
        }
        gf2 g;
        if (gf2_build(&g, mu, np, 1 + 2 * (size_t)n, np + ZPAD)) {
            snprintf(err, errlen, "n %d: the mask streams of exchange %u are not independent over GF(2)", n, e);
            rc = -1;
            break;
        }
        for (size_t i = 0; i < nmsg && rc == 0; i++) {
            if (mi[i].kind != K_VECTOR || mi[i].exchange != e) continue;
            char why[200];
            uint64_t *v = xcalloc(D, 8);
            memcpy(v, mi[i].plain, D * 8);
            int dec = decompose(&C, mu, &g, v, &mi[i], why, sizeof why);
            free(v);
            if (mi[i].opener == -2) { /* no key opens it: in the clear, or opaque */
                if (dec == 0)
                    mi[i].opener = -1;
                else
                    mi[i].kind = K_OPAQUE, mi[i].opener = -1, sealed++;
            } else if (dec) {
                snprintf(err, errlen, "n %d T %d: message %zu on %s (exchange %u): %s", n, T, i, fed_memnet_at(R.hub, i)->chan, e,
                         why);
                rc = -1;
            }
        }
        free(g.track);
    }
    for (int p = 0; p < np; p++)
        free(mu[p]);
    free(mu);
    int clear_vectors = 0;
    for (size_t i = 0; i < nmsg; i++)
        clear_vectors += (mi[i].kind == K_VECTOR || mi[i].kind == K_MODELFREE) && mi[i].opener == -1;
    if (rc == 0 && o->out)
        fprintf(o->out,
                "n=%d T=%d: %zu messages (%.0f bytes) in Redis: %d public keys with their tags and %d masked vectors in "
                "the clear, %d sealed; %d signed by the roster's keys (sites 0, 2, 4, ... pinned)\n",
                n, T, nmsg, bytes, clear_keys, clear_vectors, sealed, sigs);
    /* the observers: Redis, each site, then every coalition of c sites for c = 2 .. its largest */
    for (int kind = 0; kind < 2 && rc == 0; kind++)
        for (int q = 0; q < (kind == 0 ? 1 : n); q++) {
            int opened = 0, det = observe(&C, mi, nmsg, pa, pb, &q, kind, &opened);
            res->views++, res->single += det;
            if (o->out && kind == 0)
                fprintf(o->out, "n=%d T=%d redis: %d of %d models determined (opens %d messages)\n", n, T, det, n, opened);
            else if (o->out)
                fprintf(o->out, "n=%d T=%d site %d: %d of %d other models determined (opens %d messages)\n", n, T, q, det, n - 1,
                        opened);
        }
    for (int c = 2; c <= FED_AUDIT_MAX_COALITION && rc == 0; c++)
        if (n <= (c == 2 ? o->coalitions_upto : o->coalitions3_upto) && c < n) audit_coalitions(&C, mi, nmsg, pa, pb, c, T, o, res);
    for (size_t i = 0; i < nmsg; i++)
        msginfo_free(&mi[i]);
    free(mi), free(pa), free(pb), free(keys);
    run_free(&R);
    return rc;
}

/* d's classes regrouped at random: n / 3 groups of consecutive sites in a shuffled order, the last one taking the
 * one or two left over; the number of classes kept */
static void randomize_groups(fed_design *d)
{
    int n = d->n, perm[FED_PARTY_MAX], ng = n / 3;
    rng_state r;
    rng_seed(&r, (uint64_t)n);
    for (int c = 0; c < d->classes; c++) {
        for (int i = 0; i < n; i++)
            perm[i] = i;
        for (int i = n - 1; i > 0; i--) {
            int j = (int)rng_below(&r, (uint64_t)i + 1), t = perm[i];
            perm[i] = perm[j], perm[j] = t;
        }
        for (int k = 0; k < n; k++)
            d->group[c * n + perm[k]] = k / 3 < ng ? k / 3 : ng - 1;
        d->ngroups[c] = ng;
    }
    snprintf(d->kind, sizeof d->kind, "random groups of 3");
    d->exact = 0;
}

int fed_audit(const int *sizes, int nsizes, const fed_audit_opts *o, fed_audit_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof(*res));
    for (int s = 0; s < nsizes; s++) {
        int n = sizes[s];
        fed_design d;
        if (n < 3 || n > FED_PARTY_MAX) {
            snprintf(err, errlen, "the audit takes 3 to %d sites, not %d", FED_PARTY_MAX, n);
            return -1;
        }
        if (fed_design_make(n, &d, err, errlen)) return -1;
        if (o->random_groups) randomize_groups(&d);
        int t_max = o->t_max > 0 ? o->t_max : 3 * d.classes, t_min = o->t_min > 0 ? o->t_min : 1;
        if (o->out)
            fprintf(o->out, "n=%d: design %s, P = %d; T = %d .. %d; %s\n", n, d.kind, d.classes, t_min, t_max,
                    o->legacy ? "the exchange before issue 18 (group masks, every message readable)"
                              : "masks over all sites, sealed messages");
        for (int T = t_min; T <= t_max; T++)
            if (audit_one(n, T, &d, o, res, err, errlen)) {
                fed_design_free(&d);
                return -1;
            }
        fed_design_free(&d);
    }
    return 0;
}
