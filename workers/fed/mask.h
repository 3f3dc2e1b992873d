/* mask.h - sums without individual messages: pairwise additive masks.
 *
 * Every site has an X25519 key pair; two sites derive a shared key (here:
 * X25519, then SHA-256 of the secret and both public keys in order; the job's
 * protocol, secagg.h, derives its keys with HKDF instead).  A message is
 * encoded in fixed point (FED_FIXED_BITS fractional bits) as integers modulo
 * 2^64; for each other site j it masks with, site i adds the ChaCha20
 * keystream of their shared key (nonce: round, iteration) when i < j and
 * subtracts it when i > j.  In the sum over all those sites the masks cancel
 * exactly (arithmetic modulo 2^64), and what each site sends is uniformly
 * random to anyone without the pair keys.  OpenSSL's libcrypto; no other I/O. */
#ifndef GANTRY_FED_MASK_H
#define GANTRY_FED_MASK_H

#include <stddef.h>
#include <stdint.h>

#define FED_FIXED_BITS 32 /* |values| up to 2^31 / sites, resolution 2^-32 */

/* a fresh key pair; 0, or -1 */
int fed_keypair(unsigned char pub[32], unsigned char priv[32]);
/* the key site (priv, pub) shares with peer_pub; 0, or -1 (a bad public key) */
int fed_shared_key(const unsigned char priv[32], const unsigned char pub[32], const unsigned char peer_pub[32],
                   unsigned char key[32]);
/* out[j] = v[j] in fixed point modulo 2^64 */
void fed_encode(const double *v, uint64_t *out, size_t dim);
/* the signed fixed-point value back to a double */
double fed_decode(uint64_t v);
/* adds (sign +1) or subtracts (-1) the keystream of key for (round, iter) to msg; 0, or -1 */
int fed_mask(uint64_t *msg, size_t dim, const unsigned char key[32], int sign, uint64_t round, uint64_t iter);

#endif
