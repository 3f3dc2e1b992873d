/* fed_audit_drop.c - the privacy audit of the dropout path (fed_audit_drop.h). */
#include "workers/fed/fed_audit_drop.h"
#include "common/alloc.h"
#include "spec/fed_design.h"
#include "workers/fed/mask.h"
#include "workers/fed/memnet.h"
#include "workers/fed/secagg_drop.h"
#include "workers/fed/secagg.h"
#include "workers/fed/shamir.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DJOB "j_privacy_audit_drop"
#define DDIM 16
#define CLOSE_MS 300

static const unsigned char dsecret[] = "the dropout audit's cluster secret";

typedef struct {
    int n, t;
    fed_memnet *hub;
    fed_party *p;
    double (*v)[DDIM], *a;
    unsigned char (*spriv)[32], (*b)[32]; /* each site's latest round secrets (the hook) */
    unsigned char (*akey)[FED_PARTY_MAX][32], (*bkey)[32];
    uint32_t *e;
    fed_drop_report *rep;
    int *rc;
    char (*err)[256];
} drun;

typedef struct {
    drun *R;
    int i;
} darg;

static void hook(void *arg, int me, uint32_t e, const unsigned char spriv[32], const unsigned char b[32])
{
    drun *R = arg;
    memcpy(R->spriv[me], spriv, 32), memcpy(R->b[me], b, 32);
    R->e[me] = e;
}

static void *dsite(void *arg)
{
    darg *a = arg;
    drun *R = a->R;
    int i = a->i;
    fed_party *p = &R->p[i];
    double total[DDIM];
    int rc = fed_party_setup(p, 100 + 37 * i, R->err[i], sizeof R->err[i]);
    R->a[i] = p->a;
    memcpy(R->akey[i], p->akey, sizeof p->akey), memcpy(R->bkey[i], p->bkey, 32);
    fed_drop_opts o = {R->t, CLOSE_MS, 0, 0};
    if (rc == FED_OK) rc = fed_party_sum_drop(p, &o, R->v[i], p->a, total, &R->rep[i], R->err[i], sizeof R->err[i]);
    R->rc[i] = rc;
    return NULL;
}

/* what one observer (the sites in obs; 0: Redis) determines of the other sites' inputs in exchange e */
static int observe(const drun *R, uint32_t e, uint64_t u1, uint64_t u2, uint64_t obs, int *determined, char *err, size_t errlen)
{
    int n = R->n, t = R->t, any = -1;
    for (int o = 0; o < n; o++)
        if (obs >> o & 1) any = o;
    size_t len = (DDIM + 1) * 8, rl = (size_t)n * FED_REVEAL_ENTRY;
    unsigned char spub[FED_PARTY_MAX][32] = {{0}}, hb[FED_PARTY_MAX][32] = {{0}}, sk[FED_PARTY_MAX][32], bk[FED_PARTY_MAX][32];
    unsigned char sh[2][FED_PARTY_MAX][FED_PARTY_MAX][32]; /* [s or b][site][holder] */
    uint64_t have[2][FED_PARTY_MAX] = {{0}}, known[2] = {0}, ysent = 0;
    unsigned char *plain = xmalloc(len + rl + 64);
    uint64_t(*y)[DDIM + 1] = xcalloc(FED_PARTY_MAX, sizeof(*y));
    char dk[32], dy[32], ds[32];
    snprintf(dk, sizeof dk, "dk:%u", e), snprintf(dy, sizeof dy, "dy:%u", e), snprintf(ds, sizeof ds, "ds:%u", e);
    for (size_t q = 0; q < fed_memnet_count(R->hub); q++) {
        const fed_memnet_msg *m = fed_memnet_at(R->hub, q);
        fed_hdr h;
        if (fed_hdr_parse(m->blob.data, m->blob.len, &h) || h.sender >= n) continue;
        int s = h.sender;
        if (!strcmp(m->chan, dk) && m->blob.len == FED_DKEY_HEAD + (size_t)(n - 1) * FED_DKEY_SHARE) {
            memcpy(spub[s], m->blob.data + FED_HDR_LEN, 32), memcpy(hb[s], m->blob.data + FED_HDR_LEN + 64, 32);
            for (int o = 0; o < n; o++) { /* the shares sealed to an observer */
                if (!(obs >> o & 1) || o == s) continue;
                const unsigned char *at = m->blob.data + FED_DKEY_HEAD + (size_t)(o < s ? o : o - 1) * FED_DKEY_SHARE;
                if (fed_msg_open(R->akey[o][s], DJOB, 0, at, FED_DKEY_SHARE, plain) != 64) continue;
                memcpy(sh[0][s][o], plain, 32), memcpy(sh[1][s][o], plain + 32, 32);
                have[0][s] |= UINT64_C(1) << o, have[1][s] |= UINT64_C(1) << o;
            }
        } else if (any >= 0 && !strcmp(m->chan, dy) &&
                   fed_msg_open(R->bkey[any], DJOB, 0, m->blob.data, m->blob.len, plain) == (long)len) {
            if (!(ysent >> s & 1)) memcpy(y[s], plain, len);
            ysent |= UINT64_C(1) << s;
        } else if (any >= 0 && !strcmp(m->chan, ds) &&
                   fed_msg_open(R->bkey[any], DJOB, 0, m->blob.data, m->blob.len, plain) == (long)rl) {
            for (int j = 0; j < n; j++) {
                const unsigned char *at = plain + (size_t)j * FED_REVEAL_ENTRY;
                int kind = at[0] == FED_REVEAL_PAIR ? 0 : at[0] == FED_REVEAL_SELF ? 1 : -1;
                if (kind < 0) continue;
                memcpy(sh[kind][j][s], at + 1, 32);
                have[kind][j] |= UINT64_C(1) << s;
            }
        }
    }
    /* the secrets the observer holds or rebuilds from t shares (checked against the published key and hash) */
    for (int j = 0; j < n; j++) {
        if (obs >> j & 1) {
            memcpy(sk[j], R->spriv[j], 32), memcpy(bk[j], R->b[j], 32);
            known[0] |= UINT64_C(1) << j, known[1] |= UINT64_C(1) << j;
            continue;
        }
        for (int kind = 0; kind < 2; kind++) {
            int xs[FED_PARTY_MAX], k = 0;
            const unsigned char *parts[FED_PARTY_MAX];
            for (int o = 0; o < n && k < t; o++)
                if (have[kind][j] >> o & 1) xs[k] = o + 1, parts[k++] = sh[kind][j][o];
            unsigned char sec[32], chk[32];
            if (k < t || fed_shamir_combine(xs, parts, k, 32, sec)) continue;
            int ok;
            if (kind == 1) {
                SHA256(sec, 32, chk);
                ok = CRYPTO_memcmp(chk, hb[j], 32) == 0;
            } else {
                EVP_PKEY *pk = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, sec, 32);
                size_t pl = 32;
                ok = pk && EVP_PKEY_get_raw_public_key(pk, chk, &pl) == 1 && CRYPTO_memcmp(chk, spub[j], 32) == 0;
                EVP_PKEY_free(pk);
            }
            if (!ok) {
                snprintf(err, errlen, "n %d: site %d's %s rebuilt from %d shares does not match what it published", n, j,
                         kind ? "self-mask" : "mask key", t);
                free(plain), free(y);
                return -1;
            }
            memcpy(kind ? bk[j] : sk[j], sec, 32);
            known[kind] |= UINT64_C(1) << j;
        }
    }
    /* every input the observer can unmask, compared with the truth */
    uint64_t det = 0;
    for (int j = 0; j < n; j++) {
        if ((obs >> j & 1) || !(ysent >> j & 1) || !(known[1] >> j & 1)) continue;
        int can = 1;
        for (int k = 0; k < n; k++)
            if (k != j && (u1 >> k & 1) && !(known[0] >> j & 1) && !(known[0] >> k & 1)) can = 0;
        if (!can) continue;
        uint64_t x[DDIM + 1];
        memcpy(x, y[j], len);
        fed_mask(x, DDIM + 1, bk[j], -1, e, 1);
        for (int k = 0; k < n; k++) {
            if (k == j || !(u1 >> k & 1)) continue;
            unsigned char key[32];
            const unsigned char *lo = spub[j < k ? j : k], *hi = spub[j < k ? k : j];
            int rc = (known[0] >> j & 1) ? fed_round_pair_key(&R->p[0], e, sk[j], spub[k], lo, hi, key)
                                         : fed_round_pair_key(&R->p[0], e, sk[k], spub[j], lo, hi, key);
            if (rc == 0) fed_mask(x, DDIM + 1, key, j < k ? -1 : 1, e, 2);
        }
        uint64_t want[DDIM + 1];
        for (int q = 0; q < DDIM; q++) {
            double wv = R->a[j] * R->v[j][q];
            fed_encode(&wv, &want[q], 1);
        }
        fed_encode(&R->a[j], &want[DDIM], 1);
        if (memcmp(x, want, len)) {
            snprintf(err, errlen, "n %d: an observer unmasked site %d's input into something else (an unexplained message)", n, j);
            free(plain), free(y);
            return -1;
        }
        det |= UINT64_C(1) << j;
    }
    /* the total over U2 (every site gets it): with the observers' own inputs, it gives a lone other survivor's */
    if (any >= 0 && __builtin_popcountll(u2 & ~obs) == 1) det |= u2 & ~obs;
    *determined = __builtin_popcountll(det);
    free(plain), free(y);
    return 0;
}

static const struct {
    const char *what;
    int kind, ms, two;
    const char *at;
} scenarios[] = {
    {"nobody dropped", FED_FAULT_NONE, 0, 0, "-"},
    {"site n-1 killed before its input (its masks recovered)", FED_FAULT_KILL, 0, 0, "dy:"},
    {"site n-1 late: its input after the close", FED_FAULT_DELAY, 2 * CLOSE_MS + 200, 0, "dy:"},
    {"site n-1 killed after its input, before its shares", FED_FAULT_KILL, 0, 0, "ds:"},
    {"sites n-2, n-1 killed before their inputs", FED_FAULT_KILL, 0, 1, "dy:"},
};

static int audit_n(int n, int sc, FILE *out, fed_audit_drop_result *res, char *err, size_t errlen)
{
    drun R = {.n = n, .t = fed_drop_threshold_default(n)};
    fed_design d;
    if (fed_design_make(n, &d, err, errlen)) return -1;
    R.hub = fed_memnet_new(1);
    R.p = xcalloc((size_t)n, sizeof(fed_party));
    R.v = xcalloc((size_t)n, sizeof(*R.v)), R.a = xcalloc((size_t)n, sizeof(double));
    R.spriv = xcalloc((size_t)n, 32), R.b = xcalloc((size_t)n, 32), R.bkey = xcalloc((size_t)n, 32);
    R.akey = xcalloc((size_t)n, sizeof(*R.akey)), R.e = xcalloc((size_t)n, sizeof(uint32_t));
    R.rep = xcalloc((size_t)n, sizeof(fed_drop_report)), R.rc = xcalloc((size_t)n, sizeof(int));
    R.err = xcalloc((size_t)n, sizeof(*R.err));
    pthread_t th[FED_PARTY_MAX];
    darg args[FED_PARTY_MAX];
    int rc = 0;
    for (int i = 0; i < n; i++) {
        for (int q = 0; q < DDIM; q++)
            R.v[i][q] = (double)((i * 31 + q * 7) % 23) / 4.0 - 2.5;
        if (fed_party_init(&R.p[i], fed_memnet_endpoint(R.hub, i), n, i, DJOB, 0, dsecret, sizeof dsecret - 1, &d, DDIM, 20000))
            rc = -1;
        if (scenarios[sc].kind != FED_FAULT_NONE && (i == n - 1 || (scenarios[sc].two && i == n - 2)))
            fed_memnet_fault(R.hub, i, scenarios[sc].at, scenarios[sc].kind, scenarios[sc].ms);
    }
    fed_drop_secrets_hook = hook, fed_drop_secrets_arg = &R;
    for (int i = 0; i < n && rc == 0; i++) {
        args[i] = (darg){&R, i};
        pthread_create(&th[i], NULL, dsite, &args[i]);
    }
    for (int i = 0; i < n && rc == 0; i++)
        pthread_join(th[i], NULL);
    fed_drop_secrets_hook = NULL, fed_drop_secrets_arg = NULL;
    if (rc == 0 && R.rc[0] != FED_OK) {
        snprintf(err, errlen, "n %d (%s): site 0: %s", n, scenarios[sc].what, R.err[0]);
        rc = -1;
    }
    uint64_t u1 = R.rep[0].u1, u2 = R.rep[0].u2;
    long single = 0, pairs = 0;
    for (int o = -1; o < n && rc == 0; o++) { /* -1: Redis */
        int det = 0;
        rc = observe(&R, R.e[0], u1, u2, o < 0 ? 0 : UINT64_C(1) << o, &det, err, errlen);
        single += det, res->views++;
    }
    for (int o = 0; o < n && rc == 0; o++)
        for (int q = o + 1; q < n && rc == 0; q++) {
            int det = 0;
            rc = observe(&R, R.e[0], u1, u2, UINT64_C(1) << o | UINT64_C(1) << q, &det, err, errlen);
            pairs += det, res->views++;
        }
    /* the control: t sites together hold t shares of everything and unmask every input written (the bound) */
    int tdet = 0;
    if (rc == 0) rc = observe(&R, R.e[0], u1, u2, (UINT64_C(1) << R.t) - 1, &tdet, err, errlen);
    if (rc == 0) {
        res->single += single, res->pairs += pairs, res->t_sites += tdet;
        if (out)
            fprintf(out,
                    "dropout audit n %d t %d, %s: U1 %d, U2 %d sites; determined by Redis or a single site %ld, by pairs %ld; "
                    "control, by sites 0..t-1 together: %d\n",
                    n, R.t, scenarios[sc].what, __builtin_popcountll(u1), __builtin_popcountll(u2), single, pairs, tdet);
    }
    for (int i = 0; i < n; i++)
        fed_party_free(&R.p[i]);
    fed_memnet_free(R.hub);
    fed_design_free(&d);
    OPENSSL_cleanse(R.spriv, (size_t)n * 32), OPENSSL_cleanse(R.b, (size_t)n * 32);
    free(R.p), free(R.v), free(R.a), free(R.spriv), free(R.b), free(R.bkey), free(R.akey), free(R.e), free(R.rep), free(R.rc),
        free(R.err);
    return rc;
}

int fed_audit_drop(const int *sizes, int nsizes, FILE *out, fed_audit_drop_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof(*res));
    for (int q = 0; q < nsizes; q++) {
        int n = sizes[q];
        if (n < 4 || n > FED_PARTY_MAX) {
            snprintf(err, errlen, "the dropout audit needs 4 to %d sites, not %d", FED_PARTY_MAX, n);
            return -1;
        }
        for (int sc = 0; sc < (int)(sizeof scenarios / sizeof scenarios[0]); sc++) {
            if (scenarios[sc].two && n - fed_drop_threshold_default(n) < 2) continue;
            if (audit_n(n, sc, out, res, err, errlen)) return -1;
        }
    }
    return 0;
}
