/* shamir.h - Shamir's secret sharing over GF(2^8), byte by byte: a secret of len bytes split into n shares
 * (holder i's share is the value at x = i + 1 of a random polynomial of degree t - 1 per byte, whose constant
 * term is the secret's byte) so that any t shares give the secret back (Lagrange interpolation at 0) and any
 * t - 1 are uniformly distributed whatever the secret.  The field is AES's (x^8 + x^4 + x^3 + x + 1).  Pure:
 * the caller draws the random coefficients (the dropout protocol, secagg_drop.c, with RAND_bytes). */
#ifndef GANTRY_FED_SHAMIR_H
#define GANTRY_FED_SHAMIR_H

#include <stddef.h>

#define FED_SHAMIR_MAX 255 /* holders: x = 1 .. 255 */

/* products and inverses in GF(2^8) (inverse of 0: 0) */
unsigned char fed_gf_mul(unsigned char a, unsigned char b);
unsigned char fed_gf_inv(unsigned char a);
/* shares[i * len ..]: holder i's share (x = i + 1), for i < n; coef: (t - 1) * len random bytes.
 * 0, or -1 (t < 1, t > n, n > FED_SHAMIR_MAX) */
int fed_shamir_split(const unsigned char *secret, size_t len, int n, int t, const unsigned char *coef, unsigned char *shares);
/* the secret from k shares: shares[q] of len bytes is the share of x = xs[q] (distinct, 1..255); with k >= t of
 * a split's shares it is the split's secret, with fewer a value that says nothing about it.  0, or -1 (k < 1,
 * an x out of range or repeated) */
int fed_shamir_combine(const int *xs, const unsigned char *const *shares, int k, size_t len, unsigned char *secret);

#endif
