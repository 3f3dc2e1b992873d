/* secagg_drop.c - sums that complete with t of n sites (secagg_drop.h). */
#include "workers/fed/secagg_drop.h"
#include "common/alloc.h"
#include "workers/fed/mask.h"
#include "workers/fed/secagg.h"
#include "workers/fed/shamir.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FED_RETRY 2 /* internal: below the threshold, try again */
#define PROBE_MS 5  /* a look at what is there already (the Redis transport blocks in whole ms: 1 would not read) */

void (*fed_drop_secrets_hook)(void *arg, int me, uint32_t e, const unsigned char spriv[32], const unsigned char b[32]);
void *fed_drop_secrets_arg;

static int popcount(uint64_t m)
{
    int c = 0;
    for (; m; m &= m - 1)
        c++;
    return c;
}

static void event(fed_drop_report *r, const char *fmt, ...)
{
    size_t l = strlen(r->events);
    if (l + 3 >= sizeof r->events) return;
    if (l) memcpy(r->events + l, "; ", 3), l += 2;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->events + l, sizeof r->events - l, fmt, ap);
    va_end(ap);
}

/* the messages of one channel read so far (a prefix of it: the transport hands out the first k) */
typedef struct {
    char chan[32];
    fed_blob *m;
    int k;
} stream;

static void stream_free(stream *s)
{
    fed_blobs_free(s->m, s->k);
    free(s->m);
    s->m = NULL, s->k = 0;
}

/* s holds at least want messages (waiting up to timeout_ms); FED_OK, or FED_LOST/FED_STOPPED */
static int stream_upto(fed_party *p, stream *s, int want, int timeout_ms, char *err, size_t errlen)
{
    if (s->k >= want) return FED_OK;
    fed_blob *m = xcalloc((size_t)want, sizeof(fed_blob));
    int rc = fed_get(p, s->chan, want, timeout_ms, m, err, errlen);
    if (rc != FED_OK) {
        free(m);
        return rc;
    }
    stream_free(s);
    s->m = m, s->k = want;
    return FED_OK;
}

/* a phase's wait: for min messages on s up to the party's timeout (sites train at their own pace: none is late
 * before t have arrived), then for max up to close_ms more; then takes what arrived (at least s->k) */
static int stream_collect(fed_party *p, stream *s, int min, int max, int close_ms, char *err, size_t errlen)
{
    int rc, have = 0;
    if (p->net->count) { /* counts without reading: the messages are read once */
        rc = p->net->count(p->net, s->chan, min, p->timeout_ms, &have, err, errlen);
        if (rc == FED_NET_OK && have >= min && have < max) rc = p->net->count(p->net, s->chan, max, close_ms, &have, err, errlen);
        if (rc != FED_NET_OK) return rc == FED_NET_STOPPED ? FED_STOPPED : FED_LOST;
        rc = stream_upto(p, s, have < max ? have : max, PROBE_MS, err, errlen);
        return rc == FED_STOPPED ? rc : FED_OK;
    }
    rc = stream_upto(p, s, min, p->timeout_ms, err, errlen);
    if (rc == FED_OK) rc = stream_upto(p, s, max, close_ms, err, errlen);
    for (int k = max - 1; rc == FED_LOST && k > s->k; k--) /* what did arrive: a short wait for fewer */
        rc = stream_upto(p, s, k, PROBE_MS, err, errlen);
    return rc == FED_STOPPED ? rc : FED_OK;
}

/* opens a message sealed under the broadcast key: its plaintext's length, or -1 unless it has type, exchange
 * e, a sender < n (in *sender) and plain bytes */
static long open_b(const fed_party *p, const fed_blob *b, int type, uint32_t e, size_t plain, unsigned char *out, int *sender)
{
    fed_hdr h;
    *sender = -1;
    if (fed_hdr_parse(b->data, b->len, &h)) return -1;
    *sender = h.sender < p->n ? h.sender : -1;
    size_t sealed = fed_bcast_unsign(p, b->data, b->len); /* 0: a pinned sender's signature is missing or wrong */
    if (h.type != type || h.exchange != e || h.sender >= p->n || sealed != FED_HDR_LEN + plain + FED_TAG_LEN) return -1;
    return fed_msg_open(p->bkey, p->job, p->attempt, b->data, sealed, out);
}

static int seal_put(fed_party *p, const char *chan, int type, uint32_t e, const void *plain, size_t len, char *err, size_t errlen)
{
    unsigned char *buf = xmalloc(FED_HDR_LEN + len + FED_TAG_LEN + FED_SIG_LEN);
    fed_hdr h = {1, type, p->me, FED_TO_ALL, e, {0}};
    size_t out = 0;
    int rc = fed_bcast_seal(p, &h, plain, len, buf, &out) ? FED_BROKEN : FED_OK;
    if (rc) snprintf(err, errlen, "cannot seal a message");
    if (rc == FED_OK) rc = fed_put(p, chan, buf, out, err, errlen);
    free(buf);
    return rc;
}

/* a phase's close: publishes seen (unless a valid close is first there already); *agreed = the first valid close */
static int close_phase(fed_party *p, const char *chan, int type, uint32_t e, uint64_t seen, uint64_t *agreed, char *err,
                       size_t errlen)
{
    stream s = {{0}, NULL, 0};
    snprintf(s.chan, sizeof s.chan, "%s", chan);
    int rc = stream_upto(p, &s, 1, PROBE_MS, err, errlen), from;
    if (rc == FED_STOPPED) return rc;
    unsigned char first[8];
    if (rc != FED_OK || open_b(p, &s.m[0], type, e, 8, first, &from) != 8) { /* no valid close first: ours */
        unsigned char m[8];
        for (int i = 0; i < 8; i++)
            m[i] = (unsigned char)(seen >> (8 * i));
        if ((rc = seal_put(p, chan, type, e, m, 8, err, errlen))) return rc;
    }
    for (int k = 1; k <= 4 * p->n + 4; k++) {
        if ((rc = stream_upto(p, &s, k, p->timeout_ms, err, errlen))) break;
        unsigned char m[8];
        int from;
        if (open_b(p, &s.m[k - 1], type, e, 8, m, &from) == 8) {
            uint64_t set = 0;
            for (int i = 0; i < 8; i++)
                set |= (uint64_t)m[i] << (8 * i);
            *agreed = p->n < 64 ? set & ((UINT64_C(1) << p->n) - 1) : set;
            stream_free(&s);
            return FED_OK;
        }
    }
    stream_free(&s);
    if (rc == FED_OK) {
        snprintf(err, errlen, "exchange %u: no valid close message on %s", e, chan);
        rc = FED_LOST;
    }
    return rc;
}

/* a round's mask keys and shares as this site holds them */
typedef struct {
    unsigned char spriv[32], b[32];
    unsigned char spub[FED_PARTY_MAX][32], hb[FED_PARTY_MAX][32];
    unsigned char share[FED_PARTY_MAX][64]; /* site j's share for me: s_j's private key, then b_j */
    uint64_t got_share;                     /* the sites whose share for me opened */
} round_keys;

/* the digest a round's mask key is authenticated as: it binds the key to the exchange and to SHA-256(b) */
static void mask_key_digest(uint32_t e, const unsigned char spub[32], const unsigned char hb[32], unsigned char d[32])
{
    static const char label[] = "gantry-fed-maskkey-1";
    unsigned char msg[sizeof label + 4 + 64];
    memcpy(msg, label, sizeof label);
    for (int i = 0; i < 4; i++)
        msg[sizeof label + i] = (unsigned char)(e >> (8 * i));
    memcpy(msg + sizeof label + 4, spub, 32), memcpy(msg + sizeof label + 36, hb, 32);
    SHA256(msg, sizeof msg, d);
}

/* phase 1: this site's mask key message (its key pair, its seed, their shares sealed for every other site) */
static int put_mask_key(fed_party *p, const fed_drop_opts *o, uint32_t e, round_keys *K, char *err, size_t errlen)
{
    int n = p->n, me = p->me, rc = FED_BROKEN;
    size_t len = FED_DKEY_HEAD + (size_t)(n - 1) * FED_DKEY_SHARE;
    unsigned char *msg = xmalloc(len + FED_SIG_LEN), secret[64], d[32];
    unsigned char *coef = xmalloc((size_t)(o->t > 1 ? o->t - 1 : 1) * 64), *shares = xmalloc((size_t)n * 64);
    if (fed_keypair(K->spub[me], K->spriv) || RAND_bytes(K->b, 32) != 1 || RAND_bytes(coef, (o->t > 1 ? o->t - 1 : 1) * 64) != 1) {
        snprintf(err, errlen, "cannot draw a round's mask key");
        goto out;
    }
    if (fed_drop_secrets_hook) fed_drop_secrets_hook(fed_drop_secrets_arg, me, e, K->spriv, K->b);
    SHA256(K->b, 32, K->hb[me]);
    memcpy(secret, K->spriv, 32), memcpy(secret + 32, K->b, 32);
    if (fed_shamir_split(secret, 64, n, o->t, coef, shares)) {
        snprintf(err, errlen, "threshold %d is out of range for %d sites", o->t, n);
        goto out;
    }
    memcpy(K->share[me], shares + (size_t)me * 64, 64), K->got_share |= UINT64_C(1) << me;
    fed_hdr h = {1, FED_MSG_DKEY, me, FED_TO_ALL, e, {0}};
    fed_hdr_write(msg, &h);
    memcpy(msg + FED_HDR_LEN, K->spub[me], 32);
    mask_key_digest(e, K->spub[me], K->hb[me], d);
    if (fed_key_auth(p, me, d, msg + FED_HDR_LEN + 32)) {
        snprintf(err, errlen, "cannot authenticate a round's mask key");
        goto out;
    }
    memcpy(msg + FED_HDR_LEN + 64, K->hb[me], 32);
    unsigned char *at = msg + FED_DKEY_HEAD;
    for (int j = 0; j < n; j++) {
        if (j == me) continue;
        fed_hdr s = {1, FED_MSG_DSEAL, me, j, e, {0}};
        if (fed_seal(p, p->akey[j], &s, shares + (size_t)j * 64, 64, at)) {
            snprintf(err, errlen, "cannot seal a share for site %d", j);
            goto out;
        }
        at += FED_DKEY_SHARE;
    }
    char chan[32];
    snprintf(chan, sizeof chan, "dk:%u", e);
    size_t signed_len = fed_bcast_sign(p, msg, len); /* a pinned site signs it with its identity key */
    if (!signed_len) {
        snprintf(err, errlen, "cannot sign a round's mask key");
        goto out;
    }
    rc = fed_put(p, chan, msg, signed_len, err, errlen);
out:
    OPENSSL_cleanse(secret, sizeof secret), OPENSSL_cleanse(shares, (size_t)n * 64);
    free(msg), free(coef), free(shares);
    return rc;
}

/* a mask key message: its sender (>= 0) when it is well-formed and the sender's first (not in seen), with its
 * key, digest and my share (if it opens) into K; -1 malformed or a repeat (*who: the header's sender, or -1); a
 * tag that does not verify: *forged = 1 */
static int read_mask_key(fed_party *p, uint32_t e, const fed_blob *b, uint64_t seen, round_keys *K, int *who, int *forged)
{
    int n = p->n;
    fed_hdr h;
    *who = -1, *forged = 0;
    if (fed_hdr_parse(b->data, b->len, &h) || h.sender >= n) return -1;
    *who = h.sender;
    size_t len = fed_bcast_unsign(p, b->data, b->len);
    if (len == 0) { /* a pinned site's key without its identity key's signature: forged */
        *forged = 1;
        return -1;
    }
    if (h.type != FED_MSG_DKEY || h.exchange != e || len != FED_DKEY_HEAD + (size_t)(n - 1) * FED_DKEY_SHARE) return -1;
    const unsigned char *pub = b->data + FED_HDR_LEN, *tag = pub + 32, *hb = tag + 32;
    unsigned char d[32];
    mask_key_digest(e, pub, hb, d);
    if (!fed_key_verify(p, h.sender, d, tag)) {
        *forged = 1;
        return -1;
    }
    int s = h.sender;
    if (seen >> s & 1) return -1; /* a site's first key counts, and only it */
    if (s == p->me) return memcmp(pub, K->spub[s], 32) == 0 ? s : -1;
    memcpy(K->spub[s], pub, 32), memcpy(K->hb[s], hb, 32);
    int slot = p->me < s ? p->me : p->me - 1; /* the sender skipped itself */
    const unsigned char *sealed = b->data + FED_DKEY_HEAD + (size_t)slot * FED_DKEY_SHARE;
    fed_hdr g;
    unsigned char plain[64];
    if (fed_hdr_parse(sealed, FED_DKEY_SHARE, &g) == 0 && g.type == FED_MSG_DSEAL && g.sender == s && g.recipient == p->me &&
        g.exchange == e && fed_msg_open(p->akey[s], p->job, p->attempt, sealed, FED_DKEY_SHARE, plain) == 64) {
        memcpy(K->share[s], plain, 64);
        K->got_share |= UINT64_C(1) << s;
    }
    OPENSSL_cleanse(plain, sizeof plain);
    return s;
}

/* the public key of an X25519 private key; 0, or -1 */
static int x25519_public(const unsigned char priv[32], unsigned char pub[32])
{
    EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, priv, 32);
    size_t pl = 32;
    int ok = k && EVP_PKEY_get_raw_public_key(k, pub, &pl) == 1 && pl == 32;
    EVP_PKEY_free(k);
    return ok ? 0 : -1;
}

int fed_round_pair_key(const fed_party *p, uint32_t e, const unsigned char priv[32], const unsigned char peer[32],
                       const unsigned char lo[32], const unsigned char hi[32], unsigned char key[32])
{
    static const char label[] = "gantry-fed-roundpair-1";
    unsigned char ss[32], salt[128 + 8], info[sizeof label + 64];
    if (fed_x25519(priv, peer, ss)) return -1;
    size_t jl = strlen(p->job), sl = jl + 1;
    memcpy(salt, p->job, jl + 1);
    for (int q = 0; q < 4; q++)
        salt[sl + q] = (unsigned char)(p->attempt >> (8 * q)), salt[sl + 4 + q] = (unsigned char)(e >> (8 * q));
    sl += 8;
    memcpy(info, label, sizeof label);
    memcpy(info + sizeof label, lo, 32), memcpy(info + sizeof label + 32, hi, 32);
    int rc = fed_hkdf(ss, 32, salt, sl, info, sizeof info, key, 32);
    OPENSSL_cleanse(ss, sizeof ss);
    return rc;
}

/* the mask key of sites i and j in exchange e, from i's private key and j's public one (the same for both) */
static int round_pair_key(const fed_party *p, uint32_t e, int i, const unsigned char ipriv[32], int j, const round_keys *K,
                          unsigned char key[32])
{
    return fed_round_pair_key(p, e, ipriv, K->spub[j], K->spub[i < j ? i : j], K->spub[i < j ? j : i], key);
}

typedef struct {
    uint32_t e;
    size_t len;    /* the masked input's bytes */
    uint64_t seen; /* senders with a valid input so far */
    int first[FED_PARTY_MAX];
    fed_drop_report *r;
    unsigned char *tmp;
} inputs;

/* message k of "dy:e": its sender when it is the first valid input of a site of U1 (noted in first[]) */
static int valid_input(fed_party *p, stream *s, int k, void *ctx)
{
    inputs *in = ctx;
    int from;
    if (open_b(p, &s->m[k], FED_MSG_MASKED, in->e, in->len, in->tmp, &from) != (long)in->len) {
        if (from >= 0 && !(in->seen >> from & 1) && in->r)
            event(in->r, "site %d dropped from exchange %u: a malformed input", from, in->e);
        return -1;
    }
    if (from < 0 || in->seen >> from & 1) return -1;
    in->seen |= UINT64_C(1) << from, in->first[from] = k;
    return from;
}

/* one try of a round at exchange e; FED_RETRY below the threshold */
static int one_try(fed_party *p, const fed_drop_opts *o, uint32_t e, const double *v, double weight, double *total,
                   fed_drop_report *r, char *err, size_t errlen)
{
    int n = p->n, me = p->me, rc;
    size_t dim = p->dim, len = (dim + 1) * 8;
    round_keys *K = xcalloc(1, sizeof(*K));
    uint64_t *y = xmalloc(len), *acc = xcalloc(dim + 1, 8);
    unsigned char *tmp = xmalloc((len > (size_t)n * FED_REVEAL_ENTRY ? len : (size_t)n * FED_REVEAL_ENTRY) + 64);
    stream dk = {{0}, NULL, 0}, dy = {{0}, NULL, 0}, ds = {{0}, NULL, 0};
    snprintf(dk.chan, sizeof dk.chan, "dk:%u", e), snprintf(dy.chan, sizeof dy.chan, "dy:%u", e);
    snprintf(ds.chan, sizeof ds.chan, "ds:%u", e);
    char chan[32];
    uint64_t u1 = 0, u2 = 0, mine = UINT64_C(1) << me;
    /* 1-2: mask keys, and U1 */
    if ((rc = put_mask_key(p, o, e, K, err, errlen))) goto out;
    int expected = o->expect ? popcount(o->expect & (n >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << n) - 1)) : n;
    if ((rc = stream_collect(p, &dk, o->t, expected > o->t ? expected : o->t, o->close_ms, err, errlen))) goto out;
    uint64_t seen = 0;
    for (int k = 0; k < dk.k; k++) {
        int who, forged, s = read_mask_key(p, e, &dk.m[k], seen, K, &who, &forged);
        if (forged) {
            snprintf(err, errlen, "exchange %u: site %d's mask key is not authenticated (tampered in Redis?)", e, who);
            rc = FED_TAMPERED;
            goto out;
        }
        if (s < 0 && who >= 0 && !(seen >> who & 1)) event(r, "site %d dropped from exchange %u: a malformed mask key", who, e);
        if (s >= 0) seen |= UINT64_C(1) << s;
    }
    snprintf(chan, sizeof chan, "dc1:%u", e);
    if ((rc = close_phase(p, chan, FED_MSG_CLOSE1, e, seen, &u1, err, errlen))) goto out;
    r->u1 = u1;
    if (popcount(u1) < o->t) {
        snprintf(err, errlen, "exchange %u: mask keys from %d sites, below the threshold %d", e, popcount(u1), o->t);
        rc = FED_RETRY;
        goto out;
    }
    if ((u1 & ~seen)) { /* the close saw keys this site had not read yet: they are in the channel */
        for (int k = dk.k; (seen & u1) != u1; k++) {
            if ((rc = stream_upto(p, &dk, k + 1, p->timeout_ms, err, errlen))) goto out;
            int who, forged, s = read_mask_key(p, e, &dk.m[k], seen, K, &who, &forged);
            if (forged) {
                snprintf(err, errlen, "exchange %u: site %d's mask key is not authenticated (tampered in Redis?)", e, who);
                rc = FED_TAMPERED;
                goto out;
            }
            if (s >= 0) seen |= UINT64_C(1) << s;
        }
    }
    /* 3: the masked input of a site of U1, and U2 */
    inputs in = {e, len, 0, {0}, r, tmp};
    if (u1 & mine) {
        double vv;
        for (size_t j = 0; j < dim; j++) {
            vv = weight * v[j];
            fed_encode(&vv, &y[j], 1);
        }
        fed_encode(&weight, &y[dim], 1);
        rc = fed_mask(y, dim + 1, K->b, 1, e, 1) ? FED_BROKEN : FED_OK;
        for (int j = 0; j < n && rc == FED_OK; j++) {
            unsigned char key[32];
            if (j == me || !(u1 >> j & 1)) continue;
            if (round_pair_key(p, e, me, K->spriv, j, K, key) || fed_mask(y, dim + 1, key, me < j ? 1 : -1, e, 2)) rc = FED_BROKEN;
            OPENSSL_cleanse(key, sizeof key);
        }
        if (rc) {
            snprintf(err, errlen, "masking exchange %u failed", e);
            goto out;
        }
        if ((rc = seal_put(p, dy.chan, FED_MSG_MASKED, e, y, len, err, errlen))) goto out;
    }
    if ((rc = stream_collect(p, &dy, o->t, popcount(u1), o->close_ms, err, errlen))) goto out;
    for (int k = 0; k < dy.k; k++)
        valid_input(p, &dy, k, &in);
    snprintf(chan, sizeof chan, "dc2:%u", e);
    if ((rc = close_phase(p, chan, FED_MSG_CLOSE2, e, in.seen & u1, &u2, err, errlen))) goto out;
    u2 &= u1;
    r->u2 = u2, r->delivered = popcount(u2), r->in = (u2 & mine) != 0;
    if (popcount(u2) < o->t) {
        snprintf(err, errlen, "exchange %u: inputs from %d sites, below the threshold %d", e, popcount(u2), o->t);
        rc = FED_RETRY;
        goto out;
    }
    in.r = NULL; /* the inputs the close named that this site had not read yet: they are in the channel */
    for (int k = dy.k; (in.seen & u2) != u2; k++) {
        if ((rc = stream_upto(p, &dy, k + 1, p->timeout_ms, err, errlen))) goto out;
        valid_input(p, &dy, k, &in);
    }
    /* 4: a survivor's shares: of b for U2, of s for U1 \ U2 */
    if (u2 & mine) {
        unsigned char *rev = xcalloc((size_t)n, FED_REVEAL_ENTRY);
        for (int j = 0; j < n; j++) {
            unsigned char *at = rev + (size_t)j * FED_REVEAL_ENTRY;
            if (!(u1 >> j & 1) || !(K->got_share >> j & 1)) continue;
            at[0] = (u2 >> j & 1) ? FED_REVEAL_SELF : FED_REVEAL_PAIR;
            memcpy(at + 1, K->share[j] + (at[0] == FED_REVEAL_SELF ? 32 : 0), 32);
        }
        rc = seal_put(p, ds.chan, FED_MSG_REVEAL, e, rev, (size_t)n * FED_REVEAL_ENTRY, err, errlen);
        OPENSSL_cleanse(rev, (size_t)n * FED_REVEAL_ENTRY);
        free(rev);
        if (rc) goto out;
    }
    /* t shares of every secret needed, from the reveals of distinct survivors */
    size_t rl = (size_t)n * FED_REVEAL_ENTRY;
    unsigned char(*sh)[FED_PARTY_MAX][32] = xcalloc(FED_PARTY_MAX, sizeof(*sh)); /* sh[holder][site] */
    int xs[FED_PARTY_MAX][FED_PARTY_MAX], cnt[FED_PARTY_MAX] = {0}, holders = 0;
    uint64_t revealed = 0;
    for (int k = 0;; k++) {
        int done = 1;
        for (int j = 0; j < n; j++)
            if ((u1 >> j & 1) && cnt[j] < o->t) done = 0;
        if (done) break;
        if ((rc = stream_upto(p, &ds, k + 1, p->timeout_ms, err, errlen))) {
            snprintf(err, errlen, "exchange %u: shares from %d of the %d surviving sites (threshold %d) within %d ms", e, holders,
                     popcount(u2), o->t, p->timeout_ms);
            break;
        }
        int from;
        if (open_b(p, &ds.m[k], FED_MSG_REVEAL, e, rl, tmp, &from) != (long)rl || !(u2 >> from & 1) || (revealed >> from & 1)) {
            if (from >= 0 && !(revealed >> from & 1)) event(r, "site %d's shares in exchange %u ignored: malformed", from, e);
            continue;
        }
        revealed |= UINT64_C(1) << from, holders++;
        for (int j = 0; j < n; j++) {
            const unsigned char *at = tmp + (size_t)j * FED_REVEAL_ENTRY;
            int want = (u2 >> j & 1) ? FED_REVEAL_SELF : FED_REVEAL_PAIR;
            if (!(u1 >> j & 1) || at[0] != want || cnt[j] >= o->t) continue;
            memcpy(sh[cnt[j]][j], at + 1, 32);
            xs[j][cnt[j]++] = from + 1;
        }
    }
    /* the total: the survivors' inputs, less their self-masks and the dropped sites' pair masks */
    for (int j = 0; j < n && rc == FED_OK; j++)
        if (u2 >> j & 1) {
            int from;
            open_b(p, &dy.m[in.first[j]], FED_MSG_MASKED, e, len, tmp, &from); /* it opened before */
            memcpy(y, tmp, len);
            for (size_t q = 0; q <= dim; q++)
                acc[q] += y[q];
        }
    for (int j = 0; j < n && rc == FED_OK; j++) {
        if (!(u1 >> j & 1)) continue;
        unsigned char secret[32], check[32];
        const unsigned char *parts[FED_PARTY_MAX];
        for (int q = 0; q < cnt[j]; q++)
            parts[q] = sh[q][j];
        int ok = fed_shamir_combine(xs[j], parts, cnt[j], 32, secret) == 0;
        if (ok && (u2 >> j & 1)) { /* a survivor's self-mask */
            SHA256(secret, 32, check);
            ok = CRYPTO_memcmp(check, K->hb[j], 32) == 0;
            if (ok && fed_mask(acc, dim + 1, secret, -1, e, 1)) rc = FED_BROKEN;
        } else if (ok) { /* a dropped site's masks with every survivor */
            ok = x25519_public(secret, check) == 0 && CRYPTO_memcmp(check, K->spub[j], 32) == 0;
            for (int i = 0; ok && i < n && rc == FED_OK; i++) {
                unsigned char key[32];
                if (!(u2 >> i & 1)) continue;
                if (round_pair_key(p, e, j, secret, i, K, key) || fed_mask(acc, dim + 1, key, i < j ? -1 : 1, e, 2))
                    rc = FED_BROKEN;
                OPENSSL_cleanse(key, sizeof key);
            }
        }
        OPENSSL_cleanse(secret, sizeof secret);
        if (rc == FED_BROKEN) snprintf(err, errlen, "unmasking exchange %u failed", e);
        if (rc == FED_OK && !ok) {
            snprintf(err, errlen, "exchange %u: the shares of site %d's %s do not reconstruct it (a site sent a wrong share)", e, j,
                     (u2 >> j & 1) ? "self-mask" : "mask key");
            rc = FED_TAMPERED;
        }
    }
    free(sh);
out:
    if (rc == FED_OK && total) {
        r->weight = fed_decode(acc[dim]);
        for (size_t j = 0; j < dim; j++)
            total[j] = fed_decode(acc[j]) / r->weight;
    }
    stream_free(&dk), stream_free(&dy), stream_free(&ds);
    OPENSSL_cleanse(K, sizeof(*K));
    free(K), free(y), free(acc), free(tmp);
    return rc;
}

int fed_party_sum_drop(fed_party *p, const fed_drop_opts *o, const double *v, double weight, double *total, fed_drop_report *r,
                       char *err, size_t errlen)
{
    memset(r, 0, sizeof(*r));
    if (fed_drop_threshold_check(p->n, o->t)) {
        snprintf(err, errlen, "threshold %d is out of range for %d sites (more than half and at least 3, at most all)", o->t, p->n);
        return FED_BROKEN;
    }
    int rc = FED_RETRY;
    for (int k = 0; k <= o->retries && rc == FED_RETRY; k++) {
        uint32_t e = p->exchanges++;
        r->tries = k + 1;
        rc = one_try(p, o, e, v, weight, total, r, err, errlen);
        if (rc == FED_OK && (r->u2 & -r->u2) == (UINT64_C(1) << p->me) && e >= 2) { /* the first survivor: e - 2's channels go */
            static const char *const names[] = {"dk", "dc1", "dy", "dc2", "ds"};
            char chan[32];
            for (int q = 0; q < 5; q++) {
                snprintf(chan, sizeof chan, "%s:%u", names[q], e - 2);
                p->net->drop(p->net, chan);
            }
        }
    }
    if (rc == FED_RETRY) {
        size_t l = strlen(err);
        snprintf(err + l, errlen - l, " (%d tries)", r->tries);
        rc = FED_LOST;
    }
    return rc;
}
