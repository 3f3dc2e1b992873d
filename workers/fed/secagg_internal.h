/* secagg_internal.h - the pieces of the exchange protocol (secagg.c) that its threshold mode
 * (secagg_drop.c) shares with it: sealed messages, the transport's calls as the protocol's results, key
 * agreement and derivation, and the one function that authenticates a site's public key (the setup's hello
 * and each round's mask key).  Not for other modules: they use secagg.h and secagg_drop.h. */
#ifndef GANTRY_FED_SECAGG_INTERNAL_H
#define GANTRY_FED_SECAGG_INTERNAL_H

#include "workers/fed/secagg.h"

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
