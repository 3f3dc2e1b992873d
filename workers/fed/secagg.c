/* secagg.c - keys bound to the job and sums that reveal only the total (secagg.h). */
#include "workers/fed/secagg.h"
#include "common/alloc.h"
#include "workers/fed/mask.h"
#include "spec/fed_sitekey.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HELLO_LEN FED_HELLO_LEN

void fed_blobs_free(fed_blob *b, int n)
{
    for (int i = 0; b && i < n; i++) {
        free(b[i].data);
        b[i].data = NULL, b[i].len = 0;
    }
}

/* ---- messages ---- */

static void put16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)(v & 0xff), p[1] = (unsigned char)(v >> 8 & 0xff);
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i) & 0xff);
}

static void hdr_write(unsigned char *b, const fed_hdr *h)
{
    b[0] = 1, b[1] = (unsigned char)h->type;
    put16(b + 2, (unsigned)h->sender), put16(b + 4, (unsigned)h->recipient);
    put32(b + 6, h->exchange);
    memcpy(b + 10, h->nonce, 12);
}

int fed_hdr_parse(const unsigned char *b, size_t len, fed_hdr *h)
{
    if (len < FED_HDR_LEN || b[0] != 1) return -1;
    h->version = b[0], h->type = b[1];
    h->sender = b[2] | b[3] << 8, h->recipient = b[4] | b[5] << 8;
    h->exchange = (uint32_t)b[6] | (uint32_t)b[7] << 8 | (uint32_t)b[8] << 16 | (uint32_t)b[9] << 24;
    memcpy(h->nonce, b + 10, 12);
    return 0;
}

/* the associated data: the header, then what binds it to the job */
static size_t ad_of(const unsigned char *hdr, const char *job, uint32_t attempt, unsigned char *ad)
{
    static const char label[] = "gantry-fed-1";
    size_t k = 0, jl = strlen(job);
    memcpy(ad, hdr, FED_HDR_LEN), k += FED_HDR_LEN;
    memcpy(ad + k, label, sizeof label), k += sizeof label; /* with its NUL */
    memcpy(ad + k, job, jl + 1), k += jl + 1;
    put32(ad + k, attempt), k += 4;
    return k;
}

/* header and ChaCha20-Poly1305 of plain into out (FED_HDR_LEN + len + FED_TAG_LEN bytes); 0, or -1 */
static int seal(const fed_party *p, const unsigned char key[32], fed_hdr *h, const void *plain, size_t len, unsigned char *out)
{
    if (RAND_bytes(h->nonce, 12) != 1) return -1;
    hdr_write(out, h);
    unsigned char ad[FED_HDR_LEN + 160];
    size_t adl = ad_of(out, p->job, p->attempt, ad);
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int l1 = 0, l2 = 0, l0 = 0;
    int ok = c && EVP_EncryptInit_ex(c, EVP_chacha20_poly1305(), NULL, key, h->nonce) == 1 &&
             EVP_EncryptUpdate(c, NULL, &l0, ad, (int)adl) == 1 &&
             EVP_EncryptUpdate(c, out + FED_HDR_LEN, &l1, plain, (int)len) == 1 &&
             EVP_EncryptFinal_ex(c, out + FED_HDR_LEN + l1, &l2) == 1 && (size_t)l1 + (size_t)l2 == len &&
             EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, FED_TAG_LEN, out + FED_HDR_LEN + len) == 1;
    EVP_CIPHER_CTX_free(c);
    return ok ? 0 : -1;
}

long fed_msg_open(const unsigned char key[32], const char *job, uint32_t attempt, const unsigned char *blob, size_t len,
                  unsigned char *plain)
{
    fed_hdr h;
    if (len < FED_HDR_LEN + FED_TAG_LEN || fed_hdr_parse(blob, len, &h) || strlen(job) > 120) return -1;
    size_t cl = len - FED_HDR_LEN - FED_TAG_LEN;
    unsigned char ad[FED_HDR_LEN + 160], tag[FED_TAG_LEN];
    size_t adl = ad_of(blob, job, attempt, ad);
    memcpy(tag, blob + len - FED_TAG_LEN, FED_TAG_LEN);
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int l0 = 0, l1 = 0, l2 = 0;
    int ok = c && EVP_DecryptInit_ex(c, EVP_chacha20_poly1305(), NULL, key, h.nonce) == 1 &&
             EVP_DecryptUpdate(c, NULL, &l0, ad, (int)adl) == 1 &&
             EVP_DecryptUpdate(c, plain, &l1, blob + FED_HDR_LEN, (int)cl) == 1 &&
             EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_SET_TAG, FED_TAG_LEN, tag) == 1 && EVP_DecryptFinal_ex(c, plain + l1, &l2) == 1 &&
             (size_t)l1 + (size_t)l2 == cl;
    EVP_CIPHER_CTX_free(c);
    return ok ? (long)cl : -1;
}

/* ---- messages to every site: under the broadcast key, signed by a pinned sender ---- */

/* what a pinned sender signs: SHA-256(label, job, attempt, the sealed message) */
static int bcast_digest(const fed_party *p, const unsigned char *blob, size_t len, unsigned char d[32])
{
    static const char label[] = "gantry-fed-bcast-sig-1";
    unsigned char at[4];
    unsigned int dl = 32;
    put32(at, p->attempt);
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    int ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1 && EVP_DigestUpdate(c, label, sizeof label) == 1 &&
             EVP_DigestUpdate(c, p->job, strlen(p->job) + 1) == 1 && EVP_DigestUpdate(c, at, 4) == 1 &&
             EVP_DigestUpdate(c, blob, len) == 1 && EVP_DigestFinal_ex(c, d, &dl) == 1 && dl == 32;
    EVP_MD_CTX_free(c);
    return ok ? 0 : -1;
}

size_t fed_bcast_sign(const fed_party *p, unsigned char *blob, size_t len)
{
    unsigned char d[32];
    if (!p->pinned[p->me]) return len;
    return bcast_digest(p, blob, len, d) || fed_sitekey_sign(p->id_priv, d, 32, blob + len) ? 0 : len + FED_SIG_LEN;
}

int fed_bcast_seal(const fed_party *p, fed_hdr *h, const void *plain, size_t len, unsigned char *out, size_t *outlen)
{
    h->recipient = FED_TO_ALL;
    if (seal(p, p->bkey, h, plain, len, out)) return -1;
    *outlen = fed_bcast_sign(p, out, FED_HDR_LEN + len + FED_TAG_LEN);
    return *outlen ? 0 : -1;
}

size_t fed_bcast_unsign(const fed_party *p, const unsigned char *blob, size_t len)
{
    fed_hdr h;
    unsigned char d[32];
    if (fed_hdr_parse(blob, len, &h) || h.sender >= p->n) return 0;
    if (!p->pinned[h.sender]) return len;
    if (len < FED_HDR_LEN + FED_TAG_LEN + FED_SIG_LEN || bcast_digest(p, blob, len - FED_SIG_LEN, d) ||
        !fed_sitekey_verify(p->roster[h.sender], d, 32, blob + len - FED_SIG_LEN))
        return 0;
    return len - FED_SIG_LEN;
}

int fed_bcast_open(const fed_party *p, const fed_hdr *h, const unsigned char *blob, size_t len, void *plain, size_t want,
                   const char *what, char *why, size_t wl)
{
    size_t sealed = fed_bcast_unsign(p, blob, len);
    if (sealed == 0) {
        snprintf(why, wl,
                 "%s from site %d is not signed by its roster key (spec.sites[%d].public_key): forged by another site, or "
                 "tampered in Redis",
                 what, h->sender, h->sender);
        return FED_TAMPERED;
    }
    if (h->recipient != FED_TO_ALL || sealed != FED_HDR_LEN + want + FED_TAG_LEN ||
        fed_msg_open(p->bkey, p->job, p->attempt, blob, sealed, plain) != (long)want) {
        snprintf(why, wl, "%s does not authenticate (tampered in Redis?)", what);
        return FED_TAMPERED;
    }
    return FED_OK;
}

/* ---- keys ---- */

/* what authenticates site s's public key: label, job, attempt, s, n, pub; its length */
static size_t hello_msg(const fed_party *p, const char *label, size_t ll, int s, const unsigned char pub[32], unsigned char *msg)
{
    size_t k = 0, jl = strlen(p->job);
    memcpy(msg, label, ll), k += ll;
    memcpy(msg + k, p->job, jl + 1), k += jl + 1;
    put32(msg + k, p->attempt), k += 4;
    put16(msg + k, (unsigned)s), k += 2;
    put16(msg + k, (unsigned)p->n), k += 2;
    memcpy(msg + k, pub, 32), k += 32;
    return k;
}

#define HELLO_MSG_MAX (32 + 128 + 4 + 2 + 2 + 32)

/* the tag of site s's public key: HMAC-SHA256(secret, label, job, attempt, s, n, pub) */
static int hello_tag(const fed_party *p, int s, const unsigned char pub[32], unsigned char tag[32])
{
    static const char label[] = "gantry-fed-hello-1";
    unsigned char msg[HELLO_MSG_MAX];
    size_t k = hello_msg(p, label, sizeof label, s, pub, msg);
    unsigned int tl = 32;
    return HMAC(EVP_sha256(), p->secret, (int)p->secret_len, msg, k, tag, &tl) && tl == 32 ? 0 : -1;
}

/* site s's identity signature of its public key (the same fields, another label): sign (me), or verify against the
 * roster (1: valid) */
static int hello_sig(const fed_party *p, int s, const unsigned char pub[32], unsigned char sig[FED_SIG_LEN], int sign)
{
    static const char label[] = "gantry-fed-hello-sig-1";
    unsigned char msg[HELLO_MSG_MAX];
    size_t k = hello_msg(p, label, sizeof label, s, pub, msg);
    return sign ? fed_sitekey_sign(p->id_priv, msg, k, sig) : fed_sitekey_verify(p->roster[s], msg, k, sig);
}

int fed_hello_check(const fed_party *p, int s, const unsigned char *blob, size_t len)
{
    const unsigned char *pub = blob + FED_HDR_LEN;
    unsigned char want[32], sig[FED_SIG_LEN];
    if (p->pinned[s]) {
        if (len != HELLO_LEN + FED_SIG_LEN) return 1;
        memcpy(sig, blob + HELLO_LEN, FED_SIG_LEN);
        return hello_sig(p, s, pub, sig, 0) ? 0 : 1;
    }
    return hello_tag(p, s, pub, want) == 0 && CRYPTO_memcmp(want, pub + 32, 32) == 0 ? 0 : 2;
}

static int x25519(const unsigned char priv[32], const unsigned char peer[32], unsigned char secret[32])
{
    EVP_PKEY *me = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, priv, 32);
    EVP_PKEY *other = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, peer, 32);
    EVP_PKEY_CTX *c = me ? EVP_PKEY_CTX_new(me, NULL) : NULL;
    size_t sl = 32;
    int ok = c && other && EVP_PKEY_derive_init(c) == 1 && EVP_PKEY_derive_set_peer(c, other) == 1 &&
             EVP_PKEY_derive(c, secret, &sl) == 1 && sl == 32;
    EVP_PKEY_CTX_free(c);
    EVP_PKEY_free(me), EVP_PKEY_free(other);
    return ok ? 0 : -1;
}

static int hkdf(const unsigned char *ikm, size_t ikml, const unsigned char *salt, size_t saltl, const unsigned char *info,
                size_t infol, unsigned char *out, size_t outl)
{
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
    int ok = c && EVP_PKEY_derive_init(c) > 0 && EVP_PKEY_CTX_set_hkdf_md(c, EVP_sha256()) > 0 &&
             EVP_PKEY_CTX_set1_hkdf_salt(c, salt, (int)saltl) > 0 && EVP_PKEY_CTX_set1_hkdf_key(c, ikm, (int)ikml) > 0 &&
             EVP_PKEY_CTX_add1_hkdf_info(c, info, (int)infol) > 0 && EVP_PKEY_derive(c, out, &outl) > 0;
    EVP_PKEY_CTX_free(c);
    return ok ? 0 : -1;
}

/* the mask key and the AEAD key this site shares with site j */
static int pair_keys(fed_party *p, int j)
{
    static const char label[] = "gantry-fed-pair-1";
    unsigned char ss[32], salt[128 + 8], info[sizeof label + 64], out[64];
    if (x25519(p->priv, p->pub[j], ss)) return -1;
    size_t jl = strlen(p->job), sl = 0;
    memcpy(salt, p->job, jl + 1), sl = jl + 1;
    put32(salt + sl, p->attempt), sl += 4;
    const unsigned char *lo = p->me < j ? p->pub[p->me] : p->pub[j], *hi = p->me < j ? p->pub[j] : p->pub[p->me];
    memcpy(info, label, sizeof label);
    memcpy(info + sizeof label, lo, 32), memcpy(info + sizeof label + 32, hi, 32);
    int rc = hkdf(ss, 32, salt, sl, info, sizeof info, out, sizeof out);
    memcpy(p->mkey[j], out, 32), memcpy(p->akey[j], out + 32, 32);
    OPENSSL_cleanse(ss, sizeof ss), OPENSSL_cleanse(out, sizeof out);
    return rc;
}

/* ---- the party ---- */

int fed_party_init(fed_party *p, fed_net *net, int n, int me, const char *job, int attempt, const unsigned char *secret,
                   size_t secret_len, const fed_design *d, size_t dim, int timeout_ms)
{
    memset(p, 0, sizeof(*p));
    if (n < 1 || n > FED_PARTY_MAX || me < 0 || me >= n || !secret || secret_len < 1 || strlen(job) > 120 || dim < 1) return -1;
    p->net = net, p->n = n, p->me = me, p->timeout_ms = timeout_ms;
    snprintf(p->job, sizeof(p->job), "%s", job);
    p->attempt = (uint32_t)attempt;
    p->secret = secret, p->secret_len = secret_len;
    p->d = d, p->dim = dim;
    p->enc = xmalloc(sizeof(uint64_t) * dim), p->acc = xmalloc(sizeof(uint64_t) * dim), p->tmp = xmalloc(sizeof(uint64_t) * dim);
    p->buf = xmalloc(FED_HDR_LEN + sizeof(uint64_t) * dim + FED_TAG_LEN + FED_SIG_LEN);
    return 0;
}

int fed_party_identity(fed_party *p, const unsigned char (*roster)[32], const unsigned char *pinned, const unsigned char *id_priv)
{
    unsigned char pub[32];
    for (int s = 0; s < p->n; s++)
        if ((p->pinned[s] = pinned && pinned[s] ? 1 : 0)) memcpy(p->roster[s], roster[s], 32);
    if (id_priv) memcpy(p->id_priv, id_priv, 32);
    if (!p->pinned[p->me]) return 0;
    return id_priv && fed_sitekey_public(id_priv, pub) == 0 && memcmp(pub, p->roster[p->me], 32) == 0 ? 0 : -1;
}

void fed_party_free(fed_party *p)
{
    free(p->enc), free(p->acc), free(p->tmp), free(p->buf);
    p->enc = p->acc = p->tmp = NULL, p->buf = NULL;
    OPENSSL_cleanse(p->priv, sizeof p->priv);
    OPENSSL_cleanse(p->mkey, sizeof p->mkey), OPENSSL_cleanse(p->akey, sizeof p->akey);
    OPENSSL_cleanse(p->bkey, sizeof p->bkey), OPENSSL_cleanse(p->id_priv, sizeof p->id_priv);
}

/* a transport result as the protocol's */
static int net_rc(int rc)
{
    return rc == FED_NET_OK ? FED_OK : rc == FED_NET_STOPPED ? FED_STOPPED : FED_LOST;
}

static int put(fed_party *p, const char *chan, const void *data, size_t len, char *err, size_t errlen)
{
    p->bytes_sent += (double)len;
    return net_rc(p->net->put(p->net, chan, data, len, err, errlen));
}

static int get(fed_party *p, const char *chan, int count, fed_blob *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(fed_blob) * (size_t)count);
    int rc = net_rc(p->net->get(p->net, chan, count, p->timeout_ms, out, err, errlen));
    for (int i = 0; rc == FED_OK && i < count; i++)
        p->bytes_got += (double)out[i].len;
    return rc;
}

int fed_party_setup(fed_party *p, double samples, char *err, size_t errlen)
{
    int n = p->n, me = p->me, rc;
    if (fed_keypair(p->pub[me], p->priv)) {
        snprintf(err, errlen, "cannot make an X25519 key pair");
        return FED_BROKEN;
    }
    /* 1. public keys, each with its tag, and a pinned site's signature */
    unsigned char hello[HELLO_LEN + FED_SIG_LEN];
    fed_hdr h = {1, FED_MSG_HELLO, me, FED_TO_ALL, 0, {0}};
    hdr_write(hello, &h);
    memcpy(hello + FED_HDR_LEN, p->pub[me], 32);
    if (hello_tag(p, me, p->pub[me], hello + FED_HDR_LEN + 32) ||
        (p->pinned[me] && hello_sig(p, me, p->pub[me], hello + HELLO_LEN, 1))) {
        snprintf(err, errlen, "cannot compute HMAC-SHA256 or an Ed25519 signature");
        return FED_BROKEN;
    }
    if ((rc = put(p, "hello", hello, HELLO_LEN + (p->pinned[me] ? FED_SIG_LEN : 0), err, errlen))) return rc;
    fed_blob all[FED_PARTY_MAX];
    if ((rc = get(p, "hello", n, all, err, errlen))) return rc;
    int seen[FED_PARTY_MAX] = {0}, bad = -1, why = 0;
    for (int i = 0; i < n && rc == FED_OK; i++) {
        fed_hdr g;
        if ((all[i].len != HELLO_LEN && all[i].len != HELLO_LEN + FED_SIG_LEN) || fed_hdr_parse(all[i].data, all[i].len, &g) ||
            g.type != FED_MSG_HELLO || g.sender >= n) {
            snprintf(err, errlen, "a malformed public key message in Redis (tampered in Redis?)");
            rc = FED_TAMPERED;
        } else if (seen[g.sender]++) {
            snprintf(err, errlen, "site %d published two public keys (a restarted site?)", g.sender);
            rc = FED_LOST;
        } else {
            const unsigned char *pub = all[i].data + FED_HDR_LEN;
            memcpy(p->pub[g.sender], pub, 32);
            int no = fed_hello_check(p, g.sender, all[i].data, all[i].len);
            if (!no && g.sender == me && memcmp(pub, hello + FED_HDR_LEN, 32) != 0) no = p->pinned[me] ? 1 : 2;
            if (no && (bad < 0 || g.sender < bad)) bad = g.sender, why = no;
        }
    }
    fed_blobs_free(all, n);
    if (rc) return rc;
    if (bad >= 0 && why == 1) {
        snprintf(err, errlen,
                 "site %d's key is not signed by its roster key (spec.sites[%d].public_key): another worker posing as the site, "
                 "or tampered in Redis",
                 bad, bad);
        return FED_TAMPERED;
    }
    if (bad >= 0) {
        snprintf(err, errlen,
                 "site %d's public key is not authenticated (tampered in Redis?, or the workers' --fed-secret files differ)", bad);
        return FED_TAMPERED;
    }
    memcpy(p->pub[me], hello + FED_HDR_LEN, 32);
    /* 2. pair keys */
    for (int j = 0; j < n; j++)
        if (j != me && pair_keys(p, j)) {
            snprintf(err, errlen, "cannot derive the keys shared with site %d (a bad public key)", j);
            return FED_TAMPERED;
        }
    /* 3. the broadcast key, from site 0 */
    char chan[32];
    if (me == 0) {
        if (RAND_bytes(p->bkey, 32) != 1) {
            snprintf(err, errlen, "no random bytes for the job's key");
            return FED_BROKEN;
        }
        for (int j = 1; j < n; j++) {
            unsigned char msg[FED_HDR_LEN + 32 + FED_TAG_LEN];
            fed_hdr k = {1, FED_MSG_KEY, 0, j, 0, {0}};
            if (seal(p, p->akey[j], &k, p->bkey, 32, msg)) {
                snprintf(err, errlen, "cannot seal the job's key for site %d", j);
                return FED_BROKEN;
            }
            snprintf(chan, sizeof chan, "key:%d", j);
            if ((rc = put(p, chan, msg, sizeof msg, err, errlen))) return rc;
        }
    } else {
        fed_blob kb;
        snprintf(chan, sizeof chan, "key:%d", me);
        if ((rc = get(p, chan, 1, &kb, err, errlen))) return rc;
        fed_hdr k;
        unsigned char plain[64];
        int ok = kb.len == FED_HDR_LEN + 32 + FED_TAG_LEN && fed_hdr_parse(kb.data, kb.len, &k) == 0 && k.type == FED_MSG_KEY &&
                 k.sender == 0 && k.recipient == me && fed_msg_open(p->akey[0], p->job, p->attempt, kb.data, kb.len, plain) == 32;
        fed_blobs_free(&kb, 1);
        if (!ok) {
            snprintf(err, errlen, "the job's key from site 0 does not authenticate (tampered in Redis?)");
            return FED_TAMPERED;
        }
        memcpy(p->bkey, plain, 32);
        OPENSSL_cleanse(plain, sizeof plain);
    }
    /* 4. the weights: only the total count is revealed */
    double *v = xcalloc(p->dim, sizeof(double)), *t = xmalloc(sizeof(double) * p->dim);
    v[0] = samples;
    rc = fed_party_sum(p, v, 0, 0, t, err, errlen);
    p->total_samples = t[0];
    p->a = t[0] > 0.5 ? samples / t[0] : 1.0 / n;
    free(v), free(t);
    return rc;
}

/* the member of site s's group in class c that aggregates exchange e; its group's size in *size */
static int leader_of(const fed_party *p, int c, int s, uint32_t e, int *members, int *size)
{
    *size = fed_design_members(p->d, c, s, members);
    return members[e % (uint32_t)*size];
}

/* the exchange before issue 18, kept for the privacy audit only: masks within the group, every
 * message in the clear on one channel, every site reads all n */
static int legacy_sum(fed_party *p, uint32_t e, int cls, double *total, char *err, size_t errlen)
{
    int members[FED_PARTY_MAX], size = fed_design_members(p->d, cls, p->me, members), rc;
    for (int q = 0; q < size; q++)
        if (members[q] != p->me) fed_mask(p->enc, p->dim, p->mkey[members[q]], p->me < members[q] ? 1 : -1, e, 0);
    fed_hdr h = {1, FED_MSG_LEGACY, p->me, FED_TO_ALL, e, {0}};
    hdr_write(p->buf, &h);
    memcpy(p->buf + FED_HDR_LEN, p->enc, p->dim * 8);
    char chan[32];
    snprintf(chan, sizeof chan, "x:%u", e);
    if ((rc = put(p, chan, p->buf, FED_HDR_LEN + p->dim * 8, err, errlen))) return rc;
    fed_blob *all = xcalloc((size_t)p->n, sizeof(fed_blob));
    if ((rc = get(p, chan, p->n, all, err, errlen)) == FED_OK) {
        memset(p->acc, 0, sizeof(uint64_t) * p->dim);
        for (int i = 0; i < p->n && rc == FED_OK; i++) {
            if (all[i].len != FED_HDR_LEN + p->dim * 8) {
                snprintf(err, errlen, "exchange %u: a message of %zu bytes", e, all[i].len);
                rc = FED_TAMPERED;
                break;
            }
            memcpy(p->tmp, all[i].data + FED_HDR_LEN, p->dim * 8);
            for (size_t j = 0; j < p->dim; j++)
                p->acc[j] += p->tmp[j];
        }
        for (size_t j = 0; rc == FED_OK && j < p->dim; j++)
            total[j] = fed_decode(p->acc[j]);
    }
    fed_blobs_free(all, p->n);
    free(all);
    return rc;
}

int fed_party_sum(fed_party *p, const double *v, int weighted, int cls, double *total, char *err, size_t errlen)
{
    uint32_t e = p->exchanges++;
    int n = p->n, me = p->me, rc = FED_OK;
    size_t dim = p->dim, bytes = dim * 8, sealed = FED_HDR_LEN + bytes + FED_TAG_LEN;
    double scale = weighted ? p->a : 1.0;
    for (size_t j = 0; j < dim; j++) {
        double x = scale * v[j];
        fed_encode(&x, &p->enc[j], 1);
    }
    if (p->legacy) return legacy_sum(p, e, cls, total, err, errlen);
    /* masks with every other site: they cancel in the total, and only there */
    for (int o = 0; o < n; o++)
        if (o != me && fed_mask(p->enc, dim, p->mkey[o], me < o ? 1 : -1, e, 0)) {
            snprintf(err, errlen, "masking with site %d failed", o);
            return FED_BROKEN;
        }
    int members[FED_PARTY_MAX], size, leader = leader_of(p, cls, me, e, members, &size), group = p->d->group[cls * n + me];
    char chan[48], xchan[32];
    snprintf(chan, sizeof chan, "x:%u:%d", e, group);
    snprintf(xchan, sizeof xchan, "x:%u", e);
    fed_hdr h = {1, FED_MSG_SHARE, me, leader, e, {0}};
    if (me != leader) { /* to the group's aggregator, sealed under our pair key */
        if (seal(p, p->akey[leader], &h, p->enc, bytes, p->buf)) {
            snprintf(err, errlen, "cannot seal a message");
            return FED_BROKEN;
        }
        if ((rc = put(p, chan, p->buf, sealed, err, errlen))) return rc;
    } else { /* the group's partial sum: still masked */
        fed_blob in[FED_PARTY_MAX] = {0};
        if (size > 1 && (rc = get(p, chan, size - 1, in, err, errlen))) return rc;
        memcpy(p->acc, p->enc, bytes);
        int seen[FED_PARTY_MAX] = {0};
        for (int i = 0; i < size - 1 && rc == FED_OK; i++) {
            fed_hdr g;
            int ok =
                in[i].len == sealed && fed_hdr_parse(in[i].data, in[i].len, &g) == 0 && g.type == FED_MSG_SHARE && g.sender < n &&
                g.sender != me && p->d->group[cls * n + g.sender] == group && g.recipient == me && g.exchange == e &&
                !seen[g.sender] &&
                fed_msg_open(p->akey[g.sender], p->job, p->attempt, in[i].data, in[i].len, (unsigned char *)p->tmp) == (long)bytes;
            if (!ok) {
                snprintf(err, errlen, "exchange %u: a message to site %d does not authenticate (tampered in Redis?)", e, me);
                rc = FED_TAMPERED;
                break;
            }
            seen[g.sender] = 1;
            for (size_t j = 0; j < dim; j++)
                p->acc[j] += p->tmp[j];
        }
        if (size > 1) fed_blobs_free(in, size - 1);
        if (rc) return rc;
        p->net->drop(p->net, chan);
        h.type = FED_MSG_PARTIAL;
        size_t out;
        if (fed_bcast_seal(p, &h, p->acc, bytes, p->buf, &out)) {
            snprintf(err, errlen, "cannot seal or sign a message");
            return FED_BROKEN;
        }
        if ((rc = put(p, xchan, p->buf, out, err, errlen))) return rc;
    }
    /* every group's partial: the masks cancel in their sum */
    int groups = p->d->ngroups[cls];
    fed_blob *parts = xcalloc((size_t)groups, sizeof(fed_blob));
    if ((rc = get(p, xchan, groups, parts, err, errlen))) {
        free(parts);
        return rc;
    }
    memset(p->acc, 0, bytes);
    int seen[FED_PARTY_MAX] = {0};
    for (int i = 0; i < groups && rc == FED_OK; i++) {
        fed_hdr g;
        int m2[FED_PARTY_MAX], s2;
        char what[64];
        int ok = fed_hdr_parse(parts[i].data, parts[i].len, &g) == 0 && g.type == FED_MSG_PARTIAL && g.sender < n &&
                 g.exchange == e && leader_of(p, cls, g.sender, e, m2, &s2) == g.sender && !seen[p->d->group[cls * n + g.sender]];
        snprintf(what, sizeof what, "exchange %u: a group's sum", e);
        if (!ok) {
            snprintf(err, errlen, "%s does not authenticate (tampered in Redis?)", what);
            rc = FED_TAMPERED;
            break;
        }
        if ((rc = fed_bcast_open(p, &g, parts[i].data, parts[i].len, p->tmp, bytes, what, err, errlen))) break;
        seen[p->d->group[cls * n + g.sender]] = 1;
        for (size_t j = 0; j < dim; j++)
            p->acc[j] += p->tmp[j];
    }
    fed_blobs_free(parts, groups);
    free(parts);
    if (rc) return rc;
    for (size_t j = 0; j < dim; j++)
        total[j] = fed_decode(p->acc[j]);
    if (me == 0 && e >= 2) { /* every site has read exchange e - 2: it took part in e - 1 after reading it */
        snprintf(xchan, sizeof xchan, "x:%u", e - 2);
        p->net->drop(p->net, xchan);
    }
    return FED_OK;
}

int fed_party_sum1(fed_party *p, double v, double *total, char *err, size_t errlen)
{
    size_t dim = p->dim; /* a sum of one value: the buffers, made for dim, hold it */
    p->dim = 1;
    int rc = fed_party_sum(p, &v, 0, 0, total, err, errlen);
    p->dim = dim;
    return rc;
}

int fed_party_weigh(fed_party *p, double samples, char *err, size_t errlen)
{
    double t = 0;
    int rc = fed_party_sum1(p, samples, &t, err, errlen);
    if (rc == FED_OK) {
        p->total_samples = t;
        p->a = t > 0.5 ? samples / t : 1.0 / p->n;
    }
    return rc;
}

int fed_party_round(fed_party *p, const double *w, double *lambda, const fed_admm_params *P, int iters, int fedavg, double *z,
                    double *avg, double *x, double *m, char *err, size_t errlen)
{
    size_t dim = p->dim;
    int rc = FED_OK;
    if (fedavg) {
        rc = fed_party_sum(p, w, 1, 0, z, err, errlen);
    } else {
        memset(z, 0, sizeof(double) * dim);
        for (int k = 0; k < iters && rc == FED_OK; k++) {
            double rho = fed_admm_rho(P, k);
            fed_admm_x(w, lambda, z, rho, x, dim);
            fed_admm_message(x, lambda, rho, 1.0, m, dim); /* the sum weighs it by a_i */
            rc = fed_party_sum(p, m, 1, k % p->d->classes, z, err, errlen);
            if (rc == FED_OK) fed_admm_dual(lambda, x, z, rho, dim);
        }
    }
    if (rc == FED_OK && fedavg)
        memcpy(avg, z, sizeof(double) * dim); /* z is FedAvg's model: a second sum would reveal nothing new */
    else if (rc == FED_OK)
        rc = fed_party_sum(p, w, 1, 0, avg, err, errlen); /* FedAvg's model, for the residual */
    return rc;
}

/* ---- for the threshold mode (secagg.h, its last section) ---- */

void fed_hdr_write(unsigned char *b, const fed_hdr *h)
{
    hdr_write(b, h);
}

int fed_seal(const fed_party *p, const unsigned char key[32], fed_hdr *h, const void *plain, size_t len, unsigned char *out)
{
    return seal(p, key, h, plain, len, out);
}

int fed_put(fed_party *p, const char *chan, const void *data, size_t len, char *err, size_t errlen)
{
    return put(p, chan, data, len, err, errlen);
}

int fed_get(fed_party *p, const char *chan, int count, int timeout_ms, fed_blob *out, char *err, size_t errlen)
{
    int saved = p->timeout_ms;
    p->timeout_ms = timeout_ms;
    int rc = get(p, chan, count, out, err, errlen);
    p->timeout_ms = saved;
    return rc;
}

int fed_key_auth(const fed_party *p, int s, const unsigned char pub[32], unsigned char tag[32])
{
    return hello_tag(p, s, pub, tag);
}

int fed_key_verify(const fed_party *p, int s, const unsigned char pub[32], const unsigned char tag[32])
{
    unsigned char want[32];
    return hello_tag(p, s, pub, want) == 0 && CRYPTO_memcmp(want, tag, 32) == 0;
}

int fed_x25519(const unsigned char priv[32], const unsigned char peer[32], unsigned char secret[32])
{
    return x25519(priv, peer, secret);
}

int fed_hkdf(const unsigned char *ikm, size_t ikml, const unsigned char *salt, size_t saltl, const unsigned char *info,
             size_t infol, unsigned char *out, size_t outl)
{
    return hkdf(ikm, ikml, salt, saltl, info, infol, out, outl);
}
