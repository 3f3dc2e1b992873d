/* secagg.h - the sites' side of a federated round: keys bound to the job, and
 * sums over all sites in which only the total is revealed (docs/federated.md,
 * "Protocol").  Transport-agnostic (net.h): the job runs it over Redis
 * (workers/fed_io.c), the simulator and the privacy audit over memory.
 *
 * Setup (once per generation of a job):
 *   1. Each site makes an X25519 key pair and publishes, on channel "hello",
 *      its public key with HMAC-SHA256(cluster secret, job, attempt, site, n,
 *      key) and, when the job's roster pins the site's Ed25519 identity key
 *      (spec.sites[i].public_key), that key's signature of the same.  A pinned
 *      site's key must carry a valid signature by its roster key ("site 1's
 *      key is not signed by its roster key (spec.sites[1].public_key)"); an
 *      unpinned site's tag must verify under the cluster secret, a file every
 *      worker has and Redis never sees (--fed-secret).  Either failure fails
 *      the job.
 *   2. Every pair of sites derives, by X25519 and HKDF-SHA256 (salted with job
 *      and attempt), a mask key and an AEAD key.
 *   3. Site 0 draws the job's broadcast key and sends it to every other site
 *      sealed under their pair's AEAD key (channel "key:<s>").
 *   4. One sum of the sample counts gives the total N; each site weighs its
 *      messages by a_i = n_i / N (nobody learns another site's count).
 *
 * A sum (one exchange e, with the groups of one class of the design):
 *   - site i encodes a_i v_i in fixed point modulo 2^64 and adds, for EVERY
 *     other site j, +mask(k_ij, e) if i < j, else -mask(k_ij, e): the masks
 *     cancel in the total over all sites and in no smaller set;
 *   - in each group of the class one member (rotating with e) aggregates: the
 *     others send it their masked vector sealed under their pair's AEAD key
 *     (ChaCha20-Poly1305; channel "x:<e>:<group>"), it adds them to its own and
 *     publishes the group's partial sum, still masked, sealed under the
 *     broadcast key (channel "x:<e>") and, when the roster pins its key,
 *     signed by it (every message under the broadcast key: seal_bcast and
 *     open_bcast in secagg.c), so no other site can forge it;
 *   - every site reads the partials, adds them: the masks cancel, and the
 *     total sum_i a_i v_i is all it learns.
 * Every message carries a header (type, sender, recipient, exchange, random
 * nonce) that is authenticated together with the job id and attempt, so a
 * message cannot be moved between exchanges, sites or jobs.  Redis sees public
 * keys, tags, sizes and timing; nothing else in the clear. */
#ifndef GANTRY_FED_SECAGG_H
#define GANTRY_FED_SECAGG_H

#include "workers/fed/admm.h"
#include "spec/fed_design.h"
#include "workers/fed/net.h"

#include <stddef.h>
#include <stdint.h>

#define FED_PARTY_MAX 64

/* what the protocol's functions return */
#define FED_OK 0
#define FED_STOPPED 1
#define FED_LOST (-1)     /* a site did not answer in time, or the transport failed: the generation is retried */
#define FED_TAMPERED (-2) /* a key or a message failed authentication: the job fails */
#define FED_BROKEN (-3)   /* a local failure (crypto, memory): the job fails */

/* message types (the header's second byte) */
enum { FED_MSG_HELLO = 1, FED_MSG_KEY = 2, FED_MSG_SHARE = 3, FED_MSG_PARTIAL = 4, FED_MSG_LEGACY = 9 };

#define FED_HDR_LEN 22
#define FED_TAG_LEN 16
#define FED_SIG_LEN 64                        /* an Ed25519 signature (spec/fed_sitekey.h) */
#define FED_HELLO_LEN (FED_HDR_LEN + 32 + 32) /* a public key message: header, X25519 key, tag (+ FED_SIG_LEN when signed) */
#define FED_TO_ALL 0xffff

/* a message's header: version (1), type, sender, recipient, exchange, nonce */
typedef struct {
    int version, type, sender, recipient;
    uint32_t exchange;
    unsigned char nonce[12];
} fed_hdr;

typedef struct {
    /* fed_party_init */
    fed_net *net;
    int n, me, timeout_ms;
    char job[128];
    uint32_t attempt;
    const unsigned char *secret; /* the cluster secret (caller-owned) */
    size_t secret_len;
    const fed_design *d;
    size_t dim;
    int legacy; /* the privacy audit only: the exchange before issue 18 (group masks, every message readable) */
    /* fed_party_identity: the roster (site s's Ed25519 public key, when pinned[s]) and this site's identity key */
    unsigned char roster[FED_PARTY_MAX][32], pinned[FED_PARTY_MAX];
    unsigned char id_priv[32];
    /* fed_party_setup */
    unsigned char priv[32], pub[FED_PARTY_MAX][32];
    unsigned char mkey[FED_PARTY_MAX][32], akey[FED_PARTY_MAX][32]; /* mask and AEAD keys shared with each site */
    unsigned char bkey[32];                                         /* the job's broadcast key */
    double a;                                                       /* this site's weight n_i / N */
    double total_samples;
    uint32_t exchanges; /* exchanges so far (the mask nonce) */
    uint64_t *enc, *acc, *tmp;
    unsigned char *buf;
    double bytes_sent, bytes_got; /* through the transport */
} fed_party;

/* 0, or -1 (n, me or the secret out of range) */
int fed_party_init(fed_party *p, fed_net *net, int n, int me, const char *job, int attempt, const unsigned char *secret,
                   size_t secret_len, const fed_design *d, size_t dim, int timeout_ms);
void fed_party_free(fed_party *p);
/* The job's roster, after fed_party_init: pinned[s] when roster[s] is site s's Ed25519 public key (the spec's
 * sites[s].public_key), whose signature its public key and broadcasts must carry; id_priv: this site's identity key
 * (NULL: none).  0, or -1 when this site is pinned to a key id_priv is not (the worker claimed a site not its own). */
int fed_party_identity(fed_party *p, const unsigned char (*roster)[32], const unsigned char *pinned, const unsigned char *id_priv);
/* the keys and the weights (samples: this site's count); FED_OK or an error with err */
int fed_party_setup(fed_party *p, double samples, char *err, size_t errlen);
/* this site's weight again, from samples (its count now): one sum of the counts, over a vector of one value (a site
 * whose count changes between rounds: a federated program's); FED_OK or an error with err */
int fed_party_weigh(fed_party *p, double samples, char *err, size_t errlen);
/* one exchange of one value (unweighted): *total = the sum over all sites of v */
int fed_party_sum1(fed_party *p, double v, double *total, char *err, size_t errlen);
/* one exchange: total = sum over all sites of a_i v_i (scale 1: of v_i), through the groups of class cls */
int fed_party_sum(fed_party *p, const double *v, int weighted, int cls, double *total, char *err, size_t errlen);
/* One round's aggregation of this site's model w: SecureD-FL's ADMM (iters iterations over the design's
 * classes, lambda: this site's duals, drawn by the caller, updated) or FedAvg (one sum); z the global model;
 * avg FedAvg's average (SecureD-FL: one more sum, for the consensus residual; FedAvg: z itself).  x, m: dim
 * doubles of scratch. */
int fed_party_round(fed_party *p, const double *w, double *lambda, const fed_admm_params *P, int iters, int fedavg, double *z,
                    double *avg, double *x, double *m, char *err, size_t errlen);

/* the header of a message; 0, or -1 (too short, or an unknown version) */
int fed_hdr_parse(const unsigned char *blob, size_t len, fed_hdr *h);
/* opens a sealed message with key: the plaintext's length (written to plain, len - FED_HDR_LEN - FED_TAG_LEN bytes at
 * most), or -1 when it does not authenticate for this job and attempt */
long fed_msg_open(const unsigned char key[32], const char *job, uint32_t attempt, const unsigned char *blob, size_t len,
                  unsigned char *plain);
/* whether site s's public key message (FED_HELLO_LEN bytes, or FED_HELLO_LEN + FED_SIG_LEN: its length is the caller's to check)
 * authenticates its key: a pinned site's by its roster key's signature, the others' by the cluster secret's tag; 0, or 1
 * (not signed by its roster key), or 2 (not tagged with the cluster secret) */
int fed_hello_check(const fed_party *p, int s, const unsigned char *blob, size_t len);
/* Every message to all sites (a group's partial sum, and any other) goes through this pair.  fed_bcast_seal: sealed
 * under the broadcast key, then signed by this site's identity key when the roster pins it; its length in *outlen (out:
 * FED_HDR_LEN + len + FED_TAG_LEN + FED_SIG_LEN bytes); 0, or -1.  fed_bcast_open: one such message from site
 * h->sender (h: its parsed header; the sender's role is the caller's to check) into plain, exactly want bytes;
 * FED_OK, or FED_TAMPERED with why, naming the site when its roster key did not sign it (what names the message). */
int fed_bcast_seal(const fed_party *p, fed_hdr *h, const void *plain, size_t len, unsigned char *out, size_t *outlen);
int fed_bcast_open(const fed_party *p, const fed_hdr *h, const unsigned char *blob, size_t len, void *plain, size_t want,
                   const char *what, char *why, size_t wl);
/* the length of such a message's sealed part once the signature its sender's roster key appended verifies (len itself
 * when the sender is not pinned), or 0 (unsigned, or signed by another key) */
size_t fed_bcast_unsign(const fed_party *p, const unsigned char *blob, size_t len);

/* ---- shared with the protocol's threshold mode (secagg_drop.c) and its audit (fed_audit_drop.c), not for other
 * modules: sealed messages, the transport's calls as the protocol's results, key agreement and derivation, and the
 * one function that authenticates a site's public key (the setup's hello and each round's mask key) ---- */

/* a message's header into b (FED_HDR_LEN bytes) */
void fed_hdr_write(unsigned char *b, const fed_hdr *h);
/* header and ChaCha20-Poly1305 of plain under key into out (FED_HDR_LEN + len + FED_TAG_LEN bytes; a fresh
 * nonce into h); 0, or -1 */
int fed_seal(const fed_party *p, const unsigned char key[32], fed_hdr *h, const void *plain, size_t len, unsigned char *out);
/* the transport's put and get, counted in the party's bytes; FED_OK, FED_STOPPED or FED_LOST (err) */
int fed_put(fed_party *p, const char *chan, const void *data, size_t len, char *err, size_t errlen);
int fed_get(fed_party *p, const char *chan, int count, int timeout_ms, fed_blob *out, char *err, size_t errlen);
/* a message to every site that is not sealed under the broadcast key (a round's mask key, secagg_drop.c), signed
 * as fed_bcast_seal signs: when this site is pinned, its identity key's signature of blob[0, len) is written at
 * blob + len (room for FED_SIG_LEN bytes).  The message's length with it (len when not pinned), or 0 on a failure.
 * fed_bcast_unsign (secagg.h) checks it. */
size_t fed_bcast_sign(const fed_party *p, unsigned char *blob, size_t len);
/* the authentication of site s's public key pub (the hello's, or a round's mask key: the caller binds what
 * the key is for into pub's 32 bytes); tag: 32 bytes; 0, or -1 */
int fed_key_auth(const fed_party *p, int s, const unsigned char pub[32], unsigned char tag[32]);
/* 1 when tag authenticates site s's pub, else 0 */
int fed_key_verify(const fed_party *p, int s, const unsigned char pub[32], const unsigned char tag[32]);
/* X25519 of priv and peer; 0, or -1 */
int fed_x25519(const unsigned char priv[32], const unsigned char peer[32], unsigned char secret[32]);
/* HKDF-SHA256; 0, or -1 */
int fed_hkdf(const unsigned char *ikm, size_t ikml, const unsigned char *salt, size_t saltl, const unsigned char *info,
             size_t infol, unsigned char *out, size_t outl);

/* the threshold mode's mask key of two sites in exchange e (secagg_drop.c): HKDF of X25519(priv, peer),
 * salted with job, attempt and e; lo, hi: the two sites' public keys, the lower-numbered site's first */
int fed_round_pair_key(const fed_party *p, uint32_t e, const unsigned char priv[32], const unsigned char peer[32],
                       const unsigned char lo[32], const unsigned char hi[32], unsigned char key[32]);
/* the privacy audit only (fed_audit_drop.c): called with each round's fresh secrets of a site, so that the audit
 * knows what that site knows; NULL in the product */
extern void (*fed_drop_secrets_hook)(void *arg, int me, uint32_t e, const unsigned char spriv[32], const unsigned char b[32]);
extern void *fed_drop_secrets_arg;

#endif
